//! One registered connection to the gateway: its loop, the heartbeat and the hand-back on
//! shutdown. (Not to be confused with [`crate::sessions`], the process sessions that
//! Bash and Process run.)
//!
//! Everything the node sends goes through one bounded queue into the connection's
//! driver ([`gsv_transport::Driver`], shared with the gateway and agent clients), so
//! frames are never interleaved and a slow gateway pushes back on the senders instead
//! of growing memory. The driver also sends a ping every heartbeat interval and
//! declares the gateway dead if nothing at all (frame, ping or pong) arrives for two
//! intervals.

use crate::dispatch::Dispatcher;
use crate::state::NodeState;
use gsv_protocol::limits::MAX_RESULT_BYTES;
use gsv_protocol::HelloOk;
use gsv_transport::{ClientWs, Driver, Event, Paired};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Frames queued for the gateway before producers wait (back-pressure: the node's
/// senders await room, they never drop).
const OUTGOING_FRAMES: usize = 256;

/// How long a graceful close may take before the socket is just dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a stopping node waits for its cancelled calls to answer (a Bash call's
/// process group gets SIGTERM, then SIGKILL after 2 s).
const HAND_BACK_TIMEOUT: Duration = Duration::from_secs(3);

/// How a session ended.
#[derive(Debug)]
pub(crate) enum ConnectionEnd {
    /// The node was told to stop.
    Shutdown,
    /// The connection was lost or closed; the reason is for the log.
    Lost(String),
    /// The gateway closed the connection for a reason reconnecting cannot fix: another
    /// process connected with this node id, or the token was revoked.
    Evicted(String),
}

/// Chunk frames queued for the gateway before a transfer waits (each up to 1 MiB).
const OUTGOING_CHUNKS: usize = 16;

/// The node's connection driver: the socket and its back-pressure queues.
type Link = Driver<gsv_transport::dial::MaybeTls, Paired>;

/// Serves a registered connection until it ends or `shutdown` is cancelled.
pub(crate) async fn serve(
    ws: ClientWs,
    hello: &HelloOk,
    node: Arc<NodeState>,
    shutdown: &CancellationToken,
    lane: Option<crate::transfer::LaneDial>,
) -> ConnectionEnd {
    let heartbeat = node.config.heartbeat;
    let (tx, rx) = mpsc::channel::<String>(OUTGOING_FRAMES);
    let (binary_tx, binary_rx) = mpsc::channel::<Vec<u8>>(OUTGOING_CHUNKS);
    let mut link = Driver::new(
        ws,
        Paired {
            text: rx,
            binary: binary_rx,
        },
        heartbeat,
    );

    let max_result_bytes = MAX_RESULT_BYTES.min(hello.limits.max_result_bytes);
    let dispatcher = Dispatcher::new(
        Arc::clone(&node),
        tx.clone(),
        binary_tx,
        max_result_bytes,
        shutdown.clone(),
        lane,
    );
    node.events.attach(tx.clone());

    let stopping = shutdown.cancelled();
    tokio::pin!(stopping);
    let end = loop {
        let event = tokio::select! {
            biased;
            _ = &mut stopping => break ConnectionEnd::Shutdown,
            event = link.next() => event,
        };
        match event {
            Event::Text(text) => dispatcher.handle_text(text.as_str()),
            Event::Close(Some(frame))
                if frame.reason.as_str() == gsv_protocol::limits::CLOSE_REPLACED
                    || frame.reason.as_str() == gsv_protocol::limits::CLOSE_REVOKED =>
            {
                break ConnectionEnd::Evicted(frame.reason.as_str().to_owned());
            }
            Event::Close(frame) => {
                let why = frame
                    .map(|f| format!("{}: {}", f.code, f.reason))
                    .unwrap_or_else(|| "no reason given".into());
                break ConnectionEnd::Lost(format!("closed by the gateway ({why})"));
            }
            Event::Binary(frame) => dispatcher.handle_binary(frame),
            Event::Ended => break ConnectionEnd::Lost("connection closed".into()),
            Event::TooLarge { size, max } => {
                break ConnectionEnd::Lost(format!(
                    "the gateway sent a frame of {size} bytes, over the {max}-byte limit"
                ))
            }
            Event::ReadFailed(e) => break ConnectionEnd::Lost(e.to_string()),
            Event::WriteFailed(e) => {
                debug!(error = %e, "write to the gateway failed");
                break ConnectionEnd::Lost("could not write to the gateway".into());
            }
            Event::Silent => {
                break ConnectionEnd::Lost(format!(
                    "nothing received from the gateway for {:?}",
                    heartbeat.saturating_mul(2)
                ))
            }
        }
    };

    if matches!(end, ConnectionEnd::Shutdown) {
        hand_back(&node, &mut link).await;
    }
    node.events.detach(&tx);
    let in_flight = dispatcher.in_flight();
    if in_flight > 0 {
        info!(
            in_flight,
            "connection ended with calls still running; their results are kept for the gateway"
        );
    }
    drop(dispatcher);
    drop(tx);
    if !link.finish(CLOSE_TIMEOUT).await {
        debug!("close handshake timed out");
    }
    end
}

/// On shutdown, while the connection still works: every call was cancelled with the
/// shutdown token, so each answers `cancelled` ("the node is shutting down") as its
/// tool stops; keep the link writing (bounded) until those answers are out, so callers
/// hear it now rather than after the gateway's grace period. Frames the gateway sends
/// meanwhile are read (pings answered) but not acted on.
async fn hand_back(node: &NodeState, link: &mut Link) {
    let idle = node.ledger.until_idle();
    tokio::pin!(idle);
    let deadline = tokio::time::sleep(HAND_BACK_TIMEOUT);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut idle => break,
            _ = &mut deadline => break,
            event = link.next() => {
                if !matches!(event, Event::Text(_) | Event::Binary(_)) {
                    return;
                }
            }
        }
    }
    let left = node.ledger.running();
    if left > 0 {
        warn!(calls = left, "stopping with calls that did not end in time");
    }
}
