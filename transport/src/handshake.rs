//! The client side of the handshake: `challenge` → `connect` → `hello-ok`.
//!
//! Nothing but the handshake is sent before `hello-ok` (the gateway discards anything
//! else), and the whole exchange is bounded in time, so a half-open gateway costs one
//! timeout, never a hang.

use crate::connect_error::ConnectError;
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::encode_req;
use gsv_protocol::handshake::Challenge;
use gsv_protocol::limits::{HANDSHAKE_TIMEOUT_MS, PRE_AUTH_MAX_FRAME_BYTES};
use gsv_protocol::{ConnectParams, EventName, Frame, HelloOk, Method};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, warn};

/// The request id of the handshake's `connect`.
pub const CONNECT_ID: &str = "connect";

/// Runs the handshake on a fresh WebSocket. `params` builds the `connect` params from
/// the challenge's nonce.
pub async fn handshake<S>(
    ws: &mut WebSocketStream<S>,
    params: impl FnOnce(String) -> ConnectParams,
) -> Result<HelloOk, ConnectError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let limit = Duration::from_millis(HANDSHAKE_TIMEOUT_MS);
    tokio::time::timeout(limit, steps(ws, params))
        .await
        .map_err(|_| ConnectError::HandshakeTimeout(limit))?
}

async fn steps<S>(
    ws: &mut WebSocketStream<S>,
    params: impl FnOnce(String) -> ConnectParams,
) -> Result<HelloOk, ConnectError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
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
            // An error the gateway could not tie to a request has an empty id.
            Ok(Frame::Res { id, outcome }) if id == CONNECT_ID || id.is_empty() => {
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
async fn next_text<S>(
    ws: &mut WebSocketStream<S>,
    waiting_for: &str,
) -> Result<String, ConnectError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
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
