//! One attempt to reach the gateway: dial the WebSocket, then run the handshake
//! (`challenge` → `connect` → `hello-ok`).
//!
//! Nothing but the handshake is sent before `hello-ok` (the gateway discards anything
//! else), and every step is bounded in time, so a half-open gateway costs one timeout
//! and a retry, never a hang.

use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::encode_req;
use gsv_protocol::handshake::Challenge;
use gsv_protocol::limits::{HANDSHAKE_TIMEOUT_MS, MAX_FRAME_BYTES, PRE_AUTH_MAX_FRAME_BYTES};
use gsv_protocol::{ConnectParams, ErrorCode, ErrorShape, EventName, Frame, HelloOk, Method};
use std::time::Duration;
use thiserror::Error;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use tracing::{debug, warn};

/// The WebSocket to the gateway.
pub(crate) type WsStream = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The request id of the handshake's `connect`.
pub(crate) const CONNECT_ID: &str = "connect";

/// Why one attempt failed. All of these are retried, except a refusal or a rejected
/// certificate before the node's first successful session (see `runner`).
#[derive(Debug, Error)]
pub(crate) enum ConnectError {
    #[error("no connection within {0:?}")]
    DialTimeout(Duration),
    #[error("{0}")]
    WebSocket(#[from] tungstenite::Error),
    #[error("the gateway refused the connection: {0}")]
    Refused(ErrorShape),
    #[error("handshake: {0}")]
    Handshake(String),
    #[error("handshake did not finish within {0:?}")]
    HandshakeTimeout(Duration),
    /// The gateway's TLS certificate was rejected (pin mismatch, untrusted issuer...).
    #[error("{0}")]
    Certificate(String),
}

/// WebSocket settings: small buffers (a node idles most of the time, and benchmarks
/// run thousands), frames up to the protocol's maximum, and bounded write buffering.
pub(crate) fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(MAX_FRAME_BYTES + 64 * 1024)
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
}

/// Opens the WebSocket (TCP with `TCP_NODELAY`, TLS for `wss://`, HTTP upgrade).
pub(crate) async fn dial(
    url: &str,
    tls: Option<Connector>,
    timeout: Duration,
) -> Result<WsStream, ConnectError> {
    let request = url.into_client_request()?;
    let connect = tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(ws_config()),
        true, // disable Nagle: frames are small and latency-bound
        tls,
    );
    match tokio::time::timeout(timeout, connect).await {
        Err(_) => Err(ConnectError::DialTimeout(timeout)),
        Ok(Ok((ws, _response))) => Ok(ws),
        Ok(Err(tungstenite::Error::Http(response))) => {
            let status = response.status();
            let body = response
                .body()
                .as_deref()
                .map(|b| String::from_utf8_lossy(&b[..b.len().min(512)]).into_owned())
                .unwrap_or_default();
            let message = format!("HTTP {status} on upgrade {}", body.trim());
            match status.as_u16() {
                401 => Err(ConnectError::Refused(ErrorShape::new(
                    ErrorCode::Unauthorized,
                    message,
                ))),
                403 => Err(ConnectError::Refused(ErrorShape::new(
                    ErrorCode::Forbidden,
                    message,
                ))),
                _ => Err(ConnectError::Handshake(message)),
            }
        }
        Ok(Err(e)) => match crate::tls::certificate_failure(&e) {
            Some(reason) => Err(ConnectError::Certificate(reason)),
            None => Err(e.into()),
        },
    }
}

/// Runs the handshake on a fresh WebSocket. `params` builds the `connect` params from
/// the challenge's nonce.
pub(crate) async fn handshake(
    ws: &mut WsStream,
    params: impl FnOnce(String) -> ConnectParams,
) -> Result<HelloOk, ConnectError> {
    let limit = Duration::from_millis(HANDSHAKE_TIMEOUT_MS);
    tokio::time::timeout(limit, handshake_steps(ws, params))
        .await
        .map_err(|_| ConnectError::HandshakeTimeout(limit))?
}

async fn handshake_steps(
    ws: &mut WsStream,
    params: impl FnOnce(String) -> ConnectParams,
) -> Result<HelloOk, ConnectError> {
    let nonce = loop {
        let text = next_text(ws, "the challenge").await?;
        match Frame::decode(&text) {
            Ok(Frame::Event {
                event: EventName::Challenge,
                payload,
                ..
            }) => {
                let payload = payload
                    .ok_or_else(|| ConnectError::Handshake("challenge without a payload".into()))?;
                let challenge: Challenge = serde_json::from_str(payload.get())
                    .map_err(|e| ConnectError::Handshake(format!("bad challenge: {e}")))?;
                break challenge.nonce;
            }
            Ok(other) => debug!(frame = ?other, "ignoring a frame before the challenge"),
            Err(e) => return Err(ConnectError::Handshake(format!("bad first frame: {e}"))),
        }
    };

    let connect = encode_req(CONNECT_ID, Method::Connect, &params(nonce));
    if connect.len() > PRE_AUTH_MAX_FRAME_BYTES {
        warn!(
            bytes = connect.len(),
            limit = PRE_AUTH_MAX_FRAME_BYTES,
            "the connect request is larger than the gateway accepts before hello-ok"
        );
    }
    ws.send(Message::text(connect)).await?;

    loop {
        let text = next_text(ws, "hello-ok").await?;
        match Frame::decode(&text) {
            Ok(Frame::Res { id, outcome }) if id == CONNECT_ID => {
                let result = outcome.map_err(ConnectError::Refused)?;
                return serde_json::from_str::<HelloOk>(result.get())
                    .map_err(|e| ConnectError::Handshake(format!("bad hello-ok: {e}")));
            }
            Ok(other) => debug!(frame = ?other, "ignoring a frame before hello-ok"),
            Err(e) => warn!(error = %e, "ignoring a malformed frame before hello-ok"),
        }
    }
}

/// The next text message; control frames are skipped, a close ends the handshake.
async fn next_text(ws: &mut WsStream, waiting_for: &str) -> Result<String, ConnectError> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => return Ok(text.as_str().to_owned()),
            Some(Ok(Message::Close(frame))) => {
                let why = frame
                    .map(|f| format!(" ({}: {})", f.code, f.reason))
                    .unwrap_or_default();
                return Err(ConnectError::Handshake(format!(
                    "the gateway closed the connection while we waited for {waiting_for}{why}"
                )));
            }
            Some(Ok(Message::Binary(_))) => {
                return Err(ConnectError::Handshake(format!(
                    "binary frame while waiting for {waiting_for}"
                )))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => {
                return Err(ConnectError::Handshake(format!(
                    "connection closed while waiting for {waiting_for}"
                )))
            }
        }
    }
}
