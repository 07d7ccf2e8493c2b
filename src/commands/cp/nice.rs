//! `gsv cp` moves bulk bytes: reading, hashing and framing a large file is work that
//! may wait, while the calls and shells on the same machine (agents' calls to a node
//! on this machine, an operator's terminal) should not. So a copy runs below them, the
//! way backup tools do; a nice value only orders threads that want a core at the same
//! moment, so an idle machine still gives the copy everything.

/// How much lower `gsv cp` runs than what started it (a nice increment).
pub const CP_NICE: i32 = 10;

/// Lowers this process's priority by [`CP_NICE`], before any thread starts (threads
/// made later inherit it). Best effort: a failure changes nothing else.
pub fn run_below_calls() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: nice(2) takes an integer and changes only this thread's priority
        // (and that of the threads it starts later); no memory is involved.
        let now = unsafe { libc::nice(CP_NICE) };
        if now == -1 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "could not lower gsv cp's priority");
        }
    }
}
