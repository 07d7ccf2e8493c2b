//! End to end: operator tokens (`gsv token create operator NAME --role
//! approver|viewer`) against a real gateway and node — a viewer reads everything and
//! changes nothing, an approver also decides approvals (recorded under its name),
//! neither runs a tool, and a revoked one is cut off.

mod common;

use common::{eventually, http_request, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::method::{ApprovalsDecideParams, Verdict};
use gsv_protocol::{ErrorCode, EventName, Method};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Waits for the next `approval.requested` event on `client`; returns the request.
async fn next_request(client: &AgentClient) -> Value {
    eventually("approval.requested", Duration::from_secs(10), || async {
        let e = client.next_event(Duration::from_millis(100)).await?;
        (e.event == EventName::ApprovalRequested).then_some(e.payload)
    })
    .await
}

/// A gateway with node `box`, an agent whose Echo calls need approval, and the two
/// operator tokens.
struct Setup {
    gw: Gateway,
    _ws: TempDir,
    _node: common::Proc,
    agent: Arc<AgentClient>,
    viewer: String,
    approver: String,
}

async fn setup() -> Setup {
    let gw = Gateway::start().await;
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
    let viewer = gw.token(&["operator", "vera", "--role", "viewer"]);
    let approver = gw.token(&["operator", "alice", "--role", "approver"]);
    assert!(viewer.starts_with("gsv_operator_"), "{viewer}");
    Setup {
        gw,
        _ws: ws,
        _node: node,
        agent,
        viewer,
        approver,
    }
}

fn remote_code(e: gsv_client::ClientError) -> ErrorCode {
    e.remote().map(|r| r.code).unwrap_or(ErrorCode::Internal)
}

#[tokio::test]
async fn a_viewer_reads_everything_but_its_approve_is_refused() {
    let s = setup().await;
    let viewer = s.gw.agent_with(&s.viewer).await;
    let a = s.agent.clone();
    let call = tokio::spawn(async move {
        a.call("box__Echo", json!({"text": "held"}), Some(60_000))
            .await
    });
    // Operators get the operator events.
    let id = next_request(&viewer).await["id"]
        .as_str()
        .expect("id")
        .to_owned();

    // It reads: approvals (HTTP and WebSocket), nodes with their tools, jobs.
    let (status, body) =
        http_request(&s.gw.addr, "GET", "/v1/approvals", Some(&s.viewer), None).await;
    assert_eq!(status, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).expect("json");
    let req = listed["approvals"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == id.as_str()))
        .expect("the request listed");
    // Every argument, as the canonical JSON the arguments hash is taken of.
    assert_eq!(req["args"], r#"{"text":"held"}"#, "{body}");
    let page = viewer
        .request(Method::ApprovalsList, &json!({}))
        .await
        .expect("a viewer lists approvals over WebSocket");
    assert!(page.get().contains(&id));
    let (status, body) = http_request(&s.gw.addr, "GET", "/v1/nodes", Some(&s.viewer), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"box\""), "{body}");
    let tools = viewer.list_tools().await.expect("tools.list");
    assert!(
        tools.iter().any(|t| t.name == "box__Bash"),
        "a viewer sees every tool"
    );
    let (status, body) = http_request(&s.gw.addr, "GET", "/v1/jobs", Some(&s.viewer), None).await;
    assert_eq!(status, 200, "{body}");

    // Its decisions are refused on every channel, and the call keeps waiting.
    let (status, body) = http_request(
        &s.gw.addr,
        "POST",
        &format!("/v1/approvals/{id}"),
        Some(&s.viewer),
        Some(r#"{"decision":"approve"}"#),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("viewer"), "{body}");
    let e = viewer
        .request(
            Method::ApprovalsDecide,
            &ApprovalsDecideParams {
                id: id.clone(),
                decision: Verdict::Approve,
            },
        )
        .await
        .expect_err("a viewer's decision over WebSocket");
    assert_eq!(remote_code(e), ErrorCode::Forbidden);
    let (code, _, err) =
        s.gw.cli(&["approvals", "approve", &id, "--token", &s.viewer]);
    assert_ne!(code, 0, "the CLI with a viewer token approved: {err}");
    assert!(err.contains("forbidden"), "{err}");
    assert!(!call.is_finished(), "the call ran without an approval");

    // It runs no tool, on any channel.
    let e = viewer
        .call("box__Bash", json!({"command": "echo hi"}), None)
        .await
        .expect_err("a viewer's tool call");
    assert!(
        matches!(remote_code(e), ErrorCode::Forbidden | ErrorCode::NotFound),
        "a viewer's tool call was not refused"
    );
    // Nor a fan-out: refused as a whole, no job made (issue 42: the docs said so, the
    // gateway started one with every node denied).
    let jobs_before = viewer.jobs(100, 0).await.map(|j| j.jobs.len()).unwrap_or(0);
    let fanout = gsv_protocol::fanout::ToolsFanoutParams {
        tool: "Echo".to_owned(),
        select: "id~*".to_owned(),
        args: serde_json::value::to_raw_value(&json!({"text": "x"})).unwrap(),
        batch: None,
        fail_fast: false,
        timeout_ms: None,
        wait_offline_ms: None,
        is_async: false,
    };
    let e = viewer
        .fanout_with_id("f1", &fanout)
        .await
        .expect_err("a viewer's fan-out");
    assert_eq!(remote_code(e), ErrorCode::Forbidden);
    assert_eq!(
        viewer.jobs(100, 0).await.map(|j| j.jobs.len()).unwrap_or(0),
        jobs_before,
        "a job was made for a refused fan-out"
    );
    let (status, body) = http_request(
        &s.gw.addr,
        "POST",
        "/mcp",
        Some(&s.viewer),
        Some(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#),
    )
    .await;
    assert_eq!(status, 403, "an operator token on /mcp: {body}");
    // Nor changes the fleet.
    let (status, body) = http_request(
        &s.gw.addr,
        "POST",
        "/v1/nodes/box/labels",
        Some(&s.viewer),
        Some(r#"{"set":{"env":"prod"}}"#),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let e = viewer
        .request(
            Method::NodesLabel,
            &json!({"id": "box", "set": {"env": "prod"}}),
        )
        .await
        .expect_err("a viewer labelling a node");
    assert_eq!(remote_code(e), ErrorCode::Forbidden);

    // The admin still decides it.
    let (code, _, err) = s.gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    let e = call.await.expect("join").expect_err("denied");
    assert_eq!(remote_code(e), ErrorCode::Denied);
}

#[tokio::test]
async fn an_approvers_decision_is_recorded_under_its_name() {
    let s = setup().await;
    let admin = s.gw.agent_with(&s.gw.admin_token()).await;
    let a = s.agent.clone();
    let call = tokio::spawn(async move {
        a.call("box__Echo", json!({"text": "by alice"}), Some(60_000))
            .await
    });
    let id = next_request(&admin).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, body) = http_request(
        &s.gw.addr,
        "POST",
        &format!("/v1/approvals/{id}"),
        Some(&s.approver),
        Some(r#"{"decision":"approve"}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let decided: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(decided["decidedBy"], "operator:alice", "{body}");
    let r = call.await.expect("join").expect("approved call");
    assert_eq!(r.joined_text(), "by alice");

    // Over WebSocket too (the CLI with --token).
    let a = s.agent.clone();
    let call = tokio::spawn(async move {
        a.call("box__Echo", json!({"text": "again"}), Some(60_000))
            .await
    });
    let id2 = next_request(&admin).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (code, _, err) =
        s.gw.cli(&["approvals", "approve", &id2, "--token", &s.approver]);
    assert_eq!(code, 0, "{err}");
    call.await.expect("join").expect("approved call");
    let (code, out, err) = s.gw.cli(&["approvals", "list", "--all", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("operator:alice").count(), 2, "{out}");

    // The audit log says who decided.
    eventually(
        "the decision in the audit log",
        Duration::from_secs(10),
        || {
            let (_, out, _) = s.gw.cli(&["audit", "tail", "--lines", "200", "--json"]);
            async move {
                out.lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .any(|r| {
                        r["kind"] == "approval"
                            && r["actor"] == "operator:alice"
                            && r["outcome"] == "approved"
                    })
                    .then_some(())
            }
        },
    )
    .await;

    // An approver still changes nothing else: no labels, no tool calls, no other
    // token's jobs.
    let (status, _) = http_request(
        &s.gw.addr,
        "POST",
        "/v1/nodes/box/accept-tools",
        Some(&s.approver),
        None,
    )
    .await;
    assert_eq!(status, 403);
    let job = s
        .agent
        .call_async("box__Bash", json!({"command": "sleep 30"}), Some(60_000))
        .await
        .expect("an async job");
    let approver = s.gw.agent_with(&s.approver).await;
    let seen = approver.job(&job).await.expect("operators read every job");
    assert_eq!(seen.summary.id, job);
    let e = approver
        .cancel_job(&job)
        .await
        .expect_err("an operator cancelling an agent's job");
    assert_eq!(remote_code(e), ErrorCode::Forbidden);
    let _ = s.agent.cancel_job(&job).await;
}

#[tokio::test]
async fn operator_tokens_need_a_role_and_die_when_revoked() {
    let s = setup().await;
    let (code, _, err) = s.gw.cli(&["token", "create", "operator", "bob"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--role"), "{err}");
    let (code, _, err) =
        s.gw.cli(&["token", "create", "operator", "bob", "--role", "admin"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = s.gw.cli(&[
        "token", "create", "operator", "bob", "--role", "viewer", "--allow", "*",
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) =
        s.gw.cli(&["token", "create", "agent", "bob", "--role", "viewer"]);
    assert_eq!(code, 2, "{err}");

    let (code, out, err) = s.gw.cli(&["token", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: Vec<Value> = serde_json::from_str(&out).expect("json");
    let vera = list
        .iter()
        .find(|t| t["subject"] == "vera")
        .expect("the viewer's token");
    assert_eq!(
        (vera["kind"].as_str(), vera["role"].as_str()),
        (Some("operator"), Some("viewer"))
    );
    let id = vera["id"].as_str().expect("id").to_owned();

    let viewer = s.gw.agent_with(&s.viewer).await;
    let (code, _, err) = s.gw.cli(&["token", "revoke", &id]);
    assert_eq!(code, 0, "{err}");
    let (status, _) = http_request(&s.gw.addr, "GET", "/v1/approvals", Some(&s.viewer), None).await;
    assert_eq!(status, 401);
    eventually(
        "the viewer's connection closed",
        Duration::from_secs(10),
        || async { viewer.list_nodes().await.is_err().then_some(()) },
    )
    .await;
}
