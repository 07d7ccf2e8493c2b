//! End to end: bulk lanes (`connect.lane`). `gsv cp` through a real gateway and node on
//! loopback moves its chunks on the node's bulk lane both ways (the gateway's metrics
//! count them) with the bytes intact, and a lane joins only the connection of its own
//! node process: an agent token, a join token, or another instance is refused.

mod common;

use common::files::{cp, s, sha, varied, write_file};
use common::{eventually, http_get, Gateway, TempDir};
use gsv_protocol::handshake::{Auth, ClientInfo, ConnectParams, LaneKind, LaneParams};
use gsv_protocol::{ErrorCode, Role};
use gsv_transport::ConnectError;
use std::time::Duration;

/// A metric's value on the gateway's `/metrics`.
async fn metric(gw: &Gateway, name: &str) -> f64 {
    let (_, body) = http_get(&gw.addr, "/metrics", None).await;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_moves_its_chunks_on_the_nodes_bulk_lane_both_ways() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("lane-ws");
    let local = TempDir::new("lane-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    // No lane until a transfer needs one.
    assert_eq!(metric(&gw, "gsv_bulk_lanes").await, 0.0);

    let data = varied(8 * 1024 * 1024 + 777, 3);
    let src = local.path().join("up.bin");
    write_file(&src, &data, 0o644, 1_700_000_000_000);
    let (code, out, err) = cp(&gw, &token, &[s(&src), "box:up.bin"]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(
        sha(&std::fs::read(ws.path().join("up.bin")).expect("read")),
        sha(&data)
    );
    assert_eq!(metric(&gw, "gsv_bulk_lanes").await, 1.0);
    let after_put = metric(&gw, "gsv_lane_chunks_total").await;
    assert!(after_put >= 9.0, "9 chunks up, {after_put} on the lane");

    let back = local.path().join("back.bin");
    let (code, out, err) = cp(&gw, &token, &["box:up.bin", s(&back)]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(sha(&std::fs::read(&back).expect("read")), sha(&data));
    let after_get = metric(&gw, "gsv_lane_chunks_total").await;
    assert!(
        after_get >= after_put + 9.0,
        "9 chunks down, {} on the lane",
        after_get - after_put
    );
    // Calls still go on the node's connection meanwhile and after.
    let agent = gw.agent().await;
    let echoed = agent
        .call("box__Echo", serde_json::json!({"text": "still here"}), None)
        .await
        .expect("echo");
    assert!(format!("{echoed:?}").contains("still here"), "{echoed:?}");
}

/// Dials `/v1/node` with `token` as a bulk lane of `instance`; the gateway's answer.
async fn lane_connect(gw: &Gateway, token: &str, instance: &str) -> Result<(), ConnectError> {
    let url = format!("ws://{}/v1/node", gw.addr);
    let mut ws = gsv_transport::dial(&url, None, Duration::from_secs(5)).await?;
    gsv_transport::handshake(&mut ws, |nonce| ConnectParams {
        min_protocol: gsv_protocol::MIN_PROTOCOL_VERSION,
        max_protocol: gsv_protocol::PROTOCOL_VERSION,
        role: Role::Node,
        auth: Auth {
            token: token.to_owned(),
            nonce,
        },
        client: ClientInfo::default(),
        node: None,
        lane: Some(LaneParams {
            kind: LaneKind::Bulk,
            instance: Some(instance.to_owned()),
        }),
    })
    .await
    .map(|_| ())
}

fn refused_with(r: Result<(), ConnectError>, code: ErrorCode) {
    match r {
        Err(ConnectError::Refused(shape)) => assert_eq!(shape.code, code, "{shape:?}"),
        other => panic!("expected a {code} refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_joins_only_its_own_node_process() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("lane-join-ws");
    let _node = gw.node("box", ws.path()).await;
    let credential = eventually(
        "the node's stored credential",
        Duration::from_secs(10),
        || {
            let path = gw.node_data.path().join("node-box.credential");
            async move {
                std::fs::read_to_string(path)
                    .ok()
                    .map(|t| t.trim().to_owned())
            }
        },
    )
    .await;

    // An agent's token is no node's.
    refused_with(
        lane_connect(&gw, &gw.agent_token(), "any").await,
        ErrorCode::InvalidArgs,
    );
    // A join token (of a node not even connected) joins nothing.
    refused_with(
        lane_connect(&gw, &gw.node_token("other"), "any").await,
        ErrorCode::InvalidArgs,
    );
    // The node's own credential, for a process that is not the one connected.
    refused_with(
        lane_connect(&gw, &credential, "not-this-instance").await,
        ErrorCode::NodeOffline,
    );
    // A refused lane changes nothing for the node: still online, no lane open.
    assert_eq!(metric(&gw, "gsv_bulk_lanes").await, 0.0);
    let agent = gw.agent().await;
    agent
        .call("box__Echo", serde_json::json!({"text": "x"}), None)
        .await
        .expect("echo");
}
