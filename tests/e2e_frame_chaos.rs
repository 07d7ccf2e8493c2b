//! End to end, property-based: random frame sequences from raw WebSocket peers never
//! take the gateway down.
//!
//! One real gateway and one real node run for the whole test. Each proptest case opens
//! a raw connection to `/v1/node` or `/v1/agent`, optionally completes a valid
//! handshake (as a fake node, an agent or the operator), and sends a random sequence:
//! well-formed frames with random methods, ids and params, connects with random
//! mistakes and random tool declarations, truncated JSON, wrong types, huge ids, binary
//! and control frames, unknown events, results for ids never sent (and for a real
//! pending call), cancels for unknown ids. Every text frame the gateway answers must be
//! a valid frame. After every case the gateway process is alive, `/healthz` answers, a
//! normal `chaos-real__Echo` call works through a long-lived and a fresh `AgentClient`,
//! and the gateway's stderr holds no "panicked" (a panic inside a tokio task does not
//! end the process, so this is the check that sees it).
//!
//! `PROPTEST_CASES=N` runs more cases (default 48); a failure prints the minimal
//! sequence that broke the gateway.

mod common;

use common::fake::{agent_connect, node_connect, tool, Raw};
use common::{http_get, Gateway, Proc, TempDir};
use futures_util::{SinkExt, StreamExt};
use gsv_client::AgentClient;
use gsv_protocol::Frame;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// The real node (its token never reaches the random frames, so nothing can replace it).
const REAL: &str = "chaos-real";
/// The id raw node connections use.
const FAKE: &str = "chaos-fake";

// Placeholders the random frames may hold, filled in per connection.
const P_NONCE: &str = "@@NONCE@@";
const P_NODE_TOKEN: &str = "@@NODE_TOKEN@@";
const P_AGENT_TOKEN: &str = "@@AGENT_TOKEN@@";
const P_CALL: &str = "@@CALL@@";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// Nothing sent before the random frames: they meet the handshake.
    Unauthenticated,
    FakeNode,
    Agent,
    Operator,
}

#[derive(Debug, Clone)]
enum Out {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Case {
    node_endpoint: bool,
    who: Who,
    msgs: Vec<Out>,
}

// ---------------------------------------------------------------- strategies

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,16}".prop_map(Value::from),
        Just(Value::from("chaos-real__Echo")),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[0-9]{1,3}",
        3 => ".{0,12}",
        1 => Just(String::new()),
        1 => Just("18446744073709551616".to_owned()),
        1 => Just("x".repeat(129)),
        1 => Just("i".repeat(70_000)),
        2 => Just(P_CALL.to_owned()),
    ]
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "connect",
            "tools.list",
            "tools.call",
            "nodes.list",
            "approvals.list",
            "approvals.decide",
            "tool.invoke",
            "node.probe",
        ])
        .prop_map(str::to_owned),
        ".{0,16}",
    ]
}

/// Names an agent may call: only Echo (on the real node, the fake one, an unknown
/// one) or tools that do not exist, so random args never reach a tool with effects.
fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(format!("{REAL}__Echo")),
        Just(format!("{FAKE}__Echo")),
        Just(format!("{REAL}__NoSuchTool")),
        Just("nobody__Echo".to_owned()),
        "[a-z]{1,6}(__[A-Za-z]{0,6})?",
        ".{0,20}",
    ]
}

fn params() -> impl Strategy<Value = Value> {
    prop_oneof![
        json_value(),
        (
            tool_name(),
            prop_oneof![".{0,20}".prop_map(|t| json!({ "text": t })), json_value()],
            prop::option::of(any::<u64>()),
        )
            .prop_map(|(name, args, timeout)| {
                let mut p = json!({ "name": name, "args": args });
                if let Some(t) = timeout {
                    p["timeoutMs"] = json!(t);
                }
                p
            }),
        (id(), prop::sample::select(vec!["approve", "deny", "maybe"]))
            .prop_map(|(id, d)| json!({ "id": id, "decision": d })),
        (".{0,8}", json_value(), any::<u64>())
            .prop_map(|(t, a, ms)| json!({"tool": t, "args": a, "timeoutMs": ms})),
    ]
}

fn req() -> impl Strategy<Value = String> {
    (id(), method(), prop::option::of(params())).prop_map(|(id, method, params)| {
        let mut f = json!({ "type": "req", "id": id, "method": method });
        if let Some(p) = params {
            f["params"] = p;
        }
        f.to_string()
    })
}

fn error_shape() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            prop::sample::select(vec!["not_found", "internal", "timeout", "denied"])
                .prop_map(str::to_owned),
            ".{0,10}",
        ],
        ".{0,20}",
        prop::option::of(any::<bool>()),
        prop::option::of(json_value()),
    )
        .prop_map(|(code, message, retryable, details)| {
            let mut e = json!({ "code": code, "message": message });
            if let Some(r) = retryable {
                e["retryable"] = json!(r);
            }
            if let Some(d) = details {
                e["details"] = d;
            }
            e
        })
}

fn tool_result() -> impl Strategy<Value = Value> {
    prop_oneof![
        json_value(),
        (".{0,20}", prop::option::of(json_value()), any::<bool>()).prop_map(|(t, s, e)| {
            let mut r = json!({"content": [{"type": "text", "text": t}], "isError": e});
            if let Some(s) = s {
                r["structuredContent"] = s;
            }
            r
        }),
    ]
}

fn res() -> impl Strategy<Value = String> {
    (id(), any::<bool>(), tool_result(), error_shape()).prop_map(|(id, ok, result, error)| {
        if ok {
            json!({ "type": "res", "id": id, "ok": true, "result": result }).to_string()
        } else {
            json!({ "type": "res", "id": id, "ok": false, "error": error }).to_string()
        }
    })
}

fn event() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            prop::sample::select(vec![
                "challenge",
                "tools.changed",
                "process.exited",
                "call.progress",
                "approval.requested",
                "approval.resolved",
                "shutdown",
            ])
            .prop_map(str::to_owned),
            ".{0,16}",
        ],
        prop_oneof![
            json_value(),
            (id(), prop::option::of(any::<f64>()), ".{0,10}").prop_map(|(c, p, m)| {
                json!({ "callId": c, "progress": p, "total": p.map(|p| p * 2.0), "message": m })
            }),
        ],
        prop_oneof![
            any::<u64>().prop_map(|s| s.to_string()),
            Just("-1".to_owned()),
            Just("1e999".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("\"7\"".to_owned()),
        ],
    )
        .prop_map(|(event, payload, seq)| {
            // `seq` is spliced in as text so that out-of-range numbers reach the wire.
            let head = json!({ "type": "event", "event": event, "payload": payload }).to_string();
            format!("{},\"seq\":{seq}}}", &head[..head.len() - 1])
        })
}

fn cancel() -> impl Strategy<Value = String> {
    id().prop_map(|id| json!({ "type": "cancel", "id": id }).to_string())
}

fn schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(tool("Echo", "diagnostics.echo")["inputSchema"].clone()),
        json_value(),
        (
            prop::sample::select(vec!["object", "string", "array", "bogus"]),
            ".{0,8}",
            json_value(),
            any::<f64>(),
        )
            .prop_map(|(ty, pattern, c, n)| {
                json!({
                    "type": ty,
                    "properties": {"text": {"type": "string", "pattern": pattern}, "n": {"multipleOf": n, "maximum": n}},
                    "required": ["text"],
                    "enum": [c],
                    "$defs": {"a": {"$ref": "#/$defs/a"}},
                    "items": {"$ref": "#"}
                })
            }),
    ]
}

fn tool_decl() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("Echo".to_owned()), "[A-Za-z_]{1,8}", ".{0,10}"],
        schema(),
        prop_oneof![
            Just("diagnostics.echo".to_owned()),
            Just("filesystem.read".to_owned()),
            ".{0,10}",
        ],
    )
        .prop_map(
            |(name, schema, cap)| json!({"name": name, "inputSchema": schema, "capability": cap}),
        )
}

/// A connect with the connection's nonce and real tokens, each part possibly wrong.
fn connect() -> impl Strategy<Value = String> {
    (
        id(),
        prop::sample::select(vec!["node", "agent", "operator"]),
        prop_oneof![3 => Just(1u64), 1 => any::<u64>()],
        prop_oneof![3 => Just(1u64), 1 => any::<u64>()],
        prop::sample::select(vec![P_NODE_TOKEN, P_AGENT_TOKEN, "", "gsv_wrong"]),
        prop_oneof![4 => Just(P_NONCE.to_owned()), 1 => ".{0,8}"],
        prop::option::of((
            prop_oneof![
                3 => Just(FAKE.to_owned()),
                1 => Just(REAL.to_owned()),
                1 => ".{0,40}"
            ],
            prop::collection::vec(tool_decl(), 0..4),
            prop::option::of(prop::collection::vec(".{0,12}", 0..3)),
        )),
    )
        .prop_map(|(id, role, min, max, token, nonce, node)| {
            let mut p = json!({
                "minProtocol": min, "maxProtocol": max, "role": role,
                "auth": {"token": token, "nonce": nonce},
                "client": {"name": "chaos", "version": "0"}
            });
            if let Some((nid, tools, caps)) = node {
                let caps = caps.map(Value::from).unwrap_or_else(|| {
                    Value::Array(tools.iter().map(|t| t["capability"].clone()).collect())
                });
                p["node"] = json!({
                    "id": nid, "tools": tools, "capabilities": caps,
                    "runtime": {"hostOs": "linux", "hostArch": "x86_64"}
                });
            }
            json!({ "type": "req", "id": id, "method": "connect", "params": p }).to_string()
        })
}

fn well_formed() -> impl Strategy<Value = String> {
    prop_oneof![3 => req(), 3 => res(), 2 => event(), 2 => cancel(), 2 => connect()]
}

/// Fields of the wrong JSON type, or not a frame object at all.
fn wrong_types() -> impl Strategy<Value = String> {
    prop_oneof![
        json_value().prop_map(|v| v.to_string()),
        (
            prop_oneof![
                prop::sample::select(vec!["req", "res", "event", "cancel"]).prop_map(Value::from),
                json_value(),
            ],
            json_value(),
            json_value(),
            json_value(),
            json_value(),
        )
            .prop_map(|(ty, id, method, ok, seq)| {
                json!({"type": ty, "id": id, "method": method, "ok": ok, "seq": seq,
                       "event": method, "params": ok, "result": seq})
                .to_string()
            }),
    ]
}

fn nasty() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "[".repeat(20_000),
        format!("{}{}", "[".repeat(5_000), "]".repeat(5_000)),
        r#"{"type":"req","id":"1","method":"tools.call","params":{"name":"chaos-real__Echo","args":{"text":"\ud800"}}}"#.to_owned(),
        r#"{"type":"cancel","id":"\udc00\ud800"}"#.to_owned(),
        r#"{"type":"event","event":"call.progress","payload":{"callId":"1","progress":1e999}}"#.to_owned(),
        format!(r#"{{"type":"req","id":"1","method":"{}"}}"#, "m".repeat(60_000)),
        "\u{0}".to_owned(),
        String::new(),
        "\u{feff}{}".to_owned(),
        r#"{"type":"res","id":"@@CALL@@","ok":true,"result":{"content":"not a list"}}"#.to_owned(),
        r#"{"type":"res","id":"@@CALL@@","ok":false}"#.to_owned(),
        r#"{"type":"req","type":"res","id":"1","id":"2","ok":true}"#.to_owned(),
    ])
}

fn out() -> impl Strategy<Value = Out> {
    prop_oneof![
        8 => well_formed().prop_map(Out::Text),
        2 => (well_formed(), any::<prop::sample::Index>()).prop_map(|(f, at)| {
            // Truncated at a random character boundary.
            let cut = f.char_indices().map(|(i, _)| i).nth(at.index(f.chars().count().max(1)));
            Out::Text(f[..cut.unwrap_or(0)].to_owned())
        }),
        2 => wrong_types().prop_map(Out::Text),
        1 => nasty().prop_map(Out::Text),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Out::Binary),
        1 => prop::collection::vec(any::<u8>(), 0..32).prop_map(Out::Ping),
        1 => prop::collection::vec(any::<u8>(), 0..32).prop_map(Out::Pong),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let msgs = || prop::collection::vec(out(), 0..10);
    prop_oneof![
        (
            prop::sample::select(vec![Who::Unauthenticated, Who::FakeNode]),
            msgs()
        )
            .prop_map(|(who, msgs)| Case {
                node_endpoint: true,
                who,
                msgs
            }),
        (
            prop::sample::select(vec![Who::Unauthenticated, Who::Agent, Who::Operator]),
            msgs()
        )
            .prop_map(|(who, msgs)| Case {
                node_endpoint: false,
                who,
                msgs
            }),
    ]
}

// ---------------------------------------------------------------- the run

struct Env {
    gw: RefCell<Gateway>,
    _real: Proc,
    _workspace: TempDir,
    /// The gateway's stderr (see `spawn_capturing_stderr`).
    stderr: std::path::PathBuf,
    _logs: TempDir,
    agent: AgentClient,
    agent_token: String,
    node_token: String,
    admin_token: String,
    /// Calls made to the fake node, one per fake-node case. Each ends by a random
    /// result, its timeout, or `node_disconnected` once the node's reconnect grace
    /// period is over; the test checks at the end that every one ended.
    pending: RefCell<Vec<tokio::task::JoinHandle<Option<bool>>>>,
}

/// Starts the gateway with its stderr (fd 2, inherited by the harness's spawn) pointed
/// at a file: the harness does not capture it, and a panic in a tokio task shows only
/// there. The test's own fd 2 is restored as soon as the process is spawned.
async fn start_gateway_capturing_stderr(path: &std::path::Path) -> Gateway {
    let file = std::fs::File::create(path).expect("create stderr file");
    // SAFETY: plain fd juggling on this process's own descriptors; this file holds one
    // test, so no other thread writes to stderr meanwhile.
    let saved = unsafe { libc::dup(2) };
    assert!(saved >= 0, "dup stderr");
    unsafe { libc::dup2(file.as_raw_fd(), 2) };
    let gw = Gateway::start().await;
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
    gw
}

async fn setup() -> Env {
    let logs = TempDir::new("chaos-logs");
    let stderr = logs.path().join("gateway.stderr");
    let gw = start_gateway_capturing_stderr(&stderr).await;
    let workspace = TempDir::new("chaos-ws");
    let real = gw.node(REAL, workspace.path()).await;
    let agent_token = gw.agent_token();
    // `token create node` makes a one-time join token: enroll the fake node once and
    // keep the long-lived credential it is exchanged for.
    let join = gw.node_token(FAKE);
    let (mut raw, hello) = Raw::node(
        &gw.addr,
        FAKE,
        &join,
        json!([tool("Echo", "diagnostics.echo")]),
    )
    .await;
    let hello = hello.expect("the fake node enrolls");
    let node_token = hello["credential"].as_str().unwrap_or(&join).to_owned();
    let _ = raw.ws.close(None).await;
    let admin_token = gw.admin_token();
    let agent = gw.agent_with(&agent_token).await;
    Env {
        gw: RefCell::new(gw),
        _real: real,
        _workspace: workspace,
        stderr,
        _logs: logs,
        agent,
        agent_token,
        node_token,
        admin_token,
        pending: RefCell::new(Vec::new()),
    }
}

fn fill(text: &str, nonce: &str, env: &Env, call: &str) -> String {
    text.replace(P_NONCE, nonce)
        .replace(P_NODE_TOKEN, &env.node_token)
        .replace(P_AGENT_TOKEN, &env.agent_token)
        .replace(P_CALL, call)
}

/// Reads until the gateway closes, goes quiet for 200 ms, or 3 s pass; every text
/// frame must be a valid frame.
async fn drain(raw: &mut Raw) -> Result<(), TestCaseError> {
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        match tokio::time::timeout(Duration::from_millis(200), raw.ws.next()).await {
            Err(_) | Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => break,
            Ok(Some(Ok(Message::Text(t)))) => {
                prop_assert!(
                    Frame::decode(t.as_str()).is_ok(),
                    "the gateway sent an invalid frame: {}",
                    t.as_str()
                );
            }
            Ok(Some(Ok(_))) => {}
        }
    }
    Ok(())
}

async fn run_case(env: &Env, n: usize, case: &Case) -> Result<(), TestCaseError> {
    let addr = env.gw.borrow().addr.clone();
    let path = if case.node_endpoint {
        "/v1/node"
    } else {
        "/v1/agent"
    };
    let mut raw = Raw::open(&addr, path).await;
    let nonce = raw.challenge().await;
    let mut call_id = "0".to_owned();
    let hello = match case.who {
        Who::Unauthenticated => None,
        Who::FakeNode => {
            let tools = json!([tool("Echo", "diagnostics.echo")]);
            Some(node_connect(FAKE, &env.node_token, &nonce, tools))
        }
        Who::Agent => Some(agent_connect(&env.agent_token, &nonce)),
        Who::Operator => Some(agent_connect(&env.admin_token, &nonce)),
    };
    if let Some(params) = hello {
        let req = json!({"type": "req", "id": "c1", "method": "connect", "params": params});
        raw.send(&req.to_string()).await;
        let v = raw.recv_json().await;
        prop_assert_eq!(&v["ok"], &json!(true), "valid handshake refused: {}", v);
    }
    if case.who == Who::FakeNode {
        // A real call pending on this connection, so random results can meet it.
        let url = env.gw.borrow().url();
        let token = env.agent_token.clone();
        env.pending.borrow_mut().push(tokio::spawn(async move {
            let c = AgentClient::connect(&url, &token).await.ok()?;
            let r = c
                .call(&format!("{FAKE}__Echo"), json!({"text": "p"}), Some(5_000))
                .await;
            Some(r.is_ok())
        }));
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            match tokio::time::timeout(Duration::from_secs(5), raw.ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => {
                    if let Ok(Frame::Req { id, .. }) = Frame::decode(t.as_str()) {
                        call_id = id;
                        break;
                    }
                }
                Ok(Some(Ok(_))) => {}
                _ => break,
            }
        }
    }
    for m in &case.msgs {
        let msg = match m {
            Out::Text(t) => Message::Text(fill(t, &nonce, env, &call_id).into()),
            Out::Binary(b) => Message::Binary(b.clone().into()),
            Out::Ping(b) => Message::Ping(b.clone().into()),
            Out::Pong(b) => Message::Pong(b.clone().into()),
        };
        // The gateway may have closed the connection already: that is allowed.
        if raw.ws.send(msg).await.is_err() {
            break;
        }
    }
    drain(&mut raw).await?;
    let _ = raw.ws.close(None).await;
    drop(raw);
    healthy(env, n).await
}

/// The gateway survived: process alive, /healthz, Echo through old and new clients,
/// no panic on its stderr.
async fn healthy(env: &Env, n: usize) -> Result<(), TestCaseError> {
    let (addr, url) = {
        let mut gw = env.gw.borrow_mut();
        let status = gw.proc.0.try_wait();
        prop_assert!(
            matches!(status, Ok(None)),
            "gateway exited: {:?}\n{}",
            status,
            stderr_tail(env)
        );
        (gw.addr.clone(), gw.url())
    };
    let (status, body) = http_get(&addr, "/healthz", None).await;
    prop_assert_eq!((status, body.trim()), (200, "ok"));
    let text = format!("alive-{n}");
    let r = env
        .agent
        .call(
            &format!("{REAL}__Echo"),
            json!({ "text": text }),
            Some(10_000),
        )
        .await;
    prop_assert!(
        matches!(&r, Ok(r) if r.joined_text() == text),
        "Echo through the long-lived client: {:?}",
        r
    );
    let fresh = AgentClient::connect(&url, &env.agent_token).await;
    prop_assert!(fresh.is_ok(), "fresh agent connect: {:?}", fresh.err());
    let r = fresh
        .expect("checked")
        .call(
            &format!("{REAL}__Echo"),
            json!({ "text": text }),
            Some(10_000),
        )
        .await;
    prop_assert!(
        matches!(&r, Ok(r) if r.joined_text() == text),
        "Echo through a fresh client: {:?}",
        r
    );
    let log = std::fs::read_to_string(&env.stderr).unwrap_or_default();
    prop_assert!(
        !log.contains("panicked"),
        "the gateway panicked:\n{}",
        stderr_tail(env)
    );
    Ok(())
}

fn stderr_tail(env: &Env) -> String {
    let log = std::fs::read_to_string(&env.stderr).unwrap_or_default();
    let start = log.len().saturating_sub(4000);
    let start = (start..log.len())
        .find(|i| log.is_char_boundary(*i))
        .unwrap_or(0);
    log[start..].to_owned()
}

#[test]
fn random_frames_never_break_the_gateway() {
    // Building and shrinking the nested JSON strategies of a debug build needs more
    // than the default 2 MiB test-thread stack.
    let run = std::thread::Builder::new()
        .name("frame-chaos".into())
        .stack_size(64 << 20)
        .spawn(run)
        .expect("spawn the test thread");
    if let Err(panic) = run.join() {
        std::panic::resume_unwind(panic);
    }
}

fn run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let env = rt.block_on(setup());
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let result = runner.run(&case(), |case| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rt.block_on(run_case(&env, n, &case))
    });
    if let Err(e) = result {
        panic!("{e}\n--- gateway stderr (tail) ---\n{}", stderr_tail(&env));
    }
    let pending = std::mem::take(&mut *env.pending.borrow_mut());
    let calls = pending.len();
    rt.block_on(async {
        for (i, p) in pending.into_iter().enumerate() {
            let done = tokio::time::timeout(Duration::from_secs(30), p).await;
            assert!(
                matches!(done, Ok(Ok(Some(_)))),
                "call {i} to the fake node did not end: {done:?}"
            );
        }
    });
    let log = std::fs::read_to_string(&env.stderr).expect("gateway stderr file");
    // The capture works (the gateway's startup line is there) and holds no panic.
    assert!(
        log.contains("gsv gateway listening"),
        "stderr not captured: {log}"
    );
    assert!(!log.contains("panicked"), "{}", stderr_tail(&env));
    eprintln!(
        "{} cases ({calls} calls to the fake node) in {:.1} s; gateway alive, healthy, no panic",
        counter.into_inner(),
        started.elapsed().as_secs_f64()
    );
    rt.block_on(async move { drop(env) });
}
