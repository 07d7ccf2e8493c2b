//! End to end: input to a session is judged like a Bash command (issue 15, item 3).
//! Approving an interactive program must not approve what is typed into it later: the
//! token's `confirm` on Bash covers Process `write`/`submit`/`send-keys` at the
//! gateway, and a node in `--approve-shell` mode asks an operator for input unless the
//! text itself matches a pattern, and never auto-approves a `pty` or `background` run.
//! Real gateway, real node, the operator played through `gsv approvals`.

mod common;

use common::{decided, eventually, sc, Gateway, TempDir};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_on_bash_covers_what_is_typed_into_a_session() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("gate-ws");
    let _node = gw.node("lab", ws.path()).await;
    let token = gw.token(&[
        "agent",
        "typist",
        "--allow",
        "lab__*",
        "--confirm",
        "lab__Bash",
    ]);
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;

    // The operator approves what looks like a harmless interactive program.
    let (_, started) = decided(
        &gw,
        &agent,
        &operator,
        "lab__Bash",
        json!({"command": "sh", "background": true}),
        "approve",
    )
    .await;
    let started = started.expect("approved Bash runs");
    let id = sc(&started)["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_owned();

    // Typing into it asks again, showing the exact text; denied, nothing runs.
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
        req["reason"].as_str().unwrap_or("").contains("lab__Bash"),
        "{req}"
    );
    assert!(typed.is_err(), "denied input was sent: {typed:?}");
    for keys in [json!(["C-c"])] {
        let (req, r) = decided(
            &gw,
            &agent,
            &operator,
            "lab__Process",
            json!({"action": "send-keys", "sessionId": id, "keys": keys}),
            "deny",
        )
        .await;
        assert!(
            req["summary"].as_str().unwrap_or("").contains("C-c"),
            "{req}"
        );
        assert!(r.is_err());
    }
    // Reading the session needs no approval.
    let p = agent
        .call(
            "lab__Process",
            json!({"action": "poll", "sessionId": id}),
            None,
        )
        .await
        .expect("poll runs at once");
    assert_eq!(sc(&p)["status"], "running");
    // Approved input runs.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approve_shell_node_asks_for_input_and_interactive_runs() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("gate-ws");
    let _node = gw.spawn_node(
        "guarded",
        &gw.node_token("guarded"),
        ws.path(),
        &["--approve-shell", "echo [a-z ]*"],
    );
    gw.wait_online("guarded").await;
    // A wide-open token: only the node's guard stands between it and the shell.
    let agent = Arc::new(gw.agent().await);
    let operator = gw.agent_with(&gw.admin_token()).await;

    // A matching command runs at once in the foreground…
    let r = agent
        .call("guarded__Bash", json!({"command": "echo plain"}), None)
        .await
        .expect("auto-approved");
    assert!(r.joined_text().contains("plain"));
    // …but not on a terminal or in the background.
    let (req, r) = decided(
        &gw,
        &agent,
        &operator,
        "guarded__Bash",
        json!({"command": "echo paged", "pty": true}),
        "deny",
    )
    .await;
    assert!(
        req["reason"].as_str().unwrap_or("").contains("pty"),
        "{req}"
    );
    assert!(r.is_err());
    let (_, r) = decided(
        &gw,
        &agent,
        &operator,
        "guarded__Bash",
        json!({"command": "sh", "background": true}),
        "approve",
    )
    .await;
    let id = sc(&r.expect("approved"))["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();

    // Input that matches a pattern is typed at once; other input asks an operator.
    let r = agent
        .call(
            "guarded__Process",
            json!({"action": "submit", "sessionId": id, "data": "echo fine"}),
            None,
        )
        .await
        .expect("matching input runs");
    assert!(!r.is_error, "{}", r.joined_text());
    let (req, r) = decided(
        &gw,
        &agent,
        &operator,
        "guarded__Process",
        json!({"action": "submit", "sessionId": id, "data": "touch SNUCK"}),
        "deny",
    )
    .await;
    assert!(
        req["reason"].as_str().unwrap_or("").contains("node guard"),
        "{req}"
    );
    assert!(r.is_err());
    let (_, r) = decided(
        &gw,
        &agent,
        &operator,
        "guarded__Process",
        json!({"action": "send-keys", "sessionId": id, "keys": ["C-c"]}),
        "deny",
    )
    .await;
    assert!(r.is_err());
    // Blocklisted input is refused outright, approval or not.
    let r = agent
        .call(
            "guarded__Process",
            json!({"action": "submit", "sessionId": id, "data": "rm -rf /"}),
            None,
        )
        .await;
    let e = r.expect_err("blocklisted input refused");
    assert_eq!(
        e.remote().map(|r| r.code),
        Some(gsv_protocol::ErrorCode::Denied),
        "{e:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!ws.path().join("SNUCK").exists(), "unapproved input ran");
}
