//! What can go wrong with the journal. Every one is logged and survived: a node whose
//! journal cannot be written still runs its calls, only without crash recovery.

use std::path::PathBuf;

/// A journal failure.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A journal directory could not be created or checked.
    #[error("journal directory {path:?}: {error}")]
    Dir {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// A journal path is a symlink, or not what it should be (a file for a directory).
    #[error("journal path {path:?} is {what}; refusing to use it")]
    Foreign { path: PathBuf, what: &'static str },
    /// A journal file could not be written, read or removed.
    #[error("journal file {path:?}: {error}")]
    File {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// Another process of this node holds the journal (two processes must not share
    /// one: each would take the other's sessions for its predecessor's).
    #[error("journal {path:?} is held by another process of this node")]
    Busy { path: PathBuf },
    /// A journal file holds something this node did not write (or a torn write).
    #[error("journal file {path:?} is not a valid entry: {problem}")]
    Corrupt { path: PathBuf, problem: String },
}
