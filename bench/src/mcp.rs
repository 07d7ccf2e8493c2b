//! `gsv bench mcp`: what the MCP endpoint costs on top of the WebSocket agent API.
//!
//! One in-process gateway and one in-process node with the Echo tool, on loopback. The
//! same sequential `Echo` call is made through `/mcp` (Streamable HTTP, one keep-alive
//! connection, the way MCP clients talk to it) and through `/v1/agent` (gsv's own
//! WebSocket protocol, `gsv_client::AgentClient`), interleaved call by call so drift
//! in machine load hits both alike. Two MCP flavours are measured: a 2025-11-25 session
//! (`initialize` once, then `Mcp-Session-Id`) and the session-less 2026-07-28 revision
//! (metadata on every request). The client side is a minimal HTTP/1.1 client (hyper),
//! so the figure is the gateway's MCP path, not an SDK's overhead. A call is timed from
//! sending the request to having its JSON-RPC response, as an MCP client hands the
//! result to its caller; in a session that response is an event of an SSE stream,
//! whose end follows it, and the time to that end is reported beside it (the end is
//! read before the next call, outside the timing). The target: MCP adds at most 150 µs
//! at p50.

use super::report::{Report, Row};
use super::stats::{summarize, Summary};
use super::BenchOptions;
use gsv_client::AgentClient;
use gsv_gateway::{GatewayConfig, Store, TokenKind};
use gsv_protocol::NodeId;
use http_body_util::BodyExt;
use hyper::client::conn::http1::SendRequest;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What MCP may add to a call at p50, in microseconds.
pub const TARGET_OVERHEAD_US: f64 = 150.0;

/// The request body type of the minimal client.
type Body = http_body_util::Full<hyper::body::Bytes>;

/// One keep-alive HTTP/1.1 connection speaking MCP.
pub(super) struct McpConn {
    send: SendRequest<Body>,
    /// `/mcp`, with a query (`?view=fleet`) where a scenario asks for one.
    path: String,
    authority: String,
    token: String,
    session: Option<String>,
    version: &'static str,
    next_id: u64,
    /// The rest of the last response's body, once its JSON-RPC message was read (an
    /// SSE stream still has its end to come); read by [`McpConn::finish`].
    rest: Option<hyper::body::Incoming>,
}

impl McpConn {
    async fn open(addr: SocketAddr, token: &str, version: &'static str) -> Result<McpConn, String> {
        McpConn::open_at(addr, "/mcp", token, version).await
    }

    /// A connection that posts to `path` (`/mcp?view=fleet`).
    pub(super) async fn open_at(
        addr: SocketAddr,
        path: &str,
        token: &str,
        version: &'static str,
    ) -> Result<McpConn, String> {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(McpConn {
            send,
            path: path.to_owned(),
            authority: addr.to_string(),
            token: token.to_owned(),
            session: None,
            rest: None,
            version,
            next_id: 1,
        })
    }

    /// POSTs one JSON-RPC message; returns the response headers and the JSON-RPC
    /// response (the `data:` of the SSE event carrying it), if any, as soon as it has
    /// arrived, as an MCP client hands a result to its caller: what is left of the
    /// body (an SSE stream's end) is read by [`McpConn::finish`].
    async fn post(
        &mut self,
        method: &str,
        body: Value,
        name: Option<&str>,
    ) -> Result<(hyper::HeaderMap, Option<Value>), String> {
        self.finish().await?;
        let mut req = hyper::Request::post(self.path.as_str())
            .header("host", &self.authority)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", self.version)
            .header("mcp-method", method);
        if let Some(n) = name {
            req = req.header("mcp-name", n);
        }
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        let req = req
            .body(Body::from(body.to_string()))
            .map_err(|e| e.to_string())?;
        self.send.ready().await.map_err(|e| e.to_string())?;
        let res = self
            .send
            .send_request(req)
            .await
            .map_err(|e| format!("POST /mcp: {e}"))?;
        let status = res.status();
        let headers = res.headers().clone();
        let mut body = res.into_body();
        let mut bytes = Vec::new();
        let mut message = None;
        let mut ended = false;
        while message.is_none() {
            match body.frame().await {
                None => {
                    ended = true;
                    break;
                }
                Some(Err(e)) => return Err(format!("POST /mcp {method}: body: {e}")),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        bytes.extend_from_slice(&data);
                        if status.is_success() {
                            message = response_in(&bytes);
                        }
                    }
                }
            }
        }
        if !status.is_success() {
            return Err(format!(
                "POST /mcp {method}: {status}: {}",
                String::from_utf8_lossy(&bytes)
            ));
        }
        if !ended {
            self.rest = Some(body);
        }
        Ok((headers, message))
    }

    /// Reads the rest of the last response (an SSE stream's end), so the connection
    /// can carry the next request.
    pub(super) async fn finish(&mut self) -> Result<(), String> {
        if let Some(body) = self.rest.take() {
            body.collect()
                .await
                .map_err(|e| format!("response end: {e}"))?;
        }
        Ok(())
    }

    /// `initialize` + `notifications/initialized` (2025 revisions only).
    pub(super) async fn initialize(&mut self) -> Result<(), String> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": self.version, "capabilities": {},
            "clientInfo": {"name": "gsv-bench", "version": env!("CARGO_PKG_VERSION")}}});
        let (headers, answer) = self.post("initialize", init, None).await?;
        self.session = headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if self.session.is_none() {
            return Err(format!(
                "no Mcp-Session-Id in the initialize response of {}: {}",
                self.path,
                answer.map(|a| a.to_string()).unwrap_or_default()
            ));
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post("notifications/initialized", note, None).await?;
        Ok(())
    }

    /// Every page of `tools/list`: the tool definitions, as the client receives them.
    pub(super) async fn list_tools(&mut self) -> Result<Vec<Value>, String> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        // Bounded: a listing of more pages than this is a bug, not a big fleet.
        for _ in 0..10_000 {
            let id = self.next_id;
            self.next_id += 1;
            let mut params = json!({});
            if let Some(c) = &cursor {
                params["cursor"] = json!(c);
            }
            let body =
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
            let (_, message) = self.post("tools/list", body, None).await?;
            let message = message.ok_or("no JSON-RPC response to tools/list")?;
            if let Some(e) = message.get("error") {
                return Err(format!("tools/list: {e}"));
            }
            let result = &message["result"];
            if let Some(page) = result["tools"].as_array() {
                tools.extend(page.iter().cloned());
            }
            match result["nextCursor"].as_str() {
                Some(c) if !c.is_empty() => cursor = Some(c.to_owned()),
                _ => return Ok(tools),
            }
        }
        Err("tools/list did not end within 10,000 pages".into())
    }

    /// One `tools/call`; returns the result's text.
    pub(super) async fn call(&mut self, tool: &str, args: Value) -> Result<String, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = json!({"name": tool, "arguments": args});
        if self.session.is_none() {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientInfo": {"name": "gsv-bench", "version": env!("CARGO_PKG_VERSION")},
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let (_, message) = self.post("tools/call", body, Some(tool)).await?;
        let message = match message {
            Some(m) => m,
            None => return Err("no JSON-RPC response in the stream".into()),
        };
        if let Some(e) = message.get("error") {
            return Err(format!("tools/call: {e}"));
        }
        let result = &message["result"];
        if result["isError"] == json!(true) {
            return Err(format!("tool error: {result}"));
        }
        Ok(result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }
}

/// The JSON-RPC response in what has arrived of a body so far: the whole JSON body, or
/// the `data:` line of a complete SSE event carrying a result or an error.
fn response_in(bytes: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(bytes);
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(&text).ok();
    }
    // Only whole lines: the last one may still be cut.
    let complete = &text[..text.rfind('\n')? + 1];
    complete
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
}

/// A gateway and an Echo node in this process.
pub(super) struct Rig {
    pub(super) gateway: gsv_gateway::RunningGateway,
    pub(super) stop: CancellationToken,
    pub(super) node: tokio::task::JoinHandle<()>,
    pub(super) token: String,
    _dir: TempDir,
}

/// A directory removed on drop.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Also used by `latency`.
pub(super) async fn rig(opts: &BenchOptions) -> Result<Rig, String> {
    let base = opts.dir.clone().unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("gsv-bench-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dir = TempDir(dir);
    let data = dir.0.join("data");
    let mut config = GatewayConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)), data.clone());
    config.write_addr_file = false;
    config.caps = super::fleet::bench_caps();
    let gateway = gsv_gateway::start(config)
        .await
        .map_err(|e| format!("gateway: {e}"))?;
    let store = Store::open(&data).map_err(|e| e.to_string())?;
    let (node_token, _) = store
        .create_token(TokenKind::Node, "bench", None)
        .map_err(|e| e.to_string())?;
    let everything = gsv_gateway::PolicySpec {
        allow: vec!["*".into()],
        ..Default::default()
    };
    let (token, _) = store
        .create_token(TokenKind::Agent, "bench", Some(&everything))
        .map_err(|e| e.to_string())?;
    let id = NodeId::parse("bench").map_err(|e| e.to_string())?;
    let mut node = gsv_node::NodeConfig::new(gateway.url(), id, node_token, dir.0.clone());
    node.echo_tool = true;
    node.data_dir = Some(dir.0.join("node"));
    let stop = CancellationToken::new();
    let node = tokio::spawn({
        let stop = stop.clone();
        async move {
            if let Err(e) = gsv_node::run(node, stop).await {
                tracing::warn!(error = %e, "bench node stopped");
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while gateway.connected_nodes() == 0 {
        if Instant::now() > deadline {
            return Err("the bench node did not connect".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Rig {
        gateway,
        stop,
        node,
        token,
        _dir: dir,
    })
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let n = if opts.quick { 30 } else { 2000 };
    let rig = rig(opts).await?;
    let outcome = measure(&rig, n).await;
    rig.stop.cancel();
    let _ = rig.node.await;
    rig.gateway.stop().await;
    let (ws, session, stateless, whole) = outcome?;
    let row = |figure: &str, mcp: &Summary, pct: fn(&Summary) -> f64, label: &str| {
        let base = pct(&ws);
        let max_ratio = (base + TARGET_OVERHEAD_US) / base.max(1.0);
        let mut r = Row::at_most(
            format!("{figure}, {label}"),
            pct(mcp),
            format!("Echo via /v1/agent WebSocket, {label}"),
            base,
            "µs",
            max_ratio,
        );
        r.target = format!("+{TARGET_OVERHEAD_US:.0} µs");
        r
    };
    let p50 = |s: &Summary| s.p50_us;
    let p99 = |s: &Summary| s.p99_us;
    let mut rows = vec![
        row("Echo via /mcp, 2025-11-25 session", &session, p50, "p50"),
        row(
            "Echo via /mcp, 2026-07-28 stateless",
            &stateless,
            p50,
            "p50",
        ),
    ];
    // p99 is reported for information; the target is about p50.
    let mut tail = row("Echo via /mcp, 2025-11-25 session", &session, p99, "p99");
    tail.target = "(info)".into();
    tail.met = true;
    rows.push(tail);
    // Until the session's response stream has ended too (the client's connection free
    // for the next request), for information.
    let mut end = row(
        "Echo via /mcp, 2025-11-25 session, to the stream's end",
        &whole,
        p50,
        "p50",
    );
    end.target = "(info)".into();
    end.met = true;
    rows.push(end);
    Ok(Report::new(
        "mcp",
        format!(
            "{n} sequential Echo calls per path, interleaved; MCP over one keep-alive HTTP/1.1 \
             connection; p50 added by MCP: session {:+.0} µs, stateless {:+.0} µs",
            session.p50_us - ws.p50_us,
            stateless.p50_us - ws.p50_us
        ),
        rows,
    ))
}

async fn measure(rig: &Rig, n: usize) -> Result<(Summary, Summary, Summary, Summary), String> {
    let addr = rig.gateway.addr;
    let agent = AgentClient::connect(&rig.gateway.url(), &rig.token)
        .await
        .map_err(|e| format!("agent: {e}"))?;
    let mut session = McpConn::open(addr, &rig.token, "2025-11-25").await?;
    session.initialize().await?;
    let mut stateless = McpConn::open(addr, &rig.token, "2026-07-28").await?;
    let args = json!({"text": "ping"});
    // Warm up every path (connections, allocator, the tool set's validator).
    for _ in 0..20 {
        agent
            .call("bench__Echo", args.clone(), None)
            .await
            .map_err(|e| e.to_string())?;
        session.call("bench__Echo", args.clone()).await?;
        stateless.call("bench__Echo", args.clone()).await?;
    }
    let (mut a, mut s, mut l, mut w) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for _ in 0..n {
        let t = Instant::now();
        let r = agent
            .call("bench__Echo", args.clone(), None)
            .await
            .map_err(|e| e.to_string())?;
        a.push(t.elapsed());
        if r.is_error {
            return Err(format!("Echo failed: {}", r.joined_text()));
        }
        let t = Instant::now();
        let text = session.call("bench__Echo", args.clone()).await?;
        s.push(t.elapsed());
        session.finish().await?;
        w.push(t.elapsed());
        if text != "ping" {
            return Err(format!("Echo via MCP answered {text:?}"));
        }
        let t = Instant::now();
        stateless.call("bench__Echo", args.clone()).await?;
        l.push(t.elapsed());
        stateless.finish().await?;
    }
    Ok((summarize(&a), summarize(&s), summarize(&l), summarize(&w)))
}
