//! The calls part of the journal: which call ids the node began (with the tool and the
//! caller's token id) and the result frames of those that finished, so a restarted
//! node process answers a `resume` for them (see [`crate::ledger`]).
//!
//! One call is two files in `calls/`, named by the hex of its id: `<hex>.call` (JSON,
//! written when the call begins, before its tool runs) and `<hex>.done` (the result
//! frame as sent, written beside and renamed in when it ends). Both are removed when
//! the ledger drops the result (its caps and TTL), and an empty `<hex>.gone` stays for
//! as long as the ledger remembers the id ([`ID_TTL`], at most [`MAX_REMEMBERED_IDS`]):
//! a restarted process then answers a `resume` for it "no longer kept" instead of
//! running the call a second time. So the directory holds at most the ledger's kept
//! results, the calls running and the remembered ids.

use crate::journal::{files, JournalError};
use crate::ledger::{ID_TTL, MAX_KEPT_BYTES, MAX_REMEMBERED_IDS, RESULT_TTL};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tracing::warn;

/// Largest `.call` file read back.
const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// The calls directory of a node's journal.
#[derive(Debug, Clone)]
pub struct CallJournal {
    dir: PathBuf,
    /// The journal's lock, held as long as the ledger writes here.
    _lock: Arc<std::fs::File>,
}

/// What `<hex>.call` holds.
#[derive(Debug, Serialize, Deserialize)]
struct CallRecord {
    id: String,
    tool: String,
    caller: Option<String>,
    begun_at: u64,
}

/// A call found in the journal at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadedCall {
    /// It finished: `frame` is its result frame, written at `done_at` (ms since the
    /// Unix epoch).
    Done {
        id: String,
        frame: String,
        done_at: u64,
    },
    /// It began and no result was written: the process died while it ran.
    Pending {
        id: String,
        tool: String,
        caller: Option<String>,
    },
    /// Its result was dropped (caps, TTL); the id is remembered so it never runs again.
    Forgotten { id: String },
}

impl CallJournal {
    pub(crate) fn open(
        dir: PathBuf,
        lock: Arc<std::fs::File>,
    ) -> Result<CallJournal, JournalError> {
        files::private_dir(&dir)?;
        Ok(CallJournal { dir, _lock: lock })
    }

    fn path(&self, id: &str, ext: &str) -> Option<PathBuf> {
        files::id_name(id).map(|name| self.dir.join(format!("{name}.{ext}")))
    }

    /// Records that call `id` of `tool` begins (before its tool runs).
    pub fn begun(&self, id: &str, tool: &str, caller: Option<&str>) {
        let Some(path) = self.path(id, "call") else {
            warn!(call_id = ?id, "call id unfit for the journal; not journaled");
            return;
        };
        let record = CallRecord {
            id: id.to_owned(),
            tool: tool.to_owned(),
            caller: caller.map(str::to_owned),
            begun_at: gsv_protocol::now_ms(),
        };
        let written = serde_json::to_vec(&record)
            .map_err(|e| JournalError::Corrupt {
                path: path.clone(),
                problem: e.to_string(),
            })
            .and_then(|bytes| files::write(&path, &bytes, false));
        if let Err(e) = written {
            warn!(error = %e, "could not journal a call");
        }
    }

    /// Records the result frame of call `id`.
    pub fn finished(&self, id: &str, frame: &str) {
        let Some(path) = self.path(id, "done") else {
            return;
        };
        if let Err(e) = files::write(&path, frame.as_bytes(), true) {
            warn!(error = %e, "could not journal a call's result");
        }
    }

    /// Forgets call `id`'s result (it was dropped), remembering the id.
    pub fn forget(&self, id: &str) {
        for ext in ["done", "call"] {
            if let Some(path) = self.path(id, ext) {
                files::remove(&path);
            }
        }
        if let Some(path) = self.path(id, "gone") {
            if let Err(e) = files::write(&path, b"", false) {
                warn!(error = %e, "could not journal a forgotten call id");
            }
        }
    }

    /// Stops remembering call `id` (the ledger no longer does either).
    pub fn drop_id(&self, id: &str) {
        if let Some(path) = self.path(id, "gone") {
            files::remove(&path);
        }
    }

    /// Every call journaled, results older than the ledger's TTL dropped, corrupt and
    /// foreign entries skipped (with a warning) and removed. Results oldest first.
    pub fn load(&self) -> Vec<LoadedCall> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) => {
                warn!(dir = ?self.dir, error = %e, "could not read the calls journal");
                return Vec::new();
            }
        };
        let now = gsv_protocol::now_ms();
        let ttl = u64::try_from(RESULT_TTL.as_millis()).unwrap_or(u64::MAX);
        let mut done = Vec::new();
        let mut pending = Vec::new();
        let mut gone: Vec<(u64, String)> = Vec::new();
        let id_ttl = u64::try_from(ID_TTL.as_millis()).unwrap_or(u64::MAX);
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                skip(&path, "a name that is not UTF-8");
                continue;
            };
            if let Some(stem) = name.strip_suffix(".call") {
                match self.load_one(&path, stem) {
                    Ok(Some(call @ LoadedCall::Done { done_at, .. })) => {
                        if now.saturating_sub(done_at) >= ttl {
                            self.forget_path(stem);
                        } else {
                            done.push(call);
                        }
                    }
                    Ok(Some(call)) => pending.push(call),
                    Ok(None) => {}
                    Err(e) => {
                        warn!(error = %e, "skipping a journaled call");
                        self.forget_path(stem);
                    }
                }
            } else if let Some(stem) = name.strip_suffix(".gone") {
                let at = files::modified_ms(&path).unwrap_or(0);
                match files::name_id(stem) {
                    Some(id) if now.saturating_sub(at) < id_ttl => gone.push((at, id)),
                    Some(_) => files::remove(&path),
                    None => skip(&path, "a name that is no call id"),
                }
            } else if let Some(stem) = name.strip_suffix(".done") {
                if !self.dir.join(format!("{stem}.call")).exists() {
                    skip(&path, "a result without its call");
                }
            } else {
                skip(&path, "not a journal entry");
            }
        }
        done.sort_by_key(|c| match c {
            LoadedCall::Done { done_at, .. } => *done_at,
            _ => 0,
        });
        // The newest remembered ids, within the ledger's bound, oldest first.
        gone.sort();
        let extra = gone.len().saturating_sub(MAX_REMEMBERED_IDS);
        for (_, id) in gone.drain(..extra) {
            self.drop_id(&id);
        }
        let mut all: Vec<LoadedCall> = gone
            .into_iter()
            .map(|(_, id)| LoadedCall::Forgotten { id })
            .collect();
        all.extend(done);
        all.extend(pending);
        all
    }

    fn forget_path(&self, stem: &str) {
        files::remove(&self.dir.join(format!("{stem}.call")));
        files::remove(&self.dir.join(format!("{stem}.done")));
        files::remove(&self.dir.join(format!("{stem}.gone")));
    }

    fn load_one(&self, path: &Path, stem: &str) -> Result<Option<LoadedCall>, JournalError> {
        let corrupt = |problem: String| JournalError::Corrupt {
            path: path.to_owned(),
            problem,
        };
        let bytes = files::read_capped(path, MAX_RECORD_BYTES)?;
        let record: CallRecord =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if files::name_id(stem).as_deref() != Some(record.id.as_str()) {
            return Err(corrupt("its id does not match its name".to_owned()));
        }
        let done_path = self.dir.join(format!("{stem}.done"));
        match files::read_capped(&done_path, MAX_KEPT_BYTES as u64) {
            Ok(frame) => {
                let frame = String::from_utf8(frame).map_err(|e| corrupt(e.to_string()))?;
                let done_at = files::modified_ms(&done_path).unwrap_or(0);
                Ok(Some(LoadedCall::Done {
                    id: record.id,
                    frame,
                    done_at,
                }))
            }
            Err(JournalError::File { error, .. })
                if error.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(Some(LoadedCall::Pending {
                    id: record.id,
                    tool: record.tool,
                    caller: record.caller,
                }))
            }
            Err(e) => Err(e),
        }
    }
}

/// Warns about and removes a file that is no journal entry of this node.
fn skip(path: &Path, why: &str) {
    warn!(path = ?path, why, "skipping a foreign file in the journal");
    if !path.is_dir() {
        files::remove(path);
    }
}
