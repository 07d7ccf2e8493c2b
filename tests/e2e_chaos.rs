//! End to end under network faults: a real gateway and a real `gsv node` whose link
//! to the gateway goes through the chaos proxy (`common/chaos.rs`), agents connected
//! directly to the gateway.
//!
//! - `chaos_proxy_*`: the proxy itself, on a plain TCP echo server.
//! - `soak_*`: many Bash calls while the link is cut (mid-frame too), stalled, delayed
//!   and blackholed: every call gets exactly one answer, a result that is its own or an
//!   error from a small set; no command runs twice. `GSV_SOAK_CALLS` and
//!   `GSV_SOAK_SECS` make it the long soak (`docs/operations.md`, "Soak"),
//!   `GSV_SOAK_WORKERS` and `GSV_SOAK_GRACE_MS` change its shape, and
//!   `GSV_CHAOS_SEED` replays a run's fault decisions.
//! - `node_killed_*`: kill -9 of the node mid-call: `node_disconnected` within the
//!   grace period, then a restart; `node_restarted_*`: a restart within the grace
//!   period does not run the call again (the node's journal answers it with the
//!   re-adopted command's result).
//! - `link_lost_*`: the link cut (at once, in the middle of the result frame) or
//!   blackholed while a call runs, the node back within the gateway's grace period
//!   (also when it is back before the gateway noticed): the caller gets the real result
//!   and the command ran once.

mod common;

use common::chaos::{self, ChaosProxy, Dir, Plan, Weights, What};
use common::fake::{agent_connect, Raw};
use common::{die_with_parent, eventually, gsv_bin, Gateway, Proc, TempDir};
use futures_util::{SinkExt, StreamExt};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, ToolResult};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// Whether this gateway build has the grace period (`--grace-ms`): a caller is held
/// that long after its node drops, for the node to come back with the result.
fn grace_supported() -> bool {
    let out = Command::new(gsv_bin())
        .args(["gateway", "--help"])
        .output()
        .expect("run gsv gateway --help");
    String::from_utf8_lossy(&out.stdout).contains("--grace-ms")
}

/// Starts a real `gsv node` (with the harness's 1 s heartbeat) that dials `url`
/// (the chaos proxy, or the gateway itself) and keeps its credential in the gateway's
/// node data dir, so a restart with the same id is the same enrolled node.
fn spawn_node_via(gw: &Gateway, url: &str, id: &str, token: &str, workspace: &Path) -> Proc {
    spawn_node_hb(gw, url, id, token, workspace, 1000)
}

/// [`spawn_node_via`] with another heartbeat interval (ms).
fn spawn_node_hb(
    gw: &Gateway,
    url: &str,
    id: &str,
    token: &str,
    workspace: &Path,
    heartbeat_ms: u64,
) -> Proc {
    let mut cmd = Command::new(gsv_bin());
    cmd.arg("node")
        .args(["--gateway", url, "--id", id, "--token", token])
        .arg("--workspace")
        .arg(workspace)
        .arg("--data")
        .arg(gw.node_data.path())
        .arg("--heartbeat-ms")
        .arg(heartbeat_ms.to_string())
        .env("RUST_LOG", "error")
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_TOKEN")
        .env_remove("GSV_CA")
        .env_remove("GSV_PIN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Proc(die_with_parent(&mut cmd).spawn().expect("spawn gsv node"))
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}: cannot parse {s:?}")),
        Err(_) => default,
    }
}

/// Lines of a file, counted.
fn line_counts(path: &Path) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        *counts.entry(line.to_owned()).or_insert(0) += 1;
    }
    counts
}

/// Waits until `path` has the line `line`.
async fn wait_line(path: &Path, line: &str) {
    eventually(
        &format!("{line:?} in {}", path.display()),
        Duration::from_secs(15),
        || async { line_counts(path).contains_key(line).then_some(()) },
    )
    .await
}

/// A Bash call's output (the `output` of its structured content).
fn output_of(result: &Value) -> String {
    result["structuredContent"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The same, from a decoded result.
fn tool_output(result: &ToolResult) -> String {
    result
        .structured_content
        .as_ref()
        .and_then(|s| s["output"].as_str())
        .unwrap_or_default()
        .to_owned()
}

// ---------------------------------------------------------------------------------
// An agent that sees every answer frame
// ---------------------------------------------------------------------------------

/// A raw agent connection that counts every `res` frame per request id, so a call
/// answered twice (or an answer to nothing) shows; `AgentClient` drops such frames.
struct CountingAgent {
    out: mpsc::UnboundedSender<Message>,
    waiters: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
    /// Request id -> number of `res` frames received for it.
    answers: Arc<Mutex<HashMap<String, usize>>>,
    /// `res` frames whose id no call was waiting for (first answers only).
    stray: Arc<Mutex<Vec<String>>>,
}

impl CountingAgent {
    async fn connect(gw: &Gateway, token: &str) -> CountingAgent {
        let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
        raw.handshake(|nonce| agent_connect(token, &nonce))
            .await
            .expect("agent connects");
        let (mut sink, mut stream) = raw.ws.split();
        let (out, mut rx) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        let waiters: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>> = Arc::default();
        let answers: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let stray: Arc<Mutex<Vec<String>>> = Arc::default();
        let (w, a, s) = (waiters.clone(), answers.clone(), stray.clone());
        tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                let Message::Text(t) = m else { continue };
                let Ok(v) = serde_json::from_str::<Value>(t.as_str()) else {
                    s.lock().unwrap().push(format!("not JSON: {}", t.as_str()));
                    continue;
                };
                if v["type"] != "res" {
                    continue;
                }
                let id = v["id"].as_str().unwrap_or_default().to_owned();
                let n = {
                    let mut a = a.lock().unwrap();
                    let n = a.entry(id.clone()).or_insert(0);
                    *n += 1;
                    *n
                };
                match w.lock().unwrap().remove(&id) {
                    Some(tx) => {
                        let _ = tx.send(v);
                    }
                    None if n == 1 => s.lock().unwrap().push(v.to_string()),
                    None => {}
                }
            }
        });
        CountingAgent {
            out,
            waiters,
            answers,
            stray,
        }
    }

    /// Sends `tools.call` under request id `id`; `None` if no answer came within
    /// `wait`.
    async fn call(
        &self,
        id: &str,
        tool: &str,
        args: Value,
        timeout_ms: u64,
        wait: Duration,
    ) -> Option<Value> {
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().unwrap().insert(id.to_owned(), tx);
        let req = json!({
            "type": "req", "id": id, "method": "tools.call",
            "params": {"name": tool, "args": args, "timeoutMs": timeout_ms}
        });
        self.out
            .send(Message::Text(req.to_string().into()))
            .expect("agent connection open");
        tokio::time::timeout(wait, rx).await.ok()?.ok()
    }

    fn answers(&self, id: &str) -> usize {
        self.answers.lock().unwrap().get(id).copied().unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------
// The proxy itself
// ---------------------------------------------------------------------------------

/// A TCP echo server on loopback; returns its address.
async fn echo_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Reads what is available within `wait`: `Some(bytes)` (empty at EOF), `None` if
/// nothing came.
async fn read_some(s: &mut tokio::net::TcpStream, wait: Duration) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(wait, s.read(&mut buf)).await {
        Ok(Ok(n)) => Some(buf[..n].to_vec()),
        Ok(Err(_)) => Some(Vec::new()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn chaos_proxy_forwards_stalls_cuts_and_blackholes() {
    let upstream = echo_server().await;
    let proxy = ChaosProxy::start(&upstream, 7).await;
    let short = Duration::from_millis(300);
    let long = Duration::from_secs(5);

    // Forwards both ways.
    let mut a = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    a.write_all(b"hello").await.unwrap();
    assert_eq!(read_some(&mut a, long).await.unwrap(), b"hello");
    assert_eq!(proxy.live(), 1);

    // Paused: nothing gets through, the socket stays open; resumed: it all arrives.
    proxy.pause();
    a.write_all(b"held").await.unwrap();
    assert_eq!(read_some(&mut a, short).await, None, "paused");
    proxy.resume();
    assert_eq!(read_some(&mut a, long).await.unwrap(), b"held");

    // A stall holds traffic for its duration only.
    proxy.stall_all(Duration::from_millis(600));
    let t = Instant::now();
    a.write_all(b"late").await.unwrap();
    assert_eq!(read_some(&mut a, long).await.unwrap(), b"late");
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );

    // A delay on every chunk.
    proxy.set_plan(Plan {
        delay: 1.0,
        delay_ms: (200, 200),
        ..Plan::quiet()
    });
    let t = Instant::now();
    a.write_all(b"slow").await.unwrap();
    assert_eq!(read_some(&mut a, long).await.unwrap(), b"slow");
    assert!(
        t.elapsed() >= Duration::from_millis(350),
        "two delayed chunks: {:?}",
        t.elapsed()
    );
    proxy.set_plan(Plan::quiet());

    // An armed cut forwards only part of the next chunk, then closes both ways.
    proxy.cut_next(Some(Dir::Up), 10);
    a.write_all(b"0123456789abcdef").await.unwrap();
    let mut got = Vec::new();
    loop {
        match read_some(&mut a, long).await {
            Some(b) if b.is_empty() => break,
            Some(b) => got.extend(b),
            None => panic!("the cut closes the client side"),
        }
    }
    assert!(got.len() < 16, "only a prefix went through: {got:?}");
    assert!(b"0123456789abcdef".starts_with(&got));
    eventually("the cut connection gone", long, || async {
        (proxy.live() == 0).then_some(())
    })
    .await;

    // cut_all closes at once.
    let mut b = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    b.write_all(b"x").await.unwrap();
    assert_eq!(read_some(&mut b, long).await.unwrap(), b"x");
    proxy.cut_all();
    assert_eq!(read_some(&mut b, long).await.unwrap(), b"", "closed");

    // A blackhole swallows everything and closes nothing.
    let mut c = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    c.write_all(b"y").await.unwrap();
    assert_eq!(read_some(&mut c, long).await.unwrap(), b"y");
    proxy.drop_all();
    c.write_all(b"gone").await.unwrap();
    assert_eq!(
        read_some(&mut c, short).await,
        None,
        "blackholed, still open"
    );

    // Per-chunk cuts from the plan; the seed makes the decisions repeatable.
    proxy.set_plan(Plan {
        cut: 1.0,
        ..Plan::quiet()
    });
    let mut d = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    d.write_all(b"zzzz").await.unwrap();
    let got = read_some(&mut d, long).await.unwrap();
    assert!(got.len() < 4, "{got:?}");

    let log = proxy.log();
    for e in &log {
        eprintln!("{e}");
    }
    for what in [
        "Pause", "Resume", "Stall", "Delay", "Cut {", "CutNow", "Drop", "Open", "Closed",
    ] {
        assert!(
            log.iter()
                .any(|e| format!("{:?}", e.what).starts_with(what)),
            "log has {what}"
        );
    }
    eprintln!("{}", proxy.summary());

    // Dropping the proxy closes everything, the blackholed connection included.
    drop(proxy);
    assert_eq!(
        read_some(&mut c, long).await.unwrap(),
        b"",
        "closed on drop"
    );
}

// ---------------------------------------------------------------------------------
// Soak
// ---------------------------------------------------------------------------------

/// How one soak call ended.
#[derive(Debug)]
enum Outcome {
    Ok(Value),
    Err {
        code: String,
        dispatched: Option<bool>,
        message: String,
    },
    /// No answer within its deadline and then some.
    NoAnswer,
}

/// Error codes a call may end with when the link to its node is unreliable.
const ALLOWED: [&str; 3] = ["node_disconnected", "node_offline", "timeout"];

/// The faults of the soak: timed faults about every second (mostly cuts at the next
/// chunk, some stalls, a few blackholes), rare per-chunk cuts, stalls and drops, and
/// small delays on some chunks. Stalls reach past two heartbeats (2 s) sometimes.
fn soak_plan() -> Plan {
    Plan {
        cut: 0.004,
        stall: 0.004,
        stall_ms: (100, 2_500),
        delay: 0.05,
        delay_ms: (1, 40),
        drop: 0.001,
        every_ms: Some((300, 1_500)),
        weights: Weights {
            cut: 5,
            stall: 3,
            drop: 1,
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_bash_calls_over_a_faulty_link() {
    let calls: usize = env_or("GSV_SOAK_CALLS", 200);
    let cap = Duration::from_secs(env_or("GSV_SOAK_SECS", 45));
    let workers: usize = env_or("GSV_SOAK_WORKERS", 4);
    let seed = chaos::seed_from_env();
    let grace_ms: u64 = env_or("GSV_SOAK_GRACE_MS", 3_000);
    let grace = grace_supported();
    let grace_arg = grace_ms.to_string();
    let mut gw_args = vec!["--handshake-timeout-ms", "3000"];
    if grace {
        gw_args.extend(["--grace-ms", &grace_arg]);
    }
    eprintln!("soak: {calls} calls, {workers} workers, cap {cap:?}, gateway {gw_args:?}");

    let gw = Gateway::start_with(&gw_args).await;
    let proxy = ChaosProxy::start(&gw.addr, seed).await;
    let ws = TempDir::new("ws");
    let _node = spawn_node_via(&gw, &proxy.url(), "box", &gw.node_token("box"), ws.path());
    // Enrolled and online before any fault (a join token is spent at the first connect).
    gw.wait_online("box").await;
    let token = gw.agent_token();
    let agents = [
        CountingAgent::connect(&gw, &token).await,
        CountingAgent::connect(&gw, &token).await,
    ];
    let file = ws.path().join("ran.log");
    let ids: Vec<String> = (0..calls)
        .map(|i| format!("c{i}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]))
        .collect();
    let known: HashSet<&str> = ids.iter().map(String::as_str).collect();

    proxy.set_plan(soak_plan());
    let start = Instant::now();
    let deadline = start + cap;
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    let call_timeout_ms = 15_000;
    let wait = Duration::from_millis(call_timeout_ms + 20_000);
    let work = (0..workers).map(|w| {
        let (agent, next, outcomes, ids, file) =
            (&agents[w % agents.len()], &next, &outcomes, &ids, &file);
        async move {
            let mut rng = StdRng::seed_from_u64(seed ^ (w as u64 + 1).wrapping_mul(0x5851_F42D));
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= calls || Instant::now() >= deadline {
                    break;
                }
                let id = &ids[i];
                // Mostly short commands; one in ten runs long enough to report
                // progress (every second) and to be caught by more faults.
                let sleep_ms = match rng.random_range(0..10) {
                    0 => rng.random_range(500..1_500u32),
                    _ => rng.random_range(0..250u32),
                };
                let command = format!(
                    "echo {id} >> {file}; sleep {}.{:03}; echo {id}",
                    sleep_ms / 1000,
                    sleep_ms % 1000,
                    file = file.display()
                );
                let answer = agent
                    .call(
                        id,
                        "box__Bash",
                        json!({ "command": command }),
                        call_timeout_ms,
                        wait,
                    )
                    .await;
                let outcome = match answer {
                    None => Outcome::NoAnswer,
                    Some(v) if v["ok"] == true => Outcome::Ok(v["result"].clone()),
                    Some(v) => Outcome::Err {
                        code: v["error"]["code"].as_str().unwrap_or("?").to_owned(),
                        dispatched: v["error"]["details"]["dispatched"].as_bool(),
                        message: v["error"]["message"].as_str().unwrap_or("").to_owned(),
                    },
                };
                let offline =
                    matches!(&outcome, Outcome::Err { code, .. } if code == "node_offline");
                outcomes.lock().unwrap().push((i, outcome));
                // Do not burn the calls while the node is away.
                let pause = if offline {
                    rng.random_range(200..500)
                } else {
                    rng.random_range(0..30)
                };
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    });
    futures_util::future::join_all(work).await;
    let soak_time = start.elapsed();

    // Chaos off; the node must come back and work.
    proxy.set_plan(Plan::quiet());
    proxy.resume();
    proxy.cut_all(); // a blackholed link would otherwise linger for two heartbeats
    let healed = Instant::now();
    let agent = &agents[0];
    eventually(
        "a call works once the faults stop",
        Duration::from_secs(40),
        || async {
            let id = format!("after-{}", uuid::Uuid::new_v4().simple());
            let v = agent
                .call(
                    &id,
                    "box__Bash",
                    json!({"command": format!("echo {id}")}),
                    5_000,
                    Duration::from_secs(10),
                )
                .await?;
            (v["ok"] == true && output_of(&v["result"]).trim() == id).then_some(())
        },
    )
    .await;
    let heal_time = healed.elapsed();
    // Late or duplicate answers would arrive now.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    let issued = outcomes.len();
    let ran = line_counts(&file);
    let mut problems: Vec<String> = Vec::new();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for (i, outcome) in &outcomes {
        let id = &ids[*i];
        let answers = agents.iter().map(|a| a.answers(id)).sum::<usize>();
        if answers != 1 {
            problems.push(format!("{id}: {answers} answers"));
        }
        let in_file = ran.get(id.as_str()).copied().unwrap_or(0);
        if in_file > 1 {
            problems.push(format!("{id}: ran {in_file} times"));
        }
        match outcome {
            Outcome::Ok(r) => {
                *tally.entry("ok".into()).or_default() += 1;
                let out = output_of(r);
                if out.trim() != id
                    || r["isError"] == true
                    || r["structuredContent"]["status"] != "completed"
                {
                    problems.push(format!("{id}: wrong result {r}"));
                }
                if in_file != 1 {
                    problems.push(format!("{id}: ok but ran {in_file} times"));
                }
            }
            Outcome::Err {
                code,
                dispatched,
                message,
            } => {
                let key = match dispatched {
                    Some(d) => format!("{code} (dispatched: {d})"),
                    None => code.clone(),
                };
                *tally.entry(key).or_default() += 1;
                if !ALLOWED.contains(&code.as_str()) {
                    problems.push(format!("{id}: unexpected error {code}: {message}"));
                }
                // Never sent to the node: it must not have run.
                if (code == "node_offline" || *dispatched == Some(false)) && in_file != 0 {
                    problems.push(format!(
                        "{id}: {code} (dispatched: {dispatched:?}) but ran {in_file} times"
                    ));
                }
            }
            Outcome::NoAnswer => {
                *tally.entry("no answer".into()).or_default() += 1;
                problems.push(format!("{id}: no answer within {wait:?}"));
            }
        }
    }
    for line in ran.keys() {
        if !known.contains(line.as_str()) {
            problems.push(format!("unknown line in the file: {line:?}"));
        }
    }
    for a in &agents {
        for s in a.stray.lock().unwrap().iter() {
            problems.push(format!("answer to no pending call: {s}"));
        }
    }

    let ok = tally.get("ok").copied().unwrap_or(0);
    eprintln!(
        "soak: seed {seed}, grace {}, {issued}/{calls} calls in {soak_time:.1?} (cap {cap:?}), \
         healed in {heal_time:.1?}; outcomes {tally:?}; {} commands ran",
        if grace {
            format!("{grace_ms} ms")
        } else {
            "none".into()
        },
        ran.len()
    );
    eprintln!("soak: proxy {}", proxy.summary());
    if !problems.is_empty() {
        for e in proxy
            .log()
            .iter()
            .filter(|e| !matches!(e.what, What::Delay { .. }))
        {
            eprintln!("  {e}");
        }
        panic!(
            "soak (seed {seed}, replay with GSV_CHAOS_SEED={seed}): {} problems:\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
    assert!(issued >= calls.min(20), "too few calls issued: {issued}");
    assert!(ok > 0, "no call succeeded: {tally:?}");
}

// ---------------------------------------------------------------------------------
// Node killed mid-call
// ---------------------------------------------------------------------------------

/// Calls `box__Bash` with `command` until it succeeds (a node just back may not be
/// routable yet); returns the output.
async fn bash_until_ok(agent: &AgentClient, command: &str) -> String {
    eventually(
        "a Bash call to succeed",
        Duration::from_secs(30),
        || async {
            let r = agent
                .call("box__Bash", json!({"command": command}), Some(10_000))
                .await
                .ok()?;
            let s = r.structured_content?;
            (s["status"] == "completed")
                .then(|| s["output"].as_str().unwrap_or_default().to_owned())
        },
    )
    .await
}

#[tokio::test]
async fn node_killed_mid_call_fails_it_as_disconnected_then_restarts() {
    let grace_ms = 1_500;
    let grace = grace_supported();
    let grace_arg = grace_ms.to_string();
    let args: Vec<&str> = if grace {
        vec!["--grace-ms", &grace_arg]
    } else {
        vec![]
    };
    let gw = Gateway::start_with(&args).await;
    let ws = TempDir::new("ws");
    let token = gw.node_token("box");
    let mut node = spawn_node_via(&gw, &gw.url(), "box", &token, ws.path());
    gw.wait_online("box").await;
    let agent = Arc::new(gw.agent().await);
    let file = ws.path().join("ran.log");

    let command = format!("echo killed >> {}; sleep 5; echo done", file.display());
    let call = tokio::spawn({
        let agent = Arc::clone(&agent);
        async move {
            agent
                .call("box__Bash", json!({ "command": command }), Some(30_000))
                .await
        }
    });
    wait_line(&file, "killed").await;
    let killed = Instant::now();
    node.kill(); // SIGKILL
    let limit = Duration::from_millis(grace_ms) + Duration::from_secs(4);
    let answer = tokio::time::timeout(limit, call)
        .await
        .unwrap_or_else(|_| panic!("no answer within {limit:?} of the kill"))
        .expect("call task");
    let took = killed.elapsed();
    eprintln!("answer {took:?} after the kill (grace {grace}): {answer:?}");
    let err = answer.expect_err("the call fails");
    let shape = err.remote().expect("an error from the gateway");
    assert_eq!(shape.code, ErrorCode::NodeDisconnected, "{shape:?}");
    let details = shape.details.clone().unwrap_or_default();
    assert_eq!(details["dispatched"], true, "{shape:?}");
    assert_eq!(details["node"], "box", "{shape:?}");
    assert!(
        took <= Duration::from_millis(grace_ms) + Duration::from_secs(3),
        "answered {took:?} after the kill"
    );

    // Same id, same data dir (the stored credential): back, and calls work.
    let _node = spawn_node_via(&gw, &gw.url(), "box", &token, ws.path());
    gw.wait_online("box").await;
    assert_eq!(bash_until_ok(&agent, "echo first").await.trim(), "first");
    for i in 0..3 {
        let r = agent
            .call(
                "box__Bash",
                json!({"command": format!("echo again{i}")}),
                Some(10_000),
            )
            .await
            .expect("calls work after the restart");
        assert_eq!(tool_output(&r).trim(), format!("again{i}"));
    }
    // The killed call was not run again by the new process.
    assert_eq!(line_counts(&file).get("killed"), Some(&1));
}

// ---------------------------------------------------------------------------------
// Link lost mid-call, node back within the grace period
// ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_lost_mid_call_still_returns_the_result() {
    assert!(
        grace_supported(),
        "this build of the gateway has no --grace-ms (result outbox, grace period, call de-duplication)"
    );
    let seed = chaos::seed_from_env();
    let grace = Duration::from_millis(5_000);
    let gw = Gateway::start_with(&["--grace-ms", "5000"]).await;
    let proxy = ChaosProxy::start(&gw.addr, seed).await;
    let ws = TempDir::new("ws");
    let _node = spawn_node_via(&gw, &proxy.url(), "box", &gw.node_token("box"), ws.path());
    gw.wait_online("box").await;
    let agent = Arc::new(gw.agent().await);
    let file = ws.path().join("ran.log");

    // Each case: a call that marks the file, then sleeps; the fault strikes once the
    // command runs; the caller must get the command's own result.
    type Fault = fn(&ChaosProxy);
    let cases: [(&str, &str, Fault); 3] = [
        // The link cut (both ways, at once) while the command sleeps.
        ("cut", "1", |p| p.cut_all()),
        // The link cut in the middle of the result frame: the gateway gets a part of
        // it, then nothing (pings are smaller than 200 bytes).
        ("result-cut", "0.5", |p| p.cut_next(Some(Dir::Up), 200)),
        // A blackhole: the result goes nowhere; both sides notice by heartbeat (2 s).
        ("blackhole", "0.5", |p| p.drop_all()),
    ];
    for (name, sleep, fault) in cases {
        gw.wait_online("box").await;
        let mark = format!("{name}-{}", uuid::Uuid::new_v4().simple());
        let command = format!(
            "echo {mark} >> {}; sleep {sleep}; echo {mark}-done",
            file.display()
        );
        let started = Instant::now();
        let call = tokio::spawn({
            let agent = Arc::clone(&agent);
            async move {
                agent
                    .call("box__Bash", json!({ "command": command }), Some(30_000))
                    .await
            }
        });
        wait_line(&file, &mark).await;
        fault(&proxy);
        let limit = Duration::from_secs(2) + grace + Duration::from_secs(5);
        let answer = tokio::time::timeout(limit, call)
            .await
            .unwrap_or_else(|_| panic!("{name}: no answer within {limit:?}"))
            .expect("call task");
        let took = started.elapsed();
        eprintln!("{name}: answered in {took:?}: {answer:?}");
        let r = answer.unwrap_or_else(|e| {
            for e in proxy.log() {
                eprintln!("  {e}");
            }
            panic!("{name} (seed {seed}): the call failed instead of returning its result: {e}")
        });
        let out = tool_output(&r);
        assert_eq!(out.trim(), format!("{mark}-done"), "{name}: {r:?}");
        assert_eq!(line_counts(&file).get(&mark), Some(&1), "{name}: ran once");
        if name == "result-cut" {
            let cut = proxy.log().into_iter().rev().find_map(|e| match e.what {
                What::Cut { dir, sent, of } => Some((dir, sent, of)),
                _ => None,
            });
            eprintln!("{name}: cut {cut:?}");
            assert!(
                matches!(cut, Some((Dir::Up, _, of)) if of >= 200),
                "{cut:?}"
            );
        }
    }
    eprintln!("link_lost: proxy {}", proxy.summary());
}

/// The node notices a dead link (its heartbeat is shorter) and reconnects while the
/// gateway still holds the old connection: the new connection replaces it, and the
/// call that was running on it must still get its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_lost_node_back_before_the_gateway_notices() {
    assert!(
        grace_supported(),
        "this build of the gateway has no --grace-ms"
    );
    let seed = chaos::seed_from_env();
    let gw = Gateway::start_with(&["--grace-ms", "5000"]).await;
    let proxy = ChaosProxy::start(&gw.addr, seed).await;
    let ws = TempDir::new("ws");
    let _node = spawn_node_hb(
        &gw,
        &proxy.url(),
        "box",
        &gw.node_token("box"),
        ws.path(),
        250,
    );
    gw.wait_online("box").await;
    let agent = Arc::new(gw.agent().await);
    let file = ws.path().join("ran.log");
    let mark = format!("replaced-{}", uuid::Uuid::new_v4().simple());
    let command = format!(
        "echo {mark} >> {}; sleep 0.8; echo {mark}-done",
        file.display()
    );
    let call = tokio::spawn({
        let agent = Arc::clone(&agent);
        async move {
            agent
                .call("box__Bash", json!({ "command": command }), Some(30_000))
                .await
        }
    });
    wait_line(&file, &mark).await;
    // Blackholed: the node gives up after 500 ms and dials again; the gateway would
    // notice only after 2 s, but the new connection replaces the old one first.
    proxy.drop_all();
    let answer = tokio::time::timeout(Duration::from_secs(15), call)
        .await
        .expect("an answer in time")
        .expect("call task");
    for e in proxy.log() {
        eprintln!("  {e}");
    }
    let r = answer.unwrap_or_else(|e| panic!("seed {seed}: the call failed: {e}"));
    assert_eq!(tool_output(&r).trim(), format!("{mark}-done"));
    assert_eq!(line_counts(&file).get(&mark), Some(&1), "ran once");
}

/// A node killed mid-call and restarted within the grace period is a new process: it
/// never saw the call, so the call must fail (`node_disconnected`, it may have run)
/// and must not be sent to the new process to run a second time.
#[tokio::test]
async fn node_restarted_within_grace_does_not_run_the_call_again() {
    assert!(
        grace_supported(),
        "this build of the gateway has no --grace-ms"
    );
    let gw = Gateway::start_with(&["--grace-ms", "8000"]).await;
    let ws = TempDir::new("ws");
    let token = gw.node_token("box");
    let mut node = spawn_node_via(&gw, &gw.url(), "box", &token, ws.path());
    gw.wait_online("box").await;
    let agent = Arc::new(gw.agent().await);
    let file = ws.path().join("ran.log");
    let command = format!("echo once >> {}; sleep 2; echo done", file.display());
    let call = tokio::spawn({
        let agent = Arc::clone(&agent);
        async move {
            agent
                .call("box__Bash", json!({ "command": command }), Some(30_000))
                .await
        }
    });
    wait_line(&file, "once").await;
    node.kill();
    let restarted = Instant::now();
    let _node = spawn_node_via(&gw, &gw.url(), "box", &token, ws.path());
    let answer = tokio::time::timeout(Duration::from_secs(15), call)
        .await
        .expect("an answer within 15 s")
        .expect("call task");
    eprintln!(
        "answer {:?} after the restart: {answer:?}",
        restarted.elapsed()
    );
    // The restarted node keeps a journal: it re-adopted the command and answers the
    // call with its result when it ends (not by running it again).
    let result = answer.expect("the call is answered from the node's journal");
    assert_eq!(result.joined_text().trim(), "done", "{result:?}");
    // Give a wrongly re-sent call time to run, then count.
    assert_eq!(bash_until_ok(&agent, "echo after").await.trim(), "after");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(line_counts(&file).get("once"), Some(&1), "ran once");
}
