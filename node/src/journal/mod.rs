//! The node's journal: what a restarted `gsv node` process needs to answer for the
//! calls and sessions of the process before it (killed with SIGKILL, OOM-killed,
//! crashed), so that a node crash loses nothing silently.
//!
//! It lives in `<data dir>/journal/<node id>/` (every directory 0700, every file 0600,
//! symlinks refused), and only when the node has a data directory: in-memory nodes
//! (tests, embedding) keep no journal and behave as before.
//!
//! - `calls/` ([`calls`]): the call ids begun and the result frames of those that
//!   finished, bounded by the ledger's caps ([`crate::ledger`]).
//! - `sessions/<session id>/`: one directory per session: its record (owner, command,
//!   pid and process start time, ...), its output files and the exit status its
//!   supervisor writes (see [`crate::sessions::record`] and
//!   [`crate::sessions::supervise`]). Bounded by the session manager's caps.
//!
//! One node process at a time uses a journal: it holds `lock` (`flock`) while it runs,
//! and a second process of the same node runs without a journal, with a warning.
//!
//! Modules: [`calls`], `files` (private file operations), [`error`].

pub mod calls;
pub mod error;
pub(crate) mod files;

pub use calls::{CallJournal, LoadedCall};
pub use error::JournalError;

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A node's journal directory.
#[derive(Debug, Clone)]
pub struct Journal {
    root: PathBuf,
    calls: CallJournal,
    sessions: PathBuf,
}

/// The lock file in a journal's directory, held (`flock`, exclusive) by the one node
/// process using the journal, for as long as it runs: the kernel releases it when the
/// process dies, however it dies.
const LOCK: &str = "lock";

impl Journal {
    /// Opens (creating what is missing) the journal of node `node_id` in `data_dir`.
    pub fn open(data_dir: &Path, node_id: &str) -> Result<Journal, JournalError> {
        crate::private_file::create_private_dir(data_dir).map_err(|error| JournalError::Dir {
            path: data_dir.to_owned(),
            error,
        })?;
        let top = data_dir.join("journal");
        files::private_dir(&top)?;
        let root = top.join(node_id);
        files::private_dir(&root)?;
        let lock = Arc::new(files::lock(&root.join(LOCK))?);
        let calls = CallJournal::open(root.join("calls"), lock)?;
        let sessions = root.join("sessions");
        files::private_dir(&sessions)?;
        Ok(Journal {
            root,
            calls,
            sessions,
        })
    }

    /// The journal's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The calls part.
    pub fn calls(&self) -> &CallJournal {
        &self.calls
    }

    /// The directory of the session directories.
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions
    }
}
