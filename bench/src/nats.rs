//! A throwaway NATS server with JetStream on 127.0.0.1, for cluster-mode tests and
//! benchmarks: Debian's `nats-server`, a port it picks itself (read back from its
//! ports file), its JetStream store in a directory the caller owns (the port is read from its log). It dies with the
//! process that started it; [`NatsServer::kill`] stops it hard (`kill -9`) and
//! [`NatsServer::restart`] brings it back on the same port with the same store.

use super::fleet::{die_with_parent, Proc};
use super::sshd::{is_executable, which};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or killed) nats-server.
pub struct NatsServer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    proc: Option<Proc>,
    /// Lines added to the server's configuration file (e.g. an `authorization`
    /// block), kept across restarts.
    conf: String,
}

impl NatsServer {
    /// Finds `nats-server` (`/usr/sbin` is often not on `PATH`).
    pub fn find() -> Result<PathBuf, String> {
        [
            "/usr/sbin/nats-server",
            "/usr/bin/nats-server",
            "/usr/local/bin/nats-server",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| is_executable(p))
        .or_else(|| which("nats-server"))
        .ok_or_else(|| {
            "nats-server not found: install it (`apt-get install nats-server`)".to_owned()
        })
    }

    /// Starts one under `dir` (its store and ports file) on a port of its choosing.
    pub async fn start(dir: &Path) -> Result<NatsServer, String> {
        NatsServer::start_conf(dir, "").await
    }

    /// [`NatsServer::start`] with `conf` added to its configuration file (NATS's own
    /// syntax: an `authorization { users = [...] }` block, for instance).
    pub async fn start_conf(dir: &Path, conf: &str) -> Result<NatsServer, String> {
        let bin = NatsServer::find()?;
        let dir = dir.join("nats");
        std::fs::create_dir_all(&dir).map_err(|e| format!("nats dir: {e}"))?;
        let mut server = NatsServer {
            bin,
            dir,
            port: 0,
            proc: None,
            conf: conf.to_owned(),
        };
        server.spawn("-1").await?;
        Ok(server)
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(|p| p.0.id())
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The cluster key of the replicas this server's tests start
    /// (`--cluster-key-file`): 32 random bytes, mode 0600, made once in its directory.
    pub fn cluster_key(&self) -> PathBuf {
        use std::io::{Read, Write};
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join("cluster.key");
        if !path.exists() {
            let mut bytes = [0u8; 32];
            let read =
                std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
            let made = read.and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .and_then(|mut f| f.write_all(&bytes))
            });
            if let Err(e) = made {
                tracing::warn!(error = %e, "cannot make the cluster key");
            }
        }
        path
    }

    /// `--cluster URL --cluster-key-file FILE`: what every replica of this server's
    /// cluster is started with.
    pub fn cluster_args(&self) -> Vec<String> {
        vec![
            "--cluster".to_owned(),
            self.url(),
            "--cluster-key-file".to_owned(),
            self.cluster_key().display().to_string(),
        ]
    }

    /// Stops it at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        self.proc = None;
    }

    /// Starts it again on the same port, with the same JetStream store.
    pub async fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let port = self.port.to_string();
        self.spawn(&port).await
    }

    async fn spawn(&mut self, port: &str) -> Result<(), String> {
        let log = self.dir.join("server.log");
        // Results of up to gsv's 16 MiB frames cross between replicas in one message.
        let conf = self.dir.join("nats.conf");
        std::fs::write(&conf, format!("max_payload: 33554432\n{}\n", self.conf))
            .map_err(|e| format!("nats conf: {e}"))?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c")
            .arg(&conf)
            .args(["-a", "127.0.0.1", "-p", port, "-js", "-sd"])
            .arg(self.dir.join("store"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(&log).map_err(|e| format!("nats log: {e}"))?,
            ));
        die_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(|e| format!("nats-server: {e}"))?;
        self.proc = Some(Proc(child));
        let started = Instant::now();
        loop {
            if let Some(port) = read_port(&log) {
                self.port = port;
                break;
            }
            if started.elapsed() > Duration::from_secs(20) {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("nats-server did not start: {log}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(20) {
                return Err("nats-server does not accept connections".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The client port nats-server says in its log it listens on.
fn read_port(log: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text
        .lines()
        .find(|l| l.contains("Listening for client connections on"))?;
    line.rsplit(':').next()?.trim().parse().ok()
}
