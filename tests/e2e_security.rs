//! End to end: policies, approvals, revocation, rate limiting and the audit log, each
//! against a real gateway and node on loopback.

mod common;

use common::{eventually, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, EventName};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Waits for the next `approval.requested` event on `client`; returns the request.
async fn next_request(client: &AgentClient) -> Value {
    eventually("approval.requested", Duration::from_secs(10), || async {
        let e = client.next_event(Duration::from_millis(100)).await?;
        (e.event == EventName::ApprovalRequested).then_some(e.payload)
    })
    .await
}

async fn setup(
    extra: &[&str],
) -> (
    Gateway,
    TempDir,
    common::Proc,
    Arc<AgentClient>,
    AgentClient,
) {
    let gw = Gateway::start_with(extra).await;
    let ws = TempDir::new("ws");
    let node = gw.node("box", ws.path()).await;
    let token = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "box__*",
        "--confirm",
        "box__Echo",
    ]);
    let agent = Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;
    (gw, ws, node, agent, operator)
}

#[tokio::test]
async fn confirm_then_approve_runs_the_call() {
    let (gw, _ws, _node, agent, operator) = setup(&[]).await;
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call("box__Echo", json!({"text": "approved!"}), Some(60_000))
            .await
    });
    let req = next_request(&operator).await;
    assert_eq!(req["node"], "box");
    assert_eq!(req["tool"], "Echo");
    assert_eq!(req["agent"], "careful");
    assert!(req["summary"].as_str().unwrap().starts_with("box__Echo"));
    let id = req["id"].as_str().unwrap().to_owned();
    // The CLI lists and approves it.
    let (code, out, err) = gw.cli(&["approvals", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id), "{out}");
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let r = call.await.unwrap().unwrap();
    assert_eq!(r.joined_text(), "approved!");
    // Deciding it a second time is refused.
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_ne!(code, 0);
    assert!(err.contains("already decided"), "{err}");
    // Calls that need no confirmation run at once.
    let r = agent
        .call("box__Read", json!({"path": "."}), None)
        .await
        .unwrap();
    assert!(
        r.is_error,
        "reading a directory is a tool error, but it ran"
    );
}

#[tokio::test]
async fn confirm_then_deny_fails_with_denied() {
    let (gw, _ws, _node, agent, operator) = setup(&[]).await;
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call("box__Echo", json!({"text": "no"}), Some(60_000))
            .await
    });
    let id = next_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = common::http_request(
        &gw.addr,
        "POST",
        &format!("/v1/approvals/{id}"),
        Some(&gw.admin_token()),
        Some(r#"{"decision":"deny"}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Denied);
    // The caller heard the resolution.
    eventually("approval.resolved", Duration::from_secs(5), || async {
        let e = agent.next_event(Duration::from_millis(100)).await?;
        (e.event == EventName::ApprovalResolved && e.payload["state"] == "denied").then_some(())
    })
    .await;
    // Agents cannot decide approvals.
    let (status, _) = common::http_request(
        &gw.addr,
        "POST",
        &format!("/v1/approvals/{id}"),
        Some(&gw.agent_token()),
        Some(r#"{"decision":"approve"}"#),
    )
    .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn approving_call_a_does_not_release_call_b() {
    let (gw, _ws, _node, agent, operator) = setup(&[]).await;
    let (a1, a2) = (agent.clone(), agent.clone());
    let call_a = tokio::spawn(async move {
        a1.call("box__Echo", json!({"text": "A"}), Some(60_000))
            .await
    });
    let req_a = next_request(&operator).await;
    let call_b = tokio::spawn(async move {
        a2.call("box__Echo", json!({"text": "B"}), Some(60_000))
            .await
    });
    let req_b = next_request(&operator).await;
    assert_ne!(req_a["id"], req_b["id"]);
    assert_ne!(
        req_a["argsHash"], req_b["argsHash"],
        "each request is bound to its own arguments"
    );
    let (code, _, err) = gw.cli(&["approvals", "approve", req_a["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(call_a.await.unwrap().unwrap().joined_text(), "A");
    // B is still waiting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!call_b.is_finished());
    let (code, _, _) = gw.cli(&["approvals", "deny", req_b["id"].as_str().unwrap()]);
    assert_eq!(code, 0);
    let e = call_b.await.unwrap().unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Denied);
}

#[tokio::test]
async fn an_expired_approval_cannot_be_approved() {
    let (gw, _ws, _node, agent, operator) = setup(&["--approval-ttl-ms", "500"]).await;
    let started = Instant::now();
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call("box__Echo", json!({"text": "late"}), Some(60_000))
            .await
    });
    let id = next_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Timeout);
    assert!(started.elapsed() < Duration::from_secs(10));
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_ne!(code, 0, "approving an expired request must fail");
    assert!(
        err.contains("expired") || err.contains("already decided"),
        "{err}"
    );
}

#[tokio::test]
async fn a_revoked_token_is_disconnected_at_once() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("rv", ws.path()).await;
    let token = gw.token(&["agent", "doomed", "--allow", "*"]);
    let agent = gw.agent_with(&token).await;
    agent
        .call("rv__Echo", json!({"text": "ok"}), None)
        .await
        .unwrap();
    let (_, out, _) = gw.cli(&["token", "list", "--json"]);
    let tokens: Value = serde_json::from_str(&out).unwrap();
    let id = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["subject"] == "doomed")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = gw.cli(&["token", "revoke", &id]);
    assert_eq!(code, 0, "{err}");
    let started = Instant::now();
    eventually(
        "the revoked connection to close",
        Duration::from_secs(10),
        || async {
            match agent.call("rv__Echo", json!({"text": "x"}), None).await {
                Err(gsv_client::ClientError::Closed) => Some(()),
                _ => None,
            }
        },
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    // And it cannot connect again.
    let e = AgentClient::connect(&gw.url(), &token).await.err().unwrap();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Unauthorized);
}

#[tokio::test]
async fn brute_force_is_rate_limited() {
    let gw = Gateway::start().await;
    let mut limited = 0;
    for i in 0..30 {
        let bad = format!("gsv_agent_0123456789ab_guess{i}");
        match AgentClient::connect(&gw.url(), &bad).await {
            Err(e) => match e.remote().map(|r| r.code) {
                Some(ErrorCode::RateLimited) => limited += 1,
                Some(ErrorCode::Unauthorized) => {}
                other => panic!("unexpected {other:?}"),
            },
            Ok(_) => panic!("a guessed token connected"),
        }
    }
    assert!(
        limited >= 5,
        "only {limited} of 30 guesses were rate-limited"
    );
    // The HTTP API shares the limit.
    let (status, _) =
        common::http_get(&gw.addr, "/v1/nodes", Some("gsv_admin_0123456789ab_x")).await;
    assert_eq!(status, 429);
}

#[tokio::test]
async fn audit_chain_records_calls_verifies_and_detects_edits() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("aud", ws.path()).await;
    let agent = gw.agent().await;
    agent
        .call("aud__Echo", json!({"text": "secret-value"}), None)
        .await
        .unwrap();
    let _ = agent.call("aud__Nope", json!({}), None).await;
    let (code, out, err) = eventually(
        "the call row in the audit log",
        Duration::from_secs(10),
        || {
            let r = gw.cli(&["audit", "tail", "--lines", "100", "--json"]);
            async move { r.1.contains("\"tool\":\"Echo\"").then_some(r) }
        },
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = rows
        .iter()
        .find(|r| r["kind"] == "call" && r["tool"] == "Echo")
        .unwrap();
    assert_eq!(call["actor"], "agent:test");
    assert_eq!(call["outcome"], "ok");
    assert_eq!(call["argsHash"].as_str().unwrap().len(), 64);
    // Argument values are not stored by default.
    assert!(!out.contains("secret-value"));
    for kind in ["connect", "policy", "call"] {
        assert!(
            rows.iter().any(|r| r["kind"] == kind),
            "no {kind} row in {out}"
        );
    }
    // Every token is issued on the record: the gateway's own admin token as well as
    // those `gsv token create` made.
    let issued = |actor: &str, kind: &str| {
        rows.iter().any(|r| {
            r["kind"] == "policy"
                && r["outcome"] == "token_created"
                && r["actor"] == actor
                && match &r["detail"] {
                    Value::String(text) => serde_json::from_str::<Value>(text).ok(),
                    other => Some(other.clone()),
                }
                .is_some_and(|d| d["kind"] == kind)
        })
    };
    assert!(issued("gateway", "admin"), "no admin token row in {out}");
    assert!(issued("cli", "agent"), "no agent token row in {out}");
    assert!(issued("cli", "join"), "no join token row in {out}");
    let (code, out, _) = gw.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("ok:"), "{out}");
    // Tamper with one row: verification fails and names it.
    let store = gsv_gateway::Store::open(gw.data.path()).unwrap();
    let seq = call["seq"].as_i64().unwrap();
    store
        .with_conn(|c| Ok(c.execute("UPDATE audit SET outcome = 'denied' WHERE seq = ?1", [seq])?))
        .unwrap();
    let (code, out, _) = gw.cli(&["audit", "verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("row {seq}")), "{out}");
}

#[tokio::test]
async fn join_tokens_are_single_use_and_enrolled_ids_cannot_be_taken_over() {
    use common::fake::{tool, Raw};
    let gw = Gateway::start().await;
    let join = gw.node_token("enr");
    assert!(join.starts_with("gsv_join_"), "{join}");
    let (_first, hello) = Raw::node(
        &gw.addr,
        "enr",
        &join,
        json!([tool("T", "diagnostics.echo")]),
    )
    .await;
    let credential = hello.unwrap()["credential"].as_str().unwrap().to_owned();
    assert!(credential.starts_with("gsv_node_"));
    // Replaying the join token is refused.
    let (_, r) = Raw::node(
        &gw.addr,
        "enr",
        &join,
        json!([tool("T", "diagnostics.echo")]),
    )
    .await;
    assert_eq!(r.unwrap_err().code, ErrorCode::Unauthorized);
    // A second join token for the enrolled id cannot take it over (and is not spent).
    let second = gw.node_token("enr");
    let (_, r) = Raw::node(
        &gw.addr,
        "enr",
        &second,
        json!([tool("T", "diagnostics.echo")]),
    )
    .await;
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert!(e.message.contains("already enrolled"), "{}", e.message);
    // The credential works, and no other credential is issued with it.
    let (_, r) = Raw::node(
        &gw.addr,
        "enr",
        &credential,
        json!([tool("T", "diagnostics.echo")]),
    )
    .await;
    assert!(r.unwrap().get("credential").is_none());
    // All of it is on record.
    gw.cli(&["audit", "verify"]);
    let (_, out, _) = gw.cli(&["audit", "tail", "--lines", "200", "--json"]);
    assert!(out.contains("\"outcome\":\"enrolled\""), "{out}");
    assert!(out.contains("refused:already_enrolled"), "{out}");
    // After revoking the credential, the second join token enrolls the id again.
    let (_, list, _) = gw.cli(&["token", "list", "--json"]);
    let tokens: Value = serde_json::from_str(&list).unwrap();
    let cred_id = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["kind"] == "node" && t["subject"] == "enr")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(gw.cli(&["token", "revoke", &cred_id]).0, 0);
    let (_, r) = Raw::node(
        &gw.addr,
        "enr",
        &second,
        json!([tool("T", "diagnostics.echo")]),
    )
    .await;
    assert!(r.unwrap()["credential"].is_string());
}

#[tokio::test]
async fn a_restarted_node_uses_its_stored_credential() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let join = gw.node_token("keeper");
    let mut node = gw.spawn_node("keeper", &join, ws.path(), &[]);
    gw.wait_online("keeper").await;
    let file = gw.node_data.path().join("node-keeper.credential");
    // The node writes the file just after the gateway registered it.
    let stored = eventually("the stored credential", Duration::from_secs(10), || {
        let file = file.clone();
        async move { std::fs::read_to_string(&file).ok() }
    })
    .await;
    assert!(stored.trim().starts_with("gsv_node_"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    node.kill();
    // Started again with the spent join token: the stored credential is used.
    let _node = gw.spawn_node("keeper", &join, ws.path(), &[]);
    gw.wait_online("keeper").await;
    let agent = gw.agent().await;
    let r = agent
        .call("keeper__Echo", json!({"text": "back"}), None)
        .await
        .unwrap();
    assert_eq!(r.joined_text(), "back");
}
