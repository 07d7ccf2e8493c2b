//! `gsv bench latency`: a routed Echo call (agent → gateway → node → gateway → agent)
//! against two direct WebSocket round trips with the same payload.
//!
//! The figure: `gsv gateway` and a real `gsv node --echo-tool` run as child processes,
//! as in production, so every hop of a routed call crosses processes; the agent is
//! [`AgentClient`] in this process. The baseline: a bare tokio-tungstenite echo server
//! on a thread of its own (a single-threaded runtime, standing in for a separate
//! process) and a client in this process; one sample is two round trips of the agent's
//! request frame, the hops a routed call makes, each of them waking another thread as
//! each hop between processes does.
//!
//! For information, two more paths: a raw WebSocket agent calling a simulated node (a
//! task in this process answering with a canned result) through the same gateway
//! process, which isolates the gateway hop; and the earlier in-process set-up (gateway
//! and node in this process's runtime, `AgentClient`) against an echo task in the same
//! runtime. The latter's baseline flips between two figures from run to run: fast when
//! the echo task shares a thread with the client (no wake-up at all, which no two
//! processes can do), about twice as slow otherwise. All five paths interleave one
//! sample at a time.

use super::fleet::{mint_nodes, ProcessRig, TempDir};
use super::report::{Report, Row};
use super::stats::{summarize, Summary};
use super::BenchOptions;
use crate::client::AgentClient;
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::encode_req;
use gsv_protocol::Method;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let n = if opts.quick { 200 } else { 5000 };
    let dir = TempDir::new(opts, "latency")?;
    let procs = ProcessRig::start(&dir.0, "bench", true).await?;
    let rig = match super::mcp::rig(opts).await {
        Ok(r) => r,
        Err(e) => {
            procs.stop().await;
            return Err(e);
        }
    };
    let outcome = measure(&procs, &rig, n).await;
    rig.stop.cancel();
    let _ = rig.node.await;
    rig.gateway.stop().await;
    procs.stop().await;
    let s = outcome?;
    let base = "2 direct WebSocket round trips, same payload";
    Ok(Report::new(
        "latency",
        format!(
            "{n} sequential Echo calls via `gsv gateway` + `gsv node` child processes (1 \
             agent, 1 node), interleaved with {n} samples of 2 round trips of the same \
             {}-byte frame to a bare tokio-tungstenite echo server on its own thread; mean \
             routed {:.0} µs vs {:.0} µs. In-process gateway + node (earlier set-up): p50 \
             {:.0} µs; echo task in the shared runtime: p50 {:.0} µs",
            s.bytes, s.routed.mean_us, s.direct.mean_us, s.in_process.p50_us, s.shared.p50_us
        ),
        vec![
            Row::at_most(
                "routed Echo call, p50",
                s.routed.p50_us,
                format!("{base}, p50"),
                s.direct.p50_us,
                "µs",
                1.3,
            ),
            Row::at_most(
                "routed Echo call, p99",
                s.routed.p99_us,
                format!("{base}, p99"),
                s.direct.p99_us,
                "µs",
                2.0,
            ),
            info(Row::at_most(
                "raw agent + simulated node, p50",
                s.bare.p50_us,
                format!("{base}, p50"),
                s.direct.p50_us,
                "µs",
                1.3,
            )),
            info(Row::at_most(
                "raw agent + simulated node, p99",
                s.bare.p99_us,
                format!("{base}, p99"),
                s.direct.p99_us,
                "µs",
                2.0,
            )),
            info(Row::at_most(
                "in-process gateway + node, p50",
                s.in_process.p50_us,
                "2 round trips, echo task in the shared runtime, p50",
                s.shared.p50_us,
                "µs",
                1.3,
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

/// What one run measured.
struct Samples {
    /// `AgentClient` → gateway process → node process (the figure).
    routed: Summary,
    /// Two round trips to the echo server on its own thread (the baseline).
    direct: Summary,
    /// A raw WebSocket agent → gateway process → simulated node in this process.
    bare: Summary,
    /// `AgentClient` → in-process gateway → in-process node.
    in_process: Summary,
    /// Two round trips to an echo task in the shared runtime.
    shared: Summary,
    /// Size of the request frame.
    bytes: usize,
}

async fn measure(procs: &ProcessRig, rig: &super::mcp::Rig, n: usize) -> Result<Samples, String> {
    let agent = AgentClient::connect(&procs.gateway.url(), &procs.agent_token)
        .await
        .map_err(|e| format!("agent: {e}"))?;
    let local_agent = AgentClient::connect(&rig.gateway.url(), &rig.token)
        .await
        .map_err(|e| format!("agent: {e}"))?;
    let args = json!({"text": "ping"});
    // The frame the agent sends (id width as in a long run).
    let payload = encode_req(
        "1000",
        Method::ToolsCall,
        &json!({"name": "bench__Echo", "args": args}),
    );

    // The baseline's echo server, on a thread of its own.
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let server = std::thread::Builder::new()
        .name("bench-echo".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(600), echo_server(listener)).await;
                }
            });
        })
        .map_err(|e| e.to_string())?;
    let (mut direct, _) =
        tokio_tungstenite::connect_async_with_config(format!("ws://{addr}/"), None, true)
            .await
            .map_err(|e| format!("echo pair: {e}"))?;
    // The earlier baseline: an echo task in this process's runtime.
    let shared_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let shared_addr = shared_listener.local_addr().map_err(|e| e.to_string())?;
    let shared_server = tokio::spawn(echo_server(shared_listener));
    let (mut shared, _) =
        tokio_tungstenite::connect_async_with_config(format!("ws://{shared_addr}/"), None, true)
            .await
            .map_err(|e| format!("echo pair: {e}"))?;

    // The gateway hop alone: a raw WebSocket agent and a simulated node that answers
    // with a canned result (no AgentClient, no real node's dispatch).
    let data = &procs.gateway.data;
    let creds = mint_nodes(data, 1)?;
    let template = super::sim::NodeTemplate::standard(data)?;
    let sim_ws = super::sim::connect_node(
        &procs.gateway.node_url(),
        &template,
        &creds[0].0,
        &creds[0].1,
    )
    .await?;
    let sim_stop = tokio_util::sync::CancellationToken::new();
    let sim_task = tokio::spawn({
        let stop = sim_stop.clone();
        async move { super::sim::serve(sim_ws, false, &stop).await }
    });
    let mut raw = super::sim::connect_agent(&procs.gateway.url(), &procs.agent_token).await?;
    let raw_params = json!({"name": format!("{}__Echo", creds[0].0), "args": args});
    let mut seq = 1000u64;
    let mut raw_frame = move || {
        seq += 1;
        encode_req(&seq.to_string(), Method::ToolsCall, &raw_params)
    };

    for _ in 0..50 {
        call(&agent, &args).await?;
        round_trip(&mut direct, &payload).await?;
        round_trip_once(&mut raw, &raw_frame()).await?;
        call(&local_agent, &args).await?;
        round_trip(&mut shared, &payload).await?;
    }
    let mut samples: [Vec<Duration>; 5] = Default::default();
    for v in samples.iter_mut() {
        v.reserve(n);
    }
    for _ in 0..n {
        let t = Instant::now();
        call(&agent, &args).await?;
        samples[0].push(t.elapsed());
        let t = Instant::now();
        round_trip(&mut direct, &payload).await?;
        samples[1].push(t.elapsed());
        let t = Instant::now();
        round_trip_once(&mut raw, &raw_frame()).await?;
        samples[2].push(t.elapsed());
        let t = Instant::now();
        call(&local_agent, &args).await?;
        samples[3].push(t.elapsed());
        let t = Instant::now();
        round_trip(&mut shared, &payload).await?;
        samples[4].push(t.elapsed());
    }
    let _ = direct.close(None).await;
    let _ = shared.close(None).await;
    // The echo server ends when its connection closes.
    let _ = tokio::task::spawn_blocking(move || server.join()).await;
    shared_server.abort();
    sim_stop.cancel();
    let _ = sim_task.await;
    Ok(Samples {
        routed: summarize(&samples[0]),
        direct: summarize(&samples[1]),
        bare: summarize(&samples[2]),
        in_process: summarize(&samples[3]),
        shared: summarize(&samples[4]),
        bytes: payload.len(),
    })
}

/// One Echo call through `agent`.
async fn call(agent: &AgentClient, args: &serde_json::Value) -> Result<(), String> {
    let res = agent
        .call("bench__Echo", args.clone(), None)
        .await
        .map_err(|e| e.to_string())?;
    if res.is_error {
        return Err(format!("Echo failed: {}", res.joined_text()));
    }
    Ok(())
}

/// Accepts one connection and echoes its text frames until it closes.
async fn echo_server(listener: tokio::net::TcpListener) {
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
