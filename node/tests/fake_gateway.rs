//! The node's connection behaviour against a scripted stand-in for the gateway: the
//! handshake, calls, cancellation, deadlines, limits, heartbeats, refusals, reconnects
//! and shutdown. (End-to-end tests against the real gateway live in the workspace's
//! `tests/`.)

use futures_util::{SinkExt, StreamExt};
use gsv_node::{async_trait, NodeConfig, NodeError, Registry, Tool, ToolContext};
use gsv_protocol::frame::{encode_cancel, encode_err, encode_event, encode_ok, encode_req};
use gsv_protocol::limits::DEFAULT_HEARTBEAT_MS;
use gsv_protocol::{
    ConnectParams, ErrorCode, ErrorShape, EventName, Frame, HelloOk, Limits, Method, NodeId, Role,
    ToolAnnotations, ToolDef, ToolResult,
};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

type Ws = WebSocketStream<TcpStream>;

const WAIT: Duration = Duration::from_secs(10);

struct FakeGateway {
    listener: TcpListener,
}

impl FakeGateway {
    async fn start() -> Self {
        FakeGateway {
            listener: TcpListener::bind("127.0.0.1:0").await.unwrap(),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.listener.local_addr().unwrap())
    }

    /// Accepts the next WebSocket connection.
    async fn accept(&self) -> Ws {
        let (tcp, _) = tokio::time::timeout(WAIT, self.listener.accept())
            .await
            .expect("the node should connect")
            .unwrap();
        tokio_tungstenite::accept_async(tcp).await.unwrap()
    }

    /// Accepts a connection and completes the handshake with `limits`.
    async fn register_with(&self, limits: Limits) -> (Ws, ConnectParams) {
        let mut ws = self.accept().await;
        let connect = challenge(&mut ws).await;
        let hello = HelloOk::new(1, "conn-1".into(), limits);
        ws.send(Message::text(encode_ok("connect", &hello)))
            .await
            .unwrap();
        (ws, connect)
    }

    async fn register(&self) -> (Ws, ConnectParams) {
        self.register_with(Limits::standard(4096, DEFAULT_HEARTBEAT_MS))
            .await
    }
}

/// Sends the challenge and returns the node's connect params.
async fn challenge(ws: &mut Ws) -> ConnectParams {
    ws.send(Message::text(encode_event(
        EventName::Challenge,
        &json!({"nonce": "n-123"}),
        0,
    )))
    .await
    .unwrap();
    match next_frame(ws).await {
        Frame::Req {
            id, method, params, ..
        } => {
            assert_eq!(id, "connect");
            assert_eq!(method, Method::Connect);
            serde_json::from_str(params.unwrap().get()).unwrap()
        }
        other => panic!("expected connect, got {other:?}"),
    }
}

/// The next text frame from the node, skipping pings.
async fn next_frame(ws: &mut Ws) -> Frame {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the node should send a frame")
            .expect("the connection should stay open")
            .unwrap();
        match message {
            Message::Text(text) => return Frame::decode(text.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected message {other:?}"),
        }
    }
}

/// Sends a request and waits for the response with the same id.
async fn call(ws: &mut Ws, id: &str, method: Method, params: Value) -> Result<Value, ErrorShape> {
    ws.send(Message::text(encode_req(id, method, &params)))
        .await
        .unwrap();
    wait_res(ws, id).await
}

async fn wait_res(ws: &mut Ws, want: &str) -> Result<Value, ErrorShape> {
    loop {
        if let Frame::Res { id, outcome } = next_frame(ws).await {
            assert_eq!(id, want, "responses come back for the request asked");
            return outcome.map(|raw| serde_json::from_str(raw.get()).unwrap());
        }
    }
}

fn config(gateway: String) -> NodeConfig {
    let mut config = NodeConfig::new(
        gateway,
        NodeId::parse("test-node").unwrap(),
        "tok-1".into(),
        std::env::temp_dir(),
    );
    config.echo_tool = true;
    config
}

fn spawn_node(config: NodeConfig) -> (CancellationToken, JoinHandle<Result<(), NodeError>>) {
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(gsv_node::run(config, shutdown.clone()));
    (shutdown, handle)
}

async fn stop(shutdown: CancellationToken, handle: JoinHandle<Result<(), NodeError>>) {
    shutdown.cancel();
    let result = tokio::time::timeout(WAIT, handle)
        .await
        .expect("the node should stop promptly")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
}

fn invoke(tool: &str, args: Value, timeout_ms: u64) -> Value {
    json!({"tool": tool, "args": args, "timeoutMs": timeout_ms})
}

#[tokio::test]
async fn handshake_declares_the_node_and_calls_are_served() {
    let gw = FakeGateway::start().await;
    let (shutdown, handle) = spawn_node(config(gw.url()));

    let mut ws = gw.accept().await;
    // Nothing may arrive before the challenge.
    let early = tokio::time::timeout(Duration::from_millis(200), ws.next()).await;
    assert!(
        early.is_err(),
        "the node spoke before the challenge: {early:?}"
    );
    let connect = challenge(&mut ws).await;
    assert_eq!(connect.role, Role::Node);
    assert_eq!(connect.auth.token, "tok-1");
    assert_eq!(connect.auth.nonce, "n-123");
    assert_eq!(connect.client.name, "gsv-node");
    assert!(connect.min_protocol <= connect.max_protocol);
    let node = connect.node.expect("node info");
    assert_eq!(node.id, "test-node");
    let names: Vec<&str> = node.tools.iter().map(|t| t.name.as_str()).collect();
    // The standard set (sorted by name) plus Echo; its full contents are checked by the
    // registry's own tests.
    for name in ["Bash", "Echo", "Process", "Read"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(names.is_sorted(), "{names:?}");
    for capability in [
        "diagnostics.echo",
        "filesystem.read",
        "process.manage",
        "shell.exec",
    ] {
        assert!(
            node.capabilities.iter().any(|c| c == capability),
            "{capability} missing from {:?}",
            node.capabilities
        );
    }
    assert_eq!(node.runtime.host_bin_status.get("sh"), Some(&true));
    assert!(node.runtime.host_env.iter().any(|n| n == "PATH"));
    ws.send(Message::text(encode_ok(
        "connect",
        &HelloOk::new(1, "c".into(), Limits::standard(4096, 15_000)),
    )))
    .await
    .unwrap();

    let r = call(
        &mut ws,
        "1",
        Method::ToolInvoke,
        invoke("Echo", json!({"text": "hi"}), 5000),
    )
    .await
    .unwrap();
    let result: ToolResult = serde_json::from_value(r).unwrap();
    assert_eq!(result.joined_text(), "hi");
    assert_eq!(result.structured_content, Some(json!({"text": "hi"})));

    // A tool error is a successful response with isError.
    let r = call(
        &mut ws,
        "2",
        Method::ToolInvoke,
        invoke("Read", json!({"path": "/gsv/no/such/file"}), 5000),
    )
    .await
    .unwrap();
    assert_eq!(r["isError"], json!(true));
    assert_eq!(
        r["content"][0]["text"],
        json!("File not found: /gsv/no/such/file")
    );

    // Malformed frames are skipped; the connection carries on.
    ws.send(Message::text("{not json")).await.unwrap();
    ws.send(Message::text(r#"{"type":"weird"}"#)).await.unwrap();
    ws.send(Message::text(encode_event(
        EventName::Shutdown,
        &json!({}),
        1,
    )))
    .await
    .unwrap();

    let e = call(
        &mut ws,
        "3",
        Method::ToolInvoke,
        invoke("Nope", json!({}), 5000),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let e = call(&mut ws, "4", Method::ToolsList, json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let e = call(&mut ws, "5", Method::ToolInvoke, json!({"tool": "Echo"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgs);

    let r = call(
        &mut ws,
        "6",
        Method::NodeProbe,
        json!({"bins": ["sh", "gsv-not-a-bin"]}),
    )
    .await
    .unwrap();
    assert_eq!(r["hostBinStatus"]["sh"], json!(true));
    assert_eq!(r["hostBinStatus"]["gsv-not-a-bin"], json!(false));
    assert!(r["hostBinStatusUpdatedAt"].as_u64().unwrap() > 0);

    stop(shutdown, handle).await;
    // The node closes the socket on shutdown.
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await.unwrap() {
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
            Some(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn cancel_and_deadline() {
    let gw = FakeGateway::start().await;
    let (shutdown, handle) = spawn_node(config(gw.url()));
    let (mut ws, _) = gw.register().await;

    // A cancel frame ends a long call with `cancelled`.
    ws.send(Message::text(encode_req(
        "long",
        Method::ToolInvoke,
        &invoke("Echo", json!({"text": "x", "delayMs": 600000}), 600_000),
    )))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    ws.send(Message::text(encode_cancel("long"))).await.unwrap();
    let e = wait_res(&mut ws, "long").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Cancelled);

    // The deadline from timeoutMs ends a call with `timeout`.
    let e = call(
        &mut ws,
        "slow",
        Method::ToolInvoke,
        invoke("Echo", json!({"text": "x", "delayMs": 5000}), 100),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::Timeout);
    assert!(e.retryable);

    // Calls run concurrently: a quick one answers while a slow one waits.
    ws.send(Message::text(encode_req(
        "a",
        Method::ToolInvoke,
        &invoke("Echo", json!({"text": "a", "delayMs": 2000}), 10_000),
    )))
    .await
    .unwrap();
    let r = call(
        &mut ws,
        "b",
        Method::ToolInvoke,
        invoke("Echo", json!({"text": "b"}), 10_000),
    )
    .await
    .unwrap();
    assert_eq!(r["content"][0]["text"], json!("b"));
    let r = wait_res(&mut ws, "a").await.unwrap();
    assert_eq!(r["content"][0]["text"], json!("a"));

    stop(shutdown, handle).await;
}

/// Returns a text of `len` bytes.
struct Big;

#[async_trait]
impl Tool for Big {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Big".into(),
            description: "returns many bytes".into(),
            input_schema: json!({"type": "object", "properties": {"len": {"type": "integer"}}}),
            capability: "diagnostics.echo".into(),
            annotations: ToolAnnotations::default(),
            default_timeout_ms: None,
            requires_bins: vec![],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let len = args["len"].as_u64().unwrap_or(0) as usize;
        ToolResult::text("z".repeat(len))
    }
}

#[tokio::test]
async fn results_over_the_negotiated_limit_are_too_large() {
    let gw = FakeGateway::start().await;
    let mut registry = Registry::new();
    registry.register(Big).unwrap();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(gsv_node::run_with_registry(
        config(gw.url()),
        registry,
        shutdown.clone(),
    ));
    let mut limits = Limits::standard(4096, 15_000);
    limits.max_result_bytes = 1000;
    let (mut ws, connect) = gw.register_with(limits).await;
    assert_eq!(connect.node.unwrap().tools.len(), 1);

    let r = call(
        &mut ws,
        "ok",
        Method::ToolInvoke,
        invoke("Big", json!({"len": 500}), 5000),
    )
    .await
    .unwrap();
    assert_eq!(r["content"][0]["text"].as_str().unwrap().len(), 500);
    let e = call(
        &mut ws,
        "big",
        Method::ToolInvoke,
        invoke("Big", json!({"len": 2000}), 5000),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::TooLarge);
    assert_eq!(e.details.unwrap()["limit"], json!(1000));

    stop(shutdown, handle).await;
}

#[tokio::test]
async fn a_refused_first_connect_is_fatal() {
    for (code, exit) in [
        (ErrorCode::Unauthorized, 3),
        (ErrorCode::Forbidden, 3),
        (ErrorCode::UnsupportedProtocol, 2),
    ] {
        let gw = FakeGateway::start().await;
        let (_shutdown, handle) = spawn_node(config(gw.url()));
        let mut ws = gw.accept().await;
        challenge(&mut ws).await;
        ws.send(Message::text(encode_err(
            "connect",
            &ErrorShape::new(code, "no"),
        )))
        .await
        .unwrap();
        let result = tokio::time::timeout(WAIT, handle).await.unwrap().unwrap();
        match result {
            Err(e @ NodeError::Refused(_)) => {
                assert_eq!(e.exit_code(), exit);
                assert!(e.to_string().contains(code.as_str()), "{e}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn reconnects_after_a_lost_session_and_retries_later_refusals() {
    let gw = FakeGateway::start().await;
    let (shutdown, handle) = spawn_node(config(gw.url()));

    // First session works, then the gateway drops it.
    let (ws, _) = gw.register().await;
    drop(ws);

    // The node comes back; a refusal now is not fatal any more.
    let mut ws = gw.accept().await;
    challenge(&mut ws).await;
    ws.send(Message::text(encode_err(
        "connect",
        &ErrorShape::new(ErrorCode::Unauthorized, "revoked"),
    )))
    .await
    .unwrap();
    drop(ws);

    // It keeps trying, and serves again once accepted.
    let (mut ws, _) = gw.register().await;
    let r = call(
        &mut ws,
        "1",
        Method::ToolInvoke,
        invoke("Echo", json!({"text": "back"}), 5000),
    )
    .await
    .unwrap();
    assert_eq!(r["content"][0]["text"], json!("back"));
    assert!(!handle.is_finished());
    stop(shutdown, handle).await;
}

#[tokio::test]
async fn heartbeat_pings_and_a_silent_gateway_is_dropped() {
    let gw = FakeGateway::start().await;
    let mut cfg = config(gw.url());
    cfg.heartbeat = Duration::from_millis(100);
    let (shutdown, handle) = spawn_node(cfg);
    let (mut ws, _) = gw.register().await;

    // The node pings every heartbeat.
    let ping = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(Ok(Message::Ping(_))) = ws.next().await {
                break;
            }
        }
    })
    .await;
    assert!(ping.is_ok(), "no ping within {WAIT:?}");

    // Stop reading (so no pongs go back): after two silent intervals the node gives up
    // on this connection and dials again.
    let (_ws2, _) = gw.register().await;
    drop(ws);
    stop(shutdown, handle).await;
}

#[tokio::test]
async fn shutdown_interrupts_backoff_and_dialling() {
    // Nothing listens on this port: the node keeps failing and backing off.
    let unused = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", unused.local_addr().unwrap());
    drop(unused);
    let (shutdown, handle) = spawn_node(config(url));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!handle.is_finished());
    stop(shutdown, handle).await;
}

#[tokio::test]
async fn a_bad_address_is_a_usage_error() {
    let e = gsv_node::run(config("ftp://x".into()), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, NodeError::Gateway(_)));
    assert_eq!(e.exit_code(), 2);
}

#[tokio::test]
async fn wss_addresses_dial_with_tls() {
    use tokio::io::AsyncReadExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("wss://{}", listener.local_addr().unwrap());
    let (shutdown, handle) = spawn_node(config(url));
    let (mut tcp, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .unwrap()
        .unwrap();
    let mut first = [0u8; 1];
    tcp.read_exact(&mut first).await.unwrap();
    assert_eq!(
        first[0], 0x16,
        "a TLS handshake record starts the connection"
    );
    // A peer that does not speak TLS is an ordinary, retried failure.
    drop(tcp);
    let (_again, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .unwrap()
        .unwrap();
    assert!(!handle.is_finished());
    stop(shutdown, handle).await;
}

/// Counts its runs and answers with the count.
struct Counter(std::sync::Arc<std::sync::atomic::AtomicUsize>);

#[async_trait]
impl Tool for Counter {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Count".into(),
            description: "counts its runs".into(),
            input_schema: json!({"type": "object", "properties": {"delayMs": {"type": "integer"}}}),
            capability: "diagnostics.echo".into(),
            annotations: ToolAnnotations::default(),
            default_timeout_ms: None,
            requires_bins: vec![],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let delay = args["delayMs"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        ToolResult::text(n.to_string())
    }
}

fn counting_node(
    gw: &FakeGateway,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    CancellationToken,
    JoinHandle<Result<(), NodeError>>,
) {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut registry = Registry::new();
    registry.register(Counter(runs.clone())).unwrap();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(gsv_node::run_with_registry(
        config(gw.url()),
        registry,
        shutdown.clone(),
    ));
    (runs, shutdown, handle)
}

#[tokio::test]
async fn the_same_call_id_runs_once_and_gets_the_same_result() {
    let gw = FakeGateway::start().await;
    let (runs, shutdown, handle) = counting_node(&gw);
    let (mut ws, _) = gw.register().await;
    let first = call(
        &mut ws,
        "77",
        Method::ToolInvoke,
        invoke("Count", json!({}), 5000),
    )
    .await
    .unwrap();
    assert_eq!(first["content"][0]["text"], json!("1"));
    // Delivered again (plain and as a resume): answered from memory, not run.
    let again = call(
        &mut ws,
        "77",
        Method::ToolInvoke,
        invoke("Count", json!({}), 5000),
    )
    .await
    .unwrap();
    assert_eq!(again, first);
    let mut resume = invoke("Count", json!({}), 5000);
    resume["resume"] = json!(true);
    let resumed = call(&mut ws, "77", Method::ToolInvoke, resume)
        .await
        .unwrap();
    assert_eq!(resumed, first);
    // A running id delivered twice: one run, one answer.
    ws.send(Message::text(encode_req(
        "78",
        Method::ToolInvoke,
        &invoke("Count", json!({"delayMs": 300}), 5000),
    )))
    .await
    .unwrap();
    ws.send(Message::text(encode_req(
        "78",
        Method::ToolInvoke,
        &invoke("Count", json!({"delayMs": 300}), 5000),
    )))
    .await
    .unwrap();
    let r = wait_res(&mut ws, "78").await.unwrap();
    assert_eq!(r["content"][0]["text"], json!("2"));
    let extra = tokio::time::timeout(Duration::from_millis(600), async {
        loop {
            if let Frame::Res { id, .. } = next_frame(&mut ws).await {
                return id;
            }
        }
    })
    .await;
    assert!(extra.is_err(), "a second answer came: {extra:?}");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 2);
    stop(shutdown, handle).await;
}

#[tokio::test]
async fn a_result_that_ends_while_the_link_is_down_is_delivered_after_reconnect() {
    let gw = FakeGateway::start().await;
    let (runs, shutdown, handle) = counting_node(&gw);
    let (mut ws, first) = gw.register().await;
    let instance = first.node.unwrap().instance;
    assert!(!instance.is_empty());
    ws.send(Message::text(encode_req(
        "500",
        Method::ToolInvoke,
        &invoke("Count", json!({"delayMs": 200}), 10_000),
    )))
    .await
    .unwrap();
    // The link drops mid-call; the call ends while the node is reconnecting.
    drop(ws);
    let (mut ws, second) = gw.register().await;
    assert_eq!(
        second.node.unwrap().instance,
        instance,
        "same process, same instance"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut resume = invoke("Count", json!({"delayMs": 200}), 10_000);
    resume["resume"] = json!(true);
    let r = call(&mut ws, "500", Method::ToolInvoke, resume)
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], json!("1"));
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);

    // A resumed id the node never received runs now, once.
    let mut resume = invoke("Count", json!({}), 10_000);
    resume["resume"] = json!(true);
    let r = call(&mut ws, "501", Method::ToolInvoke, resume)
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], json!("2"));
    stop(shutdown, handle).await;
}
