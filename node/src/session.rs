//! One registered connection: a reader loop, a writer task and the heartbeat.
//!
//! Everything the node sends goes through one bounded queue into the writer task, so
//! frames are never interleaved and a slow gateway pushes back on the senders instead
//! of growing memory. The writer also sends a ping every heartbeat interval; the reader
//! declares the gateway dead if nothing at all (frame, ping or pong) arrives for two
//! intervals.

use crate::connection::WsStream;
use crate::dispatch::Dispatcher;
use crate::state::NodeState;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::limits::MAX_RESULT_BYTES;
use gsv_protocol::HelloOk;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Message;
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
pub(crate) enum SessionEnd {
    /// The node was told to stop.
    Shutdown,
    /// The connection was lost or closed; the reason is for the log.
    Lost(String),
    /// The gateway closed the connection for a reason reconnecting cannot fix: another
    /// process connected with this node id, or the token was revoked.
    Evicted(String),
}

/// Serves a registered connection until it ends or `shutdown` is cancelled.
pub(crate) async fn serve(
    ws: WsStream,
    hello: &HelloOk,
    node: Arc<NodeState>,
    shutdown: &CancellationToken,
) -> SessionEnd {
    let heartbeat = node.config.heartbeat;
    let (sink, mut stream) = ws.split();
    let (tx, rx) = mpsc::channel::<String>(OUTGOING_FRAMES);
    // Cancelled by the writer when it fails, and by the reader to stop the writer.
    let stop = CancellationToken::new();
    let writer = tokio::spawn(write_loop(sink, rx, heartbeat, stop.clone()));

    let max_result_bytes = MAX_RESULT_BYTES.min(hello.limits.max_result_bytes);
    let dispatcher = Dispatcher::new(
        Arc::clone(&node),
        tx.clone(),
        max_result_bytes,
        shutdown.clone(),
    );
    node.events.attach(tx.clone());

    let dead_after = heartbeat.saturating_mul(2);
    let mut silent_until = Instant::now() + dead_after;
    let end = loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => break SessionEnd::Shutdown,
            _ = stop.cancelled() => break SessionEnd::Lost("could not write to the gateway".into()),
            _ = tokio::time::sleep_until(silent_until) => {
                break SessionEnd::Lost(format!("nothing received from the gateway for {dead_after:?}"));
            }
            message = stream.next() => message,
        };
        silent_until = Instant::now() + dead_after;
        match message {
            None => break SessionEnd::Lost("connection closed".into()),
            Some(Err(e)) => break SessionEnd::Lost(e.to_string()),
            Some(Ok(Message::Text(text))) => dispatcher.handle_text(text.as_str()),
            Some(Ok(Message::Close(Some(frame))))
                if frame.reason.as_str() == gsv_protocol::limits::CLOSE_REPLACED
                    || frame.reason.as_str() == gsv_protocol::limits::CLOSE_REVOKED =>
            {
                break SessionEnd::Evicted(frame.reason.as_str().to_owned());
            }
            Some(Ok(Message::Close(frame))) => {
                let why = frame
                    .map(|f| format!("{}: {}", f.code, f.reason))
                    .unwrap_or_else(|| "no reason given".into());
                break SessionEnd::Lost(format!("closed by the gateway ({why})"));
            }
            Some(Ok(Message::Binary(_))) => warn!("ignoring a binary frame from the gateway"),
            // Pings are answered by tungstenite itself; pongs only prove liveness.
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
        }
    };

    if matches!(end, SessionEnd::Shutdown) {
        hand_back(&node, &stop).await;
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
    stop.cancel();
    if let Err(e) = writer.await {
        warn!(error = %e, "writer task failed");
    }
    end
}

/// On shutdown, while the connection still works: every call was cancelled with the
/// shutdown token, so each answers `cancelled` ("the node is shutting down") as its
/// tool stops; wait (bounded) for those answers to reach the send queue, so callers
/// hear it now rather than after the gateway's grace period.
async fn hand_back(node: &NodeState, writer_failed: &CancellationToken) {
    let until = Instant::now() + HAND_BACK_TIMEOUT;
    while node.ledger.running() > 0 && Instant::now() < until && !writer_failed.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = node.ledger.running();
    if left > 0 {
        warn!(calls = left, "stopping with calls that did not end in time");
    }
}

/// Writes queued frames and heartbeat pings until `stop` is cancelled or a write
/// fails, then closes the socket (briefly, best effort).
async fn write_loop(
    mut sink: SplitSink<WsStream, Message>,
    mut rx: mpsc::Receiver<String>,
    heartbeat: Duration,
    stop: CancellationToken,
) {
    let mut ping = tokio::time::interval_at(Instant::now() + heartbeat, heartbeat);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let message = tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            frame = rx.recv() => match frame {
                Some(text) => Message::text(text),
                None => break,
            },
            _ = ping.tick() => Message::Ping(Default::default()),
        };
        // `send` flushes, which also pushes out any pong tungstenite queued.
        let sent = tokio::select! {
            _ = stop.cancelled() => break,
            sent = sink.send(message) => sent,
        };
        if let Err(e) = sent {
            debug!(error = %e, "write to the gateway failed");
            stop.cancel();
            return;
        }
    }
    if tokio::time::timeout(CLOSE_TIMEOUT, sink.close())
        .await
        .is_err()
    {
        debug!("close handshake timed out");
    }
}
