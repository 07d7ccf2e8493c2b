//! Running the network tools' programs: argv only, a fixed environment, a timeout on
//! every process, and the whole process group killed when it expires.
//!
//! The network tools never go through a shell: a [`Command`] names one of the
//! programs the tools know (a `&'static str` chosen by the tool, never by the caller)
//! and an argv list the tool built from validated values.
//!
//! **Nothing under the workspace or a home directory changes what runs.** These tools
//! are offered to agents as read-only, so an agent that can also write files (Write,
//! Edit) must not be able to make them run its code. So, unlike the Bash tool, they do
//! not use the login environment (a `~/.profile` the agent wrote could put its own
//! `nmap` first on `PATH` or set `NMAPDIR`):
//!
//! - each program is resolved **once, when the node starts**, to an absolute path in the
//!   fixed system directories of [`SYSTEM_PATH`] ([`SystemRunner::new`]); a program
//!   found nowhere there is "not installed", whatever the login `PATH` says;
//! - it runs with the environment cleared and set to `PATH` = [`SYSTEM_PATH`],
//!   `HOME=/`, `LC_ALL=C`, `LANG=C` — no `NMAPDIR`, `LUA_PATH`, `LD_PRELOAD` or any other
//!   inherited variable — in the working directory `/`, with stdin from `/dev/null`;
//! - nmap gets `--datadir` pointing at the system data directory found at start (next to
//!   the binary, `…/share/nmap`, or `/usr/share/nmap`, `/usr/local/share/nmap`,
//!   `/opt/homebrew/share/nmap`), which must hold every file a scan reads
//!   ([`NMAP_DATA_FILES`]). nmap looks in `--datadir` before `NMAPDIR` and before
//!   `~/.nmap` — the home directory of the *user* (from the password database, not
//!   `HOME`, so a clean `HOME` alone would not do). If no complete data directory is
//!   found, nmap is not run at all ([`RunError::NoNmapData`]) rather than left to
//!   search `~/.nmap`.
//!
//! What this does not cover: the binaries and the data directory themselves. They are
//! only as safe as the system directories they come from (root-owned on a normal
//! install; a node whose workspace contains one of them gives that up).
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

use crate::tools::capture::{Capture, GroupGuard};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

/// Most bytes kept of each output stream.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// How long output may keep arriving after the process ended or was killed.
const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// Where the network tools' programs are looked up (at node start), in this order, and
/// the `PATH` they run with. Never a home directory, never the workspace.
pub const SYSTEM_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
    "/opt/homebrew/sbin",
    "/opt/homebrew/bin",
    "/run/current-system/sw/bin",
];

/// The programs the network tools run.
pub const PROGRAMS: &[&str] = &[
    "nmap",
    "ping",
    "traceroute",
    "tracepath",
    "ip",
    "ss",
    "netstat",
    "nmcli",
    "resolvectl",
];

/// Where nmap's data directory may be, after `BINARY_DIR/../share/nmap`.
const NMAP_DATA_DIRS: &[&str] = &[
    "/usr/share/nmap",
    "/usr/local/share/nmap",
    "/opt/homebrew/share/nmap",
];

/// Files a data directory must hold to be used: everything `nmap -sV` / `-sn` reads.
/// One missing would send nmap looking for it in `NMAPDIR` and `~/.nmap`.
pub const NMAP_DATA_FILES: &[&str] = &[
    "nmap-services",
    "nmap-service-probes",
    "nmap-protocols",
    "nmap-payloads",
    "nmap-mac-prefixes",
    "nmap-rpc",
    "nse_main.lua",
    "scripts/script.db",
    "nselib/stdnse.lua",
];

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
    #[error("nmap is installed but its data directory was not found complete when the node started (looked beside the binary and in {searched}, for {files}); the node does not run nmap without a system data directory, because nmap would then read data and scripts from NMAPDIR or ~/.nmap; reinstall nmap's data files (Debian/Ubuntu: apt-get install --reinstall nmap-common) and restart the node")]
    NoNmapData { searched: String, files: String },
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

/// [`CommandRunner`] that spawns real processes (see the module docs): the programs it
/// may run, resolved to absolute paths once, and nmap's data directory.
#[derive(Debug, Clone)]
pub struct SystemRunner {
    programs: BTreeMap<&'static str, PathBuf>,
    nmap_data: Option<PathBuf>,
    path: OsString,
}

impl SystemRunner {
    /// Resolves [`PROGRAMS`] in [`SYSTEM_PATH`] and finds nmap's data directory. Called
    /// once, when the node builds its tools.
    pub fn new() -> SystemRunner {
        SystemRunner::resolve(PROGRAMS, SYSTEM_PATH)
    }

    /// Resolves `programs` in the directories `dirs` (the first holding an executable
    /// file of that name wins; symlinks are kept as they are, so multi-call binaries
    /// still see their name).
    pub fn resolve(programs: &[&'static str], dirs: &[&str]) -> SystemRunner {
        let mut found = BTreeMap::new();
        for &program in programs {
            if let Some(path) = dirs
                .iter()
                .map(|d| Path::new(d).join(program))
                .find(|p| is_executable(p))
            {
                found.insert(program, path);
            }
        }
        let nmap_data = found.get("nmap").and_then(|nmap| nmap_data_dir(nmap));
        if found.contains_key("nmap") && nmap_data.is_none() {
            tracing::warn!("nmap is installed but no complete data directory was found; the network tools will not run it");
        }
        let path = std::env::join_paths(dirs).unwrap_or_default();
        tracing::debug!(programs = ?found, nmap_data = ?nmap_data, "network tool programs resolved");
        SystemRunner {
            programs: found,
            nmap_data,
            path,
        }
    }

    /// Where `program` was found at start.
    pub fn program_path(&self, program: &str) -> Option<&Path> {
        self.programs.get(program).map(PathBuf::as_path)
    }

    /// nmap's data directory, if a complete one was found.
    pub fn nmap_data_dir(&self) -> Option<&Path> {
        self.nmap_data.as_deref()
    }
}

impl Default for SystemRunner {
    fn default() -> Self {
        SystemRunner::new()
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first complete nmap data directory: beside the binary (`BIN/../share/nmap`, the
/// binary's symlinks resolved), then [`NMAP_DATA_DIRS`].
fn nmap_data_dir(nmap: &Path) -> Option<PathBuf> {
    let beside = std::fs::canonicalize(nmap)
        .ok()
        .and_then(|real| real.parent()?.parent().map(|p| p.join("share/nmap")));
    beside
        .into_iter()
        .chain(NMAP_DATA_DIRS.iter().map(PathBuf::from))
        .find(|dir| is_complete_data_dir(dir))
}

/// Whether `dir` holds every file of [`NMAP_DATA_FILES`].
pub fn is_complete_data_dir(dir: &Path) -> bool {
    NMAP_DATA_FILES.iter().all(|f| dir.join(f).is_file())
}

#[async_trait]
impl CommandRunner for SystemRunner {
    async fn available(&self, program: &'static str) -> bool {
        self.programs.contains_key(program)
    }

    async fn run(&self, command: &Command, cancel: &CancellationToken) -> Result<Output, RunError> {
        let program = command.program;
        let path = self.programs.get(program).ok_or(RunError::NotInstalled {
            program,
            hint: install_hint(program),
        })?;
        let mut args: Vec<OsString> = Vec::with_capacity(command.args.len() + 2);
        if program == "nmap" {
            let Some(data) = &self.nmap_data else {
                return Err(RunError::NoNmapData {
                    searched: NMAP_DATA_DIRS.join(", "),
                    files: NMAP_DATA_FILES.join(", "),
                });
            };
            args.push("--datadir".into());
            args.push(data.into());
        }
        args.extend(command.args.iter().map(OsString::from));
        let mut cmd = tokio::process::Command::new(path);
        cmd.args(&args)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", "/")
            .env("LC_ALL", "C")
            .env("LANG", "C")
            .current_dir("/")
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
        let stdout = Capture::start(child.stdout.take(), MAX_OUTPUT_BYTES);
        let stderr = Capture::start(child.stderr.take(), MAX_OUTPUT_BYTES);
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
        let drained = tokio::time::Instant::now() + DRAIN_LIMIT;
        let (stdout, out_truncated) = stdout.finish(drained).await;
        let (stderr, err_truncated) = stderr.finish(drained).await;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn runner() -> SystemRunner {
        SystemRunner::resolve(&["echo", "sh", "sleep", "gsv-no-such-program"], SYSTEM_PATH)
    }

    #[tokio::test]
    async fn runs_argv_without_a_shell() {
        let out = runner()
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
        let e = runner()
            .run(
                &Command::new("gsv-no-such-program", ["x"], Duration::from_secs(1)),
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, RunError::NotInstalled { .. }), "{e}");
        assert!(!runner().available("gsv-no-such-program").await);
        assert!(runner().available("sh").await);
        // A program the runner was not built for is never run, even if installed.
        let e = runner()
            .run(
                &Command::new("ls", ["/"], Duration::from_secs(1)),
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, RunError::NotInstalled { .. }), "{e}");
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
        let out = runner()
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
        let e = runner()
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
        let out = runner()
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

    #[tokio::test]
    async fn programs_run_with_a_fixed_environment_in_the_root() {
        let out = runner()
            .run(
                &Command::new(
                    "sh",
                    [
                        "-c",
                        "printf '%s|%s|%s|' \"$HOME\" \"$PATH\" \"$(pwd)\"; env",
                    ],
                    Duration::from_secs(5),
                ),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(out.success(), "{out:?}");
        let mut parts = out.stdout.splitn(4, '|');
        assert_eq!(parts.next(), Some("/"));
        assert_eq!(parts.next(), Some(SYSTEM_PATH.join(":").as_str()));
        assert_eq!(parts.next(), Some("/"));
        // Nothing of the node's own environment (the test's: CARGO_*, HOME, …) leaks.
        let names: Vec<&str> = parts
            .next()
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('=').map(|(n, _)| n))
            .collect();
        for name in &names {
            assert!(
                ["PATH", "HOME", "LC_ALL", "LANG", "PWD", "OLDPWD", "SHLVL", "_"].contains(name),
                "{name} leaked into {names:?}"
            );
        }
    }

    /// Writes an executable shell script.
    fn script(path: &Path, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[tokio::test]
    async fn nmap_gets_the_data_directory_beside_it_or_is_not_run() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        script(&bin.join("nmap"), "echo \"$@\"");
        let dirs = [bin.to_str().unwrap()];

        // No data directory beside it (and, in this test, none searched elsewhere
        // would do: the runner is built on a directory list of its own).
        let data = root.path().join("share/nmap");
        let incomplete = SystemRunner {
            nmap_data: None,
            ..SystemRunner::resolve(&["nmap"], &dirs)
        };
        assert!(incomplete.available("nmap").await);
        let e = incomplete
            .run(
                &Command::new("nmap", ["-sn", "127.0.0.1"], Duration::from_secs(5)),
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, RunError::NoNmapData { .. }), "{e}");
        assert!(e.to_string().contains("~/.nmap"), "{e}");

        // Complete: `--datadir` comes first.
        for f in NMAP_DATA_FILES {
            let file = data.join(f);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, "").unwrap();
        }
        assert!(is_complete_data_dir(&data));
        let runner = SystemRunner::resolve(&["nmap"], &dirs);
        let expected = std::fs::canonicalize(&bin)
            .unwrap()
            .parent()
            .unwrap()
            .join("share/nmap");
        assert_eq!(runner.nmap_data_dir(), Some(expected.as_path()));
        let out = runner
            .run(
                &Command::new("nmap", ["-sn", "127.0.0.1"], Duration::from_secs(5)),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(out.stdout.starts_with("--datadir "), "{}", out.stdout);
        assert!(
            out.stdout.trim_end().ends_with("-sn 127.0.0.1"),
            "{}",
            out.stdout
        );

        // One file missing: not complete.
        std::fs::remove_file(data.join("nmap-service-probes")).unwrap();
        assert!(!is_complete_data_dir(&data));
    }

    #[test]
    fn programs_are_only_taken_from_the_given_directories() {
        let r = SystemRunner::resolve(&["sh", "gsv-no-such-program"], SYSTEM_PATH);
        let sh = r.program_path("sh").unwrap();
        assert!(SYSTEM_PATH.iter().any(|d| sh.starts_with(d)), "{sh:?}");
        assert!(r.program_path("gsv-no-such-program").is_none());
        let empty = tempfile::tempdir().unwrap();
        let r = SystemRunner::resolve(&["sh"], &[empty.path().to_str().unwrap()]);
        assert!(r.program_path("sh").is_none());
    }
}
