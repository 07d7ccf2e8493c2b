//! Reconnect delays: exponential backoff with full jitter.
//!
//! After a gateway restart thousands of nodes reconnect at once; drawing each delay
//! uniformly from `[0, ceiling]` (full jitter) spreads them out instead of having them
//! retry in lockstep. The ceiling doubles per failed attempt from 0.5 s up to 30 s and
//! drops back after a session that registered. Pure and clock-free, so it is unit-tested.

use rand::{Rng, RngExt};
use std::time::Duration;

/// Exponential backoff state for one reconnect loop.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Ceiling of the first delay.
    pub const BASE: Duration = Duration::from_millis(500);
    /// Largest ceiling.
    pub const MAX: Duration = Duration::from_secs(30);

    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max,
            attempt: 0,
        }
    }

    /// Failed attempts since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The largest delay the next call to [`Backoff::next_delay`] may return:
    /// `min(max, base * 2^attempt)`.
    pub fn ceiling(&self) -> Duration {
        // 2^20 * base is far past any sensible max; stop doubling there.
        let factor = 1u32 << self.attempt.min(20);
        self.base
            .checked_mul(factor)
            .map_or(self.max, |d| d.min(self.max))
    }

    /// Draws the next delay (full jitter) and counts the attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.next_delay_with(&mut rand::rng())
    }

    /// [`Backoff::next_delay`] with a caller-chosen random source.
    pub fn next_delay_with<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let ceiling = u64::try_from(self.ceiling().as_micros()).unwrap_or(u64::MAX);
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_micros(rng.random_range(0..=ceiling))
    }

    /// Starts over from the base delay (after a successful session).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Backoff::BASE, Backoff::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn ceiling_doubles_then_caps() {
        let mut b = Backoff::default();
        let mut rng = StdRng::seed_from_u64(7);
        let mut seen = Vec::new();
        for _ in 0..10 {
            seen.push(b.ceiling().as_millis());
            b.next_delay_with(&mut rng);
        }
        assert_eq!(
            seen,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000]
        );
        for _ in 0..100 {
            b.next_delay_with(&mut rng);
        }
        assert_eq!(b.ceiling(), Backoff::MAX);
        assert_eq!(b.attempt(), 110);
    }

    #[test]
    fn delays_stay_within_bounds_and_are_jittered() {
        let mut rng = StdRng::seed_from_u64(42);
        for attempt in 0..12 {
            let mut b = Backoff::default();
            for _ in 0..attempt {
                b.next_delay_with(&mut rng);
            }
            let ceiling = b.ceiling();
            let mut draws = Vec::new();
            for _ in 0..200 {
                let mut probe = b.clone();
                let d = probe.next_delay_with(&mut rng);
                assert!(d <= ceiling, "{d:?} > {ceiling:?}");
                draws.push(d);
            }
            draws.sort();
            draws.dedup();
            assert!(draws.len() > 100, "delays should spread over the range");
            // Full jitter: some delays land in the lower half of the range.
            assert!(draws[0] < ceiling / 2);
        }
    }

    #[test]
    fn reset_starts_over() {
        let mut b = Backoff::default();
        for _ in 0..5 {
            b.next_delay();
        }
        assert_eq!(b.ceiling(), Duration::from_secs(16));
        b.reset();
        assert_eq!(b.attempt(), 0);
        assert_eq!(b.ceiling(), Backoff::BASE);
        assert!(b.next_delay() <= Backoff::BASE);
    }

    #[test]
    fn extreme_settings_do_not_overflow() {
        let mut b = Backoff::new(Duration::from_secs(u64::MAX / 4), Duration::MAX);
        for _ in 0..40 {
            b.next_delay();
        }
        assert_eq!(b.ceiling(), Duration::MAX);
    }
}
