//! End to end: `pkg_search` and `pkg_install` against recorded fakes of `apt-get` and
//! `apt-cache` (tests/fixtures/fake-apt) first on the node's PATH, and the real apt's
//! dry run where `apt-get -s` works (a real install only with
//! `GSV_TEST_REAL_PKG_INSTALL=1`); `pkg_install`'s approval posture (no operator →
//! nothing installed; denied → nothing; approved → exactly the argv; `dryRun` → the
//! plan, no approval, no install; `--no-approval pkg_install` runs at once), through
//! a real gateway and real `gsv node` processes on loopback.

mod common;

use common::{next_approval_request, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, EventName, ToolResult};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(tool, args.clone(), Some(60_000))
        .await
        .unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
}

/// Calls `tool` with bad `args`: refused, either by the node with a tool error that
/// says `needle`, or already by the gateway's schema check (`invalid_args`).
async fn refused(agent: &AgentClient, tool: &str, args: Value, needle: &str) {
    match agent.call(tool, args.clone(), Some(30_000)).await {
        Ok(r) => {
            assert!(r.is_error, "{tool} {args}: {}", r.joined_text());
            assert!(
                r.joined_text().contains(needle),
                "{tool} {args}: {}",
                r.joined_text()
            );
        }
        Err(e) => assert_eq!(
            e.remote().map(|s| s.code),
            Some(ErrorCode::InvalidArgs),
            "{tool} {args}: {e:?}"
        ),
    }
}

/// Fails if an approval request opens on `client` within `ms`.
async fn no_request(client: &AgentClient, ms: u64) {
    let quiet = tokio::time::Instant::now() + Duration::from_millis(ms);
    while tokio::time::Instant::now() < quiet {
        if let Some(e) = client.next_event(Duration::from_millis(50)).await {
            assert_ne!(e.event, EventName::ApprovalRequested, "{:?}", e.payload);
        }
    }
}

fn fake_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-apt")
}

/// The calls the fakes recorded, one line each (`[arg][arg]…`).
fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The recorded calls that install for real (an `install` without `-s`).
fn installs(log: &Path) -> Vec<String> {
    calls(log)
        .into_iter()
        .filter(|c| c.contains("[install]") && !c.contains("[-s]"))
        .collect()
}

/// Starts node `id` with the fake apt first on its PATH, logging to `log`.
fn fake_node(gw: &Gateway, id: &str, ws: &Path, log: &Path, extra: &[&str]) -> common::Proc {
    let path = format!(
        "{}:{}",
        fake_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    gw.spawn_node_with_env(
        id,
        &gw.node_token(id),
        ws,
        extra,
        &[("PATH", Path::new(&path)), ("FAKE_APT_LOG", log)],
        &[],
    )
}

fn names(r: &ToolResult, key: &str) -> Vec<String> {
    sc(r)[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key}: {}", r.joined_text()))
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[tokio::test]
async fn search_and_dry_run_change_nothing_and_need_nobody() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let logs = TempDir::new("log");
    let log = logs.path().join("apt.log");
    let _node = fake_node(&gw, "pk", ws.path(), &log, &[]);
    gw.wait_online("pk").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = gw.agent().await;

    let tools = agent.list_tools().await.unwrap();
    let gated = |name: &str| {
        tools
            .iter()
            .find(|t| t.node == "pk" && t.tool == name)
            .map(|t| t.requires_approval)
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    assert!(!gated("pkg_search"));
    assert!(gated("pkg_install"));

    let r = call(&agent, "pk__pkg_search", json!({"query": "jq"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["manager"], "apt");
    assert_eq!(names(&r, "packages"), ["jq", "jqp", "libjq-dev", "libjq1"]);
    assert_eq!(
        sc(&r)["packages"][0]["summary"],
        "lightweight and flexible command-line JSON processor"
    );
    let r = call(&agent, "pk__pkg_search", json!({"query": "jq", "limit": 2})).await;
    assert_eq!(names(&r, "packages"), ["jq", "jqp"]);
    assert_eq!(
        (sc(&r)["total"].as_u64(), sc(&r)["truncated"].as_bool()),
        (Some(4), Some(true))
    );

    // A dry run: the exact plan, at once, with no approval and no install.
    let r = call(
        &agent,
        "pk__pkg_install",
        json!({"packages": ["cowsay", "sl", "tree"], "dryRun": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["dryRun"], true);
    assert_eq!(
        names(&r, "install"),
        ["libtext-charwidth-perl", "cowsay", "sl", "tree"]
    );
    assert_eq!(sc(&r)["install"][1]["version"], "3.03+dfsg2-8");
    assert_eq!(sc(&r)["remove"], json!([]));
    assert_eq!(
        sc(&r)["summary"],
        "0 upgraded, 4 newly installed, 0 to remove and 131 not upgraded."
    );
    assert!(
        r.joined_text().contains("nothing changed"),
        "{}",
        r.joined_text()
    );
    no_request(&operator, 300).await;
    assert!(installs(&log).is_empty(), "{:?}", calls(&log));

    // Failures and bad input: clear errors, nothing installed.
    let r = call(
        &agent,
        "pk__pkg_install",
        json!({"packages": ["nosuchpkg"], "dryRun": true}),
    )
    .await;
    assert!(r.is_error);
    assert!(
        r.joined_text()
            .contains("E: Unable to locate package nosuchpkg"),
        "{}",
        r.joined_text()
    );
    let before = calls(&log).len();
    for (bad, needle) in [
        (
            json!({"packages": ["-o", "APT::Get::AllowUnauthenticated=1"], "dryRun": true}),
            "must not start with '-'",
        ),
        (
            json!({"packages": ["-oAPT::Get::AllowUnauthenticated=1"], "dryRun": true}),
            "must not start with '-'",
        ),
        (
            json!({"packages": ["./evil.deb"], "dryRun": true}),
            "is not valid for apt",
        ),
        (
            json!({"packages": ["sl=1.0"], "dryRun": true}),
            "is not valid for apt",
        ),
        (
            json!({"packages": [], "dryRun": true}),
            "\"packages\" must be",
        ),
    ] {
        refused(&agent, "pk__pkg_install", bad, needle).await;
    }
    refused(
        &agent,
        "pk__pkg_search",
        json!({"query": "-o"}),
        "must not start with '-'",
    )
    .await;
    refused(
        &agent,
        "pk__pkg_search",
        json!({"query": "a b"}),
        "\"query\" must be",
    )
    .await;
    assert_eq!(calls(&log).len(), before, "{:?}", calls(&log));
    assert!(installs(&log).is_empty(), "{:?}", calls(&log));
}

#[tokio::test]
async fn pkg_install_installs_only_what_an_operator_approved() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let logs = TempDir::new("log");
    let log = logs.path().join("apt.log");
    let waived_log = logs.path().join("waived.log");
    let _gated = fake_node(&gw, "pi", ws.path(), &log, &[]);
    let _waived = fake_node(
        &gw,
        "pw",
        ws.path(),
        &waived_log,
        &["--no-approval", "pkg_install"],
    );
    gw.wait_online("pi").await;
    gw.wait_online("pw").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);
    let args = json!({"packages": ["cowsay", "sl", "tree"]});

    // No operator: the call ends; the operator's request shows the plan; nothing
    // was installed (only the simulation ran).
    let e = agent
        .call("pi__pkg_install", args.clone(), Some(2_000))
        .await
        .expect_err("no operator approved");
    assert!(
        matches!(
            e.remote().map(|s| s.code),
            Some(ErrorCode::Timeout | ErrorCode::Denied)
        ),
        "{e:?}"
    );
    let req = next_approval_request(&operator).await;
    assert_eq!(req["tool"], "pkg_install");
    let plan = req["plan"]
        .as_str()
        .unwrap_or_else(|| panic!("no plan: {req}"));
    assert!(
        plan.contains("would install or upgrade 4 package(s): libtext-charwidth-perl 0.04-11, cowsay 3.03+dfsg2-8, sl 5.02-1+b1, tree 2.1.0-1"),
        "{plan}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(installs(&log).is_empty(), "{:?}", calls(&log));
    assert!(!calls(&log).is_empty(), "the plan comes from apt-get -s");

    // Denied: nothing installed.
    let a = agent.clone();
    let sent = args.clone();
    let pending = tokio::spawn(async move { a.call("pi__pkg_install", sent, Some(60_000)).await });
    let id = next_approval_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    let e = pending.await.unwrap().expect_err("denied");
    assert_eq!(e.remote().map(|s| s.code), Some(ErrorCode::Denied), "{e:?}");
    assert!(installs(&log).is_empty(), "{:?}", calls(&log));

    // Approved: exactly this install, once, non-interactive.
    let a = agent.clone();
    let sent = args.clone();
    let pending = tokio::spawn(async move { a.call("pi__pkg_install", sent, Some(60_000)).await });
    let id = next_approval_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let r = pending.await.unwrap().expect("approved call runs");
    if is_root() {
        assert!(!r.is_error, "{}", r.joined_text());
        assert_eq!(sc(&r)["exitCode"], 0);
        assert_eq!(sc(&r)["dryRun"], false);
        assert_eq!(names(&r, "install").len(), 4);
        let out = sc(&r)["output"].as_str().unwrap();
        assert!(out.contains("DEBIAN_FRONTEND=noninteractive"), "{out}");
        assert!(out.contains("Setting up tree (1.0-1)"), "{out}");
        assert_eq!(
            installs(&log),
            ["[-q][install][-y][--no-install-recommends][--][cowsay][sl][tree]"]
        );
    } else {
        // Not root: sudo -n, or a clear refusal.
        assert!(
            !r.is_error || r.joined_text().contains("needs root"),
            "{}",
            r.joined_text()
        );
    }

    // Waived by the node's owner: runs at once, no request.
    let r = call(&agent, "pw__pkg_install", json!({"packages": ["sl"]})).await;
    if is_root() {
        assert!(!r.is_error, "{}", r.joined_text());
        assert_eq!(
            installs(&waived_log),
            ["[-q][install][-y][--no-install-recommends][--][sl]"]
        );
    }
    no_request(&operator, 300).await;
    // Bad input on the waived node: refused, nothing runs at all.
    let before = calls(&waived_log).len();
    refused(
        &agent,
        "pw__pkg_install",
        json!({"packages": ["-o", "APT::Get::AllowUnauthenticated=1"]}),
        "must not start with '-'",
    )
    .await;
    refused(
        &agent,
        "pw__pkg_install",
        json!({"packages": ["/tmp/x.deb"]}),
        "is not valid for apt",
    )
    .await;
    assert_eq!(calls(&waived_log).len(), before);
}

/// Whether the real apt-get can simulate here (package lists present).
fn real_apt_simulates() -> bool {
    std::process::Command::new("apt-get")
        .args([
            "-s",
            "-q",
            "install",
            "-y",
            "--no-install-recommends",
            "--",
            "sl",
        ])
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("sl"))
}

#[tokio::test]
async fn the_real_apt_dry_run_and_opt_in_install() {
    if !real_apt_simulates() {
        eprintln!("skipped: the real `apt-get -s install sl` does not work here");
        return;
    }
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let real_install = std::env::var("GSV_TEST_REAL_PKG_INSTALL").as_deref() == Ok("1");
    let extra: &[&str] = if real_install {
        &["--no-approval", "pkg_install"]
    } else {
        &[]
    };
    let _node = gw.spawn_node("ra", &gw.node_token("ra"), ws.path(), extra);
    gw.wait_online("ra").await;
    let agent = gw.agent().await;
    let r = call(
        &agent,
        "ra__pkg_install",
        json!({"packages": ["sl"], "dryRun": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["manager"], "apt");
    let already = sc(&r)["install"].as_array().is_some_and(Vec::is_empty);
    if !already {
        assert!(
            names(&r, "install").contains(&"sl".to_owned()),
            "{}",
            r.joined_text()
        );
    }
    let r = call(&agent, "ra__pkg_search", json!({"query": "sl", "limit": 5})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    // The exact name first, whatever apt-cache's order.
    assert_eq!(names(&r, "packages")[0], "sl", "{}", r.joined_text());
    if !real_install {
        eprintln!("real install skipped: set GSV_TEST_REAL_PKG_INSTALL=1 to install `sl` for real");
        return;
    }
    let r = agent
        .call(
            "ra__pkg_install",
            json!({"packages": ["sl"]}),
            Some(600_000),
        )
        .await
        .expect("install answers");
    assert!(!r.is_error, "{}", r.joined_text());
    let status = std::process::Command::new("dpkg")
        .args(["-s", "sl"])
        .output()
        .expect("dpkg");
    assert!(
        status.status.success(),
        "sl is not installed after pkg_install"
    );
}
