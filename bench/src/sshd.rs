//! A throwaway OpenSSH server on loopback for benchmarks and tests: its own config,
//! host key and authorized key in a temporary directory, no PAM, the current user,
//! an ephemeral port on 127.0.0.1. Nothing leaves the machine.

use super::fleet::{die_with_parent, Proc};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

impl Sshd {
    /// A `known_hosts` line for this server's host key (`[127.0.0.1]:PORT TYPE KEY`).
    pub fn known_hosts_line(&self) -> Result<String, String> {
        let public = std::fs::read_to_string(self.host_key.with_extension("pub"))
            .map_err(|e| format!("host key: {e}"))?;
        let mut parts = public.split_whitespace();
        let (Some(kind), Some(key)) = (parts.next(), parts.next()) else {
            return Err("host key: unreadable public key".into());
        };
        Ok(format!("[127.0.0.1]:{} {kind} {key}\n", self.port))
    }
}

/// Paths of the OpenSSH programs.
pub struct SshBins {
    pub sshd: PathBuf,
    pub ssh: PathBuf,
    pub keygen: PathBuf,
}

impl SshBins {
    pub fn find() -> Result<SshBins, String> {
        let missing = |what: &str| {
            format!(
                "{what} not found: install OpenSSH (`apt-get install openssh-server \
                 openssh-client`) to run `gsv bench ssh`"
            )
        };
        // sshd must be run by an absolute path (it re-executes itself), and /usr/sbin
        // is often not on PATH.
        let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
            .iter()
            .map(PathBuf::from)
            .find(|p| is_executable(p))
            .or_else(|| which("sshd"))
            .ok_or_else(|| missing("sshd"))?;
        let ssh = which("ssh").ok_or_else(|| missing("ssh"))?;
        let keygen = which("ssh-keygen").ok_or_else(|| missing("ssh-keygen"))?;
        Ok(SshBins { sshd, ssh, keygen })
    }
}

pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `name` on `$PATH`, as an absolute path.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_absolute() && is_executable(p))
}

/// The current user's name, from the password database.
pub fn current_user() -> Result<String, String> {
    // SAFETY: getpwuid returns a pointer into static storage (or null); it is read at
    // once, before any other call could overwrite it, and this benchmark calls it from
    // one thread.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            return Err("the current user has no password-database entry; sshd needs one".into());
        }
        Ok(std::ffi::CStr::from_ptr((*pw).pw_name)
            .to_string_lossy()
            .into_owned())
    }
}

/// `ssh-keygen -q -t ed25519 -N '' -f PATH`.
pub fn keygen(bins: &SshBins, path: &Path) -> Result<(), String> {
    let out = Command::new(&bins.keygen)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "gsv-bench", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ssh-keygen: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ssh-keygen -f {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// The harness's own sshd: 127.0.0.1, an ephemeral port, a temporary config, host key
/// and authorized key, no PAM, as the current user. Killed on drop.
pub struct Sshd {
    proc: Proc,
    pub port: u16,
    pub user: String,
    pub client_key: PathBuf,
    /// The host key's file (its public half beside it, `.pub`).
    pub host_key: PathBuf,
}

impl Sshd {
    pub async fn start(bins: &SshBins, dir: &Path) -> Result<Sshd, String> {
        Sshd::start_with_home(bins, dir, None).await
    }

    /// [`Sshd::start`], its sessions given `home` as `HOME` (`SetEnv`, which overrides
    /// the account's): tests that run side by side as one account then each have a
    /// home of their own on the "far host" (a node's directory there is under it).
    pub async fn start_with_home(
        bins: &SshBins,
        dir: &Path,
        home: Option<&Path>,
    ) -> Result<Sshd, String> {
        let dir = dir.join("sshd");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let user = current_user()?;
        let host_key = dir.join("host_ed25519");
        let client_key = dir.join("client_ed25519");
        keygen(bins, &host_key)?;
        keygen(bins, &client_key)?;
        let authorized = dir.join("authorized_keys");
        std::fs::copy(client_key.with_extension("pub"), &authorized)
            .map_err(|e| format!("authorized_keys: {e}"))?;
        // As root, sshd insists on its privilege-separation directory, a path compiled
        // into it (Debian: /run/sshd) that no option can move; make it if missing.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let privsep = Path::new("/run/sshd");
            if !privsep.is_dir() {
                std::fs::create_dir_all(privsep).map_err(|e| {
                    format!(
                        "sshd needs its privilege-separation directory {} and it cannot be \
                         made: {e}",
                        privsep.display()
                    )
                })?;
            }
        }

        let mut last_error = String::new();
        // The port is found by binding port 0 and released before sshd binds it, so
        // another process may take it in between: try a few ports.
        for _ in 0..3 {
            let port = free_port()?;
            let config = dir.join("sshd_config");
            let mut text = sshd_config(port, &host_key, &authorized, &dir);
            if let Some(home) = home {
                text.push_str(&format!("SetEnv HOME={}\n", home.display()));
            }
            std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
            let log = dir.join("sshd.log");
            let log_file =
                std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            let mut cmd = Command::new(&bins.sshd);
            cmd.arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log_file);
            let child = die_with_parent(&mut cmd)
                .spawn()
                .map_err(|e| format!("spawn {}: {e}", bins.sshd.display()))?;
            let mut proc = Proc(child);
            match wait_for_banner(&mut proc, port).await {
                Ok(()) => {
                    return Ok(Sshd {
                        proc,
                        port,
                        user,
                        client_key,
                        host_key,
                    })
                }
                Err(e) => {
                    drop(proc);
                    let log = std::fs::read_to_string(&log).unwrap_or_default();
                    last_error = format!("{e}; sshd said: {}", log.trim());
                }
            }
        }
        Err(format!(
            "the benchmark's sshd (127.0.0.1, own config in {}) did not start: {last_error}",
            dir.display()
        ))
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.proc.0.kill();
        let _ = self.proc.0.wait();
    }
}

fn sshd_config(port: u16, host_key: &Path, authorized: &Path, dir: &Path) -> String {
    format!(
        "# gsv bench ssh: a private sshd on loopback, removed with its directory.\n\
         ListenAddress 127.0.0.1:{port}\n\
         HostKey {host}\n\
         PidFile {pid}\n\
         AuthorizedKeysFile {auth}\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\n\
         UsePAM no\n\
         StrictModes no\n\
         UseDNS no\n\
         PrintMotd no\n\
         PrintLastLog no\n\
         X11Forwarding no\n\
         AllowTcpForwarding no\n\
         MaxSessions 100\n\
         AcceptEnv SHLVL TMUX_TMPDIR\n\
         Subsystem sftp internal-sftp\n\
         LogLevel ERROR\n",
        host = host_key.display(),
        pid = dir.join("sshd.pid").display(),
        auth = authorized.display(),
    )
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

/// Waits (10 s at most) until sshd on `port` sends its `SSH-2.0` banner.
async fn wait_for_banner(proc: &mut Proc, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = proc.0.try_wait() {
            return Err(format!("sshd exited: {status}"));
        }
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 8];
            if s.read_exact(&mut buf).is_ok() && buf.starts_with(b"SSH-2.0") {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("no SSH banner on 127.0.0.1:{port} within 10 s"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
