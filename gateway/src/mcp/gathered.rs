//! The other replicas' nodes, gathered once per change for every watcher.
//!
//! In cluster mode a session or listen stream told that the node directory changed
//! asks every other replica what the token sees there ([`super::nodes::with_remote`]).
//! Streams of one token and selection would each ask the same question at the same
//! directory epoch; here the first asks, the others wait for and share its answer, so
//! what one change costs the replicas grows with the distinct (token, selection) pairs
//! watching, not with the streams open.

use super::view::RemoteFleet;
use dashmap::DashMap;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::OnceCell;

/// Pairs kept at most (selections come from URLs: past this, all are forgotten).
const MAX_KEPT: usize = 4096;

type Key = (String, Option<String>);

/// One question's answer, filled by the first caller, awaited by the others.
type Answer = Arc<OnceCell<Arc<RemoteFleet>>>;

/// Answers by (token, selection), each with the directory epoch it was asked at.
#[derive(Default)]
pub struct Gathered(DashMap<Key, (u64, Answer)>);

impl Gathered {
    /// What the other replicas hold for `token` and `select` at directory `epoch`:
    /// `gather`'s answer, run once for all callers with the same key and epoch.
    pub async fn get<F, Fut>(
        &self,
        token: &str,
        select: Option<&str>,
        epoch: u64,
        gather: F,
    ) -> Arc<RemoteFleet>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Arc<RemoteFleet>>,
    {
        let key = (token.to_owned(), select.map(str::to_owned));
        let cell = match self.0.get(&key).filter(|e| e.0 == epoch) {
            Some(e) => Arc::clone(&e.1),
            None => {
                if self.0.len() >= MAX_KEPT {
                    self.0.clear();
                }
                let mut entry = self.0.entry(key).or_insert_with(|| (epoch, Arc::default()));
                // Another caller may have put a newer or older epoch's cell here
                // meanwhile: the newest wins, and an older one is replaced.
                if entry.0 < epoch {
                    *entry = (epoch, Arc::default());
                }
                Arc::clone(&entry.1)
            }
        };
        Arc::clone(cell.get_or_init(gather).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn ask(g: &Gathered, token: &str, epoch: u64, asked: &AtomicUsize) -> Arc<RemoteFleet> {
        g.get(token, None, epoch, || async {
            asked.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Arc::new(RemoteFleet::default())
        })
        .await
    }

    #[tokio::test]
    async fn concurrent_watchers_of_one_token_share_one_gather_per_epoch() {
        let g = Gathered::default();
        let asked = AtomicUsize::new(0);
        let answers =
            futures_util::future::join_all((0..16).map(|_| ask(&g, "t", 1, &asked))).await;
        assert_eq!(
            asked.load(Ordering::SeqCst),
            1,
            "one gather for 16 watchers"
        );
        assert!(answers.iter().all(|a| Arc::ptr_eq(a, &answers[0])));
        // A new epoch asks again; another token asks for itself.
        ask(&g, "t", 2, &asked).await;
        ask(&g, "u", 2, &asked).await;
        assert_eq!(asked.load(Ordering::SeqCst), 3);
        // A watcher still at an older epoch gets the newer answer, not a new gather.
        ask(&g, "t", 1, &asked).await;
        ask(&g, "t", 2, &asked).await;
        assert_eq!(asked.load(Ordering::SeqCst), 3);
    }
}
