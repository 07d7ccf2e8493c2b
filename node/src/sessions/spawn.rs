//! Starting a command and watching it to the end: the spawn, the output readers and
//! the supervisor task.
//!
//! Commands run as `$SHELL -c COMMAND` (not a login shell: profiles are slow and would
//! cost every call) with the captured login environment (see the Bash tool's docs),
//! each in its own process group. Two reader tasks (one for a pty) copy output into the
//! session as it arrives. The supervisor owns the child: it waits for the shell, kills
//! the group when the session's own timeout passes, then waits for the readers to reach
//! end-of-file before it marks the session finished, so the last lines a command prints
//! are never lost. If something the command left behind (`daemon &`) keeps the pipes
//! open, reading stops [`DRAIN_TIMEOUT`] after the shell exited.

use crate::events::EventSender;
use crate::probe::LoginEnv;
use crate::sessions::group::KILL_GRACE;
use crate::sessions::pty;
use crate::sessions::session::{Input, KillReason, Session, Snapshot, Stream};
use crate::sessions::supervise;
use crate::sessions::{ArgvSpec, SessionManager};
use gsv_protocol::EventName;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info, info_span, warn, Instrument};

/// How long output may keep draining after the shell exited.
pub const DRAIN_TIMEOUT: Duration = Duration::from_millis(500);
/// Size of one read from a pipe or pty.
const READ_CHUNK: usize = 64 * 1024;
/// Longest command echoed in a `process.exited` event.
const EVENT_COMMAND_CHARS: usize = 1000;

/// A started command, before it becomes a session.
pub(crate) struct Launched {
    pub child: tokio::process::Child,
    pub pid: u32,
    pub input: Option<Input>,
    pub outputs: Vec<(Stream, OutputSource)>,
}

/// Where a stream of output is read from.
pub(crate) enum OutputSource {
    /// A pipe or pty, read to its end.
    Pipe(Box<dyn AsyncRead + Send + Unpin>),
    /// A file in the journal a supervised command appends to, followed as it grows
    /// ([`supervise::follow`]).
    File(std::fs::File),
}

/// Starts `shell -c command` in `workdir` with `env`, in its own process group.
/// `stdin`: give the command a pipe to write to (otherwise it reads `/dev/null`).
pub(crate) fn launch(
    shell: &Path,
    command: &str,
    workdir: &Path,
    env: &LoginEnv,
    pty: bool,
    stdin: bool,
) -> io::Result<Launched> {
    if pty {
        let started = pty::spawn(shell, command, workdir, env)?;
        let pid = started
            .child
            .id()
            .ok_or_else(|| io::Error::other("the child exited before it had a pid"))?;
        return Ok(Launched {
            child: started.child,
            pid,
            input: Some(Input::Pty(started.writer)),
            outputs: vec![(
                Stream::Terminal,
                OutputSource::Pipe(Box::new(started.reader)),
            )],
        });
    }
    let mut cmd = tokio::process::Command::new(shell);
    cmd.arg("-c").arg(command);
    spawn_piped(cmd, workdir, env, stdin)
}

/// Spawns `cmd` in `workdir` with exactly `env`, in its own process group, stdout and
/// stderr on pipes, stdin a pipe when `stdin` (else `/dev/null`); the one way both
/// launchers without a terminal start a child.
fn spawn_piped(
    mut cmd: tokio::process::Command,
    workdir: &Path,
    env: &LoginEnv,
    stdin: bool,
) -> io::Result<Launched> {
    cmd.current_dir(workdir)
        .env_clear()
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the child exited before it had a pid"))?;
    let mut outputs: Vec<(Stream, OutputSource)> = Vec::new();
    if let Some(out) = child.stdout.take() {
        outputs.push((Stream::Stdout, OutputSource::Pipe(Box::new(out))));
    }
    if let Some(err) = child.stderr.take() {
        outputs.push((Stream::Stderr, OutputSource::Pipe(Box::new(err))));
    }
    let input = child.stdin.take().map(Input::Pipe);
    Ok(Launched {
        child,
        pid,
        input,
        outputs,
    })
}

/// Starts `argv.program` with `argv.args` directly (no shell) in `workdir` with `env`,
/// in its own process group. With `argv.stdin` the bytes are written to a pipe that is
/// then closed; otherwise stdin is a pipe when `stdin` (for Process `write`), else
/// `/dev/null`.
pub(crate) fn launch_argv(
    argv: &ArgvSpec,
    workdir: &Path,
    env: &LoginEnv,
    stdin: bool,
) -> io::Result<Launched> {
    use std::os::unix::process::CommandExt;
    let piped = stdin || argv.stdin.is_some();
    let mut std_cmd = std::process::Command::new(&argv.program);
    std_cmd.arg0(&argv.arg0);
    let mut cmd = tokio::process::Command::from(std_cmd);
    cmd.args(&argv.args);
    let mut launched = spawn_piped(cmd, workdir, env, piped)?;
    // With bytes to feed, the pipe is the feeder's alone (the call gets no input).
    let fed = match &argv.stdin {
        Some(data) => launched.input.take().map(|input| (data.clone(), input)),
        None => None,
    };
    if let Some((data, Input::Pipe(mut pipe))) = fed {
        // Fed by its own task so a program that does not read cannot block the
        // spawn; the pipe closes (EOF) when the task ends.
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            if let Err(e) = pipe.write_all(&data).await {
                debug!(error = %e, "writing the program's stdin stopped");
            }
        });
    }
    Ok(launched)
}

/// Starts the readers and the supervisor of `session`. `journal_dir`: the session's
/// directory in the journal, where a supervised command's status is written.
pub(crate) fn start(
    session: Arc<Session>,
    launched: Launched,
    timeout: Option<Duration>,
    started: Instant,
    manager: Weak<SessionManager>,
    events: EventSender,
    journal_dir: Option<std::path::PathBuf>,
) {
    let span = info_span!("session", session_id = %session.id(), pid = session.pid());
    let (exited, exited_rx) = watch::channel(false);
    let readers = launched
        .outputs
        .into_iter()
        .map(|(stream, source)| {
            let session = Arc::clone(&session);
            match source {
                OutputSource::Pipe(reader) => {
                    tokio::spawn(read_output(session, stream, reader).instrument(span.clone()))
                }
                OutputSource::File(file) => tokio::spawn(
                    supervise::follow(session, stream, file, exited_rx.clone())
                        .instrument(span.clone()),
                ),
            }
        })
        .collect();
    let supervisor = Supervisor {
        session,
        child: launched.child,
        readers,
        timeout,
        started,
        manager,
        events,
        exited,
        journal_dir,
    };
    tokio::spawn(supervisor.run().instrument(span));
}

async fn read_output(
    session: Arc<Session>,
    stream: Stream,
    mut reader: Box<dyn AsyncRead + Send + Unpin>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => session.push_output(stream, &buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A pty reports EIO once no process holds its terminal side: its EOF.
            Err(e) if stream == Stream::Terminal && e.raw_os_error() == Some(nix::libc::EIO) => {
                break
            }
            Err(e) => {
                debug!(?stream, error = %e, "reading output failed");
                break;
            }
        }
    }
}

struct Supervisor {
    session: Arc<Session>,
    child: tokio::process::Child,
    readers: Vec<JoinHandle<()>>,
    timeout: Option<Duration>,
    started: Instant,
    manager: Weak<SessionManager>,
    events: EventSender,
    /// Tells the readers of output files that the supervisor has exited.
    exited: watch::Sender<bool>,
    journal_dir: Option<std::path::PathBuf>,
}

impl Supervisor {
    async fn run(mut self) {
        let status = {
            let wait = self.child.wait();
            tokio::pin!(wait);
            match self.timeout {
                None => wait.await,
                Some(timeout) => {
                    let at = tokio::time::Instant::from_std(self.started) + timeout;
                    tokio::select! {
                        status = &mut wait => status,
                        _ = tokio::time::sleep_until(at) => {
                            info!(timeout_ms = timeout.as_millis() as u64, "the session's timeout passed");
                            self.session.kill(KillReason::Timeout);
                            wait.await
                        }
                    }
                }
            }
        };
        self.session.set_leader_exited();
        let _ = self.exited.send(true);
        self.drain().await;
        // A supervised command's own status, as its supervisor wrote it.
        let recorded = self.journal_dir.as_deref().and_then(supervise::read_status);
        let (code, signal) = match (recorded, status) {
            (Some(recorded), _) => recorded,
            (None, Ok(status)) => (
                status.code(),
                status.signal().map(crate::sessions::group::signal_name),
            ),
            (None, Err(e)) => {
                warn!(error = %e, "waiting for the command failed");
                (None, None)
            }
        };
        conclude(
            &self.session,
            code,
            signal,
            None,
            &self.events,
            &self.manager,
        )
        .await;
    }

    /// Waits for the readers to reach end-of-file, within a bound.
    async fn drain(&mut self) {
        // A killed group may take the whole grace period to let go of the pipes.
        let bound = if self.session.kill_requested() {
            KILL_GRACE + DRAIN_TIMEOUT
        } else {
            DRAIN_TIMEOUT
        };
        let all = futures_util::future::join_all(self.readers.iter_mut());
        if tokio::time::timeout(bound, all).await.is_err() {
            debug!("output still open after the shell exited (a process it left behind holds it); stopped reading");
            for reader in &self.readers {
                reader.abort();
            }
        }
    }
}

/// Records the end of `session` (at `ended_at`, default now), announces a background
/// session's end and tells the manager.
pub(crate) async fn conclude(
    session: &Arc<Session>,
    code: Option<i32>,
    signal: Option<String>,
    ended_at: Option<u64>,
    events: &EventSender,
    manager: &Weak<SessionManager>,
) {
    let snapshot = session.finish_at(code, signal, ended_at);
    session.close_input().await;
    info!(
        status = snapshot.status.as_str(),
        exit_code = ?snapshot.exit_code,
        signal = ?snapshot.signal,
        duration_ms = snapshot.duration_ms,
        "session finished"
    );
    if snapshot.background {
        let payload = exited_payload(&snapshot);
        if let Err(e) = events.send(EventName::ProcessExited, &payload).await {
            warn!(error = %e, "could not queue the process.exited event");
        }
    }
    if let Some(manager) = manager.upgrade() {
        manager.on_finished(session);
    }
}

/// The payload of `process.exited`.
pub(crate) fn exited_payload(s: &Snapshot) -> gsv_protocol::event::ProcessExited {
    let command: String = if s.command.chars().count() > EVENT_COMMAND_CHARS {
        let mut cut: String = s.command.chars().take(EVENT_COMMAND_CHARS).collect();
        cut.push('…');
        cut
    } else {
        s.command.clone()
    };
    gsv_protocol::event::ProcessExited {
        session_id: s.session_id.clone(),
        status: s.status.as_str().to_owned(),
        exit_code: s.exit_code,
        signal: s.signal.clone(),
        timed_out: s.timed_out,
        started_at: s.started_at,
        ended_at: s.ended_at,
        duration_ms: s.duration_ms,
        tail: s.tail.clone(),
        truncated: s.truncated,
        command,
        owner: s.owner.clone(),
    }
}
