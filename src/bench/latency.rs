//! `gsv bench latency`: a routed Echo call (agent → gateway → node → gateway → agent)
//! against two direct WebSocket round trips with the same payload.
//!
//! Gateway and a real node (`gsv_node::run` with Echo) run in this process, as in
//! `mcp`; the agent is [`AgentClient`]. The baseline is a bare tokio-tungstenite echo
//! server and client in the same process: one sample is two round trips of the agent's
//! request frame, the hops a routed call makes. Samples alternate one by one.

use super::report::{Report, Row};
use super::stats::{summarize, Summary};
use super::BenchOptions;
use crate::client::AgentClient;
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::encode_req;
use gsv_protocol::Method;
use serde_json::json;
use std::time::Instant;
use tokio_tungstenite::tungstenite::Message;

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let n = if opts.quick { 200 } else { 5000 };
    let rig = super::mcp::rig(opts).await?;
    let outcome = measure(&rig, n).await;
    rig.stop.cancel();
    let _ = rig.node.await;
    rig.gateway.stop().await;
    let (routed, direct, bare, bytes) = outcome?;
    let base = "2 direct WebSocket round trips, same payload";
    Ok(Report::new(
        "latency",
        format!(
            "{n} sequential Echo calls via the gateway (1 agent, 1 in-process node), \
             interleaved with {n} samples of 2 round trips of the same {bytes}-byte frame \
             over a bare tokio-tungstenite echo pair; mean routed {:.0} µs vs {:.0} µs",
            routed.mean_us, direct.mean_us
        ),
        vec![
            Row::at_most(
                "routed Echo call, p50",
                routed.p50_us,
                format!("{base}, p50"),
                direct.p50_us,
                "µs",
                1.3,
            ),
            Row::at_most(
                "routed Echo call, p99",
                routed.p99_us,
                format!("{base}, p99"),
                direct.p99_us,
                "µs",
                2.0,
            ),
            info(Row::at_most(
                "raw agent + simulated node, p50",
                bare.p50_us,
                format!("{base}, p50"),
                direct.p50_us,
                "µs",
                1.3,
            )),
            info(Row::at_most(
                "raw agent + simulated node, p99",
                bare.p99_us,
                format!("{base}, p99"),
                direct.p99_us,
                "µs",
                2.0,
            )),
        ],
    ))
}

/// A row reported for information (no target).
fn info(mut r: Row) -> Row {
    r.target = "(info)".into();
    r.met = true;
    r
}

type Summaries = (Summary, Summary, Summary, usize);

async fn measure(rig: &super::mcp::Rig, n: usize) -> Result<Summaries, String> {
    let agent = AgentClient::connect(&rig.gateway.url(), &rig.token)
        .await
        .map_err(|e| format!("agent: {e}"))?;
    let args = json!({"text": "ping"});
    // The frame the agent sends (id width as in a long run).
    let payload = encode_req(
        "1000",
        Method::ToolsCall,
        &json!({"name": "bench__Echo", "args": args}),
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let server = tokio::spawn(async move {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let _ = tcp.set_nodelay(true);
        let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
            return;
        };
        while let Some(Ok(m)) = ws.next().await {
            if m.is_text() && ws.send(m).await.is_err() {
                break;
            }
        }
    });
    let (mut direct, _) =
        tokio_tungstenite::connect_async_with_config(format!("ws://{addr}/"), None, true)
            .await
            .map_err(|e| format!("echo pair: {e}"))?;
    // The gateway hop alone: a raw WebSocket agent and a simulated node that answers
    // with a canned result (no AgentClient, no real node's dispatch).
    let creds = super::fleet::mint_nodes(&rig.data, 1)?;
    let template = super::sim::NodeTemplate::standard(&rig.data)?;
    let node_url = format!(
        "ws://{}{}",
        rig.gateway.addr,
        gsv_protocol::endpoint::NODE_PATH
    );
    let sim_ws = super::sim::connect_node(&node_url, &template, &creds[0].0, &creds[0].1).await?;
    let sim_stop = tokio_util::sync::CancellationToken::new();
    let sim_task = tokio::spawn({
        let stop = sim_stop.clone();
        async move { super::sim::serve(sim_ws, false, &stop).await }
    });
    let mut raw = super::sim::connect_agent(&rig.gateway.url(), &rig.token).await?;
    let raw_params = json!({"name": format!("{}__Echo", creds[0].0), "args": args});
    let mut seq = 1000u64;
    let mut raw_frame = move || {
        seq += 1;
        encode_req(&seq.to_string(), Method::ToolsCall, &raw_params)
    };

    for _ in 0..50 {
        round_trip_once(&mut raw, &raw_frame()).await?;
        agent
            .call("bench__Echo", args.clone(), None)
            .await
            .map_err(|e| e.to_string())?;
        round_trip(&mut direct, &payload).await?;
    }
    let (mut r, mut d, mut b) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for _ in 0..n {
        let t = Instant::now();
        let res = agent
            .call("bench__Echo", args.clone(), None)
            .await
            .map_err(|e| e.to_string())?;
        r.push(t.elapsed());
        if res.is_error {
            return Err(format!("Echo failed: {}", res.joined_text()));
        }
        let t = Instant::now();
        round_trip(&mut direct, &payload).await?;
        d.push(t.elapsed());
        let t = Instant::now();
        round_trip_once(&mut raw, &raw_frame()).await?;
        b.push(t.elapsed());
    }
    let _ = direct.close(None).await;
    server.abort();
    sim_stop.cancel();
    let _ = sim_task.await;
    Ok((summarize(&r), summarize(&d), summarize(&b), payload.len()))
}

/// Two round trips of `payload` over the echo pair.
async fn round_trip(direct: &mut super::sim::Ws, payload: &str) -> Result<(), String> {
    for _ in 0..2 {
        direct
            .send(Message::text(payload.to_owned()))
            .await
            .map_err(|e| e.to_string())?;
        match direct.next().await {
            Some(Ok(Message::Text(_))) => {}
            other => return Err(format!("echo pair: {other:?}")),
        }
    }
    Ok(())
}

/// One request frame and its answer (a `res`) on a raw agent connection.
async fn round_trip_once(ws: &mut super::sim::Ws, frame: &str) -> Result<(), String> {
    ws.send(Message::text(frame.to_owned()))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                if t.as_str().contains("\"type\":\"res\"") {
                    if t.as_str().contains("\"ok\":true") {
                        return Ok(());
                    }
                    return Err(format!("raw call failed: {}", t.as_str()));
                }
            }
            Some(Ok(_)) => {}
            other => return Err(format!("raw agent: {other:?}")),
        }
    }
}
