//! Harness for the end-to-end tests: real `gsv` processes on loopback.
//!
//! Every test gets its own temporary data directory and ephemeral ports. Processes are
//! killed when their handles drop, so a failing test leaves nothing running.

#![allow(dead_code)]

pub mod chaos;
pub mod fake;
pub mod files;
pub mod mcp;

use gsv_client::{AgentClient, TlsOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `gsv` binary under test.
pub fn gsv_bin() -> &'static str {
    env!("CARGO_BIN_EXE_gsv")
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("gsv-{tag}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Makes a spawned `gsv` die with the test process, even if the test is killed before
/// its `Proc` handles drop (Linux: parent-death signal).
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe and touches only the child being set up.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    cmd
}

/// A child process killed on drop.
pub struct Proc(pub Child);

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `f` every 50 ms until it returns `Some`, or panics after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        // Each attempt is bounded too, so a hung attempt cannot hang the test.
        let left = limit
            .saturating_sub(start.elapsed())
            .max(Duration::from_millis(100));
        if let Ok(Some(v)) = tokio::time::timeout(left, f()).await {
            return v;
        }
        if start.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `gsv gateway` process.
pub struct Gateway {
    pub data: TempDir,
    /// Data directory of the nodes this test starts (their enrolled credentials).
    pub node_data: TempDir,
    pub addr: String,
    pub proc: Proc,
    extra: Vec<String>,
    /// Whether it serves TLS (its gateway.addr says `https://`).
    pub tls: bool,
    /// With `GSV_E2E_BACKEND=ssh`: the throwaway sshd every node this test starts
    /// works through (`gsv node --ssh`), so a suite written for local nodes runs
    /// again, unchanged, against SSH-backed ones.
    pub far: Option<FarHost>,
}

/// A throwaway sshd on 127.0.0.1 and the `gsv node` flags that work through it.
pub struct FarHost {
    _sshd: gsv_bench::sshd::Sshd,
    pub flags: Vec<String>,
}

/// The far host of `GSV_E2E_BACKEND=ssh`, under `dir`; `None` otherwise.
async fn far_host(dir: &Path) -> Option<FarHost> {
    if std::env::var("GSV_E2E_BACKEND").ok().as_deref() != Some("ssh") {
        return None;
    }
    let bins = gsv_bench::sshd::SshBins::find().expect("OpenSSH for GSV_E2E_BACKEND=ssh");
    // A home of this test's own on the far host: nodes of the same id in tests that
    // run side by side would otherwise share their directory there (and a node that
    // stops ends every job in it).
    let home = dir.join("far-home");
    std::fs::create_dir_all(&home).expect("far home");
    let sshd = gsv_bench::sshd::Sshd::start_with_home(&bins, dir, Some(&home))
        .await
        .expect("sshd starts");
    let known = dir.join("far_known_hosts");
    std::fs::write(&known, sshd.known_hosts_line().expect("host key")).expect("known_hosts");
    let mut flags = vec![
        "--ssh".to_owned(),
        format!("{}@127.0.0.1:{}", sshd.user, sshd.port),
    ];
    for o in [
        format!("UserKnownHostsFile={}", known.display()),
        "GlobalKnownHostsFile=/dev/null".to_owned(),
        format!("IdentityFile={}", sshd.client_key.display()),
        "IdentitiesOnly=yes".to_owned(),
        "IdentityAgent=none".to_owned(),
    ] {
        flags.push("--ssh-option".to_owned());
        flags.push(o);
    }
    Some(FarHost { _sshd: sshd, flags })
}

fn spawn_gateway(data: &Path, listen: &str, extra: &[String]) -> Proc {
    let mut cmd = Command::new(gsv_bin());
    cmd.arg("gateway")
        .arg("--data")
        .arg(data)
        .arg("--listen")
        .arg(listen)
        .arg("--heartbeat-ms")
        .arg("1000")
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Proc(
        die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn gsv gateway"),
    )
}

async fn wait_addr(data: &Path, previous: Option<&str>) -> String {
    let file = data.join("gateway.addr");
    let addr = eventually("the gateway address file", Duration::from_secs(20), || {
        let file = file.clone();
        async move {
            let s = std::fs::read_to_string(&file).ok()?;
            let s = s.trim();
            // A TLS gateway writes `https://ADDR`; the harness keeps the bare address.
            let s = s.strip_prefix("https://").unwrap_or(s).to_owned();
            if s.is_empty() || Some(s.as_str()) == previous {
                return None;
            }
            Some(s)
        }
    })
    .await;
    // The file is written after bind; make sure the port answers.
    eventually(
        "the gateway to accept connections",
        Duration::from_secs(10),
        || {
            let addr = addr.clone();
            async move { tokio::net::TcpStream::connect(&addr).await.ok().map(|_| ()) }
        },
    )
    .await;
    addr
}

impl Gateway {
    pub async fn start() -> Gateway {
        Self::start_with(&[]).await
    }

    pub async fn start_with(extra: &[&str]) -> Gateway {
        let data = TempDir::new("gw");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let proc = spawn_gateway(data.path(), "127.0.0.1:0", &extra);
        let addr = wait_addr(data.path(), None).await;
        let tls = std::fs::read_to_string(data.path().join("gateway.addr"))
            .is_ok_and(|s| s.trim().starts_with("https://"));
        let far = far_host(data.path()).await;
        Gateway {
            data,
            node_data: TempDir::new("nodedata"),
            addr,
            proc,
            extra,
            tls,
            far,
        }
    }

    /// [`Gateway::start_with`], with its log (at `RUST_LOG=debug`) written to `log`
    /// instead of the test's stderr, for tests that look at what it logs.
    pub async fn start_logged(extra: &[&str], log: &Path) -> Gateway {
        let data = TempDir::new("gw");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let file = std::fs::File::create(log).expect("create the gateway log");
        let mut cmd = Command::new(gsv_bin());
        cmd.arg("gateway")
            .arg("--data")
            .arg(data.path())
            .args(["--listen", "127.0.0.1:0", "--heartbeat-ms", "1000"])
            .args(&extra)
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file);
        let proc = Proc(
            die_with_parent(&mut cmd)
                .spawn()
                .expect("spawn gsv gateway"),
        );
        let addr = wait_addr(data.path(), None).await;
        let tls = std::fs::read_to_string(data.path().join("gateway.addr"))
            .is_ok_and(|s| s.trim().starts_with("https://"));
        let far = far_host(data.path()).await;
        Gateway {
            data,
            node_data: TempDir::new("nodedata"),
            addr,
            proc,
            extra,
            tls,
            far,
        }
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// How the harness's own clients trust this gateway: a TLS gateway's self-signed
    /// certificate (tls-cert.pem in its data dir) is pinned.
    pub fn tls_options(&self) -> TlsOptions {
        let cert = self.data.path().join("tls-cert.pem");
        match self.tls {
            true => TlsOptions {
                ca: None,
                pin: gsv_gateway::tls::fingerprint_pem_file(&cert).ok(),
            },
            false => TlsOptions::default(),
        }
    }

    /// Kills the gateway process (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Starts the gateway again on the same address and data directory.
    pub async fn restart(&mut self) {
        self.proc.kill();
        let _ = std::fs::remove_file(self.data.path().join("gateway.addr"));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.proc = spawn_gateway(self.data.path(), &self.addr, &self.extra);
            tokio::time::sleep(Duration::from_millis(300)).await;
            match self.proc.0.try_wait() {
                Ok(None) => break,
                // The port may still be held for a moment; try again.
                _ if Instant::now() < deadline => continue,
                other => panic!("gateway did not restart: {other:?}"),
            }
        }
        let addr = wait_addr(self.data.path(), None).await;
        assert_eq!(addr, self.addr);
    }

    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.data.path().join("admin.token"))
            .expect("admin.token")
            .trim()
            .to_owned()
    }

    /// `gsv token create ...` against this gateway's data dir; returns the token.
    pub fn token(&self, args: &[&str]) -> String {
        let out = Command::new(gsv_bin())
            .args(["token", "create"])
            .args(args)
            .arg("--data")
            .arg(self.data.path())
            .output()
            .expect("run gsv token create");
        assert!(
            out.status.success(),
            "token create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("utf8")
            .trim()
            .to_owned()
    }

    pub fn node_token(&self, id: &str) -> String {
        self.token(&["node", id])
    }

    /// An agent token allowed everything.
    pub fn agent_token(&self) -> String {
        self.token(&["agent", "test", "--allow", "*"])
    }

    pub async fn agent(&self) -> AgentClient {
        self.agent_with(&self.agent_token()).await
    }

    pub async fn agent_with(&self, token: &str) -> AgentClient {
        AgentClient::connect_with(&self.url(), token, &self.tls_options())
            .await
            .expect("agent connects")
    }

    /// Starts a real `gsv node` with the Echo tool and waits until it is online.
    pub async fn node(&self, id: &str, workspace: &Path) -> Proc {
        let proc = self.spawn_node(id, &self.node_token(id), workspace, &[]);
        self.wait_online(id).await;
        proc
    }

    pub fn spawn_node(&self, id: &str, token: &str, workspace: &Path, extra: &[&str]) -> Proc {
        self.spawn_node_with_env(id, token, workspace, extra, &[], &[])
    }

    /// [`Gateway::spawn_node`] with environment variables set (`env`) and removed
    /// (`unset`) for the node process; the same `--data` directory every time, so a
    /// node started again is the same enrolled node.
    pub fn spawn_node_with_env(
        &self,
        id: &str,
        token: &str,
        workspace: &Path,
        extra: &[&str],
        env: &[(&str, &Path)],
        unset: &[&str],
    ) -> Proc {
        let mut cmd = self.node_command(id, token, workspace);
        for (name, value) in env {
            cmd.env(name, value);
        }
        for name in unset {
            cmd.env_remove(name);
        }
        cmd.arg("--echo-tool").args(extra);
        Proc(die_with_parent(&mut cmd).spawn().expect("spawn gsv node"))
    }

    /// The `gsv node` command line of [`Gateway::spawn_node`] without `--echo-tool`
    /// (the standard tools only): add flags, then spawn it.
    pub fn node_command(&self, id: &str, token: &str, workspace: &Path) -> Command {
        self.node_command_via(&self.url(), id, token, workspace)
    }

    /// [`Gateway::node_command`] with the node dialing `gateway` (a chaos proxy in
    /// front of this gateway, say).
    pub fn node_command_via(
        &self,
        gateway: &str,
        id: &str,
        token: &str,
        workspace: &Path,
    ) -> Command {
        let mut cmd = Command::new(gsv_bin());
        cmd.arg("node")
            .arg("--gateway")
            .arg(gateway)
            .arg("--id")
            .arg(id)
            .arg("--token")
            .arg(token)
            .arg("--workspace")
            .arg(workspace)
            .arg("--data")
            .arg(self.node_data.path())
            .arg("--heartbeat-ms")
            .arg("1000")
            .env("RUST_LOG", "warn")
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_TOKEN")
            .env_remove("GSV_CA")
            .env_remove("GSV_PIN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(far) = &self.far {
            cmd.args(&far.flags);
        }
        cmd
    }

    /// Waits until `id` is listed online (through a fresh admin connection each poll,
    /// so it also works across gateway restarts).
    pub async fn wait_online(&self, id: &str) {
        let url = self.url();
        let token = self.admin_token();
        let tls = self.tls_options();
        eventually(
            &format!("node {id} online"),
            Duration::from_secs(30),
            || {
                let (url, token, tls) = (url.clone(), token.clone(), tls.clone());
                async move {
                    let c = AgentClient::connect_with(&url, &token, &tls).await.ok()?;
                    let nodes = c.list_nodes().await.ok()?;
                    nodes.iter().any(|n| n.id == id && n.online).then_some(())
                }
            },
        )
        .await
    }

    /// Runs the `gsv` CLI with this gateway's data dir; returns (exit code, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(gsv_bin())
            .args(args)
            .arg("--data")
            .arg(self.data.path())
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_AGENT_TOKEN")
            .env_remove("GSV_CA")
            .env_remove("GSV_PIN")
            .output()
            .expect("run gsv");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// A minimal HTTP/1.1 GET on loopback; returns (status, body).
pub async fn http_get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    http_request(addr, "GET", path, token, None).await
}

pub async fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("http response in time")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = match text.split_once("\r\n\r\n") {
        Some((head, rest))
            if head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked") =>
        {
            dechunk(rest)
        }
        Some((_, rest)) => rest.to_owned(),
        None => String::new(),
    };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Resident memory of process `pid`, in bytes.
pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// The structured content of a tool result (a test fails without it).
pub fn sc(r: &gsv_protocol::ToolResult) -> &serde_json::Value {
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {}", r.joined_text()))
}

/// The next `approval.requested` event `operator` hears of (within 15 s).
pub async fn next_approval_request(operator: &AgentClient) -> serde_json::Value {
    eventually("approval.requested", Duration::from_secs(15), || async {
        let e = operator.next_event(Duration::from_millis(100)).await?;
        (e.event == gsv_protocol::EventName::ApprovalRequested).then_some(e.payload)
    })
    .await
}

/// Calls `tool` with `args` as `agent`; the operator `decision`s (`approve` or `deny`,
/// through `gsv approvals`) the request it opens. The request, and the call's outcome.
pub async fn decided(
    gw: &Gateway,
    agent: &std::sync::Arc<AgentClient>,
    operator: &AgentClient,
    tool: &str,
    args: serde_json::Value,
    decision: &str,
) -> (
    serde_json::Value,
    Result<gsv_protocol::ToolResult, gsv_client::ClientError>,
) {
    let (a, tool) = (agent.clone(), tool.to_owned());
    let call = tokio::spawn(async move { a.call(&tool, args, Some(60_000)).await });
    let req = next_approval_request(operator).await;
    let id = req["id"].as_str().expect("id").to_owned();
    let (code, _, err) = gw.cli(&["approvals", decision, &id]);
    assert_eq!(code, 0, "{err}");
    (req, call.await.expect("join"))
}

/// A fresh cluster key (32 random bytes, mode 0600) in `dir`, for
/// `gsv gateway --cluster ... --cluster-key-file FILE`: every replica of one test
/// cluster is given the same file.
pub fn cluster_key(dir: &Path) -> PathBuf {
    use rand::RngExt;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("cluster.key");
    if !path.exists() {
        let bytes: [u8; 32] = rand::rng().random();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .expect("create the cluster key");
        std::io::Write::write_all(&mut f, &bytes).expect("write the cluster key");
    }
    path
}
