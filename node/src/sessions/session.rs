//! One command run by the Bash tool: its identity, its output, its stdin and how it
//! ended.
//!
//! A session is shared (`Arc`) by the tasks that read its output, the supervisor that
//! waits for it, the call that started it and the Process tool. Output and status live
//! under one short-held mutex; a `watch` counter is bumped on every change so waiters
//! (`poll` with `waitMs`, a synchronous call) wake without polling. Stdin has its own
//! async mutex, since a write may wait for the process to read.

use crate::sessions::buffer::{page_lines, ByteRing, LinePage, TextBuffer, Utf8Decoder};
use crate::sessions::error::SessionError;
use crate::sessions::group::{self, KILL_GRACE};
use crate::sessions::pty::AnsiStripper;
use crate::sessions::{MAX_OUTPUT_CHARS, RAW_RING_BYTES, TAIL_CHARS};
use gsv_protocol::now_ms;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

/// How long a stdin write may wait for the process to read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a chunk of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
    /// The pty of a terminal session (stdout and stderr together, with escapes).
    Terminal,
}

/// `status` of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    /// Exited with code 0.
    Completed,
    /// Exited with another code, or was killed by a signal (timeouts included).
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
        }
    }
}

/// How a finished session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<String>,
    pub ended_at: u64,
    pub duration_ms: u64,
}

/// Why a kill was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    /// Process `kill`, or the node shutting down.
    Requested,
    /// The session's `timeout` passed.
    Timeout,
    /// The synchronous call that owned the session was cancelled or timed out.
    CallEnded,
}

/// What [`Session::kill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// SIGTERM sent to the group (SIGKILL follows after the grace period).
    Started,
    /// A kill was already under way.
    AlreadyKilling,
    /// The session had already finished.
    Finished,
}

/// Which text `log` pages through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogView {
    /// The combined output (for pty sessions: escapes stripped).
    Combined,
    /// Only stdout (pipe sessions).
    Stdout,
    /// Only stderr (pipe sessions).
    Stderr,
    /// The raw terminal stream, escapes included (pty sessions; for pipe sessions the
    /// same as `Combined`).
    Raw,
}

/// A point-in-time view of a session (what `poll`, `list` and results are built from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub session_id: String,
    pub status: Status,
    pub pid: u32,
    pub command: String,
    pub workdir: String,
    pub pty: bool,
    pub background: bool,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    /// Until now while running.
    pub duration_ms: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub timed_out: bool,
    pub tail: String,
    pub truncated: bool,
    /// Characters of output produced so far (retained or not).
    pub total_chars: u64,
    /// The token id of the caller that started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Stdin of a session.
pub(crate) enum Input {
    Pipe(tokio::process::ChildStdin),
    Pty(pty_process::OwnedWritePty),
    /// The named pipe in the journal a supervised command reads its stdin from.
    Fifo(tokio::net::unix::pipe::Sender),
}

impl Input {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Input::Pipe(w) => {
                w.write_all(bytes).await?;
                w.flush().await
            }
            Input::Pty(w) => {
                w.write_all(bytes).await?;
                w.flush().await
            }
            Input::Fifo(w) => {
                w.write_all(bytes).await?;
                w.flush().await
            }
        }
    }
}

/// The captured output of a session.
#[derive(Debug)]
struct Output {
    text: TextBuffer,
    /// stdout, or the raw terminal stream of a pty session.
    stdout: ByteRing,
    stderr: ByteRing,
    stdout_utf8: Utf8Decoder,
    stderr_utf8: Utf8Decoder,
    ansi: AnsiStripper,
}

impl Output {
    fn new() -> Self {
        Output {
            text: TextBuffer::new(MAX_OUTPUT_CHARS),
            stdout: ByteRing::new(RAW_RING_BYTES),
            stderr: ByteRing::new(RAW_RING_BYTES),
            stdout_utf8: Utf8Decoder::default(),
            stderr_utf8: Utf8Decoder::default(),
            ansi: AnsiStripper::default(),
        }
    }

    fn push(&mut self, stream: Stream, bytes: &[u8]) {
        let mut text = String::with_capacity(bytes.len());
        match stream {
            Stream::Stdout => {
                self.stdout.push(bytes);
                self.stdout_utf8.decode(bytes, &mut text);
            }
            Stream::Stderr => {
                self.stderr.push(bytes);
                self.stderr_utf8.decode(bytes, &mut text);
            }
            Stream::Terminal => {
                self.stdout.push(bytes);
                self.ansi.strip(bytes, &mut text);
            }
        }
        self.text.push_str(&text);
    }

    fn finish(&mut self) {
        let mut text = String::new();
        self.stdout_utf8.finish(&mut text);
        self.stderr_utf8.finish(&mut text);
        self.text.push_str(&text);
    }

    fn retained_bytes(&self) -> usize {
        self.text.retained_bytes() + self.stdout.len() + self.stderr.len()
    }
}

#[derive(Debug)]
struct State {
    output: Output,
    background: bool,
    /// The shell itself has exited (output may still be draining).
    leader_exited: bool,
    kill_requested: bool,
    timed_out: bool,
    exit: Option<Exit>,
}

/// One command and everything known about it.
pub struct Session {
    id: String,
    /// Order of creation (ties of `started_at`).
    pub(crate) serial: u64,
    command: String,
    /// The token id of the caller that started it.
    owner: Option<String>,
    workdir: PathBuf,
    pid: u32,
    pty: bool,
    started_at: u64,
    started: Instant,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    input: tokio::sync::Mutex<Option<Input>>,
    /// A supervised command's stdin (its named pipe) is still being opened: a write
    /// waits for it rather than find no stdin yet.
    stdin_opening: std::sync::atomic::AtomicBool,
    stdin_settled: tokio::sync::Notify,
}

/// How long a write waits for a supervised command to open its stdin.
const STDIN_OPEN_WAIT: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("pid", &self.pid)
            .field("pty", &self.pty)
            .finish_non_exhaustive()
    }
}

/// What a new session is made of.
pub(crate) struct NewSession {
    pub id: String,
    pub serial: u64,
    pub command: String,
    pub owner: Option<String>,
    pub workdir: PathBuf,
    pub pid: u32,
    pub pty: bool,
    pub background: bool,
    pub started_at: u64,
    pub started: Instant,
    pub input: Option<Input>,
}

impl Session {
    pub(crate) fn new(new: NewSession) -> Session {
        Session {
            id: new.id,
            serial: new.serial,
            command: new.command,
            owner: new.owner,
            workdir: new.workdir,
            pid: new.pid,
            pty: new.pty,
            started_at: new.started_at,
            started: new.started,
            state: Mutex::new(State {
                output: Output::new(),
                background: new.background,
                leader_exited: false,
                kill_requested: false,
                timed_out: false,
                exit: None,
            }),
            changed: watch::Sender::new(0),
            input: tokio::sync::Mutex::new(new.input),
            stdin_opening: std::sync::atomic::AtomicBool::new(false),
            stdin_settled: tokio::sync::Notify::new(),
        }
    }

    /// Says the session's stdin is being opened (a supervised command's named pipe):
    /// writes wait until [`Session::stdin_settled`].
    pub(crate) fn expect_stdin(&self) {
        self.stdin_opening
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The stdin was opened (and given with [`Session::set_input`]) or will not be.
    pub(crate) fn stdin_settled(&self) {
        self.stdin_opening
            .store(false, std::sync::atomic::Ordering::Release);
        self.stdin_settled.notify_waiters();
    }

    /// Waits (bounded) while the stdin is still being opened.
    async fn stdin_ready(&self) {
        let deadline = tokio::time::Instant::now() + STDIN_OPEN_WAIT;
        loop {
            let settled = self.stdin_settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            if !self
                .stdin_opening
                .load(std::sync::atomic::Ordering::Acquire)
                || self.is_finished()
            {
                return;
            }
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                return;
            }
        }
    }

    /// The session id (a UUID v4).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The shell's process id, which is also the process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn command(&self) -> &str {
        &self.command
    }

    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// Whether the session runs on a pseudo-terminal.
    pub fn is_pty(&self) -> bool {
        self.pty
    }

    /// Milliseconds since the Unix epoch at spawn.
    pub fn started_at(&self) -> u64 {
        self.started_at
    }

    /// When the session finished (ms since the Unix epoch), if it has.
    pub fn ended_at(&self) -> Option<u64> {
        self.lock().exit.as_ref().map(|e| e.ended_at)
    }

    pub fn is_finished(&self) -> bool {
        self.lock().exit.is_some()
    }

    pub fn is_background(&self) -> bool {
        self.lock().background
    }

    /// The current state.
    /// The token id of the caller that started this session.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    pub fn snapshot(&self) -> Snapshot {
        let state = self.lock();
        let status = match &state.exit {
            None => Status::Running,
            Some(exit) if exit.code == Some(0) && !state.timed_out => Status::Completed,
            Some(_) => Status::Failed,
        };
        let duration_ms = match &state.exit {
            Some(exit) => exit.duration_ms,
            None => millis(self.started.elapsed()),
        };
        Snapshot {
            session_id: self.id.clone(),
            status,
            pid: self.pid,
            command: self.command.clone(),
            workdir: self.workdir.display().to_string(),
            pty: self.pty,
            background: state.background,
            started_at: self.started_at,
            ended_at: state.exit.as_ref().map(|e| e.ended_at),
            duration_ms,
            exit_code: state.exit.as_ref().and_then(|e| e.code),
            signal: state.exit.as_ref().and_then(|e| e.signal.clone()),
            timed_out: state.timed_out,
            tail: state.output.text.tail(TAIL_CHARS).to_owned(),
            truncated: state.output.text.truncated(),
            total_chars: state.output.text.total_chars(),
            owner: self.owner.clone(),
        }
    }

    /// The retained combined output (at most [`MAX_OUTPUT_CHARS`] characters, the most
    /// recent).
    pub fn output(&self) -> String {
        self.lock().output.text.as_str().to_owned()
    }

    /// The retained stdout and stderr of a pipe session, each decoded as UTF-8 (lossy),
    /// with whether earlier bytes of it were dropped (the last [`RAW_RING_BYTES`] bytes
    /// of each are kept).
    pub fn streams(&self) -> ((String, bool), (String, bool)) {
        let state = self.lock();
        let out = &state.output;
        (
            (out.stdout.to_text(), out.stdout.truncated()),
            (out.stderr.to_text(), out.stderr.truncated()),
        )
    }

    /// Bytes of output this session holds in memory.
    pub fn retained_bytes(&self) -> usize {
        self.lock().output.retained_bytes()
    }

    /// Lines `offset..offset + limit` of the chosen view of the output.
    pub fn log(&self, view: LogView, offset: usize, limit: usize) -> Result<LogPage, SessionError> {
        let state = self.lock();
        let out = &state.output;
        let (page, truncated) = match view {
            LogView::Combined => (
                page_lines(out.text.as_str(), offset, limit),
                out.text.truncated(),
            ),
            LogView::Raw if self.pty => (
                page_lines(&out.stdout.to_text(), offset, limit),
                out.stdout.truncated(),
            ),
            LogView::Raw => (
                page_lines(out.text.as_str(), offset, limit),
                out.text.truncated(),
            ),
            LogView::Stdout | LogView::Stderr if self.pty => {
                return Err(SessionError::PtyStream(self.id.clone()))
            }
            LogView::Stdout => (
                page_lines(&out.stdout.to_text(), offset, limit),
                out.stdout.truncated(),
            ),
            LogView::Stderr => (
                page_lines(&out.stderr.to_text(), offset, limit),
                out.stderr.truncated(),
            ),
        };
        Ok(LogPage { page, truncated })
    }

    /// A receiver that sees every change (output, status) from now on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Waits until the session has finished (output drained, status final).
    pub async fn wait_finished(&self) {
        let mut rx = self.subscribe();
        // The closure runs at once and after every change.
        let _ = rx.wait_for(|_| self.is_finished()).await;
    }

    /// Waits until the session changes (new output, or it finishes) or `timeout`
    /// passes. Returns at once if it has already finished.
    pub async fn wait_change(&self, timeout: Duration) {
        let mut rx = self.subscribe();
        if self.is_finished() {
            return;
        }
        let _ = tokio::time::timeout(timeout, rx.changed()).await;
    }

    /// Moves a running session to the background (the Process tool manages it, and
    /// its end is announced with a `process.exited` event). `false` if it had already
    /// finished, in which case it stays a foreground session.
    pub fn set_background(&self) -> bool {
        let mut state = self.lock();
        if state.exit.is_some() {
            return false;
        }
        state.background = true;
        true
    }

    /// Starts killing the session's process group (SIGTERM, then SIGKILL after the
    /// grace period).
    pub fn kill(&self, reason: KillReason) -> KillOutcome {
        let leader_exited = {
            let mut state = self.lock();
            if state.exit.is_some() {
                return KillOutcome::Finished;
            }
            if state.kill_requested {
                return KillOutcome::AlreadyKilling;
            }
            state.kill_requested = true;
            if reason == KillReason::Timeout {
                state.timed_out = true;
            }
            state.leader_exited
        };
        // Once the shell is gone, only signal what is left of its group.
        if !leader_exited || group::group_alive(self.pid) {
            group::terminate(self.pid, KILL_GRACE);
        }
        tracing::info!(session_id = %self.id, pid = self.pid, ?reason, "killing the session's process group");
        KillOutcome::Started
    }

    pub(crate) fn kill_requested(&self) -> bool {
        self.lock().kill_requested
    }

    /// Writes `bytes` to the session's stdin (its pty for terminal sessions).
    pub async fn write(&self, bytes: &[u8]) -> Result<usize, SessionError> {
        self.ensure_running()?;
        // A write right after the start may come before the command opened its stdin.
        self.stdin_ready().await;
        let mut input = self.input.lock().await;
        let Some(writer) = input.as_mut() else {
            return Err(self.closed_error());
        };
        match tokio::time::timeout(WRITE_TIMEOUT, writer.write_all(bytes)).await {
            Ok(Ok(())) => Ok(bytes.len()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                *input = None;
                Err(self.closed_error())
            }
            Ok(Err(e)) => Err(SessionError::Stdin {
                id: self.id.clone(),
                error: e,
            }),
            Err(_) => Err(SessionError::StdinFull {
                id: self.id.clone(),
                secs: WRITE_TIMEOUT.as_secs(),
            }),
        }
    }

    /// `Exited` if the session has finished.
    pub fn ensure_running(&self) -> Result<(), SessionError> {
        let snapshot = self.snapshot();
        if snapshot.status == Status::Running {
            return Ok(());
        }
        Err(SessionError::Exited {
            id: self.id.clone(),
            status: describe_end(&snapshot),
        })
    }

    fn closed_error(&self) -> SessionError {
        if self.is_finished() {
            return SessionError::Exited {
                id: self.id.clone(),
                status: describe_end(&self.snapshot()),
            };
        }
        SessionError::StdinClosed(self.id.clone())
    }

    pub(crate) fn push_output(&self, stream: Stream, bytes: &[u8]) {
        self.lock().output.push(stream, bytes);
        self.bump();
    }

    pub(crate) fn set_leader_exited(&self) {
        self.lock().leader_exited = true;
    }

    /// Records the end of the session at `ended_at` (ms since the Unix epoch; default
    /// now: a re-adopted session may have ended while no node process watched it);
    /// returns the final snapshot.
    pub(crate) fn finish_at(
        &self,
        code: Option<i32>,
        signal: Option<String>,
        ended_at: Option<u64>,
    ) -> Snapshot {
        {
            let mut state = self.lock();
            state.output.finish();
            let duration_ms = match ended_at {
                Some(at) => at.saturating_sub(self.started_at),
                None => millis(self.started.elapsed()),
            };
            state.exit = Some(Exit {
                code,
                signal,
                ended_at: ended_at.unwrap_or_else(now_ms),
                duration_ms,
            });
        }
        self.bump();
        self.snapshot()
    }

    /// Gives the session its stdin once it is open (a supervised command's named pipe).
    pub(crate) async fn set_input(&self, input: Input) {
        if !self.is_finished() {
            *self.input.lock().await = Some(input);
        }
    }

    /// Closes stdin (after the session finished).
    pub(crate) async fn close_input(&self) {
        *self.input.lock().await = None;
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a single step; a panic elsewhere cannot leave it torn.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A page of `log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    pub page: LinePage,
    /// Whether older output of this view was dropped (offsets count retained lines).
    pub truncated: bool,
}

/// "exit code 1", "killed by SIGTERM after its timeout", ... for messages.
pub fn describe_end(s: &Snapshot) -> String {
    let how = match (&s.exit_code, &s.signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by {signal}"),
        (None, None) => "ended".to_owned(),
    };
    let status = s.status.as_str();
    if s.timed_out {
        format!("{status}, timed out, {how}")
    } else {
        format!("{status}, {how}")
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
