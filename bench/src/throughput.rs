//! `gsv bench throughput`: routed calls per second with many calls in flight, against a
//! minimal relay that forwards frames by a numeric prefix without parsing them.
//!
//! Both sides use the same simulated nodes (which decode each `tool.invoke` and answer
//! a canned Echo result) and the same raw agents (each connection keeps `window` calls
//! outstanding). The gateway runs in this process (`gsv_gateway::start`). The relay is
//! a small tokio-tungstenite server: an agent frame `N|json` goes to node N as
//! `A|json` (A = the agent's index); the node answers `A|json`, which goes back to
//! agent A as `json`. Rounds alternate relay and gateway; the median round counts.

use super::fleet::{mint_agent, mint_nodes, raise_nofile, TempDir};
use super::report::{Report, Row};
use super::sim::{self, NodeTemplate, Ws};
use super::BenchOptions;
use futures_util::{SinkExt, StreamExt};
use gsv_gateway::GatewayConfig;
use gsv_protocol::frame::encode_req;
use gsv_protocol::{Frame, Method};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

struct Sizes {
    nodes: usize,
    conns: usize,
    window: usize,
    calls: usize,
    rounds: usize,
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    raise_nofile();
    let s = if opts.quick {
        Sizes {
            nodes: 4,
            conns: 2,
            window: 4,
            calls: 200,
            rounds: 1,
        }
    } else {
        Sizes {
            nodes: 16,
            conns: 8,
            window: 8,
            calls: 40_000,
            rounds: 5,
        }
    };
    let dir = TempDir::new(opts, "throughput")?;
    let template = NodeTemplate::standard(&dir.0)?;
    let stop = CancellationToken::new();
    let result = measure(&s, &dir, &template, &stop).await;
    stop.cancel();
    let (gw, relay) = result?;
    let in_flight = s.conns * s.window;
    Ok(Report::new(
        "throughput",
        format!(
            "{} Echo calls per round, {in_flight} in flight ({} agent connections × {}) over {} \
             simulated nodes; {} rounds per side, alternating; median round",
            s.calls, s.conns, s.window, s.nodes, s.rounds
        ),
        vec![Row::at_least(
            "routed calls/s via the gateway",
            gw,
            "minimal relay forwarding by id prefix",
            relay,
            "calls/s",
            0.6,
        )],
    ))
}

async fn measure(
    s: &Sizes,
    dir: &TempDir,
    template: &NodeTemplate,
    stop: &CancellationToken,
) -> Result<(f64, f64), String> {
    // The gateway and its nodes.
    let data = dir.0.join("data");
    let mut config = GatewayConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)), data.clone());
    config.write_addr_file = false;
    config.caps = super::fleet::bench_caps();
    let gateway = gsv_gateway::start(config)
        .await
        .map_err(|e| format!("gateway: {e}"))?;
    let outcome = async {
        let creds = mint_nodes(&data, s.nodes)?;
        let token = mint_agent(&data)?;
        let node_url = format!("ws://{}{}", gateway.addr, gsv_protocol::endpoint::NODE_PATH);
        sim::connect_fleet(&node_url, template, &creds, 64, stop).await?;
        let names: Vec<String> = creds.iter().map(|(id, _)| format!("{id}__Echo")).collect();

        // The relay and its nodes.
        let relay = Relay::start(stop).await?;
        for _ in 0..s.nodes {
            let ws = sim::dial(&format!("ws://{}/", relay.node_addr)).await?;
            let stop = stop.clone();
            tokio::spawn(async move { sim::serve(ws, true, &stop).await });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while relay.nodes.read().map(|v| v.len()).unwrap_or(0) < s.nodes {
            if Instant::now() > deadline {
                return Err("relay nodes did not connect".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        let (mut gw, mut rl) = (Vec::new(), Vec::new());
        // One unmeasured warm-up round each.
        for round in 0..=s.rounds {
            let r = relay_round(s, relay.agent_addr).await?;
            let g = gateway_round(s, &gateway.url(), &token, &names).await?;
            if round > 0 {
                rl.push(r);
                gw.push(g);
            }
        }
        Ok((median(&mut gw), median(&mut rl)))
    }
    .await;
    stop.cancel();
    gateway.stop().await;
    outcome
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn gateway_round(s: &Sizes, url: &str, token: &str, names: &[String]) -> Result<f64, String> {
    let mut conns = Vec::new();
    for _ in 0..s.conns {
        conns.push(sim::connect_agent(url, token).await?);
    }
    let names = Arc::new(names.to_vec());
    drive(s, conns, move |c, seq| {
        let name = &names[(c + seq) % names.len()];
        encode_req(
            &seq.to_string(),
            Method::ToolsCall,
            &json!({"name": name, "args": {"text": "ping"}}),
        )
    })
    .await
}

async fn relay_round(s: &Sizes, agent_addr: SocketAddr) -> Result<f64, String> {
    let mut conns = Vec::new();
    for _ in 0..s.conns {
        conns.push(sim::dial(&format!("ws://{agent_addr}/")).await?);
    }
    let nodes = s.nodes;
    drive(s, conns, move |c, seq| {
        let node = (c + seq) % nodes;
        let frame = encode_req(
            &seq.to_string(),
            Method::ToolInvoke,
            &json!({"tool": "Echo", "args": {"text": "ping"}, "timeoutMs": 60_000}),
        );
        format!("{node}|{frame}")
    })
    .await
}

/// Runs `s.calls` calls over `conns`, `s.window` outstanding per connection; returns
/// calls per second.
async fn drive(
    s: &Sizes,
    conns: Vec<Ws>,
    frame: impl Fn(usize, usize) -> String + Send + Sync + 'static,
) -> Result<f64, String> {
    let frame = Arc::new(frame);
    let per_conn = s.calls / s.conns;
    let window = s.window;
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(c, mut ws)| {
            let frame = frame.clone();
            tokio::spawn(async move {
                let mut sent = 0;
                while sent < window.min(per_conn) {
                    ws.send(Message::text(frame(c, sent)))
                        .await
                        .map_err(|e| e.to_string())?;
                    sent += 1;
                }
                let mut done = 0;
                while done < per_conn {
                    let text = match tokio::time::timeout(Duration::from_secs(30), ws.next()).await
                    {
                        Ok(Some(Ok(Message::Text(t)))) => t,
                        Ok(Some(Ok(_))) => continue,
                        Ok(other) => return Err(format!("agent connection: {other:?}")),
                        Err(_) => return Err("no answer in 30 s".to_owned()),
                    };
                    match Frame::decode(text.as_str()) {
                        Ok(Frame::Res { outcome: Ok(_), .. }) => done += 1,
                        Ok(Frame::Res {
                            outcome: Err(e), ..
                        }) => {
                            return Err(format!("call failed: {}: {}", e.code.as_str(), e.message))
                        }
                        _ => continue,
                    }
                    if sent < per_conn {
                        ws.send(Message::text(frame(c, sent)))
                            .await
                            .map_err(|e| e.to_string())?;
                        sent += 1;
                    }
                }
                let _ = ws.close(None).await;
                Ok::<(), String>(())
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok((per_conn * s.conns) as f64 / elapsed)
}

type Peers = Arc<RwLock<Vec<mpsc::Sender<String>>>>;

/// The baseline relay: two listeners (nodes, agents), routing by a numeric prefix.
struct Relay {
    node_addr: SocketAddr,
    agent_addr: SocketAddr,
    nodes: Peers,
}

impl Relay {
    async fn start(stop: &CancellationToken) -> Result<Relay, String> {
        let nl = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let al = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let relay = Relay {
            node_addr: nl.local_addr().map_err(|e| e.to_string())?,
            agent_addr: al.local_addr().map_err(|e| e.to_string())?,
            nodes: Peers::default(),
        };
        let agents = Peers::default();
        for (listener, is_node) in [(nl, true), (al, false)] {
            let (nodes, agents, stop) = (relay.nodes.clone(), agents.clone(), stop.clone());
            tokio::spawn(async move {
                loop {
                    let tcp = tokio::select! {
                        _ = stop.cancelled() => break,
                        r = listener.accept() => match r { Ok((t, _)) => t, Err(_) => continue },
                    };
                    let (nodes, agents, stop) = (nodes.clone(), agents.clone(), stop.clone());
                    tokio::spawn(async move {
                        let _ = tcp.set_nodelay(true);
                        if let Ok(ws) = tokio_tungstenite::accept_async(tcp).await {
                            relay_conn(ws, is_node, nodes, agents, stop).await;
                        }
                    });
                }
            });
        }
        Ok(relay)
    }
}

/// One relay connection: a writer task fed by a channel, and a reader that routes.
async fn relay_conn<S>(
    ws: tokio_tungstenite::WebSocketStream<S>,
    is_node: bool,
    nodes: Peers,
    agents: Peers,
    stop: CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::channel::<String>(1024);
    let me = {
        let mut own = if is_node { &nodes } else { &agents }
            .write()
            .expect("lock");
        own.push(tx);
        own.len() - 1
    };
    let writer = tokio::spawn(async move {
        while let Some(text) = rx.recv().await {
            if sink.send(Message::text(text)).await.is_err() {
                break;
            }
        }
    });
    loop {
        let msg = tokio::select! {
            _ = stop.cancelled() => break,
            m = stream.next() => m,
        };
        let text = match msg {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
            Some(Ok(_)) => continue,
        };
        let t = text.as_str();
        let Some(bar) = t.find('|') else { continue };
        let Ok(target) = t[..bar].parse::<usize>() else {
            continue;
        };
        let (out, peers) = if is_node {
            (t[bar + 1..].to_owned(), &agents)
        } else {
            (format!("{me}|{}", &t[bar + 1..]), &nodes)
        };
        let tx = peers.read().expect("lock").get(target).cloned();
        if let Some(tx) = tx {
            let _ = tx.send(out).await;
        }
    }
    writer.abort();
}
