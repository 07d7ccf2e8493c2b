//! The machines an MCP session brought into its own listing with `fleet_use`.
//!
//! Past a few machines the default listing is the fleet view: nine gateway tools and
//! no node's. An agent that is about to work on `web1` and `web2` says so with
//! `fleet_use {nodes: ["web1", "web2"]}` (or `{select: "role=web"}`); from then on the
//! session's `tools/list` holds every tool its token may call on those nodes, by
//! namespace (`web1__Bash`, `web1__git_log`), and the session is told with
//! `notifications/tools/list_changed` so that clients that re-list see them as
//! first-class tools. `fleet_release` takes them out again.
//!
//! Bounded: at most [`MAX_USED`] nodes per set. A 2025-revision session owns its set
//! (kept on its handler, gone with the session); the session-less 2026-07-28 revision
//! has no session, so there the set belongs to the token ([`UsedByToken`]). A set only
//! names nodes: what is listed from it is still what the token's policy (and the
//! session's `?select=`) lets it see, judged on every listing.

use dashmap::DashMap;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::watch;

/// Most nodes one set holds.
pub const MAX_USED: usize = 16;

/// Token sets kept before the idle, empty ones are swept.
const SWEEP_AT: usize = 1_024;

/// One session's (or, on 2026-07-28, one token's) nodes in use, with a counter that
/// moves whenever they change (what the `list_changed` watchers wait on).
#[derive(Debug)]
pub struct Used {
    nodes: Mutex<BTreeSet<String>>,
    changed: watch::Sender<u64>,
    /// When the set last changed: a listen stream that starts after a change made
    /// since its request arrived announces it ([`Used::changed_since`]).
    last_change: Mutex<Option<Instant>>,
}

impl Default for Used {
    fn default() -> Self {
        Used {
            nodes: Mutex::new(BTreeSet::new()),
            changed: watch::Sender::new(0),
            last_change: Mutex::new(None),
        }
    }
}

/// A `fleet_use` that would pass [`MAX_USED`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too_large: at most {MAX_USED} nodes may be in use at once ({in_use} now, {asked} more asked for); fleet_release some first, or use fleet_run for many nodes")]
pub struct TooMany {
    pub in_use: usize,
    pub asked: usize,
}

impl Used {
    fn lock(&self) -> MutexGuard<'_, BTreeSet<String>> {
        // A panic while holding this lock cannot leave the set half-changed (each
        // change is one insert or remove), so a poisoned lock is still good.
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `ids`, all or none: the ones newly in use, or why not.
    pub fn add(&self, ids: &[String]) -> Result<Vec<String>, TooMany> {
        let mut set = self.lock();
        let new: BTreeSet<&String> = ids.iter().filter(|id| !set.contains(*id)).collect();
        if set.len() + new.len() > MAX_USED {
            return Err(TooMany {
                in_use: set.len(),
                asked: new.len(),
            });
        }
        let added: Vec<String> = new.into_iter().cloned().collect();
        set.extend(added.iter().cloned());
        drop(set);
        if !added.is_empty() {
            self.moved();
        }
        Ok(added)
    }

    /// Takes `ids` out of use (all of them when `None`): the ones that were in use.
    pub fn release(&self, ids: Option<&[String]>) -> Vec<String> {
        let mut set = self.lock();
        let released: Vec<String> = match ids {
            None => std::mem::take(&mut *set).into_iter().collect(),
            Some(ids) => {
                let mut out: Vec<String> =
                    ids.iter().filter(|id| set.remove(*id)).cloned().collect();
                out.sort();
                out.dedup();
                out
            }
        };
        drop(set);
        if !released.is_empty() {
            self.moved();
        }
        released
    }

    /// Tells the watchers, and notes when.
    fn moved(&self) {
        *self.last_change.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.changed.send_modify(|n| *n += 1);
    }

    /// Whether the set changed at or after `t`.
    pub fn changed_since(&self, t: Instant) -> bool {
        self.last_change
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at >= t)
    }

    /// The nodes in use, sorted.
    pub fn nodes(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    /// Whether no node is in use.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// A receiver that wakes when the set changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Whether nothing holds or waits on this set (it can be forgotten).
    fn idle(&self) -> bool {
        self.changed.receiver_count() == 0 && self.is_empty()
    }
}

/// The 2026-07-28 sets, one per token.
#[derive(Default)]
pub struct UsedByToken(DashMap<String, Arc<Used>>);

impl UsedByToken {
    /// The set of `token_id` (a new, empty one the first time).
    pub fn of(&self, token_id: &str) -> Arc<Used> {
        if let Some(u) = self.0.get(token_id) {
            return Arc::clone(u.value());
        }
        if self.0.len() >= SWEEP_AT {
            // Only sets no one waits on and that name nothing: forgetting one loses
            // nothing a later request would see.
            self.0.retain(|_, u| Arc::strong_count(u) > 1 || !u.idle());
        }
        Arc::clone(self.0.entry(token_id.to_owned()).or_default().value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_is_dated_for_the_listen_streams_that_start_after_it() {
        let used = Used::default();
        let before = Instant::now();
        assert!(!used.changed_since(before), "nothing changed yet");
        used.add(&["web1".to_owned()]).expect("room");
        assert!(used.changed_since(before));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let later = Instant::now();
        // Adding what is in use already, or releasing what is not, changes nothing.
        used.add(&["web1".to_owned()]).expect("room");
        assert!(used.release(Some(&["db1".to_owned()])).is_empty());
        assert!(!used.changed_since(later));
        used.release(None);
        assert!(used.changed_since(later));
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_set_is_bounded_and_changes_all_or_nothing() {
        let used = Used::default();
        let mut rx = used.subscribe();
        assert_eq!(used.add(&ids(&["b", "a", "a"])).unwrap(), ids(&["a", "b"]));
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        // Nothing new: no change to tell.
        assert!(used.add(&ids(&["a"])).unwrap().is_empty());
        assert!(!rx.has_changed().unwrap());
        let many: Vec<String> = (0..MAX_USED).map(|i| format!("n{i}")).collect();
        assert_eq!(
            used.add(&many).unwrap_err(),
            TooMany {
                in_use: 2,
                asked: MAX_USED
            }
        );
        assert_eq!(used.nodes(), ids(&["a", "b"]), "none of a refused add");
        assert_eq!(used.release(Some(&ids(&["a", "zz", "a"]))), ids(&["a"]));
        assert_eq!(used.add(&many[..MAX_USED - 1]).unwrap().len(), MAX_USED - 1);
        assert_eq!(used.nodes().len(), MAX_USED);
        assert_eq!(used.release(None).len(), MAX_USED);
        assert!(used.is_empty());
        assert!(used.release(None).is_empty());
    }

    #[test]
    fn each_token_has_its_own_set_and_idle_ones_are_forgotten() {
        let sets = UsedByToken::default();
        let a = sets.of("a");
        a.add(&ids(&["web1"])).unwrap();
        assert_eq!(sets.of("a").nodes(), ids(&["web1"]));
        assert!(sets.of("b").is_empty(), "another token's set is its own");
        drop(a);
        for i in 0..SWEEP_AT + 5 {
            drop(sets.of(&format!("t{i}")));
        }
        assert!(sets.0.len() <= SWEEP_AT + 1, "{} sets kept", sets.0.len());
        assert_eq!(
            sets.of("a").nodes(),
            ids(&["web1"]),
            "a set naming nodes is kept"
        );
    }
}
