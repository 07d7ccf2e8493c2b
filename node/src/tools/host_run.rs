//! Running a host program for the container and package tools: found on the node's
//! own `PATH` at call time, argv only, bounded output, a timeout, and the whole
//! process group killed when the call ends early.
//!
//! `container_*` and `pkg_*` drive `docker`/`podman` and `apt-get`/`dnf`/`apk`/`brew`
//! with an argv the tool builds from validated values; nothing goes through a shell.
//! The program is looked up when the call runs ([`find`]), so a runtime installed
//! after the node started is seen, in the `PATH` of the node process itself (what its
//! owner started it with), never the login profile's: an agent that can write files
//! must not be able to put its own `docker` first. For the same reason, relative
//! `PATH` entries and entries inside the workspace are skipped.
//!
//! The program runs with the node's environment, less gsv's own variables (`GSV_*`:
//! the node's credential, `$GSV_TOKEN`, is no business of docker or apt), plus the
//! tool's overrides (`LC_ALL=C`
//! so the parsers see the output they were written for, `DEBIAN_FRONTEND` for apt),
//! in `/`, stdin from `/dev/null` (nothing can prompt), as the leader of its own
//! process group. Each stream is read while the program runs and kept up to its cap
//! (the rest is read and dropped, and the output says it was cut). When the timeout
//! passes or the call is cancelled, the group gets SIGTERM, then SIGKILL after a
//! short grace; if the call's future is dropped, a guard does the same.

use super::capture::{Capture, GroupGuard};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

/// How long output may keep arriving after the program ended or was killed.
const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// Why a program could not be run to an end.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostRunError {
    #[error("could not start {program}: {message}")]
    Spawn { program: String, message: String },
    #[error("{program} was stopped: the call was cancelled")]
    Cancelled { program: String },
}

/// One program run.
#[derive(Debug, Clone)]
pub struct HostCommand {
    /// Absolute path of the program ([`find`]).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables set on top of the node's environment.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Most bytes kept of stdout.
    pub max_stdout: usize,
    /// Most bytes kept of stderr.
    pub max_stderr: usize,
}

impl HostCommand {
    /// `program args…` with `LC_ALL=C`, the given timeout and caps.
    pub fn new(program: &Path, args: Vec<String>, timeout: Duration, max_output: usize) -> Self {
        HostCommand {
            program: program.to_path_buf(),
            args,
            env: vec![("LC_ALL".into(), "C".into()), ("LANG".into(), "C".into())],
            timeout,
            max_stdout: max_output,
            max_stderr: max_output.min(64 * 1024),
        }
    }

    /// The command as one line (for logs and plans): program name, then the args.
    pub fn display(&self) -> String {
        let name = self
            .program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        std::iter::once(name)
            .chain(self.args.iter().map(|a| quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `word` as a shell would need it typed (for display only; nothing runs a shell).
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_/.,:=+@%-".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// What a program left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostOutput {
    /// Exit code; `None` when a signal ended it.
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The timeout passed and the group was killed.
    pub timed_out: bool,
}

impl HostOutput {
    /// Exited by itself with status 0.
    pub fn success(&self) -> bool {
        self.status == Some(0) && !self.timed_out
    }

    /// stdout as text (lossy).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (lossy).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// A one-line account of a failure: the last non-empty stderr line that looks like
    /// an error (`E:`, `Error`), else the first one, else the exit status.
    pub fn failure(&self) -> String {
        if self.timed_out {
            return "timed out".to_owned();
        }
        let err = self.stderr_text();
        let lines: Vec<&str> = err
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let pick = lines
            .iter()
            .find(|l| l.starts_with("E:") || l.starts_with("Error") || l.starts_with("ERROR"))
            .or(lines.first());
        match (pick, self.status) {
            (Some(line), _) => line.chars().take(300).collect(),
            (None, Some(code)) => format!("exited with status {code}"),
            (None, None) => "killed by a signal".to_owned(),
        }
    }
}

/// The first of `names` found as an executable file in the node's own `PATH`
/// (absolute entries outside `workspace` only), with its path.
pub fn find<'a>(names: &[&'a str], workspace: &Path) -> Option<(&'a str, PathBuf)> {
    find_in(names, std::env::var_os("PATH").as_deref(), workspace)
}

/// [`find`] with an explicit `PATH`.
pub fn find_in<'a>(
    names: &[&'a str],
    path: Option<&std::ffi::OsStr>,
    workspace: &Path,
) -> Option<(&'a str, PathBuf)> {
    let dirs = search_dirs(path?, workspace);
    names.iter().find_map(|name| {
        dirs.iter()
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
            .map(|p| (*name, p))
    })
}

/// The entries of `path` a program may be taken from: absolute, and not inside the
/// workspace (compared with symlinks resolved).
fn search_dirs(path: &std::ffi::OsStr, workspace: &Path) -> Vec<PathBuf> {
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .filter(|d| {
            let real = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
            !real.starts_with(&ws)
        })
        .collect()
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `command` to its end, its timeout, or `cancel`.
pub async fn run(
    command: &HostCommand,
    cancel: &CancellationToken,
) -> Result<HostOutput, HostRunError> {
    let program = command.program.display().to_string();
    let mut cmd = tokio::process::Command::new(&command.program);
    for name in gsv_vars(std::env::vars_os().map(|(k, _)| k)) {
        cmd.env_remove(name);
    }
    cmd.args(command.args.iter().map(OsString::from))
        .envs(command.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    tracing::debug!(command = ?command.display(), "running");
    let mut child = cmd.spawn().map_err(|e| HostRunError::Spawn {
        program: program.clone(),
        message: e.to_string(),
    })?;
    let guard = GroupGuard(child.id());
    let stdout = Capture::start(child.stdout.take(), command.max_stdout);
    let stderr = Capture::start(child.stderr.take(), command.max_stderr);

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
    guard.terminate();
    // Both streams share one drain deadline.
    let drained = tokio::time::Instant::now() + DRAIN_LIMIT;
    let (stdout, stdout_truncated) = stdout.finish(drained).await;
    let (stderr, stderr_truncated) = stderr.finish(drained).await;
    if matches!(end, End::Cancelled) {
        return Err(HostRunError::Cancelled { program });
    }
    Ok(HostOutput {
        status,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        timed_out: matches!(end, End::TimedOut),
    })
}

/// The names among `names` that are gsv's own (`GSV_…`), kept from the program.
fn gsv_vars(names: impl Iterator<Item = OsString>) -> Vec<OsString> {
    names
        .filter(|n| n.as_encoded_bytes().starts_with(b"GSV_"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh() -> PathBuf {
        PathBuf::from("/bin/sh")
    }

    #[tokio::test]
    async fn output_is_capped_and_status_kept() {
        let mut c = HostCommand::new(
            &sh(),
            vec![
                "-c".into(),
                "head -c 5000 /dev/zero; echo oops >&2; exit 3".into(),
            ],
            Duration::from_secs(10),
            1000,
        );
        c.max_stderr = 100;
        let out = run(&c, &CancellationToken::new()).await.unwrap();
        assert_eq!(out.status, Some(3));
        assert_eq!(out.stdout.len(), 1000);
        assert!(out.stdout_truncated && !out.stderr_truncated);
        assert_eq!(out.failure(), "oops");
        assert!(!out.success());
    }

    #[tokio::test]
    async fn a_timeout_kills_the_group() {
        let c = HostCommand::new(
            &sh(),
            vec!["-c".into(), "echo started; sleep 30 & wait".into()],
            Duration::from_millis(300),
            1000,
        );
        let start = std::time::Instant::now();
        let out = run(&c, &CancellationToken::new()).await.unwrap();
        assert!(out.timed_out);
        assert_eq!(out.stdout, b"started\n");
        assert!(start.elapsed() < Duration::from_secs(10));
        let cancel = CancellationToken::new();
        cancel.cancel();
        let e = run(&c, &cancel).await.unwrap_err();
        assert!(matches!(e, HostRunError::Cancelled { .. }), "{e}");
    }

    #[tokio::test]
    async fn output_is_kept_when_an_escaped_process_holds_the_stream() {
        if !Path::new("/usr/bin/setsid").exists() {
            return;
        }
        // The setsid'd sleep leaves the group and keeps stdout open past the drain.
        let c = HostCommand::new(
            &sh(),
            vec![
                "-c".into(),
                "echo kept; /usr/bin/setsid sleep 5 & sleep 0.5".into(),
            ],
            Duration::from_secs(10),
            1000,
        );
        let start = std::time::Instant::now();
        let out = run(&c, &CancellationToken::new()).await.unwrap();
        assert_eq!(out.stdout, b"kept\n");
        assert_eq!(out.status, Some(0));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn programs_are_found_outside_the_workspace_only() {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        for dir in [ws.path(), other.path()] {
            let p = dir.join("docker");
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::join_paths([Path::new("rel"), ws.path(), other.path()]).unwrap();
        let found = find_in(&["podman", "docker"], Some(&path), ws.path()).unwrap();
        assert_eq!(found, ("docker", other.path().join("docker")));
        let only_ws = std::env::join_paths([ws.path()]).unwrap();
        assert_eq!(find_in(&["docker"], Some(&only_ws), ws.path()), None);
        assert_eq!(find_in(&["docker"], None, ws.path()), None);
    }

    #[test]
    fn gsv_variables_are_kept_from_the_program() {
        let names = [
            "PATH",
            "GSV_TOKEN",
            "GSV_TOKEN_FILE",
            "DOCKER_HOST",
            "XGSV_A",
        ];
        let removed = gsv_vars(names.iter().map(OsString::from));
        assert_eq!(removed, ["GSV_TOKEN", "GSV_TOKEN_FILE"]);
    }

    #[test]
    fn display_quotes_what_a_shell_would_split() {
        let c = HostCommand::new(
            Path::new("/usr/bin/docker"),
            vec!["exec".into(), "--".into(), "web".into(), "a b".into()],
            Duration::from_secs(1),
            10,
        );
        assert_eq!(c.display(), "docker exec -- web 'a b'");
    }
}
