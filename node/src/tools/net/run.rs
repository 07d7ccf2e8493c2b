//! Running the network tools' programs: argv only, a timeout on every process, and the
//! whole process group killed when it expires.
//!
//! The network tools never go through a shell: a [`Command`] names one of the
//! programs the tools know (a `&'static str` chosen by the tool, never by the caller)
//! and an argv list the tool built from validated values. The program is looked up on
//! the same PATH `hostBinStatus` reports (the login PATH, see [`crate::probe`]), so a
//! binary the gateway sees as missing is missing here too, and the answer is a clear
//! "install …" message ([`install_hint`]).
//!
//! Each process leads its own process group. When its timeout passes or the call is
//! cancelled, the group gets SIGTERM and, after a short grace, SIGKILL
//! ([`crate::sessions::group`]); if the call's future is dropped (the node's deadline),
//! a guard does the same. Output is read while the process runs, capped at
//! [`MAX_OUTPUT_BYTES`] per stream, decoded lossily, and kept on timeout: a partial
//! traceroute or scan is still worth returning. The locale is forced to `C` so the
//! parsers see the output they were written for.
//!
//! [`CommandRunner`] is the seam tests use: they substitute a runner that answers with
//! canned output and counts what would have run.

use crate::probe;
use crate::sessions::group;
use async_trait::async_trait;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

/// Most bytes kept of each output stream.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Grace between SIGTERM and SIGKILL for an expired command.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// How long output may keep arriving after the process ended or was killed.
const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// One program run: which, with what arguments, for how long at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// A program name the tools know (`nmap`, `ping`, …), looked up on the PATH.
    pub program: &'static str,
    pub args: Vec<String>,
    pub timeout: Duration,
}

impl Command {
    pub fn new<I, S>(program: &'static str, args: I, timeout: Duration) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Command {
            program,
            args: args.into_iter().map(Into::into).collect(),
            timeout,
        }
    }
}

/// What a finished (or expired) program left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// The exit code; `None` if it was killed by a signal (e.g. on timeout).
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The timeout passed and the process group was killed.
    pub timed_out: bool,
    /// Some output was dropped (over [`MAX_OUTPUT_BYTES`]).
    pub truncated: bool,
}

impl Output {
    /// Exited by itself with status 0.
    pub fn success(&self) -> bool {
        self.status == Some(0) && !self.timed_out
    }

    /// A one-line account of a failure: the first line of stderr, or the exit status.
    pub fn failure(&self) -> String {
        if self.timed_out {
            return "timed out".to_owned();
        }
        let first = self
            .stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| l.chars().take(300).collect::<String>());
        match (first, self.status) {
            (Some(line), _) => line,
            (None, Some(code)) => format!("exited with status {code}"),
            (None, None) => "killed by a signal".to_owned(),
        }
    }
}

/// Why a program could not be run at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RunError {
    #[error("{program} is not installed on this node; {hint}")]
    NotInstalled {
        program: &'static str,
        hint: &'static str,
    },
    #[error("could not start {program}: {message}")]
    Spawn {
        program: &'static str,
        message: String,
    },
    #[error("{program} was stopped: the call was cancelled")]
    Cancelled { program: &'static str },
}

/// How to install a program the tools use (Debian / Ubuntu package names).
pub fn install_hint(program: &str) -> &'static str {
    match program {
        "nmap" => "install nmap (Debian/Ubuntu: apt-get install nmap)",
        "ping" => "install ping (Debian/Ubuntu: apt-get install iputils-ping)",
        "traceroute" => "install traceroute (Debian/Ubuntu: apt-get install traceroute)",
        "tracepath" => "install tracepath (Debian/Ubuntu: apt-get install iputils-tracepath)",
        "ip" | "ss" => "install iproute2 (Debian/Ubuntu: apt-get install iproute2)",
        "netstat" => "install net-tools (Debian/Ubuntu: apt-get install net-tools)",
        "nmcli" => {
            "NetworkManager is not installed (Debian/Ubuntu: apt-get install network-manager)"
        }
        "resolvectl" => {
            "systemd-resolved is not installed (Debian/Ubuntu: apt-get install systemd-resolved)"
        }
        _ => "install it with the system's package manager",
    }
}

/// Runs [`Command`]s. The system one spawns processes; tests use fakes.
#[async_trait]
pub trait CommandRunner: Send + Sync {
    /// Whether `program` can be run (it is on the PATH).
    async fn available(&self, program: &'static str) -> bool;

    /// Runs `command` to completion, its timeout, or `cancel`.
    async fn run(&self, command: &Command, cancel: &CancellationToken) -> Result<Output, RunError>;
}

/// [`CommandRunner`] that spawns real processes (see the module docs).
pub struct SystemRunner;

#[async_trait]
impl CommandRunner for SystemRunner {
    async fn available(&self, program: &'static str) -> bool {
        let path = probe::login_path().await;
        which::which_in(program, Some(path), "/").is_ok()
    }

    async fn run(&self, command: &Command, cancel: &CancellationToken) -> Result<Output, RunError> {
        let program = command.program;
        let env = probe::login_env().await;
        let path =
            which::which_in(program, Some(&env.path), "/").map_err(|_| RunError::NotInstalled {
                program,
                hint: install_hint(program),
            })?;
        let mut cmd = tokio::process::Command::new(&path);
        cmd.args(&command.args)
            .env_clear()
            .envs(env.vars.iter().map(|(k, v)| (k, v)))
            .env("LC_ALL", "C")
            .env("LANG", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| RunError::Spawn {
            program,
            message: e.to_string(),
        })?;
        let guard = GroupGuard(child.id());
        let stdout = Capture::start(child.stdout.take());
        let stderr = Capture::start(child.stderr.take());
        tracing::debug!(program, args = ?command.args, "running");

        enum End {
            Exited(Option<i32>),
            TimedOut,
            Cancelled,
        }
        let end = tokio::select! {
            status = child.wait() => End::Exited(status.ok().and_then(|s| s.code())),
            _ = tokio::time::sleep(command.timeout) => End::TimedOut,
            _ = cancel.cancelled() => End::Cancelled,
        };
        let status = match end {
            End::Exited(code) => code,
            End::TimedOut | End::Cancelled => {
                guard.terminate();
                match tokio::time::timeout(DRAIN_LIMIT, child.wait()).await {
                    Ok(Ok(status)) => status.code(),
                    _ => {
                        let _ = child.start_kill();
                        None
                    }
                }
            }
        };
        // Anything the program left running in its group goes too.
        guard.terminate();
        let (stdout, out_truncated) = stdout.finish().await;
        let (stderr, err_truncated) = stderr.finish().await;
        if matches!(end, End::Cancelled) {
            return Err(RunError::Cancelled { program });
        }
        Ok(Output {
            status,
            stdout,
            stderr,
            timed_out: matches!(end, End::TimedOut),
            truncated: out_truncated || err_truncated,
        })
    }
}

/// Kills the process group when dropped (the call's future was dropped mid-run).
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn terminate(&self) {
        if let Some(pgid) = self.0 {
            if group::group_alive(pgid) {
                group::terminate(pgid, KILL_GRACE);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// One output stream, read into a capped buffer by its own task.
struct Capture {
    buf: Arc<Mutex<(Vec<u8>, bool)>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Capture {
    fn start<R: AsyncRead + Unpin + Send + 'static>(reader: Option<R>) -> Capture {
        let buf = Arc::new(Mutex::new((Vec::new(), false)));
        let task = reader.map(|mut reader| {
            let buf = Arc::clone(&buf);
            tokio::spawn(async move {
                let mut chunk = [0u8; 8192];
                loop {
                    match reader.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let mut b = buf.lock().unwrap_or_else(|p| p.into_inner());
                            let room = MAX_OUTPUT_BYTES.saturating_sub(b.0.len());
                            if n > room {
                                b.1 = true;
                            }
                            let take = n.min(room);
                            b.0.extend_from_slice(&chunk[..take]);
                        }
                    }
                }
            })
        });
        Capture { buf, task }
    }

    /// Waits (bounded) for the stream to close; returns the text and whether it was cut.
    async fn finish(mut self) -> (String, bool) {
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(DRAIN_LIMIT, &mut task).await.is_err() {
                task.abort();
            }
        }
        let b = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        (String::from_utf8_lossy(&b.0).into_owned(), b.1)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn runs_argv_without_a_shell() {
        let out = SystemRunner
            .run(
                &Command::new("echo", ["a;b", "$(x)", "-n"], Duration::from_secs(5)),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(out.success());
        assert_eq!(out.stdout, "a;b $(x) -n\n");
    }

    #[tokio::test]
    async fn a_missing_program_says_how_to_install_it() {
        let e = SystemRunner
            .run(
                &Command::new("gsv-no-such-program", ["x"], Duration::from_secs(1)),
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, RunError::NotInstalled { .. }), "{e}");
        assert!(!SystemRunner.available("gsv-no-such-program").await);
        assert!(SystemRunner.available("sh").await);
        assert!(install_hint("nmap").contains("apt-get install nmap"));
    }

    #[tokio::test]
    async fn the_group_is_killed_on_timeout_and_output_kept() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("child.pid");
        let script = format!(
            "echo started; sleep 30 & echo $! > {}; wait",
            marker.display()
        );
        let start = Instant::now();
        let out = SystemRunner
            .run(
                &Command::new("sh", ["-c", script.as_str()], Duration::from_millis(300)),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(out.timed_out);
        assert!(!out.success());
        assert_eq!(out.failure(), "timed out");
        assert_eq!(out.stdout, "started\n");
        assert!(start.elapsed() < Duration::from_secs(10));
        // The backgrounded grandchild went with the group.
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() {
            assert!(Instant::now() < deadline, "grandchild {pid} survived");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn cancellation_stops_the_program() {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            c.cancel();
        });
        let start = Instant::now();
        let e = SystemRunner
            .run(
                &Command::new("sleep", ["30"], Duration::from_secs(30)),
                &cancel,
            )
            .await
            .unwrap_err();
        assert_eq!(e, RunError::Cancelled { program: "sleep" });
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn failures_are_summarised() {
        let out = SystemRunner
            .run(
                &Command::new(
                    "sh",
                    ["-c", "echo oops >&2; exit 3"],
                    Duration::from_secs(5),
                ),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, Some(3));
        assert_eq!(out.failure(), "oops");
        let quiet = Output {
            status: Some(2),
            ..Output::default()
        };
        assert_eq!(quiet.failure(), "exited with status 2");
    }
}
