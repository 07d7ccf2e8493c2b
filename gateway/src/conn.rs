//! The gateway's side of a node or agent connection, on the shared transport driver.
//!
//! Each connection is one task ([`drive`]) running a [`gsv_transport::Driver`]: it
//! reads frames and writes what other tasks queue on the connection's
//! [`Outbound`](gsv_transport::Outbound), a queue bounded in frames and bytes that
//! closes a peer which stops reading. This module adds what is the gateway's own:
//! closing on request (replaced, revoked, shutdown), answering binary frames with a
//! protocol error, saying why a connection ended, and finishing it in a task the
//! stopping gateway waits for.

use gsv_transport::tungstenite::protocol::frame::coding::CloseCode;
use gsv_transport::{Driver, Event, Outbound, Queue};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio_tungstenite::WebSocketStream;

/// The upgraded HTTP connection under a WebSocket, read ahead while the peer streams.
pub type Io = gsv_transport::ReadAhead<TokioIo<hyper::upgrade::Upgraded>>;
/// A server-side WebSocket.
pub type Ws = WebSocketStream<Io>;

/// How long an ended connection may take to deliver its last queued frames and close.
const FINISH_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a session's read loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The connection was closed from our side (replaced, revoked, shutdown, slow).
    Closed,
    /// The peer closed the connection or it broke.
    PeerGone,
    /// Nothing received for two heartbeat intervals.
    HeartbeatLost,
    /// The peer sent a frame over the limit.
    TooLarge,
}

/// Runs a connection until it ends, handing each text frame to `on_text`. Once it
/// ends, what is still queued, a close frame and the close handshake are sent by a
/// task tracked on `closing` (at most 1 s), so the caller can clean up at once and a
/// stopping gateway still delivers the last results and its shutdown notice.
pub async fn drive(
    ws: Ws,
    queue: Queue,
    out: &Outbound,
    heartbeat: Duration,
    closing: &tokio_util::task::TaskTracker,
    mut on_text: impl FnMut(&str),
    mut on_binary: impl FnMut(gsv_transport::tungstenite::Bytes),
) -> EndReason {
    let mut driver = Driver::new(ws, queue, heartbeat);
    // One close wait for the whole connection, not a new waiter per frame.
    let closed = out.closed_token().cancelled();
    tokio::pin!(closed);
    let reason = loop {
        let event = tokio::select! {
            biased;
            _ = &mut closed => break EndReason::Closed,
            event = driver.next() => event,
        };
        match event {
            Event::Text(t) => on_text(t.as_str()),
            Event::Binary(frame) => on_binary(frame),
            Event::Close(_) | Event::Ended | Event::WriteFailed(_) => break EndReason::PeerGone,
            Event::ReadFailed(e) => {
                tracing::debug!(error = %e, "connection error");
                break EndReason::PeerGone;
            }
            Event::TooLarge { size, max } => {
                let reason = format!("too_large: frame of {size} bytes exceeds {max}");
                out.close_with(CloseCode::Size, &reason);
                break EndReason::TooLarge;
            }
            Event::Silent => {
                out.close_with(CloseCode::Away, "heartbeat lost");
                break EndReason::HeartbeatLost;
            }
        }
    };
    out.close();
    // Tracked, not detached: a stopping gateway waits for these (bounded).
    closing.spawn(driver.finish(FINISH_TIMEOUT));
    reason
}
