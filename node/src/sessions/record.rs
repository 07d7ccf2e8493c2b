//! A session's entry in the node's journal (`sessions/<id>/record.json`): what a
//! restarted node needs to re-adopt it (or to report it lost) with the same id and
//! the same owner, and to be sure the process it finds is still the one it started.
//!
//! The process start time (`/proc/<pid>/stat`, field 22, in clock ticks since boot)
//! is recorded with the pid: a pid reused by another process after the session ended
//! has another start time, and is never taken for the session (nor signalled).

use crate::journal::{files, JournalError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record's file name in the session's directory.
pub(crate) const RECORD: &str = "record.json";
/// Largest record read back.
const MAX_RECORD_BYTES: u64 = 256 * 1024;

/// What the journal keeps about one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    pub id: String,
    /// The token id of the caller that started it (the isolation key).
    pub owner: Option<String>,
    pub command: String,
    pub workdir: PathBuf,
    pub pty: bool,
    /// Started in the background.
    pub background: bool,
    /// A Bash `yieldMs` command: it becomes a background session if it outlives its call.
    pub yields: bool,
    /// Its output goes to files and a supervisor records its exit status: it can be
    /// re-adopted. Otherwise (pty and exec sessions) it is ended and reported lost.
    pub supervised: bool,
    /// The group leader's pid (the process group id).
    pub pid: u32,
    /// The leader's start time, in clock ticks since boot.
    pub start_ticks: Option<u64>,
    /// Ms since the Unix epoch.
    pub started_at: u64,
    /// The call that started it.
    pub call_id: Option<String>,
    /// When its own timeout kills it (ms since the Unix epoch).
    pub timeout_at: Option<u64>,
}

impl SessionRecord {
    /// Writes the record into the session's directory `dir`.
    pub(crate) fn write(&self, dir: &Path) -> Result<(), JournalError> {
        let path = dir.join(RECORD);
        let bytes = serde_json::to_vec(self).map_err(|e| JournalError::Corrupt {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        files::write(&path, &bytes, false)
    }

    /// Reads the record of the session directory `dir`, whose name is `id`.
    pub(crate) fn read(dir: &Path, id: &str) -> Result<SessionRecord, JournalError> {
        let path = dir.join(RECORD);
        let bytes = files::read_capped(&path, MAX_RECORD_BYTES)?;
        let record: SessionRecord =
            serde_json::from_slice(&bytes).map_err(|e| JournalError::Corrupt {
                path: path.clone(),
                problem: e.to_string(),
            })?;
        if record.id != id || record.pid <= 1 {
            return Err(JournalError::Corrupt {
                path,
                problem: "its id or pid does not fit".to_owned(),
            });
        }
        Ok(record)
    }
}

/// The start time of process `pid` (clock ticks since boot), if it exists.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ...`: comm may hold spaces and parentheses; it ends at the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after comm; starttime is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is still the process that started at `ticks` (not a zombie).
pub(crate) fn same_process(pid: u32, ticks: Option<u64>) -> bool {
    let Some(ticks) = ticks else {
        return false;
    };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let mut fields = stat[close + 1..].split_whitespace();
    let zombie = fields.next() == Some("Z");
    let started = fields.nth(18).and_then(|t| t.parse::<u64>().ok());
    !zombie && started == Some(ticks)
}

/// A session id as the journal accepts it: a UUID's characters only (ids are made by
/// this node; anything else in the directory is foreign).
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_a_reused_pid_does_not_match() {
        let me = std::process::id();
        let ticks = start_ticks(me);
        assert!(ticks.is_some());
        assert!(same_process(me, ticks));
        assert!(!same_process(me, ticks.map(|t| t + 1)));
        assert!(!same_process(me, None));
        assert!(!same_process(u32::MAX - 1, ticks));
    }

    #[test]
    fn session_ids() {
        assert!(valid_id("0b1d7a52-0c9e-4c55-9d1e-2a3b4c5d6e7f"));
        assert!(!valid_id("../x"));
        assert!(!valid_id(""));
    }
}
