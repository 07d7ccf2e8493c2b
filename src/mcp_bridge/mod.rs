//! The engine of `gsv mcp`: MCP's stdio transport on one side, the gateway's `/mcp`
//! (Streamable HTTP) on the other, and no MCP server of its own in between.
//!
//! Each JSON-RPC message read from stdin is `POST`ed to `/mcp` as it is, with the
//! headers an MCP HTTP client sends (the Bearer token, the session id the gateway gave
//! on `initialize`, `MCP-Protocol-Version`, and from 2026-07-28 on `Mcp-Method` /
//! `Mcp-Name`). Whatever the gateway answers — one JSON message, or an SSE stream of
//! them (progress, `elicitation/create`, the response) — goes to stdout, one message a
//! line, as it arrives; the client's answers to the gateway's questions come back on
//! stdin and are posted like anything else. So the client gets exactly what `/mcp`
//! gives an HTTP client, elicitation included.
//!
//! Every message is posted by a task of its own on a connection of its own: a long
//! `tools/call` never holds up a `ping` or a cancellation behind it. Only the
//! `initialize` exchange is waited for (later messages need its session id). Once the
//! session is initialized, its standalone `GET /mcp` stream is kept open (reopened
//! with a bounded backoff when it drops) for the gateway's notifications. At the end
//! of input the session is ended with `DELETE /mcp`.
//!
//! Failures the gateway cannot put into a JSON-RPC answer itself are answered for it,
//! with the codes the official SDKs' HTTP transports use ([`code`]); a line that is
//! not JSON gets `-32700` with id `null`.

mod failure;
pub(crate) mod http;
mod message;
mod sse;
pub mod stdio;

pub use failure::code;
pub use http::{HttpError, SetupError};
pub use stdio::Line;

use failure::Failure;
use gsv_client::TlsOptions;
use http::{Conn, Http};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use message::{
    classify, is_jsonrpc, is_modern, own_version, route_headers, Kind, Session, PROTOCOL_VERSION,
    SESSION_ID,
};
use serde_json::Value;
use sse::SseReader;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, OwnedRwLockWriteGuard, RwLock};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

/// The longest line read from stdin: the gateway's largest request body.
pub const MAX_LINE_BYTES: usize = gsv_protocol::limits::MAX_FRAME_BYTES;
/// The largest message taken from the gateway (a result of the largest size, mapped
/// to MCP, is well within).
const MAX_ANSWER_BYTES: usize = 4 * gsv_protocol::limits::MAX_FRAME_BYTES;
/// Largest body read from an answer that is not a message (an error page).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// After its response, how long a request's SSE stream may take to end before its
/// connection is dropped instead of reused.
const STREAM_END_WAIT: Duration = Duration::from_secs(2);
/// At the end of input, how long messages already read may still take.
const EOF_GRACE: Duration = Duration::from_secs(1);
/// How long the closing `DELETE /mcp` may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);
/// Delays between attempts to reopen the standalone stream: doubling from the first
/// to the second.
const LISTEN_RETRY: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));
/// A standalone stream that stayed open this long starts the backoff afresh.
const LISTEN_STABLE: Duration = Duration::from_secs(60);

/// Where and how to reach the gateway.
pub struct Upstream {
    http: Arc<Http>,
    auth: HeaderValue,
    /// `/mcp`, with the view and selection asked for (`?view=…&select=…`).
    path: Uri,
}

impl Upstream {
    /// Resolves `gateway` (any accepted spelling) and the TLS trust; reads `--ca`.
    pub fn new(gateway: &str, token: &str, tls: &TlsOptions) -> Result<Upstream, SetupError> {
        let http = Http::new(gateway, tls)?;
        let mut auth =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| SetupError::Token)?;
        auth.set_sensitive(true);
        Ok(Upstream {
            http: Arc::new(http),
            auth,
            path: Uri::from_static(gsv_gateway::mcp::PATH),
        })
    }

    /// Posts to `/mcp?view=VIEW&select=SEL` (`gsv mcp --view`, `--select`): the
    /// gateway then shows that view of those nodes, exactly as to an HTTP client
    /// using that URL.
    pub fn with_view(
        mut self,
        view: Option<&str>,
        select: Option<&str>,
    ) -> Result<Upstream, SetupError> {
        let pairs: Vec<(&str, &str)> = [("view", view), ("select", select)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        if pairs.is_empty() {
            return Ok(self);
        }
        let query = serde_urlencoded::to_string(&pairs).map_err(|_| SetupError::Query)?;
        self.path = format!("{}?{query}", gsv_gateway::mcp::PATH)
            .parse()
            .map_err(|_| SetupError::Query)?;
        Ok(self)
    }

    /// The gateway's `/mcp` URL.
    pub fn url(&self) -> &str {
        self.http.url()
    }

    fn request(&self, method: Method, body: Vec<u8>, accept: &'static str) -> Request<Full<Bytes>> {
        let post = method == Method::POST;
        let mut req = Request::new(Full::new(Bytes::from(body)));
        *req.method_mut() = method;
        *req.uri_mut() = self.path.clone();
        let h = req.headers_mut();
        h.insert(AUTHORIZATION, self.auth.clone());
        h.insert(ACCEPT, HeaderValue::from_static(accept));
        h.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("gsv-mcp/", env!("CARGO_PKG_VERSION"))),
        );
        if post {
            h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        req
    }

    /// `DELETE /mcp` for session `id`.
    async fn delete(&self, id: &str, version: Option<&str>) {
        let mut req = self.request(Method::DELETE, Vec::new(), "application/json");
        let h = req.headers_mut();
        if let Ok(v) = HeaderValue::from_str(id) {
            h.insert(SESSION_ID, v);
        }
        if let Some(v) = version.and_then(|v| HeaderValue::from_str(v).ok()) {
            h.insert(PROTOCOL_VERSION, v);
        }
        match tokio::time::timeout(DELETE_TIMEOUT, self.http.send(req)).await {
            Ok(Ok((res, _))) => tracing::debug!(status = %res.status(), "MCP session ended"),
            Ok(Err(e)) => tracing::debug!(error = %e, "could not end the MCP session"),
            Err(_) => tracing::debug!("ending the MCP session timed out"),
        }
    }
}

/// A request in flight.
struct Flight {
    serial: u64,
    /// Abandons the request: its connection is closed.
    abandon: CancellationToken,
    /// Posted at 2026-07-28 or later, where closing the stream is the cancellation.
    modern: bool,
    /// The client cancelled it: no answer is owed any more.
    cancelled: bool,
}

/// The standalone stream's task.
struct Listener {
    session: String,
    task: JoinHandle<()>,
}

/// What one exchange with the gateway gave.
#[derive(Default)]
struct Exchange {
    /// The response to the request posted was relayed.
    answered: bool,
    /// `Mcp-Session-Id` of the answer.
    session_id: Option<String>,
    /// `protocolVersion` of an `initialize` result.
    version: Option<String>,
}

/// The MIME type of a response, lower-cased, without parameters.
fn content_type(res: &hyper::Response<Incoming>) -> String {
    res.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Reads a whole body of at most `limit` bytes.
async fn read_body(mut body: Incoming, limit: usize) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(format!("the answer is larger than {limit} bytes"));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf)
}

/// The bridge's shared state.
struct Bridge {
    up: Upstream,
    out: mpsc::Sender<String>,
    session: Mutex<Session>,
    /// Held for writing while `initialize` is in flight: later messages wait for the
    /// session id it brings.
    gate: Arc<RwLock<()>>,
    /// The version of the client's last session-less request.
    modern: Mutex<Option<String>>,
    flights: Mutex<HashMap<String, Flight>>,
    serial: AtomicU64,
    listener: Mutex<Option<Listener>>,
    stop: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the bridge: messages from `input` to the gateway, everything the gateway
/// sends to `output`, until the end of input or `stop`. Then the session is ended.
pub async fn run(
    up: Upstream,
    mut input: mpsc::Receiver<Line>,
    output: mpsc::Sender<String>,
    stop: CancellationToken,
) {
    let bridge = Arc::new(Bridge {
        up,
        out: output,
        session: Mutex::default(),
        gate: Arc::new(RwLock::new(())),
        modern: Mutex::default(),
        flights: Mutex::default(),
        serial: AtomicU64::new(0),
        listener: Mutex::default(),
        stop: stop.clone(),
    });
    let mut tasks = JoinSet::new();
    loop {
        let line = tokio::select! {
            _ = stop.cancelled() => break,
            line = input.recv() => line,
        };
        match line {
            None | Some(Line::Eof) => break,
            Some(Line::TooLong) => {
                let message =
                    format!("Invalid request: a message longer than {MAX_LINE_BYTES} bytes");
                bridge
                    .reply_error(&Value::Null, code::INVALID_REQUEST, message, None)
                    .await;
            }
            Some(Line::Text(bytes)) => bridge.accept(bytes, &mut tasks).await,
        }
        while tasks.try_join_next().is_some() {}
    }
    bridge.close(tasks).await;
}

impl Bridge {
    /// Takes one line from the client.
    async fn accept(self: &Arc<Self>, bytes: Vec<u8>, tasks: &mut JoinSet<()>) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let msg: Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                let message = format!("Parse error: the line is not JSON: {e}");
                self.reply_error(&Value::Null, code::PARSE_ERROR, message, None)
                    .await;
                return;
            }
        };
        let kind = match classify(&msg) {
            Ok(k) => k,
            Err(id) => {
                let message =
                    "Invalid request: not a JSON-RPC 2.0 request, notification or response";
                self.reply_error(&id, code::INVALID_REQUEST, message, None)
                    .await;
                return;
            }
        };
        let own = own_version(&msg).map(str::to_owned);
        if let Some(v) = own.as_ref().filter(|v| is_modern(v)) {
            *lock(&self.modern) = Some(v.clone());
        }
        match kind {
            Kind::Request { id, method } => {
                // `initialize` is waited for: later messages need its session id.
                let init = if method == "initialize" {
                    Some(self.gate.clone().write_owned().await)
                } else {
                    None
                };
                let abandon = CancellationToken::new();
                let serial = self.serial.fetch_add(1, Ordering::Relaxed);
                lock(&self.flights).insert(
                    id.to_string(),
                    Flight {
                        serial,
                        abandon: abandon.clone(),
                        modern: own.as_deref().is_some_and(is_modern),
                        cancelled: false,
                    },
                );
                let me = self.clone();
                tasks.spawn(async move {
                    me.request(msg, bytes, id, init, serial, abandon).await;
                });
            }
            Kind::Notification { method } if method == "notifications/cancelled" => {
                if self.cancel(&msg) {
                    let me = self.clone();
                    tasks.spawn(async move { me.notify(msg, bytes, &method).await });
                }
            }
            Kind::Notification { method } => {
                let me = self.clone();
                tasks.spawn(async move { me.notify(msg, bytes, &method).await });
            }
            Kind::Response | Kind::Batch => {
                let me = self.clone();
                tasks.spawn(async move { me.notify(msg, bytes, "").await });
            }
        }
    }

    /// A `notifications/cancelled` from the client. As an MCP HTTP client does: a
    /// request posted at 2026-07-28 or later is cancelled by closing its stream (and
    /// the notification is not posted); an earlier one by posting the notification.
    /// Returns whether to post it.
    fn cancel(&self, msg: &Value) -> bool {
        let target = msg.get("params").and_then(|p| p.get("requestId"));
        let mut flights = lock(&self.flights);
        match target.and_then(|id| flights.get_mut(&id.to_string())) {
            Some(f) => {
                f.cancelled = true;
                if f.modern {
                    f.abandon.cancel();
                }
                !f.modern
            }
            None => {
                let version = lock(&self.session)
                    .version
                    .clone()
                    .or_else(|| lock(&self.modern).clone());
                !version.as_deref().is_some_and(is_modern)
            }
        }
    }

    /// The session as it is once no `initialize` is in flight.
    async fn settled_session(&self) -> Session {
        let _wait = self.gate.read().await;
        lock(&self.session).clone()
    }

    fn fallback_version(&self) -> Option<String> {
        lock(&self.modern).clone()
    }

    /// Posts a request and relays its answer; answers for the gateway when it gives
    /// none.
    async fn request(
        self: Arc<Self>,
        msg: Value,
        body: Vec<u8>,
        id: Value,
        init: Option<OwnedRwLockWriteGuard<()>>,
        serial: u64,
        abandon: CancellationToken,
    ) {
        // `initialize` opens a new session: it carries none.
        let session = match init {
            Some(_) => Session::default(),
            None => self.settled_session().await,
        };
        let headers = route_headers(&msg, &session, self.fallback_version().as_deref());
        let with_session = session.id.is_some();
        let outcome = tokio::select! {
            _ = abandon.cancelled() => None,
            r = self.exchange(body, headers, Some(&id), init.is_some(), with_session) => Some(r),
        };
        let cancelled = {
            let mut flights = lock(&self.flights);
            match flights.get(&id.to_string()) {
                Some(f) if f.serial == serial => {
                    flights.remove(&id.to_string()).is_some_and(|f| f.cancelled)
                }
                _ => false,
            }
        };
        let failure = match outcome {
            None => None,
            Some(Ok(ex)) => {
                if init.is_some() {
                    self.opened(ex.session_id.clone(), ex.version.clone());
                }
                (!ex.answered).then(|| {
                    Failure::new(
                        code::CONNECTION_CLOSED,
                        "Connection closed: the gateway's answer ended without a response",
                    )
                })
            }
            Some(Err(f)) => Some(f),
        };
        drop(init);
        if let (Some(f), false) = (failure, cancelled) {
            let data = f.http_status.map(|http_status| ErrorData { http_status });
            self.reply_error(&id, f.code, f.message, data).await;
        }
    }

    /// Records the session an `initialize` opened; ends the one it replaces.
    fn opened(&self, id: Option<String>, version: Option<String>) {
        let old = {
            let mut s = lock(&self.session);
            let old = std::mem::replace(&mut *s, Session { id, version });
            old.id
                .filter(|o| s.id.as_ref() != Some(o))
                .map(|o| (o, old.version))
        };
        if let Some((old, version)) = old {
            if let Some(l) = lock(&self.listener).take_if(|l| l.session == old) {
                l.task.abort();
            }
            let http = self.up.http.clone();
            let auth = self.up.auth.clone();
            let path = self.up.path.clone();
            tokio::spawn(async move {
                Upstream { http, auth, path }
                    .delete(&old, version.as_deref())
                    .await;
            });
        }
    }

    /// Posts a notification or a response (nothing is owed to the client for it).
    async fn notify(self: Arc<Self>, msg: Value, body: Vec<u8>, method: &str) {
        let session = self.settled_session().await;
        let headers = route_headers(&msg, &session, self.fallback_version().as_deref());
        match self
            .exchange(body, headers, None, false, session.id.is_some())
            .await
        {
            Ok(_) if method == "notifications/initialized" => self.listen(),
            Ok(_) => {}
            Err(f) => {
                tracing::warn!(method, error = %f.message, "message not delivered to the gateway")
            }
        }
    }

    /// One `POST /mcp`: sends `body`, relays what comes back. `expect` is the id of the
    /// request posted, if it is one.
    async fn exchange(
        &self,
        body: Vec<u8>,
        headers: Vec<(HeaderName, HeaderValue)>,
        expect: Option<&Value>,
        init: bool,
        with_session: bool,
    ) -> Result<Exchange, Failure> {
        let mut req = self
            .up
            .request(Method::POST, body, "application/json, text/event-stream");
        req.headers_mut().extend(headers);
        let (res, conn) = self
            .up
            .http
            .send(req)
            .await
            .map_err(|e| Failure::unreachable(&e))?;
        let status = res.status();
        let kind = content_type(&res);
        let mut ex = Exchange {
            session_id: res
                .headers()
                .get(&SESSION_ID)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            ..Exchange::default()
        };
        if status.is_success() && kind == "text/event-stream" {
            self.relay_stream(res.into_body(), conn, expect, init, &mut ex)
                .await?;
            return Ok(ex);
        }
        let limit = if status.is_success() || kind == "application/json" {
            MAX_ANSWER_BYTES
        } else {
            MAX_ERROR_BODY
        };
        let bytes = read_body(res.into_body(), limit).await.map_err(|e| {
            Failure::new(
                code::CONNECTION_CLOSED,
                format!("Connection closed: reading the gateway's answer: {e}"),
            )
        })?;
        self.up.http.release(conn);
        let message = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(is_jsonrpc);
        if let Some(v) = message {
            // A JSON-RPC answer is the answer, whatever the HTTP status.
            self.relay(v, Some(&bytes), expect, init, &mut ex).await;
            return Ok(ex);
        }
        if !status.is_success() {
            return Err(Failure::refusal(status, &bytes, with_session));
        }
        if expect.is_some() {
            return Err(if bytes.is_empty() {
                Failure::new(
                    code::INVALID_REQUEST,
                    format!("Invalid request: the gateway answered the request with {status} and no response"),
                )
            } else if kind == "application/json" {
                Failure::new(
                    code::PARSE_ERROR,
                    "Parse error: the gateway's answer is not a JSON-RPC message",
                )
            } else {
                Failure::new(
                    code::INVALID_REQUEST,
                    format!("Invalid request: unexpected content type {kind:?} from the gateway"),
                )
            });
        }
        Ok(ex)
    }

    /// Relays an SSE answer event by event, as they arrive. A request's stream is
    /// done with once its response came and the stream ended.
    async fn relay_stream(
        &self,
        mut body: Incoming,
        conn: Conn,
        expect: Option<&Value>,
        init: bool,
        ex: &mut Exchange,
    ) -> Result<(), Failure> {
        let mut reader = SseReader::new(MAX_ANSWER_BYTES);
        let mut events = Vec::new();
        loop {
            let frame = if ex.answered {
                match tokio::time::timeout(STREAM_END_WAIT, body.frame()).await {
                    Ok(f) => f,
                    Err(_) => return Ok(()),
                }
            } else {
                body.frame().await
            };
            let data = match frame {
                None => {
                    self.up.http.release(conn);
                    return Ok(());
                }
                Some(Err(_)) if ex.answered || expect.is_none() => return Ok(()),
                Some(Err(e)) => {
                    return Err(Failure::new(
                        code::CONNECTION_CLOSED,
                        format!(
                        "Connection closed: the gateway's stream broke before the response: {e}"
                    ),
                    ))
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
            };
            if let Err(e) = reader.feed(&data, &mut events) {
                if ex.answered || expect.is_none() {
                    tracing::warn!(error = %e, "the rest of a stream is dropped");
                    return Ok(());
                }
                return Err(Failure::new(code::INTERNAL_ERROR, e.to_string()));
            }
            for event in events.drain(..) {
                match serde_json::from_slice::<Value>(&event) {
                    Ok(v) => self.relay(v, Some(&event), expect, init, ex).await,
                    Err(e) if expect.is_some() && !ex.answered => {
                        return Err(Failure::new(
                            code::PARSE_ERROR,
                            format!("Parse error: an SSE message of the gateway is not JSON: {e}"),
                        ));
                    }
                    Err(e) => tracing::warn!(error = %e, "dropped an SSE message that is not JSON"),
                }
            }
        }
    }

    /// Writes one message of the gateway to stdout. The first response on a request's
    /// answer is its response (an error the gateway could not give an id gets the
    /// request's).
    async fn relay(
        &self,
        mut v: Value,
        raw: Option<&[u8]>,
        expect: Option<&Value>,
        init: bool,
        ex: &mut Exchange,
    ) {
        let response =
            v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some());
        let mut changed = false;
        if let (Some(want), true, false) = (expect, response, ex.answered) {
            ex.answered = true;
            if v.get("id") != Some(want) {
                v["id"] = want.clone();
                changed = true;
            }
            if init {
                ex.version = v
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        // The gateway's own text when it is one line already, else compact JSON.
        let line = raw
            .map(<[u8]>::trim_ascii)
            .filter(|r| !changed && !r.iter().any(|&b| b == b'\n' || b == b'\r'))
            .and_then(|r| std::str::from_utf8(r).ok())
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string());
        self.emit(line).await;
    }

    async fn emit(&self, line: String) {
        // Fails only when the writer is gone with stdout: nobody to tell.
        let _ = self.out.send(line).await;
    }

    async fn reply_error(
        &self,
        id: &Value,
        code: i64,
        message: impl Into<String>,
        data: Option<ErrorData>,
    ) {
        let reply = ErrorReply {
            error: RpcError {
                code,
                data,
                message: message.into(),
            },
            id,
            jsonrpc: "2.0",
        };
        self.emit(serde_json::to_string(&reply).unwrap_or_default())
            .await;
    }

    /// Opens the session's standalone stream (`GET /mcp`), unless it is open.
    fn listen(self: &Arc<Self>) {
        let session = lock(&self.session).clone();
        let Some(id) = session.id.clone() else {
            return;
        };
        let mut slot = lock(&self.listener);
        if slot
            .as_ref()
            .is_some_and(|l| l.session == id && !l.task.is_finished())
        {
            return;
        }
        if let Some(old) = slot.take() {
            old.task.abort();
        }
        let me = self.clone();
        *slot = Some(Listener {
            session: id,
            task: tokio::spawn(async move { me.keep_listening(session).await }),
        });
    }

    /// Keeps the standalone stream open: reopened when it ends or breaks, after a
    /// delay doubling up to a bound; given up when the gateway refuses it (no such
    /// session any more, or no standalone streams).
    async fn keep_listening(self: Arc<Self>, session: Session) {
        let mut delay = LISTEN_RETRY.0;
        loop {
            let opened = Instant::now();
            match self.listen_once(&session).await {
                Ok(()) => tracing::debug!("the session's stream ended: reopening"),
                Err(Some(status)) => {
                    tracing::debug!(%status, "no standalone stream for this session");
                    return;
                }
                Err(None) => {}
            }
            if opened.elapsed() >= LISTEN_STABLE {
                delay = LISTEN_RETRY.0;
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(LISTEN_RETRY.1);
        }
    }

    /// One standalone stream, relayed until it ends. `Err(Some(status))`: refused for
    /// good; `Err(None)`: failed, worth retrying.
    async fn listen_once(&self, session: &Session) -> Result<(), Option<StatusCode>> {
        let mut req = self
            .up
            .request(Method::GET, Vec::new(), "text/event-stream");
        req.headers_mut()
            .extend(route_headers(&Value::Null, session, None));
        let (res, _conn) = self.up.http.send(req).await.map_err(|e| {
            tracing::debug!(error = %e, "cannot open the session's stream");
            None
        })?;
        let status = res.status();
        if !status.is_success() || content_type(&res) != "text/event-stream" {
            let transient = status.is_server_error()
                || status == StatusCode::TOO_MANY_REQUESTS
                || status == StatusCode::REQUEST_TIMEOUT;
            return Err((!transient).then_some(status));
        }
        let mut body = res.into_body();
        let mut reader = SseReader::new(MAX_ANSWER_BYTES);
        let mut events = Vec::new();
        let mut ex = Exchange::default();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                tracing::debug!(error = %e, "the session's stream broke");
                None
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            reader.feed(&data, &mut events).map_err(|e| {
                tracing::warn!(error = %e, "the session's stream is dropped");
                None
            })?;
            for event in events.drain(..) {
                match serde_json::from_slice::<Value>(&event) {
                    Ok(v) => self.relay(v, Some(&event), None, false, &mut ex).await,
                    Err(e) => tracing::warn!(error = %e, "dropped an SSE message that is not JSON"),
                }
            }
        }
        Ok(())
    }

    /// At the end of input: what was read gets [`EOF_GRACE`] to be delivered, then
    /// requests still waiting are abandoned, the standalone stream closed and the
    /// session ended.
    async fn close(self: Arc<Self>, mut tasks: JoinSet<()>) {
        let drained = tokio::time::timeout(EOF_GRACE, async {
            while tasks.join_next().await.is_some() {}
        })
        .await
        .is_ok();
        if !drained {
            tasks.shutdown().await;
        }
        self.stop.cancel();
        let listener = lock(&self.listener).take();
        if let Some(l) = listener {
            l.task.abort();
            let _ = l.task.await;
        }
        let session = lock(&self.session).clone();
        if let Some(id) = &session.id {
            self.up.delete(id, session.version.as_deref()).await;
        }
    }
}
/// A JSON-RPC error response as the bridge writes it to its MCP client (MCP's framing,
/// not a gsv protocol type). Fields in name order, as the JSON map it replaces wrote them.
#[derive(serde::Serialize)]
struct ErrorReply<'a> {
    error: RpcError,
    id: &'a Value,
    jsonrpc: &'static str,
}

/// The `error` member of [`ErrorReply`].
#[derive(serde::Serialize)]
struct RpcError {
    code: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<ErrorData>,
    message: String,
}

/// The `data` of a bridge error: the gateway's HTTP status, when it answered one.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ErrorData {
    http_status: u16,
}
