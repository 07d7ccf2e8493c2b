//! The SSH master connection of an SSH-backed node: the system `ssh` in master mode
//! (`-M -N`) on a control socket of the node's own, which every channel's session
//! rides on. It is started on first use and again, after a backoff, whenever it
//! dropped; failures say whether the host key, the login or the network was the
//! problem.

use super::error::RemoteError;
use super::target::SshTarget;
use crate::backoff::Backoff;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tracing::{info, warn};

/// How long a master may take to log in.
const LOGIN_WAIT: Duration = Duration::from_secs(20);

/// The master connection and where its control socket lives.
pub struct SshMaster {
    target: SshTarget,
    ssh: PathBuf,
    dir: PrivateDir,
    control: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    child: Option<Child>,
    /// The last failure and when the next attempt may be made.
    failed: Option<(RemoteError, Instant)>,
    backoff: Option<Backoff>,
}

impl SshMaster {
    /// A master for `target` (not started yet). `ssh` is the client program.
    pub fn new(target: SshTarget, ssh: PathBuf) -> Result<SshMaster, RemoteError> {
        let dir = PrivateDir::new()?;
        let control = dir.0.join("m");
        Ok(SshMaster {
            target,
            ssh,
            dir,
            control,
            state: Mutex::new(State::default()),
        })
    }

    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// `ssh [node's and owner's options] -o ControlMaster=no -T HOST exec /bin/sh`:
    /// a shell session on the master connection.
    pub fn shell_command(&self) -> Command {
        self.shell_command_for("exec /bin/sh")
    }

    /// A session on the master connection running `remote` (a command line for the
    /// host user's login shell).
    pub fn shell_command_for(&self, remote: &str) -> Command {
        let mut cmd = Command::new(&self.ssh);
        cmd.args(self.target.base_args(&self.control))
            .args(["-o", "ControlMaster=no", "-T", "--"])
            .arg(&self.target.host)
            .arg(remote);
        cmd
    }

    /// Makes sure the master is up: starts it if it is not (or not any more), unless
    /// the last attempt failed within its backoff, whose error is returned again.
    /// `true` when it was started by this call (sessions of an earlier master are
    /// gone with it).
    pub async fn ensure(&self) -> Result<bool, RemoteError> {
        let mut state = self.state.lock().await;
        if let Some(child) = state.child.as_mut() {
            if matches!(child.try_wait(), Ok(None)) && self.control.exists() {
                return Ok(false);
            }
            warn!(host = %self.target.shown(), "the SSH master connection dropped");
            state.child = None;
        }
        if let Some((e, until)) = &state.failed {
            if Instant::now() < *until {
                return Err(clone_error(e));
            }
        }
        match self.start().await {
            Ok(child) => {
                info!(host = %self.target.shown(), "SSH master connection up");
                state.child = Some(child);
                state.failed = None;
                state.backoff = None;
                Ok(true)
            }
            Err(e) => {
                let backoff = state.backoff.get_or_insert_with(|| {
                    Backoff::new(Duration::from_millis(500), Duration::from_secs(30))
                });
                let delay = backoff.ceiling();
                backoff.next_delay();
                warn!(host = %self.target.shown(), error = ?e, retry_in = ?delay, "SSH master connection failed");
                state.failed = Some((clone_error(&e), Instant::now() + delay));
                Err(e)
            }
        }
    }

    /// Stops the master (tests cut it this way; the node on shutdown).
    pub async fn stop(&self) {
        let mut state = self.state.lock().await;
        if let Some(mut child) = state.child.take() {
            let _ = child.kill().await;
        }
        let _ = std::fs::remove_file(&self.control);
    }

    async fn start(&self) -> Result<Child, RemoteError> {
        let _ = std::fs::remove_file(&self.control);
        let mut cmd = Command::new(&self.ssh);
        cmd.args(self.target.base_args(&self.control))
            .args([
                "-M",
                "-N",
                "-o",
                "ControlMaster=yes",
                "-o",
                "ControlPersist=no",
                "--",
            ])
            .arg(&self.target.host)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        // The master goes with the node even when the node is killed outright
        // (no drop runs then): an orphaned master would hold the login open.
        #[cfg(target_os = "linux")]
        // SAFETY: prctl is async-signal-safe and touches only the child being set up.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| RemoteError::io(format!("starting {}", self.ssh.display()), e))?;
        let started = Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                let mut said = String::new();
                if let Some(mut err) = child.stderr.take() {
                    use tokio::io::AsyncReadExt;
                    let mut buf = Vec::new();
                    let _ = tokio::time::timeout(
                        Duration::from_secs(2),
                        (&mut err).take(8192).read_to_end(&mut buf),
                    )
                    .await;
                    said = String::from_utf8_lossy(&buf).trim().to_owned();
                }
                return Err(classify(&self.target, &said));
            }
            if self.control.exists() {
                // Drain stderr from now on so the master never blocks on it.
                if let Some(err) = child.stderr.take() {
                    tokio::spawn(drain(err));
                }
                return Ok(child);
            }
            if started.elapsed() > LOGIN_WAIT {
                let _ = child.kill().await;
                return Err(RemoteError::Unreachable {
                    host: self.target.shown(),
                    detail: format!("no login within {} s", LOGIN_WAIT.as_secs()),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The private directory the control socket is in (for tests).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }
}

/// What ssh's complaint on exit means.
fn classify(target: &SshTarget, said: &str) -> RemoteError {
    let host = target.shown();
    let detail: String = said.chars().take(600).collect();
    let lower = said.to_ascii_lowercase();
    if lower.contains("host key verification failed")
        || lower.contains("remote host identification has changed")
        || lower.contains("no ") && lower.contains("host key is known")
    {
        RemoteError::HostKey { host, detail }
    } else if lower.contains("permission denied") || lower.contains("too many authentication") {
        RemoteError::Auth { host, detail }
    } else {
        RemoteError::Unreachable {
            host,
            detail: if detail.is_empty() {
                "ssh exited without saying why".into()
            } else {
                detail
            },
        }
    }
}

fn clone_error(e: &RemoteError) -> RemoteError {
    match e {
        RemoteError::HostKey { host, detail } => RemoteError::HostKey {
            host: host.clone(),
            detail: detail.clone(),
        },
        RemoteError::Auth { host, detail } => RemoteError::Auth {
            host: host.clone(),
            detail: detail.clone(),
        },
        RemoteError::Unreachable { host, detail } => RemoteError::Unreachable {
            host: host.clone(),
            detail: detail.clone(),
        },
        other => RemoteError::Unreachable {
            host: String::new(),
            detail: other.to_string(),
        },
    }
}

async fn drain(mut from: tokio::process::ChildStderr) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 1024];
    while matches!(from.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// A directory only this user can enter, removed on drop: the control socket's.
/// Kept short (a Unix socket path is at most 107 bytes). Its name holds the node's
/// process id (`gsv-ssh-PID-RANDOM`), so a node killed outright (no drop runs) leaves
/// a directory the next node of this user removes ([`sweep_stale`]).
struct PrivateDir(PathBuf);

/// Removes the control directories of `gsv-ssh` nodes of this user that are gone
/// (their process id no longer exists). Best effort: a directory that cannot be read
/// or removed is left.
fn sweep_stale(base: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("gsv-ssh-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let ours = e.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        let gone = pid > 0
            && matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Err(nix::errno::Errno::ESRCH)
            );
        if ours && gone {
            tracing::debug!(dir = %e.path().display(), "removing the control directory of a node that is gone");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl PrivateDir {
    fn new() -> Result<PrivateDir, RemoteError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_dir() && p.as_os_str().len() < 60)
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        sweep_stale(&base);
        let name = format!(
            "gsv-ssh-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let dir = base.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| RemoteError::io(format!("creating {}", dir.display()), e))?;
        Ok(PrivateDir(dir))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_directories_of_gone_nodes_are_swept() {
        let base = tempfile::tempdir().unwrap();
        // A pid that cannot be running: beyond the kernel's pid limit.
        let stale = base.path().join("gsv-ssh-2147483000-abc");
        let live = base
            .path()
            .join(format!("gsv-ssh-{}-def", std::process::id()));
        let other = base.path().join("gsv-ssh-notapid");
        for d in [&stale, &live, &other] {
            std::fs::create_dir(d).unwrap();
        }
        sweep_stale(base.path());
        assert!(!stale.exists());
        assert!(live.exists());
        assert!(other.exists());
    }

    #[test]
    fn ssh_complaints_are_told_apart() {
        let t = SshTarget::parse("u@h", &[]).unwrap();
        assert!(matches!(
            classify(&t, "Host key verification failed."),
            RemoteError::HostKey { .. }
        ));
        assert!(matches!(
            classify(
                &t,
                "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@"
            ),
            RemoteError::HostKey { .. }
        ));
        assert!(matches!(
            classify(&t, "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking."),
            RemoteError::HostKey { .. }
        ));
        assert!(matches!(
            classify(&t, "u@h: Permission denied (publickey)."),
            RemoteError::Auth { .. }
        ));
        assert!(matches!(
            classify(&t, "connect to host h port 22: Connection refused"),
            RemoteError::Unreachable { .. }
        ));
    }
}
