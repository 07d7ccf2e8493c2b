//! The agent connection: requests matched to responses by id, events queued.
//!
//! One task drives the connection with the shared transport driver
//! ([`gsv_transport::Driver`]): it writes the frames callers queue and reads the
//! gateway's, matching each `res` to its waiting request by id and queueing events.
//! Requests run concurrently over one connection; the send queues (text, and binary
//! for file transfers) are bounded, so a gateway that stops reading makes callers wait
//! instead of growing memory. Chunk frames and `transfer.*` events go to the transfer
//! they name ([`crate::transfer`]).

use crate::transfer::Routes;
use crate::{ClientError, TlsOptions};
use gsv_protocol::endpoint::{Gateway, AGENT_PATH};
use gsv_protocol::frame::{encode_cancel, encode_req};
use gsv_protocol::handshake::{Auth, ClientInfo, LaneKind, LaneParams};
use gsv_protocol::method::{
    NoParams, NodeSummary, NodesListResult, ToolEntry, ToolsCallParams, ToolsListResult,
};
use gsv_protocol::{
    ConnectParams, ErrorShape, EventName, Frame, HelloOk, Method, Role, ToolResult,
};
use gsv_transport::{ClientWs, ConnectError, Driver, Event as Wire, Paired};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

type Outcome = Result<Box<RawValue>, ErrorShape>;
type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Outcome>>>>;

/// An event received from the gateway.
#[derive(Debug, Clone)]
pub struct Event {
    pub event: EventName,
    pub payload: Value,
    pub seq: u64,
}

/// A connected, authenticated agent.
pub struct AgentClient {
    frames: mpsc::Sender<String>,
    /// Binary frames: file transfers' chunks.
    binary: mpsc::Sender<Vec<u8>>,
    /// Where chunk frames and transfer events go.
    pub(crate) routes: Arc<Routes>,
    waiters: Waiters,
    next_id: AtomicU64,
    events: tokio::sync::Mutex<mpsc::Receiver<Event>>,
    /// Cancelled when the connection is gone.
    closed: CancellationToken,
    /// Cancelled when the client is dropped: the driver sends what is queued and
    /// closes.
    stop: CancellationToken,
    /// What the gateway answered in `hello-ok`.
    pub hello: HelloOk,
}

/// How long dialing and the handshake may each take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames queued for the gateway before callers wait.
const OUTGOING_FRAMES: usize = 256;
/// Binary frames (chunks of at most 1 MiB) queued for the gateway before senders wait.
const OUTGOING_BINARY: usize = 4;
/// Events kept for [`AgentClient::next_event`]; later ones are dropped while full.
const EVENTS: usize = 1024;
/// How long a dropped client keeps sending what was queued before it closes.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

impl AgentClient {
    /// Dials `gateway` (any accepted spelling) and authenticates with `token`; a TLS
    /// gateway must present a certificate the system's roots trust.
    pub async fn connect(gateway: &str, token: &str) -> Result<AgentClient, ClientError> {
        Self::connect_with(gateway, token, &TlsOptions::default()).await
    }

    /// [`AgentClient::connect`] with chosen TLS trust (`--ca` or `--pin`).
    pub async fn connect_with(
        gateway: &str,
        token: &str,
        tls: &TlsOptions,
    ) -> Result<AgentClient, ClientError> {
        Self::connect_lane(gateway, token, tls, None).await
    }

    /// [`AgentClient::connect_with`] as a bulk lane (`connect.lane`): the gateway
    /// serves the connection on threads below calls. For a client that moves a file's
    /// bytes (`gsv cp`), so other agents' calls are not kept waiting behind them.
    pub async fn connect_bulk(
        gateway: &str,
        token: &str,
        tls: &TlsOptions,
    ) -> Result<AgentClient, ClientError> {
        let lane = LaneParams {
            kind: LaneKind::Bulk,
            instance: None,
        };
        Self::connect_lane(gateway, token, tls, Some(lane)).await
    }

    async fn connect_lane(
        gateway: &str,
        token: &str,
        tls: &TlsOptions,
        lane: Option<LaneParams>,
    ) -> Result<AgentClient, ClientError> {
        // `URL1,URL2`: replicas of one cluster, tried in order; the next one only when
        // a replica cannot be reached (a refusal is every replica's answer).
        let mut last = None;
        for one in gateway.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            match AgentClient::connect_one(one, token, tls, lane.clone()).await {
                Err(e @ ClientError::Unreachable { .. }) => last = Some(e),
                other => return other,
            }
        }
        match last {
            Some(e) => Err(e),
            None => AgentClient::connect_one(gateway, token, tls, lane).await,
        }
    }

    /// [`AgentClient::connect_with`] for one gateway address.
    async fn connect_one(
        gateway: &str,
        token: &str,
        tls: &TlsOptions,
        lane: Option<LaneParams>,
    ) -> Result<AgentClient, ClientError> {
        let gateway = Gateway::parse(gateway)?;
        let url = gateway.ws_url(AGENT_PATH);
        let trust = if gateway.tls {
            Some(gsv_transport::tls::client_config(
                tls.ca.as_deref(),
                tls.pin.as_deref(),
            )?)
        } else {
            None
        };
        let mut ws = gsv_transport::dial(&url, trust, CONNECT_TIMEOUT)
            .await
            .map_err(|e| match e {
                ConnectError::Refused(shape) => ClientError::Remote(shape),
                ConnectError::Certificate(reason) => ClientError::Certificate {
                    url: url.clone(),
                    reason,
                },
                ConnectError::DialTimeout(_) => ClientError::Unreachable {
                    url: url.clone(),
                    reason: "timed out".into(),
                },
                other => ClientError::Unreachable {
                    url: url.clone(),
                    reason: other.to_string(),
                },
            })?;
        let hello = gsv_transport::handshake(&mut ws, |nonce| ConnectParams {
            min_protocol: gsv_protocol::MIN_PROTOCOL_VERSION,
            max_protocol: gsv_protocol::PROTOCOL_VERSION,
            role: Role::Agent,
            auth: Auth {
                token: token.to_owned(),
                nonce,
            },
            client: ClientInfo {
                name: "gsv-cli".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            node: None,
            lane,
        })
        .await
        .map_err(|e| match e {
            ConnectError::Refused(shape) => ClientError::Remote(shape),
            ConnectError::HandshakeTimeout(_) => {
                ClientError::Protocol("gateway did not answer the handshake".into())
            }
            ConnectError::WebSocket(_) => ClientError::Closed,
            other => ClientError::Protocol(other.to_string()),
        })?;
        Ok(Self::start(ws, hello))
    }

    /// Starts the connection's task on an authenticated socket.
    fn start(ws: ClientWs, hello: HelloOk) -> AgentClient {
        let (frames, text) = mpsc::channel(OUTGOING_FRAMES);
        let (binary, binary_rx) = mpsc::channel(OUTGOING_BINARY);
        let outbox = Paired {
            text,
            binary: binary_rx,
        };
        let routes = Arc::new(Routes::new(frames.clone()));
        let (events_tx, events_rx) = mpsc::channel(EVENTS);
        let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
        let closed = CancellationToken::new();
        let stop = CancellationToken::new();
        // The gateway pings every heartbeat; ours only have to prove this side alive.
        let heartbeat = Duration::from_millis(hello.limits.heartbeat_ms.clamp(1_000, 600_000));
        let driver = Driver::new(ws, outbox, heartbeat);
        tokio::spawn(run(
            driver,
            Arc::clone(&waiters),
            Arc::clone(&routes),
            events_tx,
            closed.clone(),
            stop.clone(),
        ));
        AgentClient {
            frames,
            binary,
            routes,
            waiters,
            next_id: AtomicU64::new(1),
            events: tokio::sync::Mutex::new(events_rx),
            closed,
            stop,
            hello,
        }
    }

    /// A fresh request id for this connection.
    pub fn next_id(&self) -> String {
        format!("r{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends a request with a chosen id and waits for its raw result.
    pub async fn request_with_id<P: Serialize + ?Sized>(
        &self,
        id: &str,
        method: Method,
        params: &P,
    ) -> Result<Box<RawValue>, ClientError> {
        if self.closed.is_cancelled() {
            return Err(ClientError::Closed);
        }
        let (tx, rx) = oneshot::channel();
        if let Ok(mut m) = self.waiters.lock() {
            m.insert(id.to_owned(), tx);
        }
        let forget = || {
            if let Ok(mut m) = self.waiters.lock() {
                m.remove(id);
            }
        };
        if self.send(encode_req(id, method, params)).await.is_err() {
            forget();
            return Err(ClientError::Closed);
        }
        // The answer first: the connection's task hands it over before it marks the
        // connection closed, so when both are ready (a last result, then the close),
        // the result is what the caller gets.
        let outcome = tokio::select! {
            biased;
            r = rx => r,
            _ = self.closed.cancelled() => {
                forget();
                return Err(ClientError::Closed);
            }
        };
        match outcome {
            Ok(Ok(raw)) => Ok(raw),
            Ok(Err(e)) => Err(ClientError::Remote(e)),
            Err(_) => Err(ClientError::Closed),
        }
    }

    /// Sends a request and waits for its raw result.
    pub async fn request<P: Serialize + ?Sized>(
        &self,
        method: Method,
        params: &P,
    ) -> Result<Box<RawValue>, ClientError> {
        let id = self.next_id();
        self.request_with_id(&id, method, params).await
    }

    /// Calls a namespaced tool.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        timeout_ms: Option<u64>,
    ) -> Result<ToolResult, ClientError> {
        let id = self.next_id();
        self.call_with_id(&id, name, args, timeout_ms).await
    }

    /// Calls a namespaced tool with a chosen request id (so it can be cancelled).
    pub async fn call_with_id(
        &self,
        id: &str,
        name: &str,
        args: Value,
        timeout_ms: Option<u64>,
    ) -> Result<ToolResult, ClientError> {
        let params = call_params(name, args, timeout_ms, false)?;
        let raw = self.request_with_id(id, Method::ToolsCall, &params).await?;
        serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad tool result: {e}")))
    }

    /// Starts a call as a job (`tools.call` with `async: true`) and returns the job's
    /// id at once; `jobs.get` reads its outcome later, from this or any connection of
    /// a token that may see it.
    pub async fn call_async(
        &self,
        name: &str,
        args: Value,
        timeout_ms: Option<u64>,
    ) -> Result<String, ClientError> {
        let params = call_params(name, args, timeout_ms, true)?;
        let raw = self.request(Method::ToolsCall, &params).await?;
        let started: gsv_protocol::job::AsyncCallResult = serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad job answer: {e}")))?;
        Ok(started.job)
    }

    /// A page of the jobs this token may see, newest first (`jobs.list`).
    pub async fn jobs(
        &self,
        limit: u32,
        offset: u32,
    ) -> Result<gsv_protocol::job::JobsListResult, ClientError> {
        let params = gsv_protocol::job::JobsListParams {
            limit,
            offset,
            select: None,
        };
        let raw = self.request(Method::JobsList, &params).await?;
        serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad jobs page: {e}")))
    }

    /// One job with its outcome (`jobs.get`).
    pub async fn job(&self, id: &str) -> Result<gsv_protocol::job::Job, ClientError> {
        self.job_request(Method::JobsGet, id).await
    }

    /// Cancels a running job (`jobs.cancel`); the job as it is then.
    pub async fn cancel_job(&self, id: &str) -> Result<gsv_protocol::job::Job, ClientError> {
        self.job_request(Method::JobsCancel, id).await
    }

    async fn job_request(
        &self,
        method: Method,
        id: &str,
    ) -> Result<gsv_protocol::job::Job, ClientError> {
        let params = gsv_protocol::job::JobsGetParams { id: id.to_owned() };
        let raw = self.request(method, &params).await?;
        serde_json::from_str(raw.get()).map_err(|e| ClientError::Protocol(format!("bad job: {e}")))
    }

    /// `tools.fanout` with a chosen request id: runs `params.tool` on every node
    /// `params.select` picks. While it runs, each finished node arrives as a
    /// `fanout.result` event named by `id` ([`AgentClient::next_event`]; see
    /// [`fanout_event`]); this returns the whole result.
    pub async fn fanout_with_id(
        &self,
        id: &str,
        params: &gsv_protocol::fanout::ToolsFanoutParams,
    ) -> Result<gsv_protocol::fanout::FanoutResult, ClientError> {
        let raw = self
            .request_with_id(id, Method::ToolsFanout, params)
            .await?;
        serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad tools.fanout result: {e}")))
    }

    /// `tools.fanout` with `async`: the fan-out's job id, at once (`jobs.get` reads its
    /// outcome).
    pub async fn fanout_async(
        &self,
        params: &gsv_protocol::fanout::ToolsFanoutParams,
    ) -> Result<String, ClientError> {
        let raw = self.request(Method::ToolsFanout, params).await?;
        let started: gsv_protocol::job::AsyncCallResult = serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad job answer: {e}")))?;
        Ok(started.job)
    }

    /// Queues one frame for the connection's task.
    async fn send(&self, text: String) -> Result<(), ClientError> {
        if self.closed.is_cancelled() {
            return Err(ClientError::Closed);
        }
        self.frames
            .send(text)
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Queues one binary frame (a transfer's chunk).
    pub(crate) async fn send_binary(&self, frame: Vec<u8>) -> Result<(), ClientError> {
        if self.closed.is_cancelled() {
            return Err(ClientError::Closed);
        }
        self.binary
            .send(frame)
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Sends a request whose answer nobody waits for (a transfer's credit: a failure
    /// comes as `transfer.failed`).
    pub(crate) async fn send_unanswered<P: Serialize + ?Sized>(
        &self,
        method: Method,
        params: &P,
    ) -> Result<(), ClientError> {
        let id = self.next_id();
        self.send(encode_req(&id, method, params)).await
    }

    /// Queues a request whose answer nobody waits for, without waiting: from `Drop`
    /// (a transfer's cancel). Lost when the queue is full; closing the connection then
    /// cancels the transfer on the gateway anyway.
    pub(crate) fn send_detached<P: Serialize + ?Sized>(&self, method: Method, params: &P) {
        let id = self.next_id();
        let _ = self.frames.try_send(encode_req(&id, method, params));
    }

    /// Waits (up to `limit`) until every frame queued so far was handed to the
    /// socket: before a process exits with a cancel still queued.
    pub async fn flush(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            while !self.closed.is_cancelled()
                && (self.frames.capacity() < self.frames.max_capacity()
                    || self.binary.capacity() < self.binary.max_capacity())
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // The driver flushes the socket once its queue is empty.
            tokio::time::sleep(Duration::from_millis(50)).await;
        })
        .await;
    }

    /// Cancels a call in flight by its request id.
    pub async fn cancel(&self, id: &str) -> Result<(), ClientError> {
        self.send(encode_cancel(id)).await
    }

    /// Sends a raw text frame (tests use this for malformed input).
    pub async fn send_raw(&self, text: String) -> Result<(), ClientError> {
        self.send(text).await
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolEntry>, ClientError> {
        let raw = self.request(Method::ToolsList, &NoParams {}).await?;
        let r: ToolsListResult = serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad tools.list result: {e}")))?;
        Ok(r.tools)
    }

    pub async fn list_nodes(&self) -> Result<Vec<NodeSummary>, ClientError> {
        self.select_nodes(None).await
    }

    /// `nodes.list {select}`: the nodes this token may see that `select` picks (every
    /// one it may see when `None`). The gateway parses the selector: a bad one is a
    /// `Remote` `invalid_args` error naming the term.
    pub async fn select_nodes(
        &self,
        select: Option<&str>,
    ) -> Result<Vec<NodeSummary>, ClientError> {
        let params = gsv_protocol::method::NodesListParams {
            select: select.map(str::to_owned),
        };
        let raw = self.request(Method::NodesList, &params).await?;
        let r: NodesListResult = serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad nodes.list result: {e}")))?;
        Ok(r.nodes)
    }

    /// Whether the connection to the gateway is gone.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// The next event, waiting up to `timeout`.
    pub async fn next_event(&self, timeout: Duration) -> Option<Event> {
        let mut rx = self.events.lock().await;
        tokio::time::timeout(timeout, rx.recv())
            .await
            .ok()
            .flatten()
    }
}

/// The node outcome an event carries when it is a `fanout.result` of request `id`.
pub fn fanout_event(event: &Event, id: &str) -> Option<gsv_protocol::fanout::NodeOutcome> {
    if event.event != EventName::FanoutResult {
        return None;
    }
    let e: gsv_protocol::fanout::FanoutResultEvent =
        serde_json::from_value(event.payload.clone()).ok()?;
    (e.id == id).then_some(e.outcome)
}

impl Drop for AgentClient {
    /// Closes the connection: the task sends what is still queued (a last cancel),
    /// then a close frame.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The connection's task: drives the socket until the gateway goes away or the client
/// is dropped; then every open request fails with [`ClientError::Closed`].
async fn run(
    mut driver: Driver<gsv_transport::dial::MaybeTls, Paired>,
    waiters: Waiters,
    routes: Arc<Routes>,
    events: mpsc::Sender<Event>,
    closed: CancellationToken,
    stop: CancellationToken,
) {
    loop {
        let wire = tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            wire = driver.next() => wire,
        };
        match wire {
            Wire::Text(text) => match Frame::decode(text.as_str()) {
                Ok(Frame::Res { id, outcome }) => {
                    routes.on_res(&id, &outcome);
                    let waiter = waiters.lock().ok().and_then(|mut m| m.remove(&id));
                    if let Some(tx) = waiter {
                        let _ = tx.send(outcome);
                    }
                }
                Ok(Frame::Event {
                    event,
                    payload,
                    seq,
                }) => {
                    if routes.on_event(event, payload.as_deref()) {
                        continue;
                    }
                    let payload = payload
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or(Value::Null);
                    let _ = events.try_send(Event {
                        event,
                        payload,
                        seq,
                    });
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "ignoring a malformed frame from the gateway")
                }
            },
            Wire::Binary(frame) => routes.on_binary(frame),
            Wire::Close(_)
            | Wire::Ended
            | Wire::TooLarge { .. }
            | Wire::ReadFailed(_)
            | Wire::WriteFailed(_)
            | Wire::Silent => break,
        }
    }
    closed.cancel();
    if let Ok(mut m) = waiters.lock() {
        m.clear();
    }
    routes.clear();
    let _ = driver.finish(CLOSE_TIMEOUT).await;
}

fn call_params(
    name: &str,
    args: Value,
    timeout_ms: Option<u64>,
    is_async: bool,
) -> Result<ToolsCallParams, ClientError> {
    Ok(ToolsCallParams {
        name: name.to_owned(),
        args: serde_json::value::to_raw_value(&args)
            .map_err(|e| ClientError::Protocol(format!("bad tool arguments: {e}")))?,
        timeout_ms,
        is_async,
    })
}
