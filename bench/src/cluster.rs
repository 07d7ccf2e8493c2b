//! `gsv bench cluster`: gateway replicas joined by a real `nats-server` on this
//! machine, each on its own loopback address, with simulated nodes spread over them.
//!
//! Measured, in one run: how long the fleet takes to register; Echo calls from an
//! agent on every replica to random nodes, those that cross replicas (over NATS
//! request-reply) against those that stay on one (the baseline, same run, same
//! calls); each replica's RSS growth per node it holds; the NATS server's RSS; and,
//! after `kill -9` of one replica, how long until every one of its nodes is
//! registered on another (each simulated node knows every replica, as `gsv node
//! --gateway URL1,URL2,…` does).
//!
//! Simulated nodes live in this process up to [`PER_PROCESS`]; a larger fleet
//! (`--nodes 100000`) is spread over worker processes ([`super::fleet_worker`]), each
//! under the open-file limit. Each node dials its own replica first and then the
//! others in an order of its own, so a killed replica's nodes spread over the rest.
//! The kill step runs only when the other replicas can hold the whole fleet within
//! [`MAX_HELD`] connections each.

use super::fleet::{mint_agent, mint_nodes_named, raise_nofile, rss_kib, GatewayProcess, TempDir};
use super::fleet_worker::{Share, Worker, PER_PROCESS};
use super::nats::NatsServer;
use super::report::{Report, Row};
use super::sim::{self, Counters, NodeTemplate, Ws};
use super::stats::summarize;
use super::BenchOptions;
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::encode_req;
use gsv_protocol::Method;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// Cross-replica p50 may be at most this multiple of same-replica p50.
pub const TARGET_CROSS: f64 = 1.5;
/// Gateway RSS per node held, KiB.
pub const TARGET_KIB: f64 = 16.0;
/// Seconds until a killed replica's nodes are all back elsewhere.
pub const TARGET_BACK_S: f64 = 20.0;
/// Connections one replica process may hold (its open files are capped near 20,000).
pub const MAX_HELD: usize = 17_000;

struct Sizes {
    replicas: usize,
    nodes: usize,
    calls: usize,
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let sizes = if opts.quick {
        Sizes {
            replicas: 3,
            nodes: 60,
            calls: 300,
        }
    } else {
        Sizes {
            replicas: 6,
            nodes: opts
                .nodes
                .as_ref()
                .and_then(|n| n.first().copied())
                .unwrap_or(12_000),
            calls: opts.rounds.unwrap_or(10_000),
        }
    };
    let limit = raise_nofile();
    if limit < sizes.nodes.min(PER_PROCESS) as u64 + 2_000 {
        return Err(format!(
            "open-file limit {limit} is too low for {} simulated nodes in one process",
            sizes.nodes.min(PER_PROCESS)
        ));
    }
    if sizes.nodes.div_ceil(sizes.replicas) > MAX_HELD {
        return Err(format!(
            "{} nodes over {} replicas is more than {MAX_HELD} connections a replica",
            sizes.nodes, sizes.replicas
        ));
    }
    let dir = TempDir::new(opts, "cluster")?;
    let mut nats = NatsServer::start(&dir.0).await?;
    let stop = CancellationToken::new();
    let outcome = measure(&sizes, &dir, &mut nats, &stop).await;
    stop.cancel();
    outcome
}

async fn measure(
    s: &Sizes,
    dir: &TempDir,
    nats: &mut NatsServer,
    stop: &CancellationToken,
) -> Result<Report, String> {
    // Each replica's own data dir, its share of the node credentials minted there.
    let per = s.nodes.div_ceil(s.replicas);
    let mut datas = Vec::new();
    let mut creds = Vec::new();
    for r in 0..s.replicas {
        let data = dir.0.join(format!("r{r}"));
        std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
        let n = per.min(s.nodes.saturating_sub(r * per));
        creds.push(mint_nodes_named(&data, &format!("r{r}"), n)?);
        datas.push(data);
    }
    let agent_token = mint_agent(&datas[0])?;
    // Read `GET /v1/cluster` with (each replica's own data dir has it before the
    // others take it in).
    let admins = datas
        .iter()
        .map(|d| {
            gsv_gateway::store::Store::open(d)
                .and_then(|s| s.create_token(gsv_gateway::token::TokenKind::Admin, "bench", None))
                .map(|(token, _)| token)
                .map_err(|e| format!("admin token: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut replicas = Vec::new();
    for (r, data) in datas.iter().enumerate() {
        // The gateway's own cap on handshakes under way, as in the field: a replica's
        // nodes failing over at once are shed and come back with their backoff rather
        // than all handshaking at once. (Only the per-source cap is lifted: every
        // simulated node dials from 127.0.0.1.)
        let mut extra = nats.cluster_args();
        extra.extend([
            "--replica".to_owned(),
            format!("r{r}"),
            "--max-unauth-conns".to_owned(),
            gsv_gateway::admission::DEFAULT_MAX_UNAUTH.to_string(),
        ]);
        replicas
            .push(GatewayProcess::spawn_with(data, &format!("127.0.0.{}:0", r + 2), &extra).await?);
    }
    let started_kib: Vec<u64> = replicas
        .iter()
        .map(|g| g.rss_kib())
        .collect::<Result<_, _>>()?;
    // Each replica first takes in the cluster's shared state (every replica's node
    // tokens): what nodes then add is measured from there.
    let idle = settled(&replicas).await?;
    let joined_kib = idle
        .iter()
        .zip(&started_kib)
        .map(|(a, b)| a.saturating_sub(*b))
        .max()
        .unwrap_or(0);
    let node_urls: Vec<String> = replicas.iter().map(|g| g.node_url()).collect();

    // Register the fleet: each node dials its own replica first, then the next ones.
    let template = Arc::new(NodeTemplate::twelve(&dir.0)?);
    let counters = Arc::new(Counters::default());
    let sem = Arc::new(tokio::sync::Semaphore::new(200));
    let started = Instant::now();
    let mut fleet: Vec<(String, String, Vec<String>)> = Vec::with_capacity(s.nodes);
    for (r, list) in creds.iter().enumerate() {
        for (i, (id, token)) in list.iter().enumerate() {
            fleet.push((id.clone(), token.clone(), dial_order(&node_urls, r, i)));
        }
    }
    let mut workers = Vec::new();
    if fleet.len() <= PER_PROCESS {
        sim::spawn_fleet(fleet, &template, &sem, &counters, stop);
    } else {
        // Interleaved, so every worker dials every replica.
        let n = fleet.len().div_ceil(PER_PROCESS);
        let mut shares: Vec<Vec<(String, String, Vec<String>)>> =
            (0..n).map(|_| Vec::new()).collect();
        for (k, node) in fleet.into_iter().enumerate() {
            shares[k % n].push(node);
        }
        for nodes in shares {
            let share = Share {
                dir: dir.0.clone(),
                nodes,
                dials: 200 / n + 1,
            };
            workers.push(Worker::start(&share, counters.clone()).await?);
        }
    }
    wait_hello(&counters, s.nodes, Duration::from_secs(600)).await?;
    let registration = started.elapsed();
    // Every replica's copy of the node directory has every node (calls find their
    // holder without asking the bucket).
    let caught_up = wait_directories(&replicas, &admins, s.nodes, Duration::from_secs(300)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut per_node = Vec::new();
    for (r, g) in replicas.iter().enumerate() {
        let held = creds[r].len().max(1) as f64;
        per_node.push((g.rss_kib()? as f64 - idle[r] as f64) / held);
    }
    let worst_kib = per_node.iter().copied().fold(0.0, f64::max);
    let nats_kib = nats.pid().map(rss_kib).transpose()?.unwrap_or(0);

    // Calls: an agent on each replica (the token was minted on r0 and shared), half to
    // nodes of its own replica, half to another's, alternating.
    let mut agents = Vec::new();
    for g in &replicas {
        let ws = wait_agent(&g.url(), &agent_token).await?;
        agents.push(ws);
    }
    let mut calls = Calls {
        agents: &mut agents,
        creds: &creds,
        rng: 0x2545_f491_4f6c_dd1d,
        sent: 0,
    };
    let mut same = Vec::new();
    let mut cross = Vec::new();
    let warmup = s.calls / 10 + s.replicas * 4;
    for i in 0..(warmup + s.calls) {
        let cross_call = (i / s.replicas) % 2 == 1;
        let took = calls.one(i % s.replicas, cross_call).await?;
        if i >= warmup {
            if cross_call {
                cross.push(took);
            } else {
                same.push(took);
            }
        }
    }
    // What each kind of call costs the replicas in CPU (user + system, every replica
    // together): a phase of its own for each, so each phase's CPU is its calls'.
    let phase = (s.calls / 5).max(200);
    let mut cpu_per_call = [0.0f64; 2];
    for (k, cross_call) in [false, true].into_iter().enumerate() {
        let before = replicas_cpu_ms(&replicas)?;
        for i in 0..phase {
            calls.one(i % s.replicas, cross_call).await?;
        }
        cpu_per_call[k] = (replicas_cpu_ms(&replicas)? - before) * 1000.0 / phase as f64;
    }
    let same_s = summarize(&same);
    let cross_s = summarize(&cross);

    // kill -9 one replica: its nodes spread over the others — when they can hold them.
    let victim = 1 % s.replicas;
    let moved = creds[victim].len();
    let fits = s.nodes.div_ceil(s.replicas - 1) <= MAX_HELD;
    let back = if fits {
        let before = counters.hello.load(Ordering::SeqCst);
        let killed = Instant::now();
        let failed = counters.failed.load(Ordering::SeqCst);
        replicas[victim].kill();
        // Its course, second by second, on stderr: a straight line is the survivors'
        // pace, a long tail the nodes' backoff.
        let trace = async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                eprintln!(
                    "  after {:>5.1} s: {:>6} of {moved} back, {:>7} failed dials",
                    killed.elapsed().as_secs_f64(),
                    counters.hello.load(Ordering::SeqCst).saturating_sub(before),
                    counters
                        .failed
                        .load(Ordering::SeqCst)
                        .saturating_sub(failed),
                );
            }
        };
        tokio::select! {
            r = wait_hello(&counters, before + moved, Duration::from_secs(120)) => r?,
            _ = trace => {}
        }
        Some(killed.elapsed())
    } else {
        None
    };
    drop(workers);

    let rows = vec![
        Row::at_most(
            "Echo call to a node on another replica, p50",
            cross_s.p50_us,
            format!(
                "the same call to a node on the agent's own replica, p50 (p99: cross {:.0} µs, same {:.0} µs; {} + {} calls)",
                cross_s.p99_us, same_s.p99_us, cross_s.n, same_s.n
            ),
            same_s.p50_us,
            "µs",
            TARGET_CROSS,
        ),
        Row::at_most(
            "gateway RSS growth per node held, worst replica",
            worst_kib,
            format!("{TARGET_KIB} KiB budget (replicas: {})", per_node.iter().map(|k| format!("{k:.1}")).collect::<Vec<_>>().join(", ")),
            TARGET_KIB,
            "KiB",
            1.0,
        ),
        match back {
            Some(back) => Row::at_most(
                format!("all {moved} nodes of a killed replica registered elsewhere"),
                back.as_secs_f64(),
                format!("{TARGET_BACK_S} s budget"),
                TARGET_BACK_S,
                "s",
                1.0,
            ),
            None => Row::at_most(
                format!("kill -9 of a replica: not run ({} nodes over {} live replicas is over {MAX_HELD} connections each)", s.nodes, s.replicas - 1),
                f64::MIN_POSITIVE,
                "information only: no replica process may hold that many open files here",
                f64::MIN_POSITIVE,
                "s",
                1.0,
            ),
        },
        Row::at_most(
            format!("{} nodes registered over {} replicas", s.nodes, s.replicas),
            registration.as_secs_f64(),
            "information only (no target): the time from the first dial to the last hello-ok, 200 dials at a time",
            registration.as_secs_f64().max(f64::MIN_POSITIVE),
            "s",
            1.0,
        ),
        Row::at_most(
            "every replica's node directory complete, after the last hello-ok",
            caught_up.as_secs_f64(),
            "information only (no target): until GET /v1/cluster says `directory` = all nodes on every replica",
            caught_up.as_secs_f64().max(f64::MIN_POSITIVE),
            "s",
            1.0,
        ),
        Row::at_most(
            format!(
                "replica RSS growth while it joins: takes in the cluster's {} node tokens, worst replica",
                s.nodes
            ),
            joined_kib as f64 / 1024.0,
            "information only (no target): counted before nodes connect, so not in the figure per node held",
            (joined_kib as f64 / 1024.0).max(f64::MIN_POSITIVE),
            "MiB",
            1.0,
        ),
        Row::at_most(
            "nats-server RSS",
            nats_kib as f64 / 1024.0,
            "information only (no target)",
            (nats_kib as f64 / 1024.0).max(f64::MIN_POSITIVE),
            "MiB",
            1.0,
        ),        Row::at_most(
            "replicas' CPU per Echo call to a node on another replica",
            cpu_per_call[1],
            format!(
                "the same per call to a node on the agent's own replica; every replica's user + system time over {phase} calls of each kind, run apart"
            ),
            cpu_per_call[0].max(f64::MIN_POSITIVE),
            "µs",
            1.0,
        )
        .for_info(),
    ];
    Ok(Report::new(
        "cluster",
        format!(
            "{} `gsv gateway --cluster` replicas (each on its own 127.0.0.x) and one nats-server with JetStream; {} simulated nodes (12 tools: Echo and 11 of the standard set) minted on their replica's data dir, each knowing every replica; an agent on each replica; {} Echo calls, alternately to a node of the agent's replica and of another; then kill -9 of one replica",
            s.replicas, s.nodes, s.calls
        ),
        rows,
    ))
}

/// The agents and the nodes the calls go to.
struct Calls<'a> {
    agents: &'a mut [Ws],
    creds: &'a [Vec<(String, String)>],
    rng: u64,
    sent: usize,
}

impl Calls<'_> {
    /// One Echo call from replica `a`'s agent to a random node of `a` (or, `cross`,
    /// of another replica); how long it took.
    async fn one(&mut self, a: usize, cross: bool) -> Result<Duration, String> {
        let replicas = self.agents.len();
        let target = if cross {
            (a + 1 + (self.next() as usize % (replicas - 1))) % replicas
        } else {
            a
        };
        let list = &self.creds[target];
        let (node, _) = &list[self.next() as usize % list.len()];
        self.sent += 1;
        let frame = encode_req(
            &self.sent.to_string(),
            Method::ToolsCall,
            &json!({"name": format!("{node}__Echo"), "args": {"text": "ping"}}),
        );
        let t = Instant::now();
        call(&mut self.agents[a], &frame).await?;
        Ok(t.elapsed())
    }

    /// xorshift64: the same calls in every run.
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }
}

/// CPU time all `replicas` have used so far, in ms.
fn replicas_cpu_ms(replicas: &[GatewayProcess]) -> Result<f64, String> {
    replicas.iter().map(|g| g.cpu_ms()).sum()
}

/// Waits until `counters` has counted `n` hello-oks.
/// Each replica's RSS once it stops growing (no sample 1 % above the one 1 s before;
/// at most 15 s): it has taken in the tokens the others replicate to it.
async fn settled(replicas: &[GatewayProcess]) -> Result<Vec<u64>, String> {
    let started = Instant::now();
    let mut last: Vec<u64> = replicas
        .iter()
        .map(|g| g.rss_kib())
        .collect::<Result<_, _>>()?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now: Vec<u64> = replicas
            .iter()
            .map(|g| g.rss_kib())
            .collect::<Result<_, _>>()?;
        let still = now
            .iter()
            .zip(&last)
            .all(|(n, l)| (*n as f64) <= (*l as f64) * 1.01);
        if still || started.elapsed() > Duration::from_secs(15) {
            return Ok(now);
        }
        last = now;
    }
}

/// The replicas node `i` of replica `r` dials, in order: its own, then the others
/// starting at one of its own, so a replica's nodes spread over the rest when it dies.
fn dial_order(urls: &[String], r: usize, i: usize) -> Vec<String> {
    let n = urls.len();
    let mut order = vec![urls[r % n].clone()];
    for k in 1..n {
        let offset = 1 + (i + k - 1) % (n - 1).max(1);
        order.push(urls[(r + offset) % n].clone());
    }
    order
}

async fn wait_hello(counters: &Counters, n: usize, cap: Duration) -> Result<(), String> {
    let started = Instant::now();
    while counters.hello.load(Ordering::SeqCst) < n {
        if started.elapsed() > cap {
            return Err(format!(
                "only {} of {n} node registrations after {cap:?} ({} failed dials)",
                counters.hello.load(Ordering::SeqCst),
                counters.failed.load(Ordering::SeqCst)
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Waits until every replica's directory holds `n` nodes (`GET /v1/cluster`); how long
/// it took.
async fn wait_directories(
    replicas: &[GatewayProcess],
    admins: &[String],
    n: usize,
    cap: Duration,
) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        let mut sizes = Vec::new();
        for (g, admin) in replicas.iter().zip(admins) {
            sizes.push(
                directory_size(&g.addr.to_string(), admin)
                    .await
                    .unwrap_or(0),
            );
        }
        if sizes.iter().all(|&d| d >= n) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > cap {
            return Err(format!("node directories after {cap:?}: {sizes:?} of {n}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `directory` of a replica's `GET /v1/cluster`.
async fn directory_size(addr: &str, token: &str) -> Option<usize> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    let req = format!(
        "GET /v1/cluster HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf);
    let body = text.split_once("\r\n\r\n")?.1;
    let status: gsv_gateway::peers::ClusterStatus = serde_json::from_str(body).ok()?;
    Some(status.directory)
}

/// An agent connection once the replica accepts the (shared) token.
async fn wait_agent(url: &str, token: &str) -> Result<Ws, String> {
    let started = Instant::now();
    loop {
        match sim::connect_agent(url, token).await {
            Ok(ws) => return Ok(ws),
            Err(e) if started.elapsed() > Duration::from_secs(60) => {
                return Err(format!("the agent token never reached {url}: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// One call and its answer; a failed call is an error of the run.
async fn call(ws: &mut Ws, frame: &str) -> Result<(), String> {
    ws.send(Message::text(frame.to_owned()))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .map_err(|_| "no answer in 30 s".to_owned())?;
        match next {
            Some(Ok(Message::Text(t))) if t.as_str().contains("\"type\":\"res\"") => {
                return if t.as_str().contains("\"ok\":true") {
                    Ok(())
                } else {
                    Err(format!("call failed: {}", t.as_str()))
                };
            }
            Some(Ok(_)) => {}
            other => return Err(format!("agent connection: {other:?}")),
        }
    }
}
