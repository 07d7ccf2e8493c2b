//! End to end: `container_list`, `container_logs` and `container_exec` against a
//! recorded fake `docker` (tests/fixtures/fake-docker) first on the node's PATH, and
//! against the real docker when a daemon answers; `container_exec`'s approval
//! posture (no operator → no `docker exec`; denied → none; approved → exactly the
//! argv asked for), through a real gateway and real `gsv node` processes on loopback.

mod common;

use common::{next_approval_request, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, ToolResult};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(tool, args.clone(), Some(30_000))
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

fn fake_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-docker")
}

/// The node's PATH: the fake first.
fn fake_path() -> String {
    format!(
        "{}:{}",
        fake_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The calls the fake recorded, one line each (`[arg][arg]…`).
fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn execs(log: &Path) -> Vec<String> {
    calls(log)
        .into_iter()
        .filter(|c| c.starts_with("[exec]"))
        .collect()
}

/// Starts node `id` with the fake docker first on its PATH, logging to `log`.
fn fake_node(gw: &Gateway, id: &str, ws: &Path, log: &Path, extra: &[&str]) -> common::Proc {
    let path = fake_path();
    gw.spawn_node_with_env(
        id,
        &gw.node_token(id),
        ws,
        extra,
        &[("PATH", Path::new(&path)), ("FAKE_DOCKER_LOG", log)],
        &[],
    )
}

#[tokio::test]
async fn list_and_logs_read_the_runtime_and_refuse_options() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let logs = TempDir::new("log");
    let log = logs.path().join("docker.log");
    let _node = fake_node(&gw, "ct", ws.path(), &log, &[]);
    gw.wait_online("ct").await;
    let agent = gw.agent().await;

    // The posture is in the listing: only exec needs an operator.
    let tools = agent.list_tools().await.unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t.node == "ct" && t.tool == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    assert!(!tool("container_list").requires_approval);
    assert!(!tool("container_logs").requires_approval);
    assert!(tool("container_exec").requires_approval);
    // Which runtimes the node has is reported in hostBinStatus (the fake docker is
    // on its PATH).
    let nodes = agent.list_nodes().await.unwrap();
    let bins = &nodes
        .iter()
        .find(|n| n.id == "ct")
        .unwrap()
        .runtime
        .host_bin_status;
    assert_eq!(bins.get("docker"), Some(&true), "{bins:?}");
    assert!(bins.contains_key("podman"), "{bins:?}");

    let r = call(&agent, "ct__container_list", json!({})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["runtime"], "docker");
    let list = sc(&r)["containers"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{}", r.joined_text());
    assert_eq!(
        list[0],
        json!({
            "id": "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b",
            "name": "web",
            "image": "nginx:1.25",
            "state": "running",
            "status": "Up 2 hours",
            "created": "2024-05-01 10:00:00 +0000 UTC",
            "ports": "0.0.0.0:8080->80/tcp"
        })
    );
    let r = call(&agent, "ct__container_list", json!({"all": true})).await;
    let list = sc(&r)["containers"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(
        (list[1]["name"].as_str(), list[1]["state"].as_str()),
        (Some("db"), Some("exited"))
    );

    // podman when asked for (its own JSON shape, read into the same record).
    let r = call(&agent, "ct__container_list", json!({"runtime": "podman"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["runtime"], "podman");
    assert_eq!(
        sc(&r)["containers"][0],
        json!({
            "id": "7d1c0a5b3e2f4a6b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b",
            "name": "pweb",
            "image": "docker.io/library/nginx:1.25",
            "state": "running",
            "status": "Up 2 hours",
            "created": "2024-05-01 10:00:00 +0000 UTC",
            "ports": "0.0.0.0:8080->80/tcp"
        })
    );

    let r = call(
        &agent,
        "ct__container_logs",
        json!({"container": "web", "tail": 2, "since": "10m", "timestamps": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["stdout"], "line 4\nline 5\n");
    assert_eq!(sc(&r)["stderr"], "warning: on stderr\n");
    let r = call(&agent, "ct__container_logs", json!({"container": "nope"})).await;
    assert!(r.is_error);
    assert!(
        r.joined_text().contains("No such container: nope"),
        "{}",
        r.joined_text()
    );

    // Options never get through as names: refused before docker runs.
    let before = calls(&log).len();
    for (args, needle) in [
        (
            json!({"container": "--privileged"}),
            "must not start with '-'",
        ),
        (
            json!({"container": "web", "since": "--follow"}),
            "must not start with '-'",
        ),
        (json!({"container": "web;id"}), "[A-Za-z0-9_.-]"),
        (json!({"container": "web", "runtime": "lxc"}), "\"runtime\""),
        (
            json!({"container": "web", "follow": true}),
            "unknown argument",
        ),
    ] {
        refused(&agent, "ct__container_logs", args, needle).await;
    }
    assert_eq!(calls(&log).len(), before, "a refused call ran docker");
    assert_eq!(
        calls(&log),
        [
            "[ps][--no-trunc][--format][{{json .}}]",
            "[ps][--no-trunc][--all][--format][{{json .}}]",
            "podman[ps][--no-trunc][--format][{{json .}}]",
            "[logs][--tail][2][--since][10m][--timestamps][--][web]",
            "[logs][--tail][200][--][nope]",
        ]
    );
}

#[tokio::test]
async fn container_exec_runs_only_what_an_operator_approved() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let logs = TempDir::new("log");
    let log = logs.path().join("docker.log");
    let waived_log = logs.path().join("waived.log");
    let _gated = fake_node(&gw, "cx", ws.path(), &log, &[]);
    let _waived = fake_node(
        &gw,
        "cw",
        ws.path(),
        &waived_log,
        &["--no-approval", "container_exec"],
    );
    gw.wait_online("cx").await;
    gw.wait_online("cw").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);
    let args = json!({"container": "web", "argv": ["ls", "-l", "/srv"], "user": "1000"});

    // No operator: the call ends without effect; docker exec never ran.
    let e = agent
        .call("cx__container_exec", args.clone(), Some(2_000))
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
    assert_eq!(req["tool"], "container_exec");
    assert_eq!(
        req["plan"], "would run: docker exec --user 1000 -- web ls -l /srv",
        "{req}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(execs(&log).is_empty(), "{:?}", calls(&log));

    // Denied: refused, nothing ran.
    let a = agent.clone();
    let sent = args.clone();
    let pending =
        tokio::spawn(async move { a.call("cx__container_exec", sent, Some(60_000)).await });
    let id = next_approval_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    let e = pending.await.unwrap().expect_err("denied");
    assert_eq!(e.remote().map(|s| s.code), Some(ErrorCode::Denied), "{e:?}");
    assert!(execs(&log).is_empty(), "{:?}", calls(&log));

    // Approved: exactly the argv asked for, once.
    let a = agent.clone();
    let sent = args.clone();
    let pending =
        tokio::spawn(async move { a.call("cx__container_exec", sent, Some(60_000)).await });
    let id = next_approval_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(execs(&log).is_empty());
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let r = pending.await.unwrap().expect("approved call runs");
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["stdout"], "in web as 1000: ls -l /srv\n");
    assert_eq!(sc(&r)["exitCode"], 0);
    assert_eq!(sc(&r)["runtime"], "docker");
    assert_eq!(execs(&log), ["[exec][--user][1000][--][web][ls][-l][/srv]"]);

    // Waived by the node's owner: runs at once; the command's exit code comes back.
    let r = call(
        &agent,
        "cw__container_exec",
        json!({"container": "web", "argv": ["fail", "--privileged"], "env": {"A": "b c"}, "workdir": "/"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["exitCode"], 3);
    assert_eq!(sc(&r)["stderr"], "failing as asked\n");
    assert_eq!(
        execs(&waived_log),
        ["[exec][--workdir][/][--env][A=b c][--][web][fail][--privileged]"]
    );
    // Past its timeout the command is stopped: a tool error with what it printed.
    let started = std::time::Instant::now();
    let r = call(
        &agent,
        "cw__container_exec",
        json!({"container": "web", "argv": ["sleep", "30"], "timeout": 500}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    assert!(
        r.joined_text().contains("did not finish within 500 ms"),
        "{}",
        r.joined_text()
    );
    assert_eq!(sc(&r)["timedOut"], true);
    assert_eq!(sc(&r)["stdout"], "in web as root: sleep 30\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Bad input is refused with a clear error, and docker never runs.
    for (bad, needle) in [
        (
            json!({"container": "--privileged", "argv": ["sh"]}),
            "must not start with '-'",
        ),
        (
            json!({"container": "web", "argv": []}),
            "\"argv\" must be an array",
        ),
        (
            json!({"container": "web", "argv": "ls -l"}),
            "\"argv\" must be an array",
        ),
        (
            json!({"container": "web", "argv": [""]}),
            "\"argv\" must be an array",
        ),
        (
            json!({"container": "web", "argv": ["id"], "user": "-0"}),
            "must not start with '-'",
        ),
        (
            json!({"container": "web", "argv": ["id"], "env": {"LD_PRELOAD=x": "y"}}),
            "\"env\"",
        ),
        (
            json!({"container": "web", "argv": ["id"], "privileged": true}),
            "unknown argument",
        ),
    ] {
        refused(&agent, "cw__container_exec", bad, needle).await;
    }
    assert_eq!(execs(&waived_log).len(), 2, "{:?}", calls(&waived_log));
    assert_eq!(calls(&waived_log).len(), 2);
}

#[tokio::test]
async fn the_real_docker_where_a_daemon_answers() {
    let info = std::process::Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(std::process::Stdio::null())
        .output();
    if !info.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no docker daemon answers `docker info` here");
        return;
    }
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("real", ws.path()).await;
    let agent = gw.agent().await;
    let r = call(&agent, "real__container_list", json!({"all": true})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["runtime"], "docker");
    assert!(sc(&r)["containers"].is_array());
    let r = call(
        &agent,
        "real__container_logs",
        json!({"container": "gsv-no-such-container-xyz"}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
}
