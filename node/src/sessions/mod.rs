//! The process session manager: every command the Bash tool runs, and the background
//! ones the Process tool manages.
//!
//! One [`SessionManager`] lives in the node process (made by
//! [`crate::Registry::standard`] and shared by Bash and Process through an `Arc`).
//! Sessions belong to the node process, not to a connection: a dropped connection or
//! a gateway restart never touches them, and after reconnecting `poll` and `log` work
//! as before. Stopping the node (dropping the manager) kills the groups still running.
//!
//! Lifecycle: a session is created running; a synchronous call removes it when it
//! finishes (its whole output was in the result). A session that is, or becomes
//! (`yieldMs`), a *background* session is kept after it finishes for
//! [`Limits::retention`] (30 minutes) so its result can still be polled, and its end
//! is announced to the gateway with a `process.exited` event (queued while the node is
//! disconnected).
//!
//! Caps ([`Limits`], defaults in parentheses): running sessions (64), finished sessions
//! kept (256), output held in memory by all sessions together (64 MiB). Past the
//! finished and memory caps the oldest finished sessions are dropped first; a new
//! command is refused with a clear error only when 64 are already running, or when
//! running sessions alone hold the whole memory cap. Per session, output is bounded by
//! construction: the last [`MAX_OUTPUT_CHARS`] characters of combined output plus the
//! last [`RAW_RING_BYTES`] bytes of each raw stream.
//!
//! With a journal ([`SessionManager::attach_journal`], a node with a data directory)
//! every session has a directory in it (its record, and for supervised commands its
//! output and exit status), removed when the session is forgotten; a restarted node
//! re-adopts what the previous process left ([`SessionManager::adopt`]). See
//! [`supervise`] and `adopt`.
//!
//! Modules: [`buffer`] (byte rings, UTF-8 decoding, the capped text), [`session`] (one
//! session), `spawn` (start, read, supervise), [`supervise`] (commands that outlive
//! the node), `record` (a session's journal entry), `adopt` (re-adoption after a
//! restart), [`group`] (process-group kill), [`pty`] (terminal sessions), [`keys`]
//! (send-keys names), [`error`].

pub mod adopt;
pub mod buffer;
pub mod error;
pub mod group;
pub mod keys;
pub mod owner_tag;
pub mod pty;
pub(crate) mod record;
pub mod session;
mod spawn;
pub(crate) use spawn::exited_payload;
pub mod supervise;

pub use error::SessionError;
pub use session::{
    describe_end, KillOutcome, KillReason, LogPage, LogView, Session, Snapshot, Status,
};

use crate::events::EventSender;
use crate::probe;
use session::NewSession;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tracing::{debug, info};

/// Most characters of combined output kept per session (the most recent).
pub const MAX_OUTPUT_CHARS: usize = 200_000;
/// Characters in `tail`.
pub const TAIL_CHARS: usize = 4_000;
/// Bytes kept of each raw stream (stdout, stderr, or a pty's terminal stream).
pub const RAW_RING_BYTES: usize = 256 * 1024;

/// The manager's caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Sessions running at once (synchronous ones included).
    pub max_running: usize,
    /// Sessions one caller's token may have running at once: its share of
    /// `max_running`, so another agent always has room (default half).
    pub max_running_per_owner: usize,
    /// Finished background sessions kept.
    pub max_finished: usize,
    /// Bytes of output held by all sessions together.
    pub max_retained_bytes: usize,
    /// How long a finished background session is kept.
    pub retention: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_running: 64,
            max_running_per_owner: 32,
            max_finished: 256,
            max_retained_bytes: 64 * 1024 * 1024,
            retention: Duration::from_secs(30 * 60),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Shell command line (run as `$SHELL -c command`).
    pub command: String,
    /// Absolute working directory.
    pub workdir: PathBuf,
    /// Run on a pseudo-terminal.
    pub pty: bool,
    /// Start as a background session.
    pub background: bool,
    /// Give the command a stdin pipe (otherwise `/dev/null`; a pty always has one).
    pub stdin: bool,
    /// Kill the group this long after the start.
    pub timeout: Option<Duration>,
    /// The token id of the caller that starts it (`tool.invoke.caller`): the session
    /// is that token's. `None`: nobody's (only operators see it).
    pub owner: Option<String>,
    /// Changes to the login environment for this command: `Some` sets a variable,
    /// `None` removes it (an auto-approved command's git hardening, see
    /// [`crate::guards::git_env`]).
    pub env_overrides: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)>,
    /// Run this program directly instead of `$SHELL -c command` (the exec tool);
    /// `command` is then only what listings show.
    pub argv: Option<ArgvSpec>,
    /// The call that starts it (journaled, so a restarted node can answer the call).
    pub call_id: Option<String>,
    /// A Bash `yieldMs` command (it becomes a background session if it outlives its
    /// call).
    pub yields: bool,
}

/// A program run without a shell (the exec tool).
#[derive(Debug, Clone)]
pub struct ArgvSpec {
    /// The program's absolute, canonical path (what is executed).
    pub program: PathBuf,
    /// `argv[0]` as the caller gave it.
    pub arg0: String,
    /// `argv[1..]`.
    pub args: Vec<String>,
    /// Variables set on top of the login environment (and its overrides).
    pub env: Vec<(String, String)>,
    /// Bytes written to stdin, which is then closed (`None`: as for a command).
    pub stdin: Option<Vec<u8>>,
}

/// All sessions of this node process.
pub struct SessionManager {
    me: Weak<SessionManager>,
    events: EventSender,
    limits: Limits,
    table: Mutex<Table>,
    serial: AtomicU64,
    /// See [`SessionManager::keep_on_exit`].
    keep_on_exit: std::sync::atomic::AtomicBool,
    /// The journal's sessions directory, once attached.
    journal: std::sync::OnceLock<PathBuf>,
}

#[derive(Default)]
struct Table {
    sessions: HashMap<String, Arc<Session>>,
    /// Spawns between the cap check and the insert.
    reserved: usize,
    /// The same, by owner.
    reserved_by: HashMap<String, usize>,
}

impl Table {
    fn unreserve(&mut self, owner: Option<&str>) {
        self.reserved = self.reserved.saturating_sub(1);
        if let Some(o) = owner {
            if let Some(n) = self.reserved_by.get_mut(o) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.reserved_by.remove(o);
                }
            }
        }
    }
}

impl SessionManager {
    /// A manager with the default [`Limits`], announcing ends through `events`.
    pub fn new(events: EventSender) -> Arc<SessionManager> {
        SessionManager::with_limits(events, Limits::default())
    }

    /// A manager with explicit caps.
    pub fn with_limits(events: EventSender, limits: Limits) -> Arc<SessionManager> {
        Arc::new_cyclic(|me| SessionManager {
            me: me.clone(),
            events,
            limits,
            table: Mutex::new(Table::default()),
            serial: AtomicU64::new(0),
            keep_on_exit: std::sync::atomic::AtomicBool::new(false),
            journal: std::sync::OnceLock::new(),
        })
    }

    /// Keeps every session's record (and a supervised command's output and status) in
    /// `dir`, the journal's sessions directory, from now on. Once; before any spawn.
    pub fn attach_journal(&self, dir: PathBuf) {
        if self.journal.set(dir).is_err() {
            tracing::warn!("the session journal was attached already");
        }
    }

    /// The journal directory of session `id`, if the manager keeps a journal.
    pub(crate) fn journal_dir(&self, id: &str) -> Option<PathBuf> {
        self.journal.get().map(|d| d.join(id))
    }

    /// Removes the journal directory of the forgotten sessions `ids`: on a blocking
    /// thread when there is a runtime, so a call's answer never waits for the file
    /// system (a node killed before it is done finds a finished foreground session it
    /// forgets at its next start).
    fn discard(&self, ids: &[String]) {
        let dirs: Vec<PathBuf> = ids.iter().filter_map(|id| self.journal_dir(id)).collect();
        if dirs.is_empty() {
            return;
        }
        let remove = move || {
            for dir in dirs {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!(dir = ?dir, error = %e, "could not remove a session's journal")
                    }
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(remove)),
            Err(_) => remove(),
        }
    }

    /// Leave running sessions alone when the node stops (`--keep-sessions-on-exit`).
    pub fn keep_on_exit(&self, keep: bool) {
        self.keep_on_exit
            .store(keep, std::sync::atomic::Ordering::Relaxed);
    }

    fn keeps_on_exit(&self) -> bool {
        self.keep_on_exit.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Starts `spec` as a new session.
    pub async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<Session>, SessionError> {
        self.prune();
        let reservation = self.reserve(spec.owner.as_deref())?;
        let mut env = probe::login_env().await;
        let mut overrides = spec.env_overrides.clone();
        if let Some(argv) = &spec.argv {
            overrides.extend(argv.env.iter().map(|(k, v)| (k.into(), Some(v.into()))));
        }
        // Last, so no caller-given `env` replaces it: what revocation finds.
        if let Some(owner) = &spec.owner {
            overrides.push(owner_tag::tag(owner));
        }
        if !overrides.is_empty() {
            env = Arc::new(env.with_overrides(&overrides));
        }
        let shell = probe::user_shell();
        let started = Instant::now();
        let started_at = gsv_protocol::now_ms();
        let id = uuid::Uuid::new_v4().to_string();
        let journal_dir =
            self.journal_dir(&id)
                .and_then(|dir| match crate::journal::files::private_dir(&dir) {
                    Ok(()) => Some(dir),
                    Err(e) => {
                        tracing::warn!(error = %e, "no journal for this session");
                        None
                    }
                });
        // Only a shell command without a terminal can run under the supervisor.
        let supervised = journal_dir
            .as_deref()
            .filter(|_| !spec.pty && spec.argv.is_none());
        let launched = match (&spec.argv, supervised) {
            (None, Some(dir)) => {
                supervise::launch(&shell, &spec.command, &spec.workdir, &env, spec.stdin, dir)
            }
            (None, None) => spawn::launch(
                &shell,
                &spec.command,
                &spec.workdir,
                &env,
                spec.pty,
                spec.stdin,
            ),
            (Some(argv), _) => spawn::launch_argv(argv, &spec.workdir, &env, spec.stdin),
        };
        let program = spec.argv.as_ref().map_or(shell, |a| a.program.clone());
        let mut launched = match launched {
            Ok(launched) => launched,
            Err(error) => {
                self.discard(std::slice::from_ref(&id));
                return Err(spawn_error(&spec, &program, error));
            }
        };
        if let Some(dir) = &journal_dir {
            let record = record::SessionRecord {
                id: id.clone(),
                owner: spec.owner.clone(),
                command: spec.command.clone(),
                workdir: spec.workdir.clone(),
                pty: spec.pty,
                background: spec.background,
                yields: spec.yields,
                supervised: supervised.is_some(),
                pid: launched.pid,
                start_ticks: record::start_ticks(launched.pid),
                started_at,
                call_id: spec.call_id.clone(),
                timeout_at: spec
                    .timeout
                    .map(|t| started_at.saturating_add(session::millis(t))),
            };
            if let Err(e) = record.write(dir) {
                tracing::warn!(error = %e, "could not journal a session");
            }
        }
        let session = Arc::new(Session::new(NewSession {
            id,
            serial: self.serial.fetch_add(1, Ordering::Relaxed),
            command: spec.command.clone(),
            owner: spec.owner.clone(),
            workdir: spec.workdir.clone(),
            pid: launched.pid,
            pty: spec.pty,
            background: spec.background,
            started_at,
            started,
            input: launched.input.take(),
        }));
        {
            let mut table = self.lock();
            table
                .sessions
                .insert(session.id().to_owned(), Arc::clone(&session));
            reservation.release(&mut table);
        }
        info!(
            session_id = %session.id(),
            pid = session.pid(),
            pty = spec.pty,
            background = spec.background,
            "started a command"
        );
        spawn::start(
            Arc::clone(&session),
            launched,
            spec.timeout,
            started,
            self.me.clone(),
            self.events.clone(),
            supervised.map(Path::to_path_buf),
        );
        if let (Some(dir), true) = (supervised, spec.stdin) {
            session.expect_stdin();
            tokio::spawn(supervise::open_stdin(
                Arc::clone(&session),
                dir.to_owned(),
                true,
            ));
        }
        Ok(session)
    }

    /// The session `id`, background or not.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.prune();
        self.lock().sessions.get(id).cloned()
    }

    /// The background session `id`, as the Process tool sees it.
    pub fn background(&self, id: &str) -> Result<Arc<Session>, SessionError> {
        let session = self
            .get(id)
            .ok_or_else(|| SessionError::NotFound(id.to_owned()))?;
        if !session.is_background() {
            return Err(SessionError::NotBackground(id.to_owned()));
        }
        Ok(session)
    }

    /// Background sessions, newest first.
    pub fn list(&self) -> Vec<Arc<Session>> {
        let mut sessions = self.all();
        sessions.retain(|s| s.is_background());
        sessions
    }

    /// Every session (synchronous ones included), newest first.
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.prune();
        let mut sessions: Vec<Arc<Session>> = self.lock().sessions.values().cloned().collect();
        sessions.sort_by_key(|s| std::cmp::Reverse((s.started_at(), s.serial)));
        sessions
    }

    /// Kills every running session owned by one of `owners` (their tokens were
    /// revoked); returns how many were told to stop.
    pub fn end_owned_by(&self, owners: &[String]) -> u64 {
        let mut ended = 0;
        for s in self.all() {
            let owned = s.owner().is_some_and(|o| owners.iter().any(|t| t == o));
            if owned && !s.is_finished() {
                info!(session_id = %s.id(), "ending a session of a revoked token");
                s.kill(KillReason::Requested);
                ended += 1;
            }
        }
        // And whatever their commands started that left the session's group.
        owner_tag::end_tagged(owners, group::KILL_GRACE);
        ended
    }

    /// Forgets the finished background session `id`.
    pub fn remove(&self, id: &str) -> Result<Arc<Session>, SessionError> {
        let session = self.background(id)?;
        if !session.is_finished() {
            return Err(SessionError::StillRunning(id.to_owned()));
        }
        if self.lock().sessions.remove(id).is_some() {
            self.discard(&[id.to_owned()]);
        }
        debug!(session_id = %id, "session removed");
        Ok(session)
    }

    /// Sessions running now.
    pub fn running(&self) -> usize {
        self.lock()
            .sessions
            .values()
            .filter(|s| !s.is_finished())
            .count()
    }

    /// Sessions known (running, and finished ones still kept).
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of output held by all sessions.
    pub fn retained_bytes(&self) -> usize {
        self.lock()
            .sessions
            .values()
            .map(|s| s.retained_bytes())
            .sum()
    }

    /// Drops expired finished sessions, then the oldest finished ones while over the
    /// finished-session or memory cap.
    pub fn prune(&self) {
        let mut table = self.lock();
        let mut finished: Vec<(u64, u64, String, usize)> = Vec::new();
        let mut total = 0usize;
        let now = gsv_protocol::now_ms();
        let retention = session::millis(self.limits.retention);
        let mut expired = Vec::new();
        for (id, s) in &table.sessions {
            let snap_bytes = s.retained_bytes();
            match s.ended_at() {
                Some(ended) if now.saturating_sub(ended) >= retention => expired.push(id.clone()),
                Some(ended) => {
                    total += snap_bytes;
                    finished.push((ended, s.serial, id.clone(), snap_bytes));
                }
                None => total += snap_bytes,
            }
        }
        let mut dropped = Vec::new();
        for id in expired {
            debug!(session_id = %id, "finished session expired");
            table.sessions.remove(&id);
            dropped.push(id);
        }
        finished.sort();
        let mut kept = finished.len();
        for (_, _, id, bytes) in finished {
            if kept <= self.limits.max_finished && total <= self.limits.max_retained_bytes {
                break;
            }
            debug!(session_id = %id, "dropping the oldest finished session (caps)");
            table.sessions.remove(&id);
            dropped.push(id);
            kept -= 1;
            total -= bytes;
        }
        drop(table);
        self.discard(&dropped);
    }

    /// The process groups of the running sessions whose owner `may_use` refuses (a
    /// caller's view of other tokens' sessions: proc_list hides them, proc_kill
    /// refuses them). Each session's group id is its leader's pid.
    pub fn groups_not_of(&self, may_use: impl Fn(Option<&str>) -> bool) -> HashSet<i32> {
        self.all()
            .iter()
            .filter(|s| !s.is_finished() && !may_use(s.owner()))
            .filter_map(|s| i32::try_from(s.pid()).ok())
            .collect()
    }

    /// Forgets a finished foreground session (its call has the result). Called by the
    /// call and by the supervisor, whichever comes first.
    pub(crate) fn forget_foreground(&self, session: &Session) {
        if session.is_finished()
            && !session.is_background()
            && self.lock().sessions.remove(session.id()).is_some()
        {
            self.discard(&[session.id().to_owned()]);
        }
    }

    /// Called by a session's supervisor once it has finished.
    pub(crate) fn on_finished(&self, session: &Arc<Session>) {
        if !session.is_background() {
            self.forget_foreground(session);
            return;
        }
        self.prune();
        // Expire it on time even if nothing else happens on this node.
        let me = self.me.clone();
        let retention = self.limits.retention;
        tokio::spawn(async move {
            tokio::time::sleep(retention).await;
            if let Some(manager) = me.upgrade() {
                manager.prune();
            }
        });
    }

    fn reserve(&self, owner: Option<&str>) -> Result<Reservation, SessionError> {
        let mut table = self.lock();
        let running = table.sessions.values().filter(|s| !s.is_finished()).count();
        if running + table.reserved >= self.limits.max_running {
            return Err(SessionError::TooManyRunning {
                limit: self.limits.max_running,
            });
        }
        if let Some(o) = owner {
            let mine = table
                .sessions
                .values()
                .filter(|s| !s.is_finished() && s.owner() == Some(o))
                .count()
                + table.reserved_by.get(o).copied().unwrap_or(0);
            if mine >= self.limits.max_running_per_owner {
                return Err(SessionError::TooManyRunningForToken {
                    limit: self.limits.max_running_per_owner,
                    total: self.limits.max_running,
                });
            }
            *table.reserved_by.entry(o.to_owned()).or_default() += 1;
        }
        let retained: usize = table.sessions.values().map(|s| s.retained_bytes()).sum();
        if retained >= self.limits.max_retained_bytes {
            return Err(SessionError::OutputFull {
                limit_mib: self.limits.max_retained_bytes / (1024 * 1024),
            });
        }
        table.reserved += 1;
        Ok(Reservation {
            manager: self.me.clone(),
            owner: owner.map(str::to_owned),
            released: false,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // Plain map updates; a panic elsewhere cannot leave it torn.
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl SessionManager {
    /// Ends every running session when the node stops: SIGTERM to each process group,
    /// then SIGKILL to whatever is left after the grace period. Waits for it, so no
    /// group outlives the node (the grace thread of `kill` would die with the process).
    ///
    /// With [`SessionManager::keep_on_exit`], running sessions are left alone instead:
    /// their process groups keep running, but their output after this point has no
    /// reader (a process that writes to it then gets `EPIPE`/`SIGPIPE`; a pty session
    /// gets `SIGHUP` when the terminal closes, as with any closed terminal).
    pub async fn shutdown(&self) {
        if self.keeps_on_exit() {
            let kept = self.all().iter().filter(|s| !s.is_finished()).count();
            if kept > 0 {
                tracing::info!(
                    kept,
                    "node stopping: leaving running sessions alone (--keep-sessions-on-exit)"
                );
            }
            return;
        }
        let running: Vec<Arc<Session>> = self
            .all()
            .into_iter()
            .filter(|s| s.kill(KillReason::Requested) != KillOutcome::Finished)
            .collect();
        if running.is_empty() {
            return;
        }
        debug!(
            count = running.len(),
            "node stopping: ending running sessions"
        );
        let deadline = tokio::time::Instant::now() + group::KILL_GRACE + Duration::from_millis(200);
        while tokio::time::Instant::now() < deadline {
            if running.iter().all(|s| !group::group_alive(s.pid())) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        for s in &running {
            group::kill_now(s.pid());
        }
    }
}

impl Drop for SessionManager {
    fn drop(&mut self) {
        if self.keeps_on_exit() {
            return;
        }
        let table = self.table.get_mut().unwrap_or_else(|p| p.into_inner());
        for session in table.sessions.values() {
            if session.kill(KillReason::Requested) == KillOutcome::Started {
                debug!(session_id = %session.id(), "node stopping: killed a running session");
            }
        }
    }
}

/// A running-session slot held between the cap check and the insert.
struct Reservation {
    manager: Weak<SessionManager>,
    owner: Option<String>,
    released: bool,
}

impl Reservation {
    fn release(mut self, table: &mut Table) {
        table.unreserve(self.owner.as_deref());
        self.released = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Some(manager) = self.manager.upgrade() {
            let mut table = manager.lock();
            table.unreserve(self.owner.as_deref());
        }
    }
}

/// Explains a failed spawn. The workdir is checked only now, off the fast path: a
/// missing directory and a missing shell both surface as `ENOENT` from the spawn.
fn spawn_error(spec: &SpawnSpec, shell: &std::path::Path, error: std::io::Error) -> SessionError {
    let workdir = |problem: String| SessionError::Workdir {
        path: spec.workdir.display().to_string(),
        problem,
    };
    match std::fs::metadata(&spec.workdir) {
        Ok(meta) if !meta.is_dir() => workdir("is not a directory".to_owned()),
        Ok(_) => SessionError::Spawn {
            shell: shell.display().to_string(),
            error,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => workdir("does not exist".to_owned()),
        Err(e) => workdir(format!("cannot be used: {e}")),
    }
}
