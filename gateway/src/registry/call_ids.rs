//! Call ids: unique across the whole gateway (not per connection), so a result sent on
//! the wrong connection can never match another call by accident, and across gateway
//! restarts, so a node that remembers the ids of a previous gateway process never takes
//! a new call for an old one. In cluster mode unique across replicas too: each replica
//! gives out only the ids of its slot ([`CallIds::partition`]).
//!
//! One [`CallIds`] per gateway (in its registry), not one per process: two gateways
//! in one process (tests, an embedding) each keep their own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The call ids one gateway gives out.
pub struct CallIds {
    next: AtomicU64,
    /// Cluster mode: every id is ≡ slot (mod stride).
    partition: OnceLock<(u64, u64)>,
}

impl Default for CallIds {
    fn default() -> Self {
        CallIds {
            // Time in ms × 1,000: a restarted gateway starts above every id the previous
            // process used unless that one averaged over 1,000 calls per millisecond;
            // ids stay below 2^53 (exact as JSON numbers) until the year 2255.
            next: AtomicU64::new(gsv_protocol::now_ms().saturating_mul(1000).max(1)),
            partition: OnceLock::new(),
        }
    }
}

impl CallIds {
    /// Gives the ids from now on the residue `slot` modulo `stride` (once; before the
    /// first call). Ids still grow with time: a restarted replica starts above the
    /// previous process's ids unless that one averaged over 1,000 / `stride` calls per
    /// millisecond.
    pub fn partition(&self, slot: u64, stride: u64) {
        if stride == 0 || slot >= stride || self.partition.set((slot, stride)).is_err() {
            return;
        }
        let current = self.next.load(Ordering::Relaxed);
        self.next.store(
            current - current % stride + stride + slot,
            Ordering::Relaxed,
        );
    }

    /// A new call id.
    pub fn next(&self) -> u64 {
        let stride = self.partition.get().map_or(1, |p| p.1);
        self.next.fetch_add(stride, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::CallIds;

    #[test]
    fn partitioned_ids_keep_their_residue_and_grow() {
        let ids = CallIds::default();
        let before = ids.next();
        ids.partition(5, 64);
        let got: Vec<u64> = (0..4).map(|_| ids.next()).collect();
        assert!(got[0] > before);
        for w in got.windows(2) {
            assert_eq!(w[1] - w[0], 64);
        }
        assert!(got.iter().all(|id| id % 64 == 5), "{got:?}");
        // Only the first partition counts.
        ids.partition(7, 64);
        assert_eq!(ids.next() % 64, 5);
    }

    #[test]
    fn two_gateways_in_one_process_keep_their_own_ids() {
        let (a, b) = (CallIds::default(), CallIds::default());
        a.partition(1, 4);
        let from_b = b.next();
        assert_eq!(a.next() % 4, 1);
        // b was not partitioned by a: its ids go up by one.
        assert_eq!(b.next(), from_b + 1);
    }
}
