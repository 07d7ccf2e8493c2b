//! End to end: policy by what a tool does (issue 42, "policy by what a tool can do",
//! "one input gate for every session"). `class:` entries in `--allow`, `--deny` and
//! `--confirm` cover every tool of the class whatever its name; `gsv token create`
//! warns when a policy closes one code-running tool and leaves another open; input to
//! a session started by `exec` is judged like input to a Bash session. Real gateway,
//! real node, narrow tokens, the operator played through `gsv approvals`.

mod common;

use common::{decided, eventually, sc, Gateway, TempDir};
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::{ErrorCode, ToolResult};
use serde_json::json;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// `gsv token create agent NAME ARGS...`: (token, stderr).
fn create(gw: &Gateway, name: &str, args: &[&str]) -> (String, String) {
    let out = Command::new(common::gsv_bin())
        .args(["token", "create", "agent", name])
        .args(args)
        .arg("--data")
        .arg(gw.data.path())
        .output()
        .expect("gsv token create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn forbidden(r: Result<ToolResult, ClientError>, what: &str) {
    match r {
        Err(ClientError::Remote(e)) => assert_eq!(e.code, ErrorCode::Forbidden, "{what}: {e:?}"),
        other => panic!("{what} must be forbidden: {other:?}"),
    }
}

async fn tool_names(agent: &AgentClient) -> Vec<String> {
    agent
        .list_tools()
        .await
        .expect("tools")
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// The reported case: the docs' `--deny '*__Bash'` left `exec` open, and
/// `exec ["cat", admin.token]` returned the admin token with no warning. Now
/// `token create` warns about that policy, and `--deny 'class:run'` closes every tool
/// that runs code — Bash, exec, Process, term_send, container_exec, pkg_install —
/// whatever it is called, while the file tools stay usable.
#[tokio::test]
async fn deny_class_run_closes_every_tool_that_runs_code() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("class-ws");
    std::fs::write(ws.path().join("notes.txt"), "hello\n").unwrap();
    let _node = gw.node("box", ws.path()).await;
    let admin_file = gw.data.path().join("admin.token");

    let (_, warned) = create(&gw, "by-name", &["--allow", "*", "--deny", "*__Bash"]);
    assert!(
        warned.contains("exec") && warned.contains("class:run"),
        "no warning about exec: {warned}"
    );
    let (token, quiet) = create(&gw, "by-class", &["--allow", "*", "--deny", "class:run"]);
    assert!(!quiet.contains("class:run"), "{quiet}");
    let agent = gw.agent_with(&token).await;
    let listed = tool_names(&agent).await;
    for t in [
        "Bash",
        "exec",
        "Process",
        "term_send",
        "container_exec",
        "pkg_install",
    ] {
        assert!(
            !listed.contains(&format!("box__{t}")),
            "box__{t} listed: {listed:?}"
        );
    }
    assert!(listed.contains(&"box__Read".to_owned()), "{listed:?}");
    let r = agent
        .call(
            "box__exec",
            json!({"argv": ["cat", admin_file.to_str().unwrap()]}),
            None,
        )
        .await;
    forbidden(r, "exec cat admin.token");
    let r = agent
        .call("box__Bash", json!({"command": "cat admin.token"}), None)
        .await;
    forbidden(r, "Bash");
    let r = agent
        .call("box__Process", json!({"action": "list"}), None)
        .await;
    forbidden(r, "Process");
    let r = agent
        .call("box__Read", json!({"path": "notes.txt"}), None)
        .await
        .expect("Read allowed");
    assert!(!r.is_error, "{}", r.joined_text());
}

/// `--allow 'class:readonly'`: every tool that only looks, on every node, and nothing
/// else. A name that is not a tool is refused like a denied one (the token cannot
/// probe for names); an unknown class is a usage error at `token create`.
#[tokio::test]
async fn allow_class_readonly_gives_the_looking_tools_only() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("class-ro-ws");
    std::fs::write(ws.path().join("notes.txt"), "hello\n").unwrap();
    let _node = gw.node("box", ws.path()).await;
    let (token, _) = create(&gw, "looker", &["--allow", "class:readonly"]);
    let agent = gw.agent_with(&token).await;
    let listed = tool_names(&agent).await;
    for t in [
        "Read",
        "Glob",
        "Grep",
        "fs_stat",
        "git_status",
        "time",
        "Echo",
    ] {
        assert!(
            listed.contains(&format!("box__{t}")),
            "box__{t} missing: {listed:?}"
        );
    }
    for t in [
        "Write",
        "Edit",
        "Bash",
        "exec",
        "proc_kill",
        "fetch_url",
        "git_push",
    ] {
        assert!(
            !listed.contains(&format!("box__{t}")),
            "box__{t} listed: {listed:?}"
        );
    }
    let r = agent
        .call("box__Read", json!({"path": "notes.txt"}), None)
        .await
        .expect("Read");
    assert!(!r.is_error, "{}", r.joined_text());
    let r = agent
        .call("box__Write", json!({"path": "x.txt", "content": "x"}), None)
        .await;
    forbidden(r, "Write");
    assert!(!ws.path().join("x.txt").exists());
    for name in ["box__Nope", "ghost__Read"] {
        let r = agent.call(name, json!({}), None).await;
        forbidden(r, name);
    }
    let out = Command::new(common::gsv_bin())
        .args(["token", "create", "agent", "typo", "--deny", "class:exe"])
        .arg("--data")
        .arg(gw.data.path())
        .output()
        .expect("gsv token create");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown class") && err.contains("run"),
        "{err}"
    );
}

/// The reported case: `exec` under `--confirm`, Bash not allowed. The operator
/// approved an interactive `sh` started by exec, and input to it then ran code with
/// no approval, because the input gate looked only at Bash. Now input to any session
/// is judged by the node's code-running tools: exec needs approval, so does what is
/// typed into its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_to_an_exec_session_needs_the_approval_exec_needs() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("class-gate-ws");
    let _node = gw.node("lab", ws.path()).await;
    let (token, _) = create(
        &gw,
        "typist",
        &[
            "--allow",
            "lab__*",
            "--deny",
            "lab__Bash",
            "--confirm",
            "lab__exec",
        ],
    );
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;
    let (_, started) = decided(
        &gw,
        &agent,
        &operator,
        "lab__exec",
        json!({"argv": ["sh"], "background": true}),
        "approve",
    )
    .await;
    let started = started.expect("approved exec runs");
    let id = sc(&started)["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("sessionId in {started:?}"))
        .to_owned();
    let (req, typed) = decided(
        &gw,
        &agent,
        &operator,
        "lab__Process",
        json!({"action": "submit", "sessionId": id, "data": "touch TYPED"}),
        "deny",
    )
    .await;
    assert!(
        req["summary"]
            .as_str()
            .unwrap_or("")
            .contains("touch TYPED"),
        "{req}"
    );
    assert!(
        req["reason"].as_str().unwrap_or("").contains("lab__exec"),
        "{req}"
    );
    assert!(typed.is_err(), "denied input was sent: {typed:?}");
    let (_, r) = decided(
        &gw,
        &agent,
        &operator,
        "lab__Process",
        json!({"action": "submit", "sessionId": id, "data": "touch APPROVED"}),
        "approve",
    )
    .await;
    assert!(!r.expect("approved input").is_error);
    eventually("approved input ran", Duration::from_secs(10), || async {
        ws.path().join("APPROVED").exists().then_some(())
    })
    .await;
    assert!(!ws.path().join("TYPED").exists(), "denied input ran");
}
