//! `gsv bench latency`: a routed Echo call (agent → gateway → node → gateway → agent)
//! against two direct WebSocket round trips with the same payload.
//!
//! Every hop crosses processes on both sides. The figure: `gsv gateway` and a real
//! `gsv node --echo-tool` run as child processes, as in production; the agent is
//! `gsv_client::AgentClient`. The baseline: a bare tokio-tungstenite echo server in a child process of its own (`gsv bench
//! echo-server`) and a bare client; one sample is two round trips of the agent's
//! request frame, the hops a routed call makes. Both clients run on one thread with a
//! single-threaded runtime, standing in for the agent's process (as `gsv call` runs).
//!
//! For information, two more paths: a raw WebSocket agent calling a simulated node (a
//! task in this process answering with a canned result) through the same gateway
//! process, which isolates the gateway hop; and the earlier in-process set-up (gateway
//! and node in this process's runtime, `AgentClient`) against an echo task in that
//! runtime. All five paths interleave one sample at a time.

use super::fleet::{mint_nodes, ProcessRig, TempDir};
use super::report::{Report, Row};
use super::stats::{summarize, Summary};
use super::BenchOptions;
use futures_util::{SinkExt, StreamExt};
use gsv_client::AgentClient;
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
    // The agent side — `AgentClient` and the baseline's client — runs on a thread of
    // its own with a single-threaded runtime, standing in for the agent's process (as
    // `gsv call` runs); the simulated node and the in-process gateway stay on this
    // process's multi-threaded runtime.
    let here = tokio::runtime::Handle::current();
    let outcome = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let agent_side = std::thread::Builder::new()
                .name("bench-agent".into())
                .spawn_scoped(scope, || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| e.to_string())?;
                    rt.block_on(measure(&procs, &rig, n, &here))
                })
                .map_err(|e| e.to_string())?;
            agent_side
                .join()
                .unwrap_or_else(|_| Err("the agent thread panicked".into()))
        })
    });
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
             {}-byte frame to a bare tokio-tungstenite echo server process; mean \
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
                "raw agent + `gsv node` process, p50",
                s.raw_real.p50_us,
                format!("{base}, p50"),
                s.direct.p50_us,
                "µs",
                1.3,
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
fn info(r: Row) -> Row {
    r.for_info()
}

/// What one run measured.
struct Samples {
    /// `AgentClient` → gateway process → node process (the figure).
    routed: Summary,
    /// Two round trips to the echo server process (the baseline).
    direct: Summary,
    /// A raw WebSocket agent → gateway process → simulated node in this process.
    bare: Summary,
    /// `AgentClient` → in-process gateway → in-process node.
    in_process: Summary,
    /// Two round trips to an echo task in the shared runtime.
    shared: Summary,
    /// A raw WebSocket agent → gateway process → node process (the node's share).
    raw_real: Summary,
    /// Size of the request frame.
    bytes: usize,
}

async fn measure(
    procs: &ProcessRig,
    rig: &super::mcp::Rig,
    n: usize,
    fleet: &tokio::runtime::Handle,
) -> Result<Samples, String> {
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

    // The baseline's echo server: a process of its own, as the gateway and node are.
    let (mut echo, addr) = echo_process().await?;
    let (mut direct, _) =
        tokio_tungstenite::connect_async_with_config(format!("ws://{addr}/"), None, true)
            .await
            .map_err(|e| format!("echo pair: {e}"))?;
    // The earlier baseline: an echo task in the in-process gateway's runtime (sockets
    // are registered with the runtime that creates them, so it binds there).
    let shared_std = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let shared_addr = shared_std.local_addr().map_err(|e| e.to_string())?;
    shared_std
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let shared_server = fleet.spawn(async move {
        if let Ok(listener) = tokio::net::TcpListener::from_std(shared_std) {
            echo_server(listener).await;
        }
    });
    let (mut shared, _) =
        tokio_tungstenite::connect_async_with_config(format!("ws://{shared_addr}/"), None, true)
            .await
            .map_err(|e| format!("echo pair: {e}"))?;

    // The gateway hop alone: a raw WebSocket agent and a simulated node that answers
    // with a canned result (no AgentClient, no real node's dispatch).
    let data = &procs.gateway.data;
    let creds = mint_nodes(data, 1)?;
    let template = super::sim::NodeTemplate::standard(data)?;
    let sim_stop = tokio_util::sync::CancellationToken::new();
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let sim_task = fleet.spawn({
        let stop = sim_stop.clone();
        let url = procs.gateway.node_url();
        let (id, token) = creds[0].clone();
        async move {
            let ws = super::sim::connect_node(&url, &template, &id, &token).await;
            let ws = match ws {
                Ok(ws) => ws,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            super::sim::serve(ws, false, &stop).await
        }
    });
    ready
        .await
        .map_err(|_| "the simulated node's task ended".to_owned())??;
    let mut raw = super::sim::connect_agent(&procs.gateway.url(), &procs.agent_token).await?;
    let raw_params = json!({"name": format!("{}__Echo", creds[0].0), "args": args});
    let real_params = json!({"name": "bench__Echo", "args": args});
    let mut seq = 1000u64;
    let mut raw_frame = move |params: &serde_json::Value| {
        seq += 1;
        encode_req(&seq.to_string(), Method::ToolsCall, params)
    };

    for _ in 0..50 {
        call(&agent, &args).await?;
        round_trip(&mut direct, &payload).await?;
        round_trip_once(&mut raw, &raw_frame(&raw_params)).await?;
        round_trip_once(&mut raw, &raw_frame(&real_params)).await?;
        call(&local_agent, &args).await?;
        round_trip(&mut shared, &payload).await?;
    }
    let mut samples: [Vec<Duration>; 6] = Default::default();
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
        round_trip_once(&mut raw, &raw_frame(&raw_params)).await?;
        samples[2].push(t.elapsed());
        let t = Instant::now();
        round_trip_once(&mut raw, &raw_frame(&real_params)).await?;
        samples[5].push(t.elapsed());
        let t = Instant::now();
        call(&local_agent, &args).await?;
        samples[3].push(t.elapsed());
        let t = Instant::now();
        round_trip(&mut shared, &payload).await?;
        samples[4].push(t.elapsed());
    }
    let _ = direct.close(None).await;
    let _ = shared.close(None).await;
    // The echo process ends when its connection closes; kill it if it has not.
    if tokio::time::timeout(Duration::from_secs(5), echo.wait())
        .await
        .is_err()
    {
        let _ = echo.kill().await;
    }
    shared_server.abort();
    sim_stop.cancel();
    let _ = sim_task.await;
    Ok(Samples {
        routed: summarize(&samples[0]),
        direct: summarize(&samples[1]),
        bare: summarize(&samples[2]),
        in_process: summarize(&samples[3]),
        shared: summarize(&samples[4]),
        raw_real: summarize(&samples[5]),
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

/// Starts `gsv bench echo-server` (this executable) and reads the address it listens
/// on from its first line of output.
async fn echo_process() -> Result<(tokio::process::Child, String), String> {
    use tokio::io::AsyncBufReadExt;
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut child = tokio::process::Command::new(exe)
        .args(["bench", ECHO_SERVER])
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("echo server: {e}"))?;
    let stdout = child.stdout.take().ok_or("echo server: no stdout")?;
    let mut line = String::new();
    let mut reader = tokio::io::BufReader::new(stdout);
    match tokio::time::timeout(Duration::from_secs(10), reader.read_line(&mut line)).await {
        Ok(Ok(n)) if n > 0 => Ok((child, line.trim().to_owned())),
        _ => Err("echo server: no address on its output".into()),
    }
}

/// The hidden scenario name under which `gsv bench` runs the baseline's echo server.
pub const ECHO_SERVER: &str = "echo-server";

/// `gsv bench echo-server`: the latency baseline's far end, as a process of its own.
/// Listens on 127.0.0.1 (an ephemeral port, printed on stdout), echoes the text frames
/// of one connection until it closes, and gives up after 10 minutes.
pub async fn serve_echo_process() -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("{addr}");
    let _ = tokio::time::timeout(Duration::from_secs(600), echo_server(listener)).await;
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
