//! End to end: every kind of bad input gets a stable error code, nothing panics, and
//! the connection stays usable where that makes sense.

mod common;

use common::fake::{agent_connect, node_connect, tool, Raw};
use common::{Gateway, TempDir};
use gsv_protocol::ErrorCode;
use serde_json::{json, Value};
use std::time::Duration;

async fn agent_raw(gw: &Gateway) -> Raw {
    let token = gw.agent_token();
    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    raw.handshake(|n| agent_connect(&token, &n))
        .await
        .expect("agent connects");
    raw
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

/// After a bad frame, a good request on the same connection still works.
async fn still_usable(raw: &mut Raw) {
    raw.send(r#"{"type":"req","id":"ok?","method":"tools.list","params":{}}"#)
        .await;
    let v = raw.recv_json().await;
    assert_eq!(v["id"], "ok?");
    assert_eq!(v["ok"], true, "{v}");
}

#[tokio::test]
async fn malformed_json_and_unknown_frames_keep_the_connection() {
    let gw = Gateway::start().await;
    let mut raw = agent_raw(&gw).await;
    for bad in [
        "{not json",
        "[1,2,3]",
        r#"{"type":"rpc","id":"1"}"#,
        r#"{"type":"req","method":"tools.list"}"#,
    ] {
        raw.send(bad).await;
        let v = raw.recv_json().await;
        assert_eq!(v["type"], "res", "{bad}");
        assert_eq!(v["id"], "", "{bad}");
        assert_eq!(v["ok"], false);
        assert_eq!(code(&v), "invalid_frame", "{bad}: {v}");
        still_usable(&mut raw).await;
    }
    // Unknown method: not_found with the request's id.
    raw.send(r#"{"type":"req","id":"m1","method":"tools.destroy","params":{}}"#)
        .await;
    let v = raw.recv_json().await;
    assert_eq!(v["id"], "m1");
    assert_eq!(code(&v), "not_found");
    still_usable(&mut raw).await;
    // tools.call with params that are not an object.
    raw.send(r#"{"type":"req","id":"p1","method":"tools.call","params":[1]}"#)
        .await;
    let v = raw.recv_json().await;
    assert_eq!(code(&v), "invalid_args");
    still_usable(&mut raw).await;
    // A binary frame.
    use futures_util::SinkExt;
    raw.ws
        .send(tokio_tungstenite::tungstenite::Message::Binary(
            vec![1, 2, 3].into(),
        ))
        .await
        .unwrap();
    let v = raw.recv_json().await;
    assert_eq!(code(&v), "invalid_frame");
    still_usable(&mut raw).await;
}

#[tokio::test]
async fn frame_before_handshake_is_refused() {
    let gw = Gateway::start().await;
    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    raw.challenge().await;
    raw.send(r#"{"type":"req","id":"x","method":"tools.list","params":{}}"#)
        .await;
    let v = raw.recv_json().await;
    assert_eq!(v["id"], "x");
    assert_eq!(code(&v), "invalid_frame");
    let close = raw.closed().await.expect("close frame");
    assert_eq!(close.0, 1002);
}

#[tokio::test]
async fn oversized_frame_before_hello_is_refused() {
    let gw = Gateway::start().await;
    let mut raw = Raw::open(&gw.addr, "/v1/node").await;
    raw.challenge().await;
    let big = format!(
        r#"{{"type":"req","id":"c","method":"connect","params":{{"pad":"{}"}}}}"#,
        "x".repeat(70 * 1024)
    );
    raw.send(&big).await;
    let v = raw.recv_json().await;
    assert_eq!(code(&v), "too_large", "{v}");
    let close = raw.closed().await.expect("close frame");
    assert_eq!(close.0, 1009);
}

#[tokio::test]
async fn handshake_deadline_closes_silent_connections() {
    let gw = Gateway::start_with(&["--handshake-timeout-ms", "500"]).await;
    let mut raw = Raw::open(&gw.addr, "/v1/node").await;
    raw.challenge().await;
    let v = raw.recv_json().await;
    assert_eq!(code(&v), "timeout");
    assert!(raw.closed().await.is_some());
}

#[tokio::test]
async fn wrong_protocol_range_bad_token_wrong_role() {
    let gw = Gateway::start().await;
    let token = gw.agent_token();
    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    let e = raw
        .handshake(|n| {
            let mut p = agent_connect(&token, &n);
            p["minProtocol"] = 7.into();
            p["maxProtocol"] = 9.into();
            p
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::UnsupportedProtocol);
    assert_eq!(e.details.unwrap()["max"], 1);

    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    let e = raw
        .handshake(|n| agent_connect("gsv_agent_0123456789ab_wrongsecret", &n))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(raw.closed().await.unwrap().0, 1008);

    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    let e = raw
        .handshake(|_| agent_connect(&token, "not-the-nonce"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);

    // A node token on the agent endpoint, and an agent token on the node endpoint.
    let node_token = gw.node_token("n1");
    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    let e = raw
        .handshake(|n| agent_connect(&node_token, &n))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    let (_, r) = Raw::node(
        &gw.addr,
        "n1",
        &token,
        json!([tool("T", "diagnostics.echo")]),
    )
    .await;
    assert_eq!(r.unwrap_err().code, ErrorCode::Forbidden);

    // Role in connect must match the endpoint.
    let mut raw = Raw::open(&gw.addr, "/v1/node").await;
    let e = raw
        .handshake(|n| agent_connect(&token, &n))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgs);
}

#[tokio::test]
async fn node_declarations_are_validated() {
    let gw = Gateway::start().await;
    let token = gw.node_token("decl");
    let t = |tools: Value| tools;
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "invalid node id",
            "Not_Valid",
            t(json!([tool("A", "diagnostics.echo")])),
        ),
        (
            "tool name with __",
            "decl",
            t(json!([tool("a__b", "diagnostics.echo")])),
        ),
        (
            "duplicate tool names",
            "decl",
            t(json!([
                tool("A", "diagnostics.echo"),
                tool("A", "diagnostics.echo")
            ])),
        ),
        (
            "unknown capability",
            "decl",
            t(json!([tool("A", "filesystem.delete")])),
        ),
    ];
    for (what, id, tools) in cases {
        let (mut raw, r) = Raw::node(&gw.addr, id, &token, tools).await;
        let e = r.expect_err(what);
        assert_eq!(e.code, ErrorCode::InvalidArgs, "{what}: {e:?}");
        assert!(raw.closed().await.is_some(), "{what}");
    }
    // A schema that is not a JSON Schema.
    let mut bad = tool("A", "diagnostics.echo");
    bad["inputSchema"] = json!({"type": 42});
    let (_, r) = Raw::node(&gw.addr, "decl", &token, json!([bad])).await;
    assert_eq!(r.unwrap_err().code, ErrorCode::InvalidArgs);
    // A node-level capability outside the closed set.
    let mut raw = Raw::open(&gw.addr, "/v1/node").await;
    let e = raw
        .handshake(|n| {
            let mut p = node_connect("decl", &token, &n, json!([tool("A", "diagnostics.echo")]));
            p["node"]["capabilities"] = json!(["diagnostics.echo", "root.everything"]);
            p
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgs);
    // Missing node object.
    let mut raw = Raw::open(&gw.addr, "/v1/node").await;
    let e = raw
        .handshake(|n| {
            let mut p = node_connect("decl", &token, &n, json!([]));
            p.as_object_mut().unwrap().remove("node");
            p
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgs);
    // And the valid declaration is accepted.
    let (_, r) = Raw::node(
        &gw.addr,
        "decl",
        &token,
        json!([tool("A", "diagnostics.echo")]),
    )
    .await;
    r.expect("valid declaration accepted");
}

#[tokio::test]
async fn token_for_another_node_id_is_forbidden() {
    let gw = Gateway::start().await;
    let token = gw.node_token("owner");
    let (mut raw, r) = Raw::node(
        &gw.addr,
        "intruder",
        &token,
        json!([tool("A", "diagnostics.echo")]),
    )
    .await;
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert!(e.message.contains("owner"), "{}", e.message);
    assert_eq!(raw.closed().await.unwrap().0, 1008);
    // The refusal is counted.
    let (_, metrics) = common::http_get(&gw.addr, "/metrics", None).await;
    assert!(
        metrics.contains(r#"gsv_refused_connects_total{role="node",code="forbidden"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn unknown_node_unknown_tool_and_bad_args() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("known", ws.path()).await;
    let agent = gw.agent().await;
    for (name, args, expect) in [
        ("ghost__Read", json!({"path": "x"}), ErrorCode::NotFound),
        ("known__Nope", json!({}), ErrorCode::NotFound),
        ("no-separator", json!({}), ErrorCode::NotFound),
        ("known__Read", json!({"path": 12}), ErrorCode::InvalidArgs),
        ("known__Read", json!({}), ErrorCode::InvalidArgs),
        (
            "known__Echo",
            json!({"text": "x", "delayMs": -5}),
            ErrorCode::InvalidArgs,
        ),
    ] {
        let e = agent.call(name, args.clone(), None).await.unwrap_err();
        let e = e.remote().unwrap();
        assert_eq!(e.code, expect, "{name} {args}: {e:?}");
    }
    let e = agent
        .call("known__Read", json!({"path": 12}), None)
        .await
        .unwrap_err();
    assert_eq!(
        e.remote().unwrap().details.as_ref().unwrap()["path"],
        "/path"
    );
}

#[tokio::test]
async fn stray_results_are_dropped_and_the_node_keeps_working() {
    let gw = Gateway::start().await;
    let token = gw.node_token("liar");
    let (mut node, r) = Raw::node(
        &gw.addr,
        "liar",
        &token,
        json!([tool("Say", "diagnostics.echo")]),
    )
    .await;
    r.unwrap();
    // A result for a call id this connection was never sent.
    node.send(r#"{"type":"res","id":"999","ok":true,"result":{"content":[],"isError":false}}"#)
        .await;
    node.send(r#"{"type":"res","id":"not-a-number","ok":true,"result":{}}"#)
        .await;
    // Garbage from the node gets an error back but the connection stays.
    node.send("{garbage").await;
    let v = node.recv_json().await;
    assert_eq!(code(&v), "invalid_frame");
    // A real call still works.
    let agent = std::sync::Arc::new(gw.agent().await);
    let a = agent.clone();
    let call = tokio::spawn(async move { a.call("liar__Say", json!({"text": "hi"}), None).await });
    let gsv_protocol::Frame::Req { id, .. } = node.frame().await else {
        panic!()
    };
    node.send(&json!({"type": "res", "id": id, "ok": true, "result": {"content": [{"type": "text", "text": "said"}], "isError": false}}).to_string()).await;
    let r = call.await.unwrap().unwrap();
    assert_eq!(r.joined_text(), "said");
    let (_, metrics) = common::http_get(&gw.addr, "/metrics", None).await;
    assert!(metrics.contains("gsv_stray_results_total 2"), "{metrics}");
}

#[tokio::test]
async fn a_node_cannot_complete_calls_sent_to_another_connection() {
    let gw = Gateway::start().await;
    let (t1, t2) = (gw.node_token("one"), gw.node_token("two"));
    let (mut one, r) = Raw::node(
        &gw.addr,
        "one",
        &t1,
        json!([tool("Say", "diagnostics.echo")]),
    )
    .await;
    r.unwrap();
    let (mut two, r) = Raw::node(
        &gw.addr,
        "two",
        &t2,
        json!([tool("Say", "diagnostics.echo")]),
    )
    .await;
    r.unwrap();
    let agent = std::sync::Arc::new(gw.agent().await);
    let a = agent.clone();
    let call =
        tokio::spawn(async move { a.call("one__Say", json!({"text": "hi"}), Some(3000)).await });
    let gsv_protocol::Frame::Req { id, .. } = one.frame().await else {
        panic!()
    };
    // Node two forges the answer to node one's call: ignored.
    two.send(&json!({"type": "res", "id": id, "ok": true, "result": {"content": [{"type": "text", "text": "forged"}], "isError": false}}).to_string()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    one.send(&json!({"type": "res", "id": id, "ok": true, "result": {"content": [{"type": "text", "text": "genuine"}], "isError": false}}).to_string()).await;
    let r = call.await.unwrap().unwrap();
    assert_eq!(r.joined_text(), "genuine");
}
