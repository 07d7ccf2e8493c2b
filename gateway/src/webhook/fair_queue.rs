//! The approval webhook's queue, fair between tokens.
//!
//! One queue in arrival order let a single token's flood of approval requests push
//! every other agent's notification out (1,500 requests of one token dropped another
//! agent's). Here each token has a queue of its own, at most [`super::QUEUE_PER_TOKEN`]
//! long; delivery takes one notification from each token in turn; and when the whole
//! queue is full ([`super::QUEUE`]) room is made by dropping the oldest notification
//! of the token that has the most waiting, never the newcomer's. So a token can lose
//! only its own notifications.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::Notify;

/// Notifications waiting, by token, delivered round-robin.
pub struct FairQueue<T> {
    inner: Mutex<Inner<T>>,
    ready: Notify,
    per_token: usize,
    max: usize,
}

struct Inner<T> {
    queues: HashMap<String, VecDeque<T>>,
    /// Tokens with something waiting, in the order they are served.
    turns: VecDeque<String>,
    total: usize,
}

/// What `push` had to drop to stay within its bounds, if anything.
#[derive(Debug, PartialEq, Eq)]
pub enum Dropped<T> {
    /// The token's own queue is full: the new notification is dropped.
    New(T),
    /// The whole queue was full: this older notification of the busiest token made room.
    Oldest { token: String, item: T },
}

impl<T> FairQueue<T> {
    /// At most `per_token` waiting for one token and `max` in all.
    pub fn new(per_token: usize, max: usize) -> Self {
        FairQueue {
            inner: Mutex::new(Inner {
                queues: HashMap::new(),
                turns: VecDeque::new(),
                total: 0,
            }),
            ready: Notify::new(),
            per_token: per_token.max(1),
            max: max.max(1),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item` for `token`; never waits. Says what was dropped to make it fit.
    pub fn push(&self, token: &str, item: T) -> Option<Dropped<T>> {
        let mut inner = self.inner();
        if inner
            .queues
            .get(token)
            .is_some_and(|q| q.len() >= self.per_token)
        {
            return Some(Dropped::New(item));
        }
        let mut dropped = None;
        if inner.total >= self.max {
            let busiest = inner
                .queues
                .iter()
                .max_by_key(|(_, q)| q.len())
                .map(|(t, _)| t.clone());
            if let Some(busiest) = busiest {
                if let Some(old) = inner.queues.get_mut(&busiest).and_then(VecDeque::pop_front) {
                    inner.total -= 1;
                    dropped = Some(Dropped::Oldest {
                        token: busiest.clone(),
                        item: old,
                    });
                }
                if inner.queues.get(&busiest).is_some_and(VecDeque::is_empty) {
                    inner.queues.remove(&busiest);
                    inner.turns.retain(|t| t != &busiest);
                }
            }
        }
        let queue = inner.queues.entry(token.to_owned()).or_default();
        let first = queue.is_empty();
        queue.push_back(item);
        if first {
            inner.turns.push_back(token.to_owned());
        }
        inner.total += 1;
        drop(inner);
        self.ready.notify_one();
        dropped
    }

    /// The next notification: the oldest of the token whose turn it is.
    pub fn try_pop(&self) -> Option<T> {
        let mut inner = self.inner();
        let token = inner.turns.pop_front()?;
        let queue = inner.queues.get_mut(&token)?;
        let item = queue.pop_front();
        let more = !queue.is_empty();
        if more {
            inner.turns.push_back(token);
        } else {
            inner.queues.remove(&token);
        }
        if item.is_some() {
            inner.total -= 1;
        }
        item
    }

    /// Waits for the next notification.
    pub async fn pop(&self) -> T {
        loop {
            let notified = self.ready.notified();
            if let Some(item) = self.try_pop() {
                return item;
            }
            notified.await;
        }
    }

    /// Notifications waiting, in all.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner().total
    }

    /// Whether nothing waits.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flooding_token_loses_only_its_own() {
        let q = FairQueue::new(3, 5);
        for i in 0..3 {
            assert_eq!(q.push("flood", i), None);
        }
        assert_eq!(q.push("flood", 99), Some(Dropped::New(99)));
        assert_eq!(q.push("a", 100), None);
        assert_eq!(q.push("b", 200), None);
        // Full: room comes from the busiest token, not from the newcomer.
        assert_eq!(
            q.push("c", 300),
            Some(Dropped::Oldest {
                token: "flood".into(),
                item: 0
            })
        );
        assert_eq!(q.len(), 5);
        // Round-robin: one of each token in turn.
        let order: Vec<i32> = std::iter::from_fn(|| q.try_pop()).collect();
        assert_eq!(order, vec![1, 100, 200, 300, 2]);
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn pop_waits_for_a_push() {
        let q = std::sync::Arc::new(FairQueue::new(2, 4));
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.pop().await });
        tokio::task::yield_now().await;
        q.push("t", 7);
        assert_eq!(waiter.await.unwrap(), 7);
    }
}
