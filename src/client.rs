//! A client for the agent WebSocket protocol (`/v1/agent`).
//!
//! Used by `gsv call`, `gsv nodes`, `gsv tools`, the examples and the end-to-end tests.
//! One reader task matches each `res` to its request by id and queues events; requests
//! can run concurrently over one connection. A request is written by the task that makes
//! it (the sink is shared under a lock), so sending costs no hand-off to another task. `https://` / `wss://` gateways are trusted
//! the same ways a node trusts them ([`TlsOptions`]: system roots, `--ca`, `--pin`).

use futures_util::{SinkExt, StreamExt};
use gsv_protocol::endpoint::{Gateway, AGENT_PATH};
use gsv_protocol::frame::{encode_cancel, encode_req};
use gsv_protocol::handshake::{Auth, Challenge, ClientInfo};
use gsv_protocol::method::{
    NoParams, NodeSummary, NodesListResult, ToolEntry, ToolsCallParams, ToolsListResult,
};
use gsv_protocol::{
    ConnectParams, ErrorShape, EventName, Frame, HelloOk, Method, Role, ToolResult,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// Client-side failures.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("{0}")]
    Url(#[from] gsv_protocol::endpoint::EndpointError),
    #[error("cannot reach the gateway at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// `--ca` / `--pin` could not be used (unreadable file, malformed pin).
    #[error("{0}")]
    Tls(#[from] gsv_node::tls::TlsError),
    /// The gateway's certificate was rejected (pin mismatch, untrusted issuer...).
    #[error("{url}: {reason}")]
    Certificate { url: String, reason: String },
    #[error("{0}")]
    Remote(ErrorShape),
    #[error("connection to the gateway closed")]
    Closed,
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The gateway's error, when it sent one.
    pub fn remote(&self) -> Option<&ErrorShape> {
        match self {
            ClientError::Remote(e) => Some(e),
            _ => None,
        }
    }
}

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Box<RawValue>, ErrorShape>>>>>;

/// An event received from the gateway.
#[derive(Debug, Clone)]
pub struct Event {
    pub event: EventName,
    pub payload: Value,
    pub seq: u64,
}

/// The sending half of the connection.
type Sink = futures_util::stream::SplitSink<Stream, Message>;

/// A connected, authenticated agent.
pub struct AgentClient {
    sink: Arc<tokio::sync::Mutex<Sink>>,
    waiters: Waiters,
    next_id: AtomicU64,
    events: tokio::sync::Mutex<mpsc::Receiver<Event>>,
    /// Cancelled when the connection is gone (read side ended).
    closed: tokio_util::sync::CancellationToken,
    /// What the gateway answered in `hello-ok`.
    pub hello: HelloOk,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which certificates an `https://` / `wss://` gateway may present. The default
/// (neither set) trusts the system's root certificates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM file whose certificates are the only trusted roots (`--ca`).
    pub ca: Option<PathBuf>,
    /// SHA-256 fingerprint of the gateway's leaf certificate (`--pin`): only it is
    /// checked, not the chain or name.
    pub pin: Option<String>,
}

fn ws_config() -> WebSocketConfig {
    let max = gsv_protocol::limits::MAX_FRAME_BYTES;
    WebSocketConfig::default()
        .read_buffer_size(8 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(max + 64 * 1024)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

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
        let gateway = Gateway::parse(gateway)?;
        let url = gateway.ws_url(AGENT_PATH);
        let unreachable = |reason: String| ClientError::Unreachable {
            url: url.clone(),
            reason,
        };
        let connector = if gateway.tls {
            let config = gsv_node::tls::client_config(tls.ca.as_deref(), tls.pin.as_deref())?;
            Some(tokio_tungstenite::Connector::Rustls(config))
        } else {
            None
        };
        let (mut ws, _) = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_tungstenite::connect_async_tls_with_config(
                url.as_str(),
                Some(ws_config()),
                true,
                connector,
            ),
        )
        .await
        .map_err(|_| unreachable("timed out".into()))?
        .map_err(|e| match gsv_node::tls::certificate_failure(&e) {
            Some(reason) => ClientError::Certificate {
                url: url.clone(),
                reason,
            },
            None => unreachable(e.to_string()),
        })?;

        let nonce = loop {
            match next_frame(&mut ws).await? {
                Frame::Event {
                    event: EventName::Challenge,
                    payload,
                    ..
                } => {
                    let c: Challenge = payload
                        .as_deref()
                        .map(|p| serde_json::from_str(p.get()))
                        .transpose()
                        .map_err(|e| ClientError::Protocol(format!("bad challenge: {e}")))?
                        .ok_or_else(|| ClientError::Protocol("empty challenge".into()))?;
                    break c.nonce;
                }
                _ => continue,
            }
        };
        let params = ConnectParams {
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
        };
        ws.send(Message::Text(
            encode_req("connect", Method::Connect, &params).into(),
        ))
        .await
        .map_err(|e| unreachable(e.to_string()))?;
        let hello: HelloOk = loop {
            match next_frame(&mut ws).await? {
                Frame::Res { id, outcome } if id == "connect" || id.is_empty() => {
                    let raw = outcome.map_err(ClientError::Remote)?;
                    break serde_json::from_str(raw.get())
                        .map_err(|e| ClientError::Protocol(format!("bad hello-ok: {e}")))?;
                }
                _ => continue,
            }
        };

        let (sink, mut stream) = ws.split();
        let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
        let (ev_tx, ev_rx) = mpsc::channel(1024);
        let w = waiters.clone();
        let closed = tokio_util::sync::CancellationToken::new();
        let closed_by_reader = closed.clone();
        tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let Message::Text(t) = msg else { continue };
                match Frame::decode(t.as_str()) {
                    Ok(Frame::Res { id, outcome }) => {
                        let waiter = w.lock().ok().and_then(|mut m| m.remove(&id));
                        if let Some(tx) = waiter {
                            let _ = tx.send(outcome);
                        }
                    }
                    Ok(Frame::Event {
                        event,
                        payload,
                        seq,
                    }) => {
                        let payload = payload
                            .and_then(|p| serde_json::from_str(p.get()).ok())
                            .unwrap_or(Value::Null);
                        let _ = ev_tx.try_send(Event {
                            event,
                            payload,
                            seq,
                        });
                    }
                    _ => {}
                }
            }
            // Connection gone: every open and future request fails.
            closed_by_reader.cancel();
            if let Ok(mut m) = w.lock() {
                m.clear();
            }
        });
        Ok(AgentClient {
            sink: Arc::new(tokio::sync::Mutex::new(sink)),
            waiters,
            next_id: AtomicU64::new(1),
            events: tokio::sync::Mutex::new(ev_rx),
            closed,
            hello,
        })
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
        if self
            .send(Message::Text(encode_req(id, method, params).into()))
            .await
            .is_err()
        {
            if let Ok(mut m) = self.waiters.lock() {
                m.remove(id);
            }
            return Err(ClientError::Closed);
        }
        let outcome = tokio::select! {
            r = rx => r,
            _ = self.closed.cancelled() => {
                if let Ok(mut m) = self.waiters.lock() {
                    m.remove(id);
                }
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
        let params = ToolsCallParams {
            name: name.to_owned(),
            args: serde_json::value::to_raw_value(&args)
                .map_err(|e| ClientError::Protocol(format!("bad tool arguments: {e}")))?,
            timeout_ms,
        };
        let raw = self.request_with_id(id, Method::ToolsCall, &params).await?;
        serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad tool result: {e}")))
    }

    /// Writes one frame (and flushes it) on the caller's own task.
    async fn send(&self, message: Message) -> Result<(), ClientError> {
        self.sink
            .lock()
            .await
            .send(message)
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Cancels a call in flight by its request id.
    pub async fn cancel(&self, id: &str) -> Result<(), ClientError> {
        self.send(Message::Text(encode_cancel(id).into())).await
    }

    /// Sends a raw text frame (tests use this for malformed input).
    pub async fn send_raw(&self, text: String) -> Result<(), ClientError> {
        self.send(Message::Text(text.into())).await
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolEntry>, ClientError> {
        let raw = self.request(Method::ToolsList, &NoParams {}).await?;
        let r: ToolsListResult = serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad tools.list result: {e}")))?;
        Ok(r.tools)
    }

    pub async fn list_nodes(&self) -> Result<Vec<NodeSummary>, ClientError> {
        let raw = self.request(Method::NodesList, &NoParams {}).await?;
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

impl Drop for AgentClient {
    /// Closes the connection (a close frame, then the gateway closes its side and the
    /// reader task ends), as the writer task used to when the client went away.
    fn drop(&mut self) {
        let sink = Arc::clone(&self.sink);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let mut sink = sink.lock().await;
                let _ = tokio::time::timeout(Duration::from_secs(5), sink.close()).await;
            });
        }
    }
}

type Stream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_frame(ws: &mut Stream) -> Result<Frame, ClientError> {
    loop {
        let msg = tokio::time::timeout(CONNECT_TIMEOUT, ws.next())
            .await
            .map_err(|_| ClientError::Protocol("gateway did not answer the handshake".into()))?;
        match msg {
            Some(Ok(Message::Text(t))) => {
                return Frame::decode(t.as_str()).map_err(|e| ClientError::Protocol(e.to_string()))
            }
            Some(Ok(Message::Close(_))) | None => return Err(ClientError::Closed),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(ClientError::Protocol(e.to_string())),
        }
    }
}
