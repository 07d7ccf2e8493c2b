//! End to end: proc_list and proc_kill (issue 19), driven through a real gateway and a
//! real `gsv node` on loopback, against processes the test starts itself. proc_kill
//! needs an operator: denied, nothing happens; approved, the process gets the signal
//! asked for; and what it refuses stays refused even with an operator's approval.

mod common;

use common::{next_approval_request, sc, Gateway, Proc, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, ToolResult};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(tool, args, Some(30_000))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A `sleep` the test owns (killed on drop), with an argument no other process has.
fn sleeper(tag: u32) -> (Proc, u32, String) {
    let arg = format!("{}.{tag}", 3000 + std::process::id() % 1000);
    let child = Command::new("sleep")
        .arg(&arg)
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    (Proc(child), pid, format!("sleep {arg}"))
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().expect("id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Calls proc_kill with an operator's approval (asked for and given), so what comes
/// back is the node's own answer.
async fn approved_kill(
    gw: &Gateway,
    agent: &Arc<AgentClient>,
    operator: &AgentClient,
    args: Value,
) -> (Value, ToolResult) {
    let a = agent.clone();
    let sent = args.clone();
    let pending = tokio::spawn(async move { a.call("px__proc_kill", sent, Some(60_000)).await });
    let req = next_approval_request(operator).await;
    assert_eq!(req["tool"], "proc_kill", "{req}");
    let (code, _, err) = gw.cli(&["approvals", "approve", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let r = pending
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{args}: {e}"));
    (req, r)
}

#[tokio::test]
async fn proc_list_finds_a_process_the_test_started() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("px", ws.path()).await;
    let agent = gw.agent().await;
    let (_sleep, pid, command) = sleeper(1);
    let me = whoami();

    let r = call(
        &agent,
        "px__proc_list",
        json!({"nameLike": "SLEEP", "user": me, "limit": 1000}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let found = sc(&r)["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not listed: {}", r.joined_text()))
        .clone();
    assert_eq!(found["ppid"], std::process::id(), "{found}");
    assert_eq!(found["user"], me, "{found}");
    assert_eq!(found["command"], command, "{found}");
    assert_eq!(found["name"], "sleep", "{found}");
    assert!(found["start"].as_str().unwrap().ends_with('Z'), "{found}");
    assert!(found["rssBytes"].as_u64().unwrap() > 0, "{found}");

    // By numeric uid too; another user's processes are left out.
    let uid = found["uid"].as_u64().unwrap();
    let r = call(
        &agent,
        "px__proc_list",
        json!({"user": uid.to_string(), "nameLike": command}),
    )
    .await;
    assert_eq!(sc(&r)["processes"][0]["pid"], pid, "{}", r.joined_text());
    let r = call(
        &agent,
        "px__proc_list",
        json!({"user": (uid + 4242).to_string(), "nameLike": command}),
    )
    .await;
    assert_eq!(sc(&r)["total"], 0, "{}", r.joined_text());
    // Filters filter: a name nobody has lists nothing.
    let r = call(
        &agent,
        "px__proc_list",
        json!({"nameLike": "no-such-process-xyz"}),
    )
    .await;
    assert_eq!(sc(&r)["total"], 0, "{}", r.joined_text());
    // Bounded: limit 1 of many is truncated and says so.
    let r = call(
        &agent,
        "px__proc_list",
        json!({"limit": 1, "sort": "start"}),
    )
    .await;
    assert_eq!(sc(&r)["processes"].as_array().unwrap().len(), 1);
    assert_eq!(sc(&r)["truncated"], true, "{}", r.joined_text());
    // Newest first: the sleep started after the node, so the node is not first.
    let r = call(
        &agent,
        "px__proc_list",
        json!({"limit": 1000, "sort": "start"}),
    )
    .await;
    let starts: Vec<&str> = sc(&r)["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["start"].as_str().unwrap())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] >= w[1]), "{starts:?}");
    // Bad arguments are refused.
    for bad in [
        json!({"sort": "name"}),
        json!({"limit": 5000}),
        json!({"pid": 1}),
    ] {
        let r = agent.call("px__proc_list", bad.clone(), Some(30_000)).await;
        assert!(r.is_err() || r.unwrap().is_error, "{bad}");
    }
}

#[tokio::test]
async fn proc_kill_waits_for_an_operator_and_sends_the_signal_asked_for() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("px", ws.path()).await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);
    let (mut sleep, pid, command) = sleeper(2);

    // The posture is in the listing.
    let tools = agent.list_tools().await.unwrap();
    let kill = tools
        .iter()
        .find(|t| t.node == "px" && t.tool == "proc_kill")
        .expect("proc_kill listed");
    assert!(kill.requires_approval);

    // Denied: refused, and the process lives on.
    let a = agent.clone();
    let pending = tokio::spawn(async move {
        a.call(
            "px__proc_kill",
            json!({"pid": pid, "signal": "KILL"}),
            Some(60_000),
        )
        .await
    });
    let req = next_approval_request(&operator).await;
    assert_eq!(
        (req["node"].as_str(), req["tool"].as_str()),
        (Some("px"), Some("proc_kill"))
    );
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let e = pending.await.unwrap().expect_err("denied");
    assert_eq!(e.remote().map(|s| s.code), Some(ErrorCode::Denied), "{e:?}");
    // No operator at all: the call ends without effect.
    let r = agent
        .call("px__proc_kill", json!({"pid": pid}), Some(2_000))
        .await;
    assert!(r.is_err() || r.unwrap().is_error);
    let _ = tokio::time::timeout(Duration::from_secs(1), next_approval_request(&operator)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alive(pid), "a call nobody approved signalled {pid}");

    // A stale startTime (the pid "reused") is refused even when approved.
    let (_, r) = approved_kill(
        &gw,
        &agent,
        &operator,
        json!({"pid": pid, "signal": "KILL", "startTime": "2001-01-01T00:00:00Z"}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    assert!(r.joined_text().contains("reused"), "{}", r.joined_text());
    assert!(alive(pid));

    // Approved: it dies of the signal asked for (USR1, not the default TERM).
    let listed = call(
        &agent,
        "px__proc_list",
        json!({"nameLike": command, "limit": 1000}),
    )
    .await;
    let start = sc(&listed)["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .map(|p| p["start"].clone())
        .expect("listed");
    let (_, r) = approved_kill(
        &gw,
        &agent,
        &operator,
        json!({"pid": pid, "signal": "USR1", "startTime": start}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["sent"], true);
    assert_eq!(sc(&r)["process"]["command"], command);
    let status = sleep.0.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGUSR1), "{status:?}");

    // Gone: not found.
    let (_, r) = approved_kill(&gw, &agent, &operator, json!({"pid": pid})).await;
    assert!(r.is_error, "{}", r.joined_text());
}

#[tokio::test]
async fn proc_kill_refuses_init_the_node_and_its_parents_even_when_approved() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let node = gw.node("px", ws.path()).await;
    let node_pid = node.0.id();
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);

    // Refused by the schema before any operator is asked: init, process groups, a
    // signal outside the set.
    for bad in [
        json!({"pid": 1}),
        json!({"pid": 0}),
        json!({"pid": -1}),
        json!({"pid": node_pid, "signal": "SEGV"}),
        json!({"pid": node_pid, "signal": 9}),
    ] {
        let e = agent
            .call("px__proc_kill", bad.clone(), Some(10_000))
            .await
            .expect_err("refused");
        assert_eq!(
            e.remote().map(|s| s.code),
            Some(ErrorCode::InvalidArgs),
            "{bad}: {e:?}"
        );
    }

    // The node itself and its parent (this test process), approved or not.
    for (pid, why) in [(node_pid, "this node"), (std::process::id(), "ancestor")] {
        let (req, r) = approved_kill(
            &gw,
            &agent,
            &operator,
            json!({"pid": pid, "signal": "KILL"}),
        )
        .await;
        assert!(
            req["plan"]
                .as_str()
                .unwrap_or_default()
                .contains("would be refused"),
            "{req}"
        );
        assert!(r.is_error, "{}", r.joined_text());
        assert!(r.joined_text().contains(why), "{}", r.joined_text());
    }
    // Still here, and the node still answers.
    let r = call(&agent, "px__proc_list", json!({"limit": 1})).await;
    assert!(!r.is_error, "{}", r.joined_text());
}

#[tokio::test]
async fn a_dry_run_shows_the_process_without_an_operator_and_sends_nothing() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("px", ws.path()).await;
    let agent = gw.agent().await;
    let (_sleep, pid, command) = sleeper(3);

    let r = agent
        .call(
            "px__proc_kill",
            json!({"pid": pid, "signal": "KILL", "dryRun": true}),
            Some(10_000),
        )
        .await
        .unwrap_or_else(|e| panic!("a dry run must not wait for an operator: {e}"));
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["dryRun"], true);
    assert_eq!(sc(&r)["sent"], false);
    assert_eq!(sc(&r)["process"]["pid"], pid);
    assert_eq!(sc(&r)["process"]["command"], command);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alive(pid), "a dry run signalled {pid}");
}

#[tokio::test]
async fn another_tokens_session_processes_are_neither_listed_nor_signalled() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("proc-iso");
    let _node = gw.spawn_node(
        "lab",
        &gw.node_token("lab"),
        ws.path(),
        &["--no-approval", "proc_kill"],
    );
    gw.wait_online("lab").await;
    let alice = gw
        .agent_with(&gw.token(&["agent", "alice", "--allow", "*"]))
        .await;
    let mallory = gw
        .agent_with(&gw.token(&["agent", "mallory", "--allow", "*"]))
        .await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    // Alice's background job, in a session of hers.
    let marker = format!("{}.77", 4000 + std::process::id() % 1000);
    let r = call(
        &alice,
        "lab__Bash",
        json!({"command": format!("exec sleep {marker}"), "background": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let mut mine = Vec::new();
    for _ in 0..100 {
        mine = listed(&alice, &marker).await;
        if !mine.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(mine.len(), 1, "alice's sleep in her proc_list: {mine:?}");
    let pid = mine[0]["pid"].as_u64().expect("pid") as u32;
    // Mallory neither sees it nor can signal it (answered like a missing pid); an
    // operator sees it.
    assert!(
        listed(&mallory, &marker).await.is_empty(),
        "another token's process listed"
    );
    assert_eq!(listed(&operator, &marker).await.len(), 1);
    let r = call(
        &mallory,
        "lab__proc_kill",
        json!({"pid": pid, "signal": "KILL"}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    assert!(
        r.joined_text().contains("no process"),
        "{}",
        r.joined_text()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(alive(pid), "another token's session was signalled");
    // Its owner can.
    let r = call(
        &alice,
        "lab__proc_kill",
        json!({"pid": pid, "signal": "KILL"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
}

/// The processes `agent`'s proc_list shows whose command has `marker`.
async fn listed(agent: &AgentClient, marker: &str) -> Vec<Value> {
    let r = call(agent, "lab__proc_list", json!({"nameLike": marker})).await;
    sc(&r)["processes"].as_array().cloned().unwrap_or_default()
}
