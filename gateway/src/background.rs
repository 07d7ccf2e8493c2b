//! The gateway's background tasks (sweepers, watchers, cluster mode's replication and
//! listeners): each is held in one tracker and ends when the gateway shuts down, after
//! the drain, so a stopped gateway leaves nothing of its own running and its stop waits
//! for them.

use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The background tasks of one gateway.
pub struct Background {
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl Background {
    /// Tasks that end when `stop` is cancelled.
    pub fn new(stop: CancellationToken) -> Background {
        Background {
            tasks: TaskTracker::new(),
            stop,
        }
    }

    /// Runs `work` until it ends or the gateway shuts down, whichever is first (a
    /// task that loops for ever is dropped at shutdown, where it waits).
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = work => {}
            }
        });
    }

    /// How many are running.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether none is running.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Waits (at most `patience`) for every task to end, once shutdown has begun; no
    /// new task starts after this.
    pub async fn finish(&self, patience: Duration) -> bool {
        self.tasks.close();
        tokio::time::timeout(patience, self.tasks.wait())
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::Background;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn a_task_that_loops_for_ever_ends_at_shutdown_and_is_waited_for() {
        let stop = CancellationToken::new();
        let background = Background::new(stop.clone());
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        background.spawn(async move {
            // Dropped with the task: the receiver hears the sender go.
            let _held = dropped_tx;
            loop {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
        });
        background.spawn(async {});
        tokio::task::yield_now().await;
        assert_eq!(background.len(), 1, "the short task ended on its own");
        stop.cancel();
        assert!(background.finish(Duration::from_secs(10)).await);
        assert!(background.is_empty());
        assert!(dropped_rx.await.is_err(), "the looping task was dropped");
    }
}
