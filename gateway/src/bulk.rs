//! The gateway's bulk runtime: a second set of worker threads, below the ones that
//! serve calls, for connections that carry a transfer's bytes (agents' and nodes' bulk
//! lanes, `connect.lane`).
//!
//! Relaying a chunk is the gateway's heaviest work (reading, unmasking and writing a
//! MiB, the loopback peer's TCP work included); on the call runtime it competed with
//! calls for the same workers at the same priority, so a call to a node waited behind
//! the chunks of an upload to it. On these threads the kernel gives a waking call
//! thread a core first, and an idle gateway still gives transfers everything.

use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::{Builder, Runtime};

/// Worker threads of the bulk runtime: as many as cores, at most four.
fn workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
}

/// The runtime, built on first use and kept for the life of the process (a static is
/// never dropped, so it is never shut down inside an async context). `None` when it
/// could not be built: bulk connections then run with everything else.
fn runtime() -> Option<&'static Runtime> {
    static BULK: OnceLock<Option<Runtime>> = OnceLock::new();
    BULK.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(workers())
            .thread_name("gsv-bulk")
            .on_thread_start(gsv_transport::priority::lower_this_thread)
            .enable_all()
            .build()
            .map_err(|e| tracing::warn!(error = %e, "no bulk runtime: transfers run beside calls"))
            .ok()
    })
    .as_ref()
}

/// Runs `work` on the bulk runtime and waits for it (on the caller's runtime, which
/// only waits); runs it in place when there is no bulk runtime. A panic in `work` is
/// logged, like one in any connection's task.
pub async fn run<F>(work: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match runtime() {
        Some(rt) => {
            if let Err(e) = rt.spawn(work).await {
                tracing::error!(error = %e, "a bulk connection's task failed");
            }
        }
        None => work.await,
    }
}

#[cfg(test)]
mod tests {
    /// This thread's nice value, from `/proc/thread-self/stat` (Linux).
    fn nice() -> Option<i64> {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
        let (_, after) = stat.rsplit_once(')')?;
        // Fields after the command's closing parenthesis; nice is field 19.
        after.split_whitespace().nth(16)?.parse().ok()
    }

    #[tokio::test]
    async fn bulk_work_runs_on_lowered_threads_of_its_own() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        super::run(async move {
            let name = std::thread::current().name().map(str::to_owned);
            let _ = tx.send((name, nice()));
        })
        .await;
        let (name, theirs) = rx.await.expect("ran");
        assert_eq!(name.as_deref(), Some("gsv-bulk"));
        if let Some(ours) = nice() {
            let lowered = (ours + i64::from(gsv_transport::priority::BULK_NICE)).min(19);
            assert_eq!(theirs, Some(lowered));
        }
    }
}
