//! End to end: the gateway's MCP server (`/mcp`) and the `gsv mcp` stdio bridge,
//! driven by the official MCP SDKs for Python and TypeScript against a real gateway and
//! real nodes.
//!
//! `.ci/run` installs the Python SDK (PyPI `mcp`) into `.venv` and the TypeScript SDK
//! (npm `@modelcontextprotocol/client`) into `tests/mcp/ts/node_modules`;
//! `tests/mcp/drive.py` and `tests/mcp/ts/drive.mjs` run the same checks and report
//! each one. Every transport (Streamable HTTP, stdio) is driven in both protocol modes
//! of each SDK: `legacy` (the `initialize` handshake, a session) and `auto`
//! (`server/discover`, then the session-less 2026-07-28 revision). Without an SDK
//! installed its tests are skipped, unless `CI` is set. The tests at the end need
//! neither.

mod common;

use common::mcp::send_mcp;
use common::{eventually, Gateway, Proc, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::EventName;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A program that drives `/mcp` with an official MCP SDK: `tests/mcp/drive.py` or
/// `tests/mcp/ts/drive.mjs`, which take the same arguments.
enum Driver {
    /// The virtual environment's Python, with the Python SDK.
    Python(PathBuf),
    /// Node.js, with the TypeScript SDK in `tests/mcp/ts/node_modules`.
    TypeScript,
}

impl Driver {
    fn name(&self) -> &'static str {
        match self {
            Driver::Python(_) => "drive.py",
            Driver::TypeScript => "drive.mjs",
        }
    }

    fn command(&self) -> tokio::process::Command {
        let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
        match self {
            Driver::Python(py) => {
                let mut cmd = tokio::process::Command::new(py);
                cmd.arg(tests.join("drive.py"));
                cmd
            }
            Driver::TypeScript => {
                let mut cmd = tokio::process::Command::new("node");
                cmd.arg(tests.join("ts/drive.mjs"));
                cmd
            }
        }
    }
}

/// The virtual environment's Python with the MCP SDK, or `None` (test skipped) when it
/// is missing outside CI.
fn python() -> Option<Driver> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let ready = py.exists()
        && std::process::Command::new(&py)
            .args(["-c", "import mcp, httpx2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if ready {
        return Some(Driver::Python(py));
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{} with the `mcp` package is required in CI (.ci/run installs it)",
            py.display()
        );
    }
    eprintln!(
        "skipping: {} with the `mcp` package is missing (python3 -m venv .venv && .venv/bin/pip install mcp)",
        py.display()
    );
    None
}

/// Node.js with the TypeScript SDK installed in `tests/mcp/ts`, or `None` (test skipped)
/// when either is missing outside CI.
fn typescript() -> Option<Driver> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/ts");
    // Importing the package (not just finding node_modules) catches a broken install.
    let ready = dir.join("node_modules").is_dir()
        && std::process::Command::new("node")
            .args([
                "--input-type=module",
                "-e",
                "await import('@modelcontextprotocol/client')",
            ])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if ready {
        return Some(Driver::TypeScript);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "node and {}/node_modules with the MCP TypeScript SDK are required in CI (.ci/run installs them)",
            dir.display()
        );
    }
    eprintln!(
        "skipping: node or {}/node_modules is missing (npm ci --prefix tests/mcp/ts)",
        dir.display()
    );
    None
}

/// Waits until the gateway lists node `id` as known and offline.
async fn seen_offline(gw: &Gateway, id: &str) {
    let (url, admin) = (gw.url(), gw.admin_token());
    eventually(
        &format!("{id} gone offline"),
        Duration::from_secs(20),
        || {
            let (url, admin) = (url.clone(), admin.clone());
            async move {
                let c = AgentClient::connect(&url, &admin).await.ok()?;
                let nodes = c.list_nodes().await.ok()?;
                nodes.iter().any(|n| n.id == id && !n.online).then_some(())
            }
        },
    )
    .await;
}

/// A gateway with an online node `alpha`, an offline node `gone`, and agent tokens.
struct Fleet {
    gw: Gateway,
    workspace: TempDir,
    empty: TempDir,
    _alpha: Proc,
    token: String,
    limited: String,
    confirm: String,
    self_confirm: String,
    /// May call `alpha__Read` only.
    only_read: String,
    /// Allowed everything, `--mcp-view fleet`.
    fleet_view: String,
    _guarded: Option<Proc>,
    _extra: Vec<Proc>,
}

impl Fleet {
    async fn start() -> Fleet {
        Fleet::start_with_extra(&[]).await
    }

    /// [`Fleet::start`] with more online nodes (13 tools each), to grow the fleet past
    /// the `auto` view's threshold.
    async fn start_with_extra(extra: &[&str]) -> Fleet {
        Fleet::start_shaped(extra, false).await
    }

    /// A gateway whose one and only node is `alpha` (no `gone`, no `guarded`); the
    /// tokens are the same.
    async fn start_alone() -> Fleet {
        Fleet::start_shaped(&[], true).await
    }

    async fn start_shaped(extra: &[&str], alone: bool) -> Fleet {
        let gw = Gateway::start().await;
        let workspace = TempDir::new("mcpws");
        std::fs::write(workspace.path().join("hello.txt"), "hello world\n").unwrap();
        let alpha = gw.node("alpha", workspace.path()).await;
        if !alone {
            let mut gone = gw.node("gone", workspace.path()).await;
            gone.kill();
            seen_offline(&gw, "gone").await;
        }
        let token = gw.agent_token();
        let limited = gw.token(&[
            "agent",
            "limited",
            "--allow",
            "alpha__*",
            "--deny",
            "alpha__Bash",
        ]);
        let confirm = gw.token(&["agent", "asker", "--allow", "*", "--confirm", "alpha__Echo"]);
        let self_confirm = gw.token(&[
            "agent",
            "self-asker",
            "--allow",
            "*",
            "--confirm",
            "alpha__Echo",
            "--confirm",
            "alpha__Write",
            "--confirm",
            "guarded__Bash",
            "--self-confirm",
        ]);
        let guarded = if alone {
            None
        } else {
            let guarded = gw.spawn_node(
                "guarded",
                &gw.node_token("guarded"),
                workspace.path(),
                &["--approve-shell", "echo .*"],
            );
            gw.wait_online("guarded").await;
            Some(guarded)
        };
        let only_read = gw.token(&["agent", "reader", "--allow", "alpha__Read"]);
        let fleet_view = gw.token(&["agent", "fleeter", "--allow", "*", "--mcp-view", "fleet"]);
        let mut extra_nodes = Vec::new();
        for id in extra {
            extra_nodes.push(gw.node(id, workspace.path()).await);
        }
        Fleet {
            gw,
            workspace,
            empty: TempDir::new("mcpempty"),
            _alpha: alpha,
            token,
            limited,
            confirm,
            self_confirm,
            only_read,
            fleet_view,
            _guarded: guarded,
            _extra: extra_nodes,
        }
    }

    /// Runs the driver with these checks; panics with its output on failure.
    async fn drive(&self, driver: &Driver, transport: &str, mode: &str, checks: &[&str]) {
        self.drive_with(driver, transport, mode, checks, &[]).await
    }

    /// The flat view's checks: they ask for `view=flat`, since with this fleet's tool
    /// count `auto` would give the fleet view (tested on its own).
    async fn drive_flat(&self, driver: &Driver, transport: &str, mode: &str, checks: &[&str]) {
        self.drive_with(driver, transport, mode, checks, &["--default-view", "flat"])
            .await
    }

    async fn drive_with(
        &self,
        driver: &Driver,
        transport: &str,
        mode: &str,
        checks: &[&str],
        extra: &[&str],
    ) {
        let name = driver.name();
        let mut cmd = driver.command();
        cmd.args(["--transport", transport, "--mode", mode])
            .args(extra)
            .arg("--url")
            .arg(format!("{}/mcp", self.gw.url()))
            .arg("--gateway")
            .arg(self.gw.url())
            .arg("--gsv")
            .arg(common::gsv_bin())
            .arg("--data")
            .arg(self.gw.data.path())
            .arg("--empty-data")
            .arg(self.empty.path())
            .arg("--workspace")
            .arg(self.workspace.path())
            .args(["--token", &self.token])
            .args(["--limited-token", &self.limited])
            .args(["--confirm-token", &self.confirm])
            .args(["--self-confirm-token", &self.self_confirm])
            .args(["--only-read-token", &self.only_read])
            .args(["--fleet-token", &self.fleet_view])
            .args(["--guarded", "guarded"])
            .args(["--node", "alpha", "--offline-node", "gone"])
            .args(checks)
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_AGENT_TOKEN")
            .env_remove("GSV_DATA")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(150), cmd.output())
            .await
            .unwrap_or_else(|_| panic!("{name} {transport} {mode} finished in time"))
            .unwrap_or_else(|e| panic!("run {name}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        print!("{stdout}");
        assert!(
            out.status.success(),
            "{name} {transport} {mode} failed:\n{stdout}\n--- stderr ---\n{stderr}"
        );
        for check in checks {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(&format!("PASS {check} "))),
                "{name}: {check} did not pass:\n{stdout}"
            );
        }
    }
}

/// Every check `/mcp` must pass, in either protocol mode (and `gsv mcp` too).
const HTTP_CHECKS: &[&str] = &[
    "list",
    "read",
    "bash-progress",
    "tool-error",
    "offline",
    "hidden",
    "unauthorized",
    "cancel",
    "elicit",
    "elicit-plan",
    "no-self-approval",
    "guard-operator",
    "operator-queue",
    "list-changed",
];

/// `gsv mcp` bridges stdio to `/mcp`: every check, elicitation included.
const STDIO_CHECKS: &[&str] = HTTP_CHECKS;

/// The fleet view, the view choice, `?select=` and the resources (issue 18): the same
/// policy, approvals, guards and audit rows as the flat view, and nothing more seen.
const FLEET_CHECKS: &[&str] = &[
    "fleet-list",
    "fleet-nodes",
    "fleet-tools",
    "fleet-call",
    "fleet-progress",
    "fleet-cancel",
    "fleet-elicit",
    "fleet-operator-queue",
    "fleet-guard",
    "select",
    "view-override",
    "no-leak",
    "resources",
];

#[tokio::test]
async fn mcp_fleet_view_over_http_legacy_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    fleet.drive(&py, "http", "legacy", FLEET_CHECKS).await;
}

#[tokio::test]
async fn mcp_fleet_view_over_http_auto_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    fleet.drive(&py, "http", "auto", FLEET_CHECKS).await;
}

/// `gsv mcp --view fleet` / `--select`: the bridge asks for the view in the URL.
#[tokio::test]
async fn mcp_fleet_view_over_stdio_auto_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    fleet.drive(&py, "stdio", "auto", FLEET_CHECKS).await;
}

/// `auto` lists each node's reference tools flat while the listing is small (four
/// nodes here), and weighs by bytes: every tool of four nodes (`?tools=all`) is the
/// fleet view, one token's single tool stays flat; in a session (legacy) and per
/// request (auto).
#[tokio::test]
async fn mcp_auto_view_switches_at_the_threshold() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start_with_extra(&["beta"]).await;
    fleet
        .drive(&py, "http", "legacy", &["auto-threshold"])
        .await;
    fleet.drive(&py, "http", "auto", &["auto-threshold"]).await;
}

/// One machine alone, then two and five (beside the offline one) over the default URL:
/// each one's reference tools listed by namespace (alone: those seven and the fleet
/// tools, nothing else), `{node}__Bash` and the unlisted `{node}__Echo` called by name
/// on every one, `fleet_use` listing the rest; both SDKs, both eras.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_machines_are_called_by_name_over_the_default_url() {
    let Some(py) = python() else { return };
    let ts = typescript();
    for extra in [None, Some(&[][..]), Some(&["m1", "m2", "m3"][..])] {
        let fleet = match extra {
            None => Fleet::start_alone().await,
            Some(extra) => Fleet::start_with_extra(extra).await,
        };
        for mode in ["legacy", "auto"] {
            fleet.drive(&py, "http", mode, &["by-name-small"]).await;
            if let Some(ts) = &ts {
                fleet.drive(ts, "http", mode, &["by-name-small"]).await;
            }
        }
    }
}

/// Fifty machines (47 beside the fixture's three, one of which is offline) over the
/// default URL: the fleet view, and `{node}__Bash` called by name on several of them;
/// `fleet_use` by name and by selector (list_changed heard, the cap of 16 refusing
/// `id~m*` whole) and `fleet_release`; in a session (legacy) and per request
/// (2026-07-28), Python and TypeScript SDKs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_machines_are_called_by_name_over_the_default_url() {
    let Some(py) = python() else { return };
    let extra: Vec<String> = (0..47).map(|i| format!("m{i:02}")).collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let fleet = Fleet::start_with_extra(&extra).await;
    fleet.drive(&py, "http", "legacy", &["by-name"]).await;
    fleet.drive(&py, "http", "auto", &["by-name"]).await;
    if let Some(ts) = typescript() {
        fleet.drive(&ts, "http", "legacy", &["by-name"]).await;
        fleet.drive(&ts, "http", "auto", &["by-name"]).await;
    }
}

/// Nodes for `fleet_run` (issue: MCP fan-out and jobs): `run-a` with a long file in
/// its workspace, `run-b` without it (`cat` fails), `run-c` offline, `run-d` whose
/// Bash the run token may not call; and the tokens the checks use.
struct RunNodes {
    _procs: Vec<Proc>,
    _dirs: Vec<TempDir>,
    args: Vec<String>,
}

impl RunNodes {
    async fn start(fleet: &Fleet) -> RunNodes {
        let gw = &fleet.gw;
        let a = TempDir::new("runa");
        let b = TempDir::new("runb");
        // Over fleet_run's 2,000-character cut; kept whole by the job.
        let long = format!("{}\nEND-OF-LONG\n", "0123456789".repeat(600));
        std::fs::write(a.path().join("long.txt"), long).unwrap();
        let run_a = gw.node("run-a", a.path()).await;
        let run_b = gw.node("run-b", b.path()).await;
        let mut run_c = gw.node("run-c", b.path()).await;
        run_c.kill();
        let run_d = gw.node("run-d", b.path()).await;
        seen_offline(gw, "run-c").await;
        let runner = gw.token(&["agent", "runner", "--allow", "*", "--deny", "run-d__Bash"]);
        let other = gw.token(&["agent", "other", "--allow", "*"]);
        let args = vec![
            "--run-token".to_owned(),
            runner,
            "--other-token".to_owned(),
            other,
            "--admin-token".to_owned(),
            gw.admin_token(),
            "--run-workspace".to_owned(),
            a.path().display().to_string(),
        ];
        RunNodes {
            _procs: vec![run_a, run_b, run_c, run_d],
            _dirs: vec![a, b],
            args,
        }
    }

    async fn drive(&self, fleet: &Fleet, driver: &Driver, transport: &str, mode: &str) {
        let extra: Vec<&str> = self.args.iter().map(String::as_str).collect();
        fleet
            .drive_with(driver, transport, mode, RUN_CHECKS, &extra)
            .await
    }
}

/// `fleet_run` with mixed outcomes, progress and cuts, then `fleet_job` / `fleet_jobs`
/// (the job's owner, another token, the admin), and cancelling a run.
const RUN_CHECKS: &[&str] = &["fleet-run", "fleet-run-cancel"];

#[tokio::test]
async fn mcp_fleet_run_over_http_legacy_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    let run = RunNodes::start(&fleet).await;
    run.drive(&fleet, &py, "http", "legacy").await;
}

#[tokio::test]
async fn mcp_fleet_run_over_http_auto_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    let run = RunNodes::start(&fleet).await;
    run.drive(&fleet, &py, "http", "auto").await;
}

#[tokio::test]
async fn mcp_typescript_sdk_fleet_run_legacy_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    let run = RunNodes::start(&fleet).await;
    run.drive(&fleet, &ts, "http", "legacy").await;
}

#[tokio::test]
async fn mcp_typescript_sdk_fleet_run_auto_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    let run = RunNodes::start(&fleet).await;
    run.drive(&fleet, &ts, "http", "auto").await;
}

#[tokio::test]
async fn mcp_fleet_run_over_stdio_auto_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    let run = RunNodes::start(&fleet).await;
    run.drive(&fleet, &py, "stdio", "auto").await;
}

#[tokio::test]
async fn mcp_over_http_legacy_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&py, "http", "legacy", HTTP_CHECKS).await;
}

#[tokio::test]
async fn mcp_over_http_auto_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&py, "http", "auto", HTTP_CHECKS).await;
}

#[tokio::test]
async fn mcp_over_stdio_legacy_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&py, "stdio", "legacy", STDIO_CHECKS).await;
}

#[tokio::test]
async fn mcp_over_stdio_auto_mode() {
    let Some(py) = python() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&py, "stdio", "auto", STDIO_CHECKS).await;
}

#[tokio::test]
async fn mcp_typescript_sdk_legacy_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&ts, "http", "legacy", HTTP_CHECKS).await;
}

#[tokio::test]
async fn mcp_typescript_sdk_auto_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&ts, "http", "auto", HTTP_CHECKS).await;
}

#[tokio::test]
async fn mcp_typescript_sdk_over_stdio_legacy_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&ts, "stdio", "legacy", STDIO_CHECKS).await;
}

#[tokio::test]
async fn mcp_typescript_sdk_over_stdio_auto_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    fleet.drive_flat(&ts, "stdio", "auto", STDIO_CHECKS).await;
}

/// The fleet view through the TypeScript SDK, as [`mcp_fleet_view_over_http_legacy_mode`].
#[tokio::test]
async fn mcp_typescript_sdk_fleet_view_legacy_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    fleet.drive(&ts, "http", "legacy", FLEET_CHECKS).await;
}

#[tokio::test]
async fn mcp_typescript_sdk_fleet_view_auto_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    fleet.drive(&ts, "http", "auto", FLEET_CHECKS).await;
}

#[tokio::test]
async fn mcp_typescript_sdk_fleet_view_over_stdio_auto_mode() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start().await;
    fleet.drive(&ts, "stdio", "auto", FLEET_CHECKS).await;
}

/// [`mcp_auto_view_switches_at_the_threshold`] through the TypeScript SDK.
#[tokio::test]
async fn mcp_typescript_sdk_auto_view_switches_at_the_threshold() {
    let Some(ts) = typescript() else { return };
    let fleet = Fleet::start_with_extra(&["beta"]).await;
    fleet
        .drive(&ts, "http", "legacy", &["auto-threshold"])
        .await;
    fleet.drive(&ts, "http", "auto", &["auto-threshold"]).await;
}

/// One raw HTTP/1.1 exchange; returns the head (status line and headers) and body.
async fn raw_http(addr: &str, request: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("response in time")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_owned(), body.to_owned())
}

#[tokio::test]
async fn mcp_without_a_token_is_challenged_and_metadata_is_served() {
    let gw = Gateway::start().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        gw.addr,
        body.len()
    );
    let (head, body) = raw_http(&gw.addr, &req).await;
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let challenge = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("www-authenticate:"))
        .expect("WWW-Authenticate");
    let metadata = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        gw.addr
    );
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
        "{challenge}"
    );
    assert!(body.contains("gsv token create agent"), "{body}");

    let (status, doc) =
        common::http_get(&gw.addr, "/.well-known/oauth-protected-resource/mcp", None).await;
    assert_eq!(status, 200);
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["resource"], format!("http://{}/mcp", gw.addr));
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));

    // A browser page of another site is refused even with a valid token.
    let token = gw.agent_token();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nOrigin: https://evil.example\r\n\
         Authorization: Bearer {token}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
        gw.addr
    );
    let (head, _) = raw_http(&gw.addr, &req).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
}

#[tokio::test]
async fn websocket_agents_get_call_progress_before_the_result() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("progws");
    let _node = gw.node("prog", ws.path()).await;
    let agent = gw.agent().await;
    let cmd = "for i in 1 2 3; do echo step$i; sleep 1; done";
    let r = agent
        .call_with_id("p1", "prog__Bash", json!({"command": cmd}), None)
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.joined_text());
    let mut progress = Vec::new();
    while let Some(e) = agent.next_event(Duration::from_millis(100)).await {
        if e.event == EventName::CallProgress {
            progress.push(e.payload);
        }
    }
    assert!(!progress.is_empty(), "no call.progress event");
    for p in &progress {
        assert_eq!(p["callId"], "p1", "{p}");
    }
    assert!(
        progress
            .iter()
            .any(|p| p["message"].as_str().is_some_and(|m| m.contains("step"))),
        "{progress:?}"
    );
}

/// `gsv bench mcp` in its smoke size: both paths answer, the report has its rows
/// (figures are not asserted; benchmarks report them, tests never assert timings).
#[test]
fn bench_mcp_smoke() {
    let dir = TempDir::new("benchmcp");
    let out = std::process::Command::new(common::gsv_bin())
        .args(["bench", "mcp", "--quick", "--json", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run gsv bench mcp");
    assert!(
        out.status.success(),
        "gsv bench mcp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(v["scenario"], "mcp");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "{v}");
    for r in rows {
        assert!(r["value"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["baselineValue"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// One session-less (2026-07-28) `tools/call` of `alpha__Echo`, as raw HTTP/1.1.
async fn call_2026(gw: &Gateway, token: &str, args: serde_json::Value) -> (String, String) {
    call_tool_2026(gw, token, "alpha__Echo", args).await
}

/// One session-less (2026-07-28) `tools/call` of tool `name`, as raw HTTP/1.1.
async fn call_tool_2026(
    gw: &Gateway,
    token: &str,
    name: &str,
    args: serde_json::Value,
) -> (String, String) {
    let params = json!({"name": name, "arguments": args});
    request_2026(gw, token, "", "tools/call", Some(name), params).await
}

/// One session-less (2026-07-28) request `method` to `/mcp{query}` with `params` (the
/// revision's `_meta` added), as raw HTTP/1.1; `name` is the `Mcp-Name` header.
async fn request_2026(
    gw: &Gateway,
    token: &str,
    query: &str,
    method: &str,
    name: Option<&str>,
    mut params: serde_json::Value,
) -> (String, String) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let name = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "POST /mcp{query} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        gw.addr,
        body.len()
    );
    raw_http(&gw.addr, &req).await
}

/// `fleet_copy` copies a file node to node for an MCP agent (its bytes never in the
/// answer), refuses what the token's policy does not allow, and malformed places.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_copy_copies_between_nodes_within_the_tokens_policy() {
    let gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("mcp-copy-a"), TempDir::new("mcp-copy-b"));
    let _alpha = gw.node("alpha", wa.path()).await;
    let _beta = gw.node("beta", wb.path()).await;
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(wa.path().join("src.bin"), &data).expect("write");
    let token = gw.agent_token();
    let (head, body) = call_tool_2026(
        &gw,
        &token,
        "fleet_copy",
        json!({"from": "alpha:src.bin", "to": "beta:dst.bin"}),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let result = &v["result"];
    assert_eq!(result["isError"], false, "{v}");
    assert_eq!(
        result["structuredContent"]["bytes"],
        data.len() as u64,
        "{v}"
    );
    assert!(
        body.len() < 4096,
        "the answer carries no file bytes: {}",
        body.len()
    );
    assert_eq!(
        std::fs::read(wb.path().join("dst.bin")).expect("copied"),
        data
    );

    // Read on alpha only: the destination side is refused, nothing placed.
    let reader = gw.token(&["agent", "reader", "--allow", "alpha__Read"]);
    let (_, body) = call_tool_2026(
        &gw,
        &reader,
        "fleet_copy",
        json!({"from": "alpha:src.bin", "to": "beta:no.bin"}),
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(v.to_string().contains("forbidden"), "{v}");
    assert!(!wb.path().join("no.bin").exists());

    // Not NODE:PATH.
    let (_, body) = call_tool_2026(
        &gw,
        &token,
        "fleet_copy",
        json!({"from": "src.bin", "to": "beta:x"}),
    )
    .await;
    assert!(body.contains("invalid_args"), "{body}");
}

#[tokio::test]
async fn session_less_calls_answer_json_when_quick_and_stream_when_slow() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("mcp-slow");
    let _alpha = gw.node("alpha", ws.path()).await;
    let token = gw.agent_token();

    // Quick: the result is the whole answer, as plain JSON.
    let (head, body) = call_2026(&gw, &token, json!({"text": "quick"})).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let head_lc = head.to_ascii_lowercase();
    assert!(head_lc.contains("content-type: application/json"), "{head}");
    let msg: serde_json::Value = serde_json::from_str(body.trim()).expect(&body);
    assert_eq!(msg["result"]["content"][0]["text"], "quick", "{msg}");

    // Slow (past the 1 s wait): an SSE stream opened at once with a comment, the
    // result relayed into it as one data event when it comes.
    let (head, body) = call_2026(&gw, &token, json!({"text": "slow", "delayMs": 1800})).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let head_lc = head.to_ascii_lowercase();
    assert!(
        head_lc.contains("content-type: text/event-stream"),
        "{head}"
    );
    assert!(body.contains(": gsv: call running"), "{body}");
    let result = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .find(|m| m.get("result").is_some())
        .unwrap_or_else(|| panic!("no result event in {body}"));
    assert_eq!(result["id"], 7);
    assert_eq!(result["result"]["content"][0]["text"], "slow", "{result}");
}

/// `gsv mcp` driven by hand, one JSON-RPC message a line.
struct Bridge {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Bridge {
    /// Starts `gsv mcp` with these flags (and nothing from the environment).
    fn start(args: &[&str]) -> Bridge {
        let mut child = tokio::process::Command::new(common::gsv_bin())
            .arg("mcp")
            .args(args)
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_AGENT_TOKEN")
            .env_remove("GSV_DATA")
            .env_remove("GSV_CA")
            .env_remove("GSV_PIN")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn gsv mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        Bridge {
            child,
            stdin,
            lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout)),
        }
    }

    async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
        stdin.flush().await.expect("flush");
    }

    /// The next line the bridge writes, as JSON.
    async fn recv(&mut self) -> serde_json::Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("a line in time")
            .expect("read stdout")
            .expect("stdout open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    async fn initialize(&mut self) -> serde_json::Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}})
            .to_string(),
        )
        .await;
        self.recv().await
    }

    /// Closes stdin; returns the exit code.
    async fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("gsv mcp exits at the end of input")
            .expect("wait");
        status.code()
    }
}

/// A 2025-11-25 `initialize` of `token` straight to `/mcp`; the HTTP status.
async fn raw_initialize(gw: &Gateway, token: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        gw.addr,
        body.len()
    );
    let (head, _) = raw_http(&gw.addr, &req).await;
    head.split_whitespace().nth(1).unwrap_or("").to_owned()
}

/// The plain bridge's own behaviour: a line that is not JSON gets a `-32700` error with
/// id null and the bridge goes on; a slow call does not hold up a later request; the
/// end of input ends the session (`DELETE /mcp`) and the process, with exit code 0.
#[tokio::test]
async fn gsv_mcp_answers_bad_lines_and_ends_its_session_at_eof() {
    // One session per token: whether the bridge's session is open shows in whether
    // another `initialize` of the same token is refused.
    let gw = Gateway::start_with(&["--mcp-sessions-per-token", "1"]).await;
    let ws = TempDir::new("bridge-ws");
    let _alpha = gw.node("alpha", ws.path()).await;
    let token = gw.agent_token();
    let empty = TempDir::new("bridge-empty");
    let data = empty.path().display().to_string();
    let mut bridge = Bridge::start(&["--gateway", &gw.url(), "--token", &token, "--data", &data]);

    let init = bridge.initialize().await;
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    bridge
        .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    bridge.send("this is not JSON").await;
    let err = bridge.recv().await;
    assert_eq!(err["error"]["code"], -32700, "{err}");
    assert!(err["id"].is_null(), "{err}");
    bridge
        .send(r#"{"jsonrpc":"2.0","id":"x","nothing":1}"#)
        .await;
    let err = bridge.recv().await;
    assert_eq!(err["error"]["code"], -32600, "{err}");
    assert_eq!(err["id"], "x", "{err}");

    bridge
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#)
        .await;
    let list = bridge.recv().await;
    assert_eq!(list["id"], 2, "{list}");
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "alpha__Bash"), "{list}");

    // A slow call, then a ping: the ping's answer comes first.
    let slow = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "alpha__Echo", "arguments": {"text": "slow", "delayMs": 2500}}});
    bridge.send(&slow.to_string()).await;
    bridge
        .send(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .await;
    let first = bridge.recv().await;
    assert_eq!(first["id"], 4, "the ping waited for the slow call: {first}");
    let second = bridge.recv().await;
    assert_eq!(second["id"], 3, "{second}");
    assert_eq!(second["result"]["content"][0]["text"], "slow", "{second}");

    // The session is open…
    assert_eq!(raw_initialize(&gw, &token).await, "429");
    // …until the end of input ends it.
    assert_eq!(bridge.close().await, Some(0));
    assert_eq!(raw_initialize(&gw, &token).await, "200");
}

/// Without a gateway to talk to, each request gets an error answer, and the bridge
/// stays up for the next one.
#[tokio::test]
async fn gsv_mcp_answers_for_a_gateway_it_cannot_reach() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let empty = TempDir::new("bridge-none");
    let data = empty.path().display().to_string();
    let url = format!("http://127.0.0.1:{port}");
    let mut bridge = Bridge::start(&["--gateway", &url, "--token", "t", "--data", &data]);
    for _ in 0..2 {
        let err = bridge.initialize().await;
        assert_eq!(err["id"], 1, "{err}");
        assert_eq!(err["error"]["code"], -32000, "{err}");
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("unreachable: "), "{err}");
    }
    assert_eq!(bridge.close().await, Some(0));
}

/// TLS is trusted as by every other client: the gateway's certificate pinned by
/// `--pin`, or found in the data directory; a wrong pin is refused, saying so.
#[tokio::test]
async fn gsv_mcp_trusts_a_tls_gateway_like_the_other_clients() {
    let gw = Gateway::start_with(&["--tls-self-signed"]).await;
    assert!(gw.tls);
    let pin = gw.tls_options().pin.expect("the gateway's certificate");
    let token = gw.agent_token();
    let empty = TempDir::new("bridge-tls");
    let data = empty.path().display().to_string();
    let url = gw.url();

    let mut pinned = Bridge::start(&[
        "--gateway",
        &url,
        "--token",
        &token,
        "--data",
        &data,
        "--pin",
        &pin,
    ]);
    let init = pinned.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(pinned.close().await, Some(0));

    // No flags at all: the gateway, the token and the certificate of the data dir.
    let gw_data = gw.data.path().display().to_string();
    let mut local = Bridge::start(&["--data", &gw_data]);
    let init = local.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(local.close().await, Some(0));

    let wrong = "00".repeat(32);
    let mut refused = Bridge::start(&[
        "--gateway",
        &url,
        "--token",
        &token,
        "--data",
        &data,
        "--pin",
        &wrong,
    ]);
    let err = refused.initialize().await;
    assert_eq!(err["error"]["code"], -32000, "{err}");
    let message = err["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("fingerprint mismatch"), "{err}");
    assert_eq!(refused.close().await, Some(0));
}

/// Everything that comes on `stream` within `within` (or until it closes).
async fn read_for(stream: &mut tokio::net::TcpStream, within: Duration) -> String {
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    String::from_utf8_lossy(&seen).into_owned()
}

/// A 2026-07-28 `subscriptions/listen` stream holds what a session holds, so it
/// counts against the same share: past `--mcp-sessions-per-token` the stream is
/// refused with `overloaded` (it could otherwise be opened without end, each one
/// watching the fleet and, in cluster mode, gathering from every replica per change),
/// another token is not held back, and a closed stream frees its place.
#[tokio::test]
async fn listen_streams_count_against_the_tokens_share() {
    let gw = Gateway::start_with(&["--mcp-sessions-per-token", "2"]).await;
    let token = gw.agent_token();
    let other = gw.token(&["agent", "other", "--allow", "*"]);
    let filter = json!({"notifications": {"toolsListChanged": true}});
    let open = |t: String| {
        let filter = filter.clone();
        let gw = &gw;
        async move { send_mcp(gw, &t, "", "subscriptions/listen", filter, false).await }
    };
    const ACK: &str = "notifications/subscriptions/acknowledged";
    let quiet = Duration::from_millis(800);
    let mut first = open(token.clone()).await;
    let mut second = open(token.clone()).await;
    for s in [&mut first, &mut second] {
        let said = read_for(s, quiet).await;
        assert!(said.contains(ACK) && !said.contains("overloaded"), "{said}");
    }
    let mut third = open(token.clone()).await;
    let said = read_for(&mut third, Duration::from_secs(10)).await;
    assert!(
        said.contains("overloaded") && said.contains("mcp_sessions_per_token = 2"),
        "the third stream of one token was not refused: {said}"
    );
    let mut theirs = open(other).await;
    let said = read_for(&mut theirs, quiet).await;
    assert!(
        said.contains(ACK) && !said.contains("overloaded"),
        "another token was held back: {said}"
    );
    drop(first);
    eventually(
        "a closed stream frees its place",
        Duration::from_secs(40),
        || {
            let open = &open;
            let token = token.clone();
            async move {
                let mut s = open(token).await;
                let said = read_for(&mut s, quiet).await;
                (said.contains(ACK) && !said.contains("overloaded")).then_some(s)
            }
        },
    )
    .await;
}

/// The names one session-less (2026-07-28) `tools/list` of `/mcp{query}` gives.
async fn list_names_2026(gw: &Gateway, token: &str, query: &str) -> Vec<String> {
    let (head, body) = request_2026(gw, token, query, "tools/list", None, json!({})).await;
    let json = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(&body);
    let v: serde_json::Value =
        serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {head}\n{body}"));
    v["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {v}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// `gsv token create agent … --mcp-tools`: the token's flat listings name those node
/// tools unless the URL says otherwise (`?tools=`), a tool left out is still called by
/// name, and a set that is not one is refused when the token is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokens_mcp_tools_choose_what_its_listings_name() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("mcp-tools");
    let _alpha = gw.node("alpha", ws.path()).await;
    let token = gw.token(&[
        "agent",
        "picky",
        "--allow",
        "*",
        "--mcp-tools",
        "Echo,git_*",
    ]);
    let names = list_names_2026(&gw, &token, "").await;
    let has = |names: &[String], n: &str| names.iter().any(|x| x == n);
    assert!(
        has(&names, "alpha__Echo") && has(&names, "alpha__git_log"),
        "{names:?}"
    );
    assert!(
        !has(&names, "alpha__Bash") && has(&names, "fleet_tools"),
        "{names:?}"
    );
    // The URL beats the token.
    let names = list_names_2026(&gw, &token, "?tools=reference").await;
    assert!(
        has(&names, "alpha__Bash") && !has(&names, "alpha__Echo"),
        "{names:?}"
    );
    // Not listed, called by name all the same.
    let (_, body) = call_tool_2026(
        &gw,
        &token,
        "alpha__Bash",
        json!({"command": "echo unlisted-ok"}),
    )
    .await;
    assert!(body.contains("unlisted-ok"), "{body}");
    // The set is shown with the token, and a bad one is refused at creation.
    let (code, out, err) = gw.cli(&["token", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mcp-tools=Echo,git_*"), "{out}");
    let (code, _, err) = gw.cli(&[
        "token",
        "create",
        "agent",
        "bad",
        "--allow",
        "*",
        "--mcp-tools",
        "Bash,[x",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--mcp-tools") && err.contains("[x"), "{err}");
}
