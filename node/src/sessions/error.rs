//! Why a session operation failed, worded for the model that asked.
//!
//! Every variant's message says what was wrong and, where there is one, what to do
//! instead; the tools return it as a tool error (`isError: true`).

use thiserror::Error;

/// A failed session operation.
#[derive(Debug, Error)]
pub enum SessionError {
    #[error("no session {0:?} (finished sessions are kept for 30 minutes; see action \"list\")")]
    NotFound(String),
    #[error("session {0} is not a background session (only sessions started with background or yieldMs, and still running when the call returned, are managed)")]
    NotBackground(String),
    #[error(
        "session {id} has already exited ({status}); it takes no more input and cannot be killed"
    )]
    Exited { id: String, status: String },
    #[error("session {0} is still running: kill it first, or wait for it to finish")]
    StillRunning(String),
    #[error("session {0} was not started with pty: true; send-keys needs a terminal (use write or submit for stdin)")]
    NotPty(String),
    #[error("session {0} is still running but its stdin is closed (EPIPE: the program closed it or its reader exited); it takes no more input")]
    StdinClosed(String),
    #[error("session {id}: stdin accepted no data for {secs} s (the process is not reading it)")]
    StdinFull { id: String, secs: u64 },
    #[error("session {id}: writing to stdin failed: {error}")]
    Stdin { id: String, error: std::io::Error },
    #[error(
        "session {0} is a pty session: its output is one terminal stream (use stream \"combined\")"
    )]
    PtyStream(String),
    #[error("too many running sessions ({limit}): wait for some to finish or stop them with Process action \"kill\"")]
    TooManyRunning { limit: usize },
    #[error("this token already has {limit} sessions running, its share of the node's {total}: wait for some to finish or stop them with Process action \"kill\"")]
    TooManyRunningForToken { limit: usize, total: usize },
    #[error("session output retained on this node has reached its cap ({limit_mib} MiB) and no finished session is left to drop: kill or remove sessions first")]
    OutputFull { limit_mib: usize },
    #[error("workdir {path} {problem}")]
    Workdir { path: String, problem: String },
    #[error("could not start {shell}: {error}")]
    Spawn {
        shell: String,
        error: std::io::Error,
    },
}
