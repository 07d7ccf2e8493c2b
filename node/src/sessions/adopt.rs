//! Re-adoption: what a restarted node process does with the sessions the previous
//! process journaled.
//!
//! For each session directory in the journal:
//! - a supervised command whose status file is written: a finished session again,
//!   with the same id, owner and output (the last [`RAW_RING_BYTES`](crate::sessions::RAW_RING_BYTES) of each stream;
//!   stdout is loaded before stderr, so their interleaving is not kept);
//! - a supervised command whose supervisor still runs (same pid, same process start
//!   time): a running session again; its output files are followed and the
//!   supervisor checked every [`ADOPTED_POLL`] (it is not this process's child, so no
//!   `wait`); Process poll, log, kill and write work as before (stdin: the node opens
//!   the session's named pipe again; a command that read end-of-file when the previous
//!   process died has stopped reading), and its timeout still holds;
//! - a supervised command that is gone without a status (its supervisor was killed):
//!   a failed session with an unknown exit, reported `lost:` to its call;
//! - a pty or exec session (not supervised): ended if its process group still runs
//!   (the process checked by start time first, so a reused pid is never signalled),
//!   forgotten, and reported `lost:` to its call.
//!
//! Sessions keep their owner, so another token still cannot see or touch them.

use crate::journal::files;
use crate::sessions::group::{self, KILL_GRACE};
use crate::sessions::record::{self, SessionRecord};
use crate::sessions::session::{KillReason, NewSession, Session, Stream};
use crate::sessions::spawn::{self, DRAIN_TIMEOUT};
use crate::sessions::{supervise, SessionManager};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{info, info_span, warn, Instrument};

/// How often a re-adopted session's supervisor and status file are checked.
pub const ADOPTED_POLL: Duration = Duration::from_millis(100);

/// What a restarted node made of the session a previous process started for a call.
#[derive(Debug, Clone)]
pub enum Adoption {
    /// Re-adopted (running, or finished with its status known): the call's answer is
    /// this session's.
    Session(Arc<Session>),
    /// Not recoverable, and why (for the call's `lost:` error).
    Lost(String),
}

impl SessionManager {
    /// Re-adopts the sessions the journal holds (see the module docs); returns what
    /// became of the sessions that calls started, by call id. Foreground sessions
    /// stay in the table until the caller forgets them
    /// ([`SessionManager::forget_adopted`]), once their call is answered.
    pub fn adopt(&self) -> HashMap<String, Adoption> {
        let Some(root) = self.journal.get().cloned() else {
            return HashMap::new();
        };
        let entries = match std::fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(e) => {
                warn!(dir = ?root, error = %e, "could not read the sessions journal");
                return HashMap::new();
            }
        };
        let mut by_call = HashMap::new();
        for entry in entries.flatten() {
            let dir = entry.path();
            let name = entry.file_name();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let Some(id) = name.to_str().filter(|id| is_dir && record::valid_id(id)) else {
                warn!(path = ?dir, "skipping a foreign entry in the sessions journal");
                remove_entry(&dir, is_dir);
                continue;
            };
            let record = match SessionRecord::read(&dir, id) {
                Ok(record) => record,
                Err(e) => {
                    warn!(error = %e, "skipping a journaled session");
                    remove_entry(&dir, true);
                    continue;
                }
            };
            let call = record.call_id.clone();
            let adoption = self.adopt_one(record, &dir);
            if let Some(call) = call {
                by_call.insert(call, adoption);
            }
        }
        self.prune();
        by_call
    }

    /// Forgets a re-adopted foreground session once its call has its answer (if it
    /// has finished; otherwise it is forgotten when it does).
    pub fn forget_adopted(&self, session: &Session) {
        self.forget_foreground(session);
    }

    fn adopt_one(&self, record: SessionRecord, dir: &Path) -> Adoption {
        let alive = record::same_process(record.pid, record.start_ticks);
        let span = info_span!("adopt", session_id = %record.id, pid = record.pid);
        let _in = span.enter();
        if !record.supervised {
            let kind = if record.pty { "terminal" } else { "exec" };
            if alive {
                info!(
                    kind,
                    "ending a command the previous node process left running (not re-adoptable)"
                );
                group::terminate(record.pid, KILL_GRACE);
            }
            remove_entry(dir, true);
            return Adoption::Lost(format!(
                "the node restarted while the command ran; {kind} sessions are not re-adopted{}",
                if alive {
                    ", so its process group was ended"
                } else {
                    ""
                }
            ));
        }
        let session = Arc::new(self.restored(&record));
        let followed: Vec<(Stream, std::fs::File)> = [Stream::Stdout, Stream::Stderr]
            .into_iter()
            .filter_map(|s| supervise::load_tail(&session, dir, s).map(|f| (s, f)))
            .collect();
        if let Some((code, signal)) = supervise::read_status(dir) {
            let ended_at = files::modified_ms(&dir.join(supervise::STATUS));
            session.finish_at(code, signal, ended_at);
            info!("re-adopted a session that finished while no node process watched it");
            self.insert(&session);
            return Adoption::Session(session);
        }
        if !alive {
            session.finish_at(None, None, None);
            warn!("a journaled session's supervisor is gone without recording an exit status");
            self.insert(&session);
            return Adoption::Lost(
                "the node restarted and the command's supervisor is gone without recording its exit status, so its outcome is unknown"
                    .to_owned(),
            );
        }
        info!("re-adopted a running session");
        self.insert(&session);
        if dir.join(supervise::STDIN).exists() {
            // Its writer died with the previous process; a command still reading gets
            // a new one (one that saw end-of-file already does not read again).
            session.expect_stdin();
            tokio::spawn(supervise::open_stdin(
                Arc::clone(&session),
                dir.to_owned(),
                false,
            ));
        }
        self.watch(&session, dir.to_owned(), &record, followed);
        Adoption::Session(session)
    }

    /// A session object for `record`, with no output yet and no stdin.
    fn restored(&self, record: &SessionRecord) -> Session {
        let age = Duration::from_millis(gsv_protocol::now_ms().saturating_sub(record.started_at));
        let now = Instant::now();
        Session::new(NewSession {
            id: record.id.clone(),
            serial: self.serial.fetch_add(1, Ordering::Relaxed),
            command: record.command.clone(),
            owner: record.owner.clone(),
            workdir: record.workdir.clone(),
            pid: record.pid,
            pty: false,
            background: record.background || record.yields,
            started_at: record.started_at,
            started: now.checked_sub(age).unwrap_or(now),
            input: None,
        })
    }

    fn insert(&self, session: &Arc<Session>) {
        self.lock()
            .sessions
            .insert(session.id().to_owned(), Arc::clone(session));
    }

    /// Follows a re-adopted running session's output and watches for its end.
    fn watch(
        &self,
        session: &Arc<Session>,
        dir: PathBuf,
        record: &SessionRecord,
        followed: Vec<(Stream, std::fs::File)>,
    ) {
        let span = info_span!("session", session_id = %session.id(), pid = session.pid());
        let (exited, exited_rx) = watch::channel(false);
        let readers: Vec<_> = followed
            .into_iter()
            .map(|(stream, file)| {
                let follow =
                    supervise::follow(Arc::clone(session), stream, file, exited_rx.clone());
                tokio::spawn(follow.instrument(span.clone()))
            })
            .collect();
        let (pid, ticks, timeout_at) = (record.pid, record.start_ticks, record.timeout_at);
        let session = Arc::clone(session);
        let (manager, events) = (self.me.clone(), self.events.clone());
        let watcher = async move {
            let (code, signal) = loop {
                if let Some(status) = supervise::read_status(&dir) {
                    break status;
                }
                if !record::same_process(pid, ticks) {
                    // Written just before it exited, or never (it was killed).
                    break supervise::read_status(&dir).unwrap_or((None, None));
                }
                if timeout_at.is_some_and(|at| gsv_protocol::now_ms() >= at) {
                    session.kill(KillReason::Timeout);
                }
                tokio::time::sleep(ADOPTED_POLL).await;
            };
            session.set_leader_exited();
            let _ = exited.send(true);
            let all = futures_util::future::join_all(readers);
            if tokio::time::timeout(KILL_GRACE + DRAIN_TIMEOUT, all)
                .await
                .is_err()
            {
                warn!("the output files of a re-adopted session could not be read to their end");
            }
            spawn::conclude(&session, code, signal, None, &events, &manager).await;
        };
        tokio::spawn(watcher.instrument(span));
    }
}

fn remove_entry(path: &Path, is_dir: bool) {
    let removed = if is_dir {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    if let Err(e) = removed {
        warn!(path = ?path, error = %e, "could not remove a journal entry");
    }
}
