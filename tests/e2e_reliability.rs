//! Delivery across faults, at the protocol level: a scripted node (raw WebSocket) whose
//! link drops mid-call, against a real gateway and a real agent client. Covers the
//! gateway's grace period and resume (`tool.invoke` with `resume`), refusing to resume
//! on a restarted node process, and events acknowledged and delivered once.
//! (Real `gsv node` processes under a chaos proxy: `e2e_chaos.rs`.)

mod common;

use common::fake::{node_connect, tool, Raw};
use common::Gateway;
use gsv_protocol::frame::{encode_event, encode_ok};
use gsv_protocol::{ErrorCode, EventName, Frame, Method, ToolResult};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A scripted node with a fixed process instance id.
struct Scripted {
    id: &'static str,
    instance: &'static str,
    credential: String,
    addr: String,
}

impl Scripted {
    /// Enrolls `id` and returns it with the credential for later connections.
    async fn enroll(gw: &Gateway, id: &'static str, instance: &'static str) -> (Scripted, Raw) {
        let token = gw.node_token(id);
        let mut s = Scripted {
            id,
            instance,
            credential: token,
            addr: gw.addr.clone(),
        };
        let (raw, hello) = s.connect().await;
        if let Some(c) = hello["credential"].as_str() {
            s.credential = c.to_owned();
        }
        (s, raw)
    }

    async fn connect(&self) -> (Raw, Value) {
        let mut raw = Raw::open(&self.addr, "/v1/node").await;
        let (id, cred, instance) = (self.id, self.credential.clone(), self.instance);
        let hello = raw
            .handshake(|nonce| {
                let mut p =
                    node_connect(id, &cred, &nonce, json!([tool("Slow", "diagnostics.echo")]));
                p["node"]["instance"] = json!(instance);
                p
            })
            .await
            .expect("the node registers");
        (raw, hello)
    }
}

/// The next `tool.invoke` the node receives: (id, params).
async fn next_invoke(raw: &mut Raw) -> (String, Value) {
    loop {
        if let Frame::Req {
            id,
            method: Method::ToolInvoke,
            params,
            ..
        } = raw.frame().await
        {
            let params = serde_json::from_str(params.expect("params").get()).expect("json");
            return (id, params);
        }
    }
}

/// The `seq` of the next `events.ack` the node receives.
async fn next_ack(raw: &mut Raw) -> u64 {
    loop {
        if let Frame::Event {
            event: EventName::EventsAck,
            payload,
            ..
        } = raw.frame().await
        {
            let v: Value = serde_json::from_str(payload.expect("payload").get()).expect("json");
            return v["seq"].as_u64().expect("seq");
        }
    }
}

fn start_call(
    gw: &Gateway,
    name: &str,
) -> tokio::task::JoinHandle<Result<ToolResult, gsv_client::ClientError>> {
    let (url, token, name) = (gw.url(), gw.agent_token(), name.to_owned());
    tokio::spawn(async move {
        let agent = gsv_client::AgentClient::connect(&url, &token).await?;
        agent.call(&name, json!({"text": "t"}), Some(30_000)).await
    })
}

#[tokio::test]
async fn a_node_back_within_the_grace_period_delivers_the_result() {
    let gw = Gateway::start_with(&["--grace-ms", "10000"]).await;
    let (node, mut raw) = Scripted::enroll(&gw, "flaky", "proc-1").await;
    let call = start_call(&gw, "flaky__Slow");
    let (id, first) = next_invoke(&mut raw).await;
    assert_eq!(
        first.get("resume"),
        None,
        "a first dispatch is not a resume"
    );
    // The link drops mid-call, then the same process comes back.
    drop(raw);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mut raw, _) = node.connect().await;
    let (again, params) = next_invoke(&mut raw).await;
    assert_eq!(again, id, "the same call id is asked for again");
    assert_eq!(params["resume"], json!(true));
    assert_eq!(params["tool"], json!("Slow"));
    raw.send(&encode_ok(&id, &ToolResult::text("kept result")))
        .await;
    let result = call
        .await
        .unwrap()
        .expect("the caller gets the node's result");
    assert_eq!(result.joined_text(), "kept result");
    // A second copy of the same result (e.g. sent before the resume arrived) is
    // dropped quietly; the node stays usable.
    raw.send(&encode_ok(&id, &ToolResult::text("duplicate")))
        .await;
    let call = start_call(&gw, "flaky__Slow");
    let (id2, _) = next_invoke(&mut raw).await;
    assert_ne!(id2, id);
    raw.send(&encode_ok(&id2, &ToolResult::text("next"))).await;
    assert_eq!(call.await.unwrap().unwrap().joined_text(), "next");
}

#[tokio::test]
async fn a_restarted_node_process_fails_the_call_at_once() {
    let gw = Gateway::start_with(&["--grace-ms", "20000"]).await;
    let (mut node, mut raw) = Scripted::enroll(&gw, "reborn", "proc-1").await;
    let call = start_call(&gw, "reborn__Slow");
    let _ = next_invoke(&mut raw).await;
    drop(raw);
    node.instance = "proc-2";
    let (_raw, _) = node.connect().await;
    let started = Instant::now();
    let err = call.await.unwrap().unwrap_err();
    let e = err.remote().expect("a gateway error");
    assert_eq!(e.code, ErrorCode::NodeDisconnected, "{e:?}");
    let details = e.details.as_ref().unwrap();
    assert_eq!(details["dispatched"], true);
    assert_eq!(details["restarted"], true);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not held for the grace period"
    );
}

#[tokio::test]
async fn without_the_node_the_caller_hears_node_disconnected_after_the_grace_period() {
    let gw = Gateway::start_with(&["--grace-ms", "800"]).await;
    let (_node, mut raw) = Scripted::enroll(&gw, "gone", "proc-1").await;
    let call = start_call(&gw, "gone__Slow");
    let _ = next_invoke(&mut raw).await;
    let dropped = Instant::now();
    drop(raw);
    let err = call.await.unwrap().unwrap_err();
    let waited = dropped.elapsed();
    let e = err.remote().expect("a gateway error");
    assert_eq!(e.code, ErrorCode::NodeDisconnected, "{e:?}");
    assert_eq!(e.details.as_ref().unwrap()["dispatched"], true);
    assert!(
        waited >= Duration::from_millis(700),
        "answered before the grace period: {waited:?}"
    );
    assert!(waited < Duration::from_secs(6), "took {waited:?}");
}

#[tokio::test]
async fn events_are_acknowledged_and_relayed_once_across_reconnects() {
    let gw = Gateway::start().await;
    let (node, mut raw) = Scripted::enroll(&gw, "evented", "proc-1").await;
    // These sessions name no owner: only operators hear of them.
    let agent = gw.agent_with(&gw.admin_token()).await;
    // One round trip: the agent's session is fully registered for events.
    agent.list_nodes().await.unwrap();
    let exited = |n: u64| json!({"sessionId": format!("s{n}"), "exitCode": 0});
    raw.send(&encode_event(EventName::ProcessExited, &exited(1), 1))
        .await;
    assert_eq!(next_ack(&mut raw).await, 1);
    // The ack was lost with the link: the node sends event 1 again on its next
    // connection, then event 2.
    drop(raw);
    let (mut raw, _) = node.connect().await;
    raw.send(&encode_event(EventName::ProcessExited, &exited(1), 1))
        .await;
    assert_eq!(
        next_ack(&mut raw).await,
        1,
        "a repeat is acknowledged again"
    );
    raw.send(&encode_event(EventName::ProcessExited, &exited(2), 2))
        .await;
    assert_eq!(next_ack(&mut raw).await, 2);

    let mut seen = Vec::new();
    while let Some(e) = agent.next_event(Duration::from_millis(1500)).await {
        if e.event == EventName::ProcessExited {
            seen.push(
                e.payload["data"]["sessionId"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            );
        }
    }
    assert_eq!(seen, ["s1", "s2"], "each event relayed once, in order");
}
