//! The store's own threads: where [`Store::blocking`](super::Store::blocking) runs its
//! queries.
//!
//! Why not tokio's blocking pool: it starts a thread whenever none is idle at the
//! moment of a spawn, and a thread that just ran a query is not idle yet when the next
//! query is handed over, so a wave of connects (a thousand nodes registering, a fleet
//! coming back after a restart) grew the pool to a dozen threads or more however few
//! queries ran at once. Each kept its stack and an allocator heap of its own, ~10 MiB
//! at 1,000 nodes in `gsv bench memory`. Here a fixed set of [`STORE_THREADS`] threads
//! takes the queries in turn; the ones waiting are tasks in a queue, not threads.

use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::{Builder, Runtime};

/// Threads that run store queries. The one connection serializes queries anyway; more
/// than one lets a query that does work outside the lock (hashing a presented token)
/// overlap another's.
pub const STORE_THREADS: usize = 4;

/// The runtime whose workers are the store threads, built on first use and kept for
/// the life of the process (a static is never dropped, so never shut down inside an
/// async context). `None` when it could not be built: queries then go to tokio's
/// blocking pool, as before.
fn runtime() -> Option<&'static Runtime> {
    static STORE: OnceLock<Option<Runtime>> = OnceLock::new();
    STORE
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(STORE_THREADS)
                .thread_name("gsv-store")
                .build()
                .map_err(|e| tracing::warn!(error = %e, "no store threads: queries use the blocking pool"))
                .ok()
        })
        .as_ref()
}

/// Runs `work` on a store thread and returns its result; a panic in `work` comes back
/// as the [`tokio::task::JoinError`] it would be on the blocking pool.
pub fn run<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, tokio::task::JoinError>> {
    // The task never awaits: it occupies its worker until `work` returns, which is
    // what a store thread is for.
    match runtime() {
        Some(rt) => rt.spawn(async move { work() }),
        None => tokio::task::spawn_blocking(work),
    }
}
