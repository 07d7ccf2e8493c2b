//! A node without a service manager: started detached (its own session, no
//! terminal), its output appended to `node-<id>.log` and its pid in `node-<id>.pid`,
//! both in the node's data directory.
//!
//! The fallback where neither systemd nor launchd can run it (a container without
//! systemd, a minimal system). Nothing restarts such a node when it fails or after a
//! reboot; `gsv node install` says so and prints the foreground command. Run again,
//! it leaves a node that runs the same command alone and replaces one that does not
//! (or whose executable was replaced).

use super::spec::ServiceSpec;
use super::{Changed, ServiceError};
use gsv_protocol::NodeId;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a stopping node may take to end its sessions before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The environment variables `gsv node` reads: the detached node gets every setting
/// as a flag, so none of the installer's own may leak into it (a `GSV_TOKEN` beside
/// `--token-file` would be a conflict, and a secret in its environment).
const NODE_ENV: &[&str] = &[
    "GSV_GATEWAY",
    "GSV_NODE_ID",
    "GSV_TOKEN",
    "GSV_TOKEN_FILE",
    "GSV_WORKSPACE",
    "GSV_NODE_DATA",
    "GSV_CA",
    "GSV_PIN",
    "GSV_SERVICE",
];

/// The running node recorded in `data`'s pid file for `id`, if it still runs.
pub fn running(data: &Path, id: &NodeId) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(ServiceSpec::pid_file(data, id))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (alive(pid) && is_node(pid, id)).then_some(pid)
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    if unsafe { libc::kill(raw, 0) } != 0 {
        return false;
    }
    // A zombie (exited, not yet reaped) is not running.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => true,
    }
}

/// The command line of `pid` (Linux), as its arguments.
fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Whether `pid` is a gsv node with this id (where the command line can be read; a
/// reused pid of another program must not be taken for the node).
fn is_node(pid: u32, id: &NodeId) -> bool {
    match cmdline(pid) {
        Some(args) => {
            args.iter().any(|a| a == "node")
                && args
                    .windows(2)
                    .any(|w| w[0] == "--id" && w[1] == id.as_str())
        }
        None => true,
    }
}

/// Starts the node unless the same command already runs (and the executable is the
/// same). Returns whether anything changed.
pub fn apply(spec: &ServiceSpec, exe_changed: bool) -> Result<Changed, ServiceError> {
    let wanted: Vec<String> = std::iter::once(spec.exe_str()?.to_owned())
        .chain(spec.args.iter().cloned())
        .collect();
    if let Some(pid) = running(&spec.data, &spec.id) {
        let same = cmdline(pid).is_none_or(|c| c == wanted);
        if same && !exe_changed {
            eprintln!("the node already runs in the background (pid {pid})");
            return Ok(Changed(false));
        }
        eprintln!("stopping the node running in the background (pid {pid})");
        stop(pid);
    }
    let pid = spawn(spec)?;
    let pid_file = ServiceSpec::pid_file(&spec.data, &spec.id);
    super::write_file(&pid_file, format!("{pid}\n").as_bytes(), 0o600)?;
    eprintln!(
        "started the node in the background (pid {pid}, log {}); nothing restarts it if it stops or after a reboot",
        spec.log_file().display()
    );
    Ok(Changed(true))
}

/// Starts the node detached; returns its pid.
fn spawn(spec: &ServiceSpec) -> Result<u32, ServiceError> {
    let log_path = spec.log_file();
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let log = opts
        .open(&log_path)
        .map_err(ServiceError::io("open", &log_path))?;
    let err = log
        .try_clone()
        .map_err(ServiceError::io("open", &log_path))?;
    let mut cmd = Command::new(&spec.exe);
    cmd.args(&spec.args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .current_dir("/");
    for name in NODE_ENV {
        cmd.env_remove(name);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe and only affects the child being set up.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
    let child = cmd.spawn().map_err(|source| ServiceError::Spawn {
        program: spec.exe.clone(),
        source,
    })?;
    Ok(child.id())
}

/// SIGTERM, up to `STOP_GRACE` (10 s) to exit, then SIGKILL.
pub fn stop(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    // SAFETY: sending a signal to a pid has no memory-safety preconditions.
    unsafe { libc::kill(raw, libc::SIGTERM) };
    let deadline = Instant::now() + STOP_GRACE;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(pid) {
        // SAFETY: as above.
        unsafe { libc::kill(raw, libc::SIGKILL) };
    }
}

/// Stops the background node of `id` and removes its pid file, if there is one.
pub fn remove(data: &Path, id: &NodeId) -> Result<bool, ServiceError> {
    let pid_file = ServiceSpec::pid_file(data, id);
    if !pid_file.exists() {
        return Ok(false);
    }
    if let Some(pid) = running(data, id) {
        stop(pid);
        eprintln!("stopped the node running in the background (pid {pid})");
    }
    std::fs::remove_file(&pid_file).map_err(ServiceError::io("remove", &pid_file))?;
    eprintln!("removed {}", pid_file.display());
    Ok(true)
}

/// The node ids with a pid file in `data`.
pub fn installed(data: &Path) -> Vec<String> {
    super::ids_in(data, "node-", ".pid")
}
