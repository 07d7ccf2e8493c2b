//! Bulk work (a file transfer's bytes) runs on threads below the ones that serve calls,
//! in every process a transfer passes through: a nice value only orders threads that
//! want a core at the same moment, so an idle machine still gives bulk work all of it,
//! while a call that wakes up behind it gets a core first.

/// How much lower bulk threads run than the rest of their process (a nice increment).
pub const BULK_NICE: i32 = 10;

/// Lowers the calling thread's priority by [`BULK_NICE`] (Linux: this thread only, and
/// the threads it starts later). Best effort: a failure changes nothing else.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    match rustix::process::getpriority_process(None) {
        Ok(now) => {
            if let Err(e) = rustix::process::setpriority_process(None, (now + BULK_NICE).min(19)) {
                tracing::debug!(error = %e, "could not lower a bulk thread's priority");
            }
        }
        Err(e) => tracing::debug!(error = %e, "could not read a bulk thread's priority"),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_bulk_thread_runs_below_the_thread_that_started_it() {
        let before = rustix::process::getpriority_process(None).expect("priority");
        let inside = std::thread::spawn(|| {
            super::lower_this_thread();
            rustix::process::getpriority_process(None).expect("priority")
        })
        .join()
        .expect("thread");
        assert_eq!(inside, (before + super::BULK_NICE).min(19));
        // Only that thread: this one is where it was.
        assert_eq!(
            rustix::process::getpriority_process(None).expect("priority"),
            before
        );
    }
}
