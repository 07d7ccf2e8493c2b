//! Shared set-up for the gateway scenarios: temp dirs, the open-file limit, a gateway
//! in a separate process (so its RSS can be read and it can be killed), node
//! credentials minted straight into the gateway's store, and a gateway plus a real
//! node as child processes.

use super::BenchOptions;
use gsv_client::AgentClient;
use gsv_gateway::{Store, TokenKind};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh `gsv-bench-{name}-{pid}` under `opts.dir` (or the system temp dir).
    pub fn new(opts: &BenchOptions, name: &str) -> Result<TempDir, String> {
        let base = opts.dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("gsv-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
#[allow(clippy::unnecessary_cast)] // `rlim_t` is not `u64` on every target
pub fn raise_nofile() -> u64 {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed in.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur as u64;
            }
        }
        r.rlim_cur as u64
    }
}

/// The caps on unauthenticated connections a benchmark's gateway runs with: every
/// simulated node dials from 127.0.0.1, thousands at once after a restart, so the
/// per-source default (64) would turn the reconnect storm into a test of backoff.
pub const BENCH_MAX_UNAUTH: usize = 100_000;

/// [`BENCH_MAX_UNAUTH`] as the gateway's caps (for in-process gateways).
pub fn bench_caps() -> gsv_gateway::admission::Caps {
    gsv_gateway::admission::Caps {
        max_unauth: BENCH_MAX_UNAUTH,
        max_unauth_per_source: BENCH_MAX_UNAUTH,
    }
}

/// Mints `n` node credentials (`sim-00001`…) in the store of `data`.
pub fn mint_nodes(data: &Path, n: usize) -> Result<Vec<(String, String)>, String> {
    mint_nodes_named(data, "sim", n)
}

/// Mints `n` node credentials (`PREFIX-00001`…) in the store of `data`.
pub fn mint_nodes_named(
    data: &Path,
    prefix: &str,
    n: usize,
) -> Result<Vec<(String, String)>, String> {
    let store = Store::open(data).map_err(|e| format!("store: {e}"))?;
    (1..=n)
        .map(|i| {
            let id = format!("{prefix}-{i:05}");
            let (token, _) = store
                .create_token(TokenKind::Node, &id, None)
                .map_err(|e| format!("token for {id}: {e}"))?;
            Ok((id, token))
        })
        .collect()
}

/// An agent token allowed to call everything, from the store of `data`.
pub fn mint_agent(data: &Path) -> Result<String, String> {
    let store = Store::open(data).map_err(|e| format!("store: {e}"))?;
    let everything = gsv_gateway::PolicySpec {
        allow: vec!["*".into()],
        ..Default::default()
    };
    let (token, _) = store
        .create_token(TokenKind::Agent, "bench", Some(&everything))
        .map_err(|e| e.to_string())?;
    Ok(token)
}

/// `gsv gateway` running as a child process of the benchmark.
pub struct GatewayProcess {
    child: Child,
    pub addr: SocketAddr,
    pub data: PathBuf,
}

impl GatewayProcess {
    /// Starts `gsv gateway --listen LISTEN --data DATA` and waits for its address file.
    pub async fn spawn(data: &Path, listen: &str) -> Result<GatewayProcess, String> {
        GatewayProcess::spawn_with(data, listen, &[]).await
    }

    /// [`GatewayProcess::spawn`] with more flags (`--cluster …`).
    pub async fn spawn_with(
        data: &Path,
        listen: &str,
        extra: &[String],
    ) -> Result<GatewayProcess, String> {
        let addr_file = data.join(gsv_gateway::datadir::ADDR_FILE);
        let _ = std::fs::remove_file(&addr_file);
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        // The caps are lifted (every simulated node dials from 127.0.0.1) unless
        // `extra` sets one itself.
        let mut caps = Vec::new();
        for cap in ["--max-unauth-conns", "--max-unauth-conns-per-source"] {
            if !extra.iter().any(|e| e == cap) {
                caps.extend([cap.to_owned(), BENCH_MAX_UNAUTH.to_string()]);
            }
        }
        let child = Command::new(exe)
            .args(["gateway", "--listen", listen, "--data"])
            .arg(data)
            .args(&caps)
            .args(extra)
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn gateway: {e}"))?;
        let mut gw = GatewayProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data: data.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(text) = std::fs::read_to_string(&addr_file) {
                let t = text.trim();
                let t = t
                    .strip_prefix("http://")
                    .or_else(|| t.strip_prefix("https://"))
                    .unwrap_or(t)
                    .trim_end_matches('/');
                if let Ok(addr) = t.parse() {
                    gw.addr = addr;
                    return Ok(gw);
                }
            }
            if let Ok(Some(status)) = gw.child.try_wait() {
                return Err(format!("the gateway exited: {status}"));
            }
            if Instant::now() > deadline {
                return Err("the gateway did not write its address file in 20 s".into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The node WebSocket URL.
    pub fn node_url(&self) -> String {
        format!("ws://{}{}", self.addr, gsv_protocol::endpoint::NODE_PATH)
    }

    /// The gateway process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// VmRSS of the gateway process, in KiB.
    pub fn rss_kib(&self) -> Result<u64, String> {
        rss_kib(self.child.id())
    }

    /// CPU time the gateway process has used so far (user + system), in ms.
    pub fn cpu_ms(&self) -> Result<f64, String> {
        cpu_ms(&format!("/proc/{}/stat", self.child.id()))
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// VmRSS of a process, in KiB (Linux).
pub fn rss_kib(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "no VmRSS".to_owned())
}

/// CPU time (user + system) of the process whose `/proc/PID/stat` is `stat`, in ms
/// (Linux; clock-tick resolution, 10 ms here).
pub fn cpu_ms(stat: &str) -> Result<f64, String> {
    let text = std::fs::read_to_string(stat).map_err(|e| format!("{stat}: {e}"))?;
    // Fields after the command name (which may hold spaces, inside parentheses):
    // state is field 3, utime 14, stime 15.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| format!("{stat}: no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64, String> {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("{stat}: no field {}", i + 3))
    };
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    Ok((ticks(11)? + ticks(12)?) * 1e3 / hz)
}

/// Makes a spawned helper die with this process (Linux: parent-death signal), so an
/// interrupted benchmark leaves no gateway, node or sshd behind.
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

/// A child process killed (and reaped) on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `gsv gateway` and one real `gsv node` as child processes on 127.0.0.1, as they run
/// in production: every hop between agent, gateway and node crosses processes.
pub struct ProcessRig {
    pub gateway: GatewayProcess,
    node: Proc,
    /// An agent token allowed to call everything.
    pub agent_token: String,
}

impl ProcessRig {
    /// Starts both under `dir` (data, workspace, node state) and waits until the node
    /// `node_id` is online; with `echo_tool` the node also offers Echo.
    pub async fn start(dir: &Path, node_id: &str, echo_tool: bool) -> Result<ProcessRig, String> {
        ProcessRig::start_with(dir, node_id, echo_tool, &[]).await
    }

    /// [`ProcessRig::start`] with more flags for the node (`--ssh …`, say).
    pub async fn start_with(
        dir: &Path,
        node_id: &str,
        echo_tool: bool,
        node_flags: &[std::ffi::OsString],
    ) -> Result<ProcessRig, String> {
        let data = dir.join("data");
        let workspace = dir.join("workspace");
        for d in [&data, &workspace] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let node_token = {
            let store = Store::open(&data).map_err(|e| format!("store: {e}"))?;
            store
                .create_token(TokenKind::Node, node_id, None)
                .map_err(|e| format!("node token: {e}"))?
                .0
        };
        let agent_token = mint_agent(&data)?;
        let gateway = GatewayProcess::spawn(&data, "127.0.0.1:0").await?;
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.args(["node", "--id", node_id, "--gateway"])
            .arg(gateway.url())
            .arg("--workspace")
            .arg(&workspace)
            .arg("--data")
            .arg(dir.join("node"))
            .env("GSV_TOKEN", &node_token)
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if echo_tool {
            cmd.arg("--echo-tool");
        }
        cmd.args(node_flags);
        let node = Proc(
            die_with_parent(&mut cmd)
                .spawn()
                .map_err(|e| format!("spawn gsv node: {e}"))?,
        );
        let rig = ProcessRig {
            gateway,
            node,
            agent_token,
        };
        rig.wait_for_node(node_id).await?;
        Ok(rig)
    }

    /// Waits until the node is online at the gateway (20 s at most).
    async fn wait_for_node(&self, node_id: &str) -> Result<(), String> {
        let agent = AgentClient::connect(&self.gateway.url(), &self.agent_token)
            .await
            .map_err(|e| format!("agent: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let nodes = agent.list_nodes().await.map_err(|e| e.to_string())?;
            if nodes.iter().any(|n| n.id == node_id && n.online) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "`gsv node --id {node_id}` did not come online in 20 s"
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `gsv call --gateway URL --data DATA NAME ARGS`, with the agent token in the
    /// environment (as `$GSV_AGENT_TOKEN`).
    pub fn call_command(&self, name: &str, args: &str) -> Result<Command, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("call")
            .arg("--gateway")
            .arg(self.gateway.url())
            .arg("--data")
            .arg(&self.gateway.data)
            .arg(name)
            .arg(args)
            .env("GSV_AGENT_TOKEN", &self.agent_token)
            .stdin(Stdio::null());
        Ok(cmd)
    }

    /// Stops the node, then the gateway.
    pub async fn stop(self) {
        drop(self.node);
        drop(self.gateway);
    }
}
