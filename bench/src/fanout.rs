//! `gsv bench fanout`: one `tools.fanout` of Echo to 1,000 and 8,000 simulated nodes,
//! against the same calls pipelined from one WebSocket client, in the same run.
//!
//! It exists to price what a fan-out adds over calling every node yourself: the job
//! record, the per-node policy check, the `fanout.result` event per node, the sort
//! and the rolling batch. Both sides go through the same gateway to the same nodes,
//! from the same kind of client (a raw WebSocket agent that decodes every frame it
//! reads), so the ratio is the fan-out's own cost.
//!
//! `gsv gateway` runs as a child process (so 8,000 node connections are split between
//! two processes, each well under the machine's open-file limit); the simulated nodes
//! ([`crate::sim`]) answer Echo with a canned result. Nodes are connected in steps, so
//! at each size exactly that many are online and `id~sim-*` picks them all.
//!
//! - **floor**: one agent connection sends one `tools.call` of `{node}__Echo` per node,
//!   all in flight at once (up to the gateway's per-connection bound of
//!   [`MAX_IN_FLIGHT_PER_AGENT`] calls; past it, the next call goes out as an answer
//!   comes in), timed from the first frame sent to the last answer read.
//! - **fan-out**: one agent connection sends one `tools.fanout` {select: `id~sim-*`,
//!   tool: Echo}, timed from sending it to reading its final `res`, reading every
//!   `fanout.result` event on the way (each is counted; the result's summary must say
//!   every node answered ok).
//!
//! Rounds alternate floor and fan-out after one unmeasured warm-up of each; the
//! medians count.

use super::fleet::{cpu_ms, mint_agent, mint_nodes, raise_nofile, GatewayProcess, TempDir};
use super::report::{Report, Row};
use super::sim::{self, NodeTemplate, Ws};
use super::BenchOptions;
use futures_util::{FutureExt, SinkExt, StreamExt};
use gsv_protocol::fanout::FanoutResult;
use gsv_protocol::frame::encode_req;
use gsv_protocol::limits::MAX_IN_FLIGHT_PER_AGENT;
use gsv_protocol::{EventName, Frame, Method};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// Most a fan-out may take, against the floor.
pub const TARGET_RATIO: f64 = 1.3;

/// The selector that picks every simulated node.
const SELECT: &str = "id~sim-*";

/// The Echo arguments both sides send.
const ARGS: &str = r#"{"text":"ping"}"#;

/// How long one round (either side) may take before the bench gives up.
const ROUND_LIMIT: Duration = Duration::from_secs(60);

/// Most nodes this scenario connects (two processes share them; see the module doc).
const MAX_NODES: usize = 9_000;

/// The absolute target for a fan-out to `n` nodes (all results back), when the issue
/// sets one: 0.15 s up to 1,000 nodes, 1 s up to 8,000.
fn budget_ms(n: usize) -> Option<f64> {
    match n {
        0..=1_000 => Some(150.0),
        1_001..=8_000 => Some(1_000.0),
        _ => None,
    }
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let limit = raise_nofile();
    let mut sizes = match &opts.nodes {
        Some(list) if !list.is_empty() => list.clone(),
        _ if opts.quick => vec![20],
        _ => vec![1_000, 8_000],
    };
    sizes.sort_unstable();
    sizes.dedup();
    let rounds = opts.rounds.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let max = *sizes.last().unwrap_or(&0);
    if max == 0 || max > MAX_NODES {
        return Err(format!("--nodes: give sizes from 1 to {MAX_NODES}"));
    }
    if limit < (max as u64) + 500 {
        return Err(format!(
            "open-file limit {limit} is too low for {max} nodes"
        ));
    }
    let dir = TempDir::new(opts, "fanout")?;
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let creds = mint_nodes(&data, max)?;
    let token = mint_agent(&data)?;
    let template = NodeTemplate::standard(&dir.0)?;
    let gw = GatewayProcess::spawn(&data, "127.0.0.1:0").await?;
    let stop = CancellationToken::new();
    let outcome = measure(&gw, &template, &creds, &token, &sizes, rounds, &stop).await;
    stop.cancel();
    drop(gw);
    let points = outcome?;
    let mut rows = Vec::new();
    for p in &points {
        rows.push(Row::at_most(
            format!("fan-out Echo to {} nodes, all results", p.nodes),
            p.fanout_ms,
            format!("{} tools.call pipelined on 1 connection", p.nodes),
            p.floor_ms,
            "ms",
            TARGET_RATIO,
        ));
        if let Some(budget) = budget_ms(p.nodes) {
            let mut row = Row::at_most(
                format!("fan-out to {} nodes against its time budget", p.nodes),
                p.fanout_ms,
                format!("{budget} ms budget"),
                budget,
                "ms",
                1.0,
            );
            row.target = format!("≤ {budget} ms");
            rows.push(row);
        }
    }
    let ranges = points
        .iter()
        .map(|p| {
            format!(
                "{} nodes: fan-out {:.1}–{:.1} ms, floor {:.1}–{:.1} ms; CPU per round, \
                 gateway: fan-out {:.0} ms, floor {:.0} ms, this process (nodes and \
                 client): fan-out {:.0} ms, floor {:.0} ms",
                p.nodes,
                p.fanout_range.0,
                p.fanout_range.1,
                p.floor_range.0,
                p.floor_range.1,
                p.fanout_cpu.0,
                p.floor_cpu.0,
                p.fanout_cpu.1,
                p.floor_cpu.1
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Report::new(
        "fanout",
        format!(
            "`gsv gateway` as a child process; simulated nodes answering Echo; per size one \
             tools.fanout {{select: {SELECT:?}, tool: Echo}} timed to its final res (every \
             fanout.result event read) vs the same calls as tools.call from one connection, \
             at most {MAX_IN_FLIGHT_PER_AGENT} in flight (the gateway's per-connection \
             bound); {rounds} rounds per side after a warm-up, alternating; medians \
             ({ranges})"
        ),
        rows,
    ))
}

/// One size's medians (and ranges) in milliseconds.
struct Point {
    nodes: usize,
    fanout_ms: f64,
    floor_ms: f64,
    fanout_range: (f64, f64),
    floor_range: (f64, f64),
    /// Median CPU per round: (gateway, this process), ms.
    fanout_cpu: (f64, f64),
    floor_cpu: (f64, f64),
}

/// CPU used so far by the gateway and by this process, ms.
fn cpus(gw: &GatewayProcess) -> Result<(f64, f64), String> {
    Ok((gw.cpu_ms()?, cpu_ms("/proc/self/stat")?))
}

async fn measure(
    gw: &GatewayProcess,
    template: &NodeTemplate,
    creds: &[(String, String)],
    token: &str,
    sizes: &[usize],
    rounds: usize,
    stop: &CancellationToken,
) -> Result<Vec<Point>, String> {
    let url = gw.url();
    let node_url = gw.node_url();
    let mut connected = 0;
    let mut points = Vec::new();
    for &n in sizes {
        sim::connect_fleet(&node_url, template, &creds[connected..n], 200, stop).await?;
        connected = n;
        let names: Vec<String> = creds[..n]
            .iter()
            .map(|(id, _)| format!("{id}__Echo"))
            .collect();
        // Let the registration wave settle before timing.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut agent = sim::connect_agent(&url, token).await?;
        let (mut floor, mut fan) = (Vec::new(), Vec::new());
        let (mut floor_cpu, mut fan_cpu) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        for round in 0..=rounds {
            let c0 = cpus(gw)?;
            let f = floor_round(&mut agent, &names, round).await?;
            let c1 = cpus(gw)?;
            let g = fanout_round(&mut agent, n, round).await?;
            let c2 = cpus(gw)?;
            if round > 0 {
                floor.push(f);
                fan.push(g);
                floor_cpu.0.push(c1.0 - c0.0);
                floor_cpu.1.push(c1.1 - c0.1);
                fan_cpu.0.push(c2.0 - c1.0);
                fan_cpu.1.push(c2.1 - c1.1);
            }
        }
        let _ = agent.close(None).await;
        points.push(Point {
            nodes: n,
            fanout_ms: median(&mut fan),
            floor_ms: median(&mut floor),
            fanout_range: range(&fan),
            floor_range: range(&floor),
            fanout_cpu: (median(&mut fan_cpu.0), median(&mut fan_cpu.1)),
            floor_cpu: (median(&mut floor_cpu.0), median(&mut floor_cpu.1)),
        });
    }
    Ok(points)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn range(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// The next frame, or an error after [`ROUND_LIMIT`] from `start`.
async fn next_text(ws: &mut Ws, start: Instant) -> Result<String, String> {
    loop {
        let left = ROUND_LIMIT
            .checked_sub(start.elapsed())
            .ok_or_else(|| format!("a round took over {ROUND_LIMIT:?}"))?;
        match tokio::time::timeout(left, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => return Ok(t.as_str().to_owned()),
            Ok(Some(Ok(Message::Close(c)))) => {
                return Err(format!("agent connection closed: {c:?}"))
            }
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(e))) => return Err(format!("agent connection: {e}")),
            Ok(None) => return Err("agent connection ended".into()),
            Err(_) => return Err(format!("a round took over {ROUND_LIMIT:?}")),
        }
    }
}

/// The floor: one `tools.call` per node on one connection, as many in flight as the
/// gateway allows per connection. Frames are queued and flushed together whenever no
/// answer is ready to read (so the client writes in batches, as the gateway does).
async fn floor_round(ws: &mut Ws, names: &[String], round: usize) -> Result<f64, String> {
    let args: serde_json::Value = serde_json::from_str(ARGS).map_err(|e| e.to_string())?;
    let frame = |i: usize| {
        encode_req(
            &format!("f{round}-{i}"),
            Method::ToolsCall,
            &json!({"name": names[i], "args": args}),
        )
    };
    // Encoded before the clock starts: the floor is the gateway's work, not the client's.
    let frames: Vec<String> = (0..names.len()).map(frame).collect();
    let mut frames = frames.into_iter();
    let n = names.len();
    let window = MAX_IN_FLIGHT_PER_AGENT.min(n);
    let start = Instant::now();
    for f in frames.by_ref().take(window) {
        ws.feed(Message::text(f)).await.map_err(|e| e.to_string())?;
    }
    ws.flush().await.map_err(|e| e.to_string())?;
    let mut done = 0;
    let mut dirty = false;
    let mut ready: Option<Message> = None;
    while done < n {
        let text = match ready.take() {
            Some(Message::Text(t)) => t.as_str().to_owned(),
            Some(Message::Close(c)) => return Err(format!("agent connection closed: {c:?}")),
            Some(_) => String::new(),
            None => {
                if dirty {
                    ws.flush().await.map_err(|e| e.to_string())?;
                    dirty = false;
                }
                next_text(ws, start).await?
            }
        };
        if !text.is_empty() {
            match Frame::decode(&text) {
                Ok(Frame::Res { outcome: Ok(_), .. }) => {
                    done += 1;
                    if let Some(f) = frames.next() {
                        ws.feed(Message::text(f)).await.map_err(|e| e.to_string())?;
                        dirty = true;
                    }
                }
                Ok(Frame::Res {
                    outcome: Err(e), ..
                }) => {
                    return Err(format!(
                        "floor call failed: {}: {}",
                        e.code.as_str(),
                        e.message
                    ))
                }
                Ok(_) => {}
                Err(e) => return Err(format!("bad frame from the gateway: {e}")),
            }
        }
        ready = match ws.next().now_or_never() {
            Some(Some(Ok(m))) => Some(m),
            Some(Some(Err(e))) => return Err(format!("agent connection: {e}")),
            Some(None) => return Err("agent connection ended".into()),
            None => None,
        };
    }
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// The fan-out: one `tools.fanout` to every node, timed to its final `res`; every
/// `fanout.result` event is read and counted on the way.
async fn fanout_round(ws: &mut Ws, n: usize, round: usize) -> Result<f64, String> {
    let id = format!("fan{round}");
    // As JSON, not the protocol's struct: the bench sends what any client would.
    let args: serde_json::Value = serde_json::from_str(ARGS).map_err(|e| e.to_string())?;
    let params = json!({"tool": "Echo", "select": SELECT, "args": args});
    let req = encode_req(&id, Method::ToolsFanout, &params);
    let start = Instant::now();
    ws.send(Message::text(req))
        .await
        .map_err(|e| e.to_string())?;
    let mut events = 0;
    loop {
        let text = next_text(ws, start).await?;
        match Frame::decode(&text) {
            Ok(Frame::Event {
                event: EventName::FanoutResult,
                ..
            }) => events += 1,
            Ok(Frame::Res {
                id: rid,
                outcome: Ok(raw),
            }) if rid == id => {
                let elapsed = start.elapsed().as_secs_f64() * 1e3;
                let result: FanoutResult = serde_json::from_str(raw.get())
                    .map_err(|e| format!("bad tools.fanout result: {e}"))?;
                if result.summary.ok != n || result.results.len() != n || events != n {
                    return Err(format!(
                        "fan-out to {n} nodes: {} results, {events} events, summary {:?}",
                        result.results.len(),
                        result.summary
                    ));
                }
                return Ok(elapsed);
            }
            Ok(Frame::Res {
                id: rid,
                outcome: Err(e),
            }) if rid == id => {
                return Err(format!(
                    "tools.fanout failed: {}: {}",
                    e.code.as_str(),
                    e.message
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(format!("bad frame from the gateway: {e}")),
        }
    }
}
