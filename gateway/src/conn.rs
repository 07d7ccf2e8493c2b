//! WebSocket plumbing shared by node and agent connections.
//!
//! Each connection is one task ([`drive`]) that reads frames and writes what other
//! tasks queue for it, fed by a queue bounded in frames and in bytes. Nothing ever
//! waits on a peer while holding anything else: a sender that finds the queue full
//! closes the connection (a slow consumer is cut off, never buffered without bound).
//! The bounds are wide enough for every legitimate burst (a node's whole pending
//! window, a few of the largest results), so a peer that reads is never cut off for a
//! burst, only one that stops reading. The same task sends the heartbeat pings and
//! declares the peer dead after two silent intervals.

use futures_util::SinkExt;
use gsv_protocol::limits::{SEND_QUEUE_BYTES, SEND_QUEUE_FRAMES};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

/// The upgraded HTTP connection under a WebSocket.
pub type Io = TokioIo<hyper::upgrade::Upgraded>;
/// A server-side WebSocket.
pub type Ws = WebSocketStream<Io>;

/// Small buffers: a gateway holds thousands of mostly idle connections. tungstenite
/// zero-fills its read buffer up to this size before every read, so each idle
/// connection keeps this much resident: 2 KiB holds any call or result frame of usual
/// size in one read, and a large frame is read 2 KiB per system call (about 2 KiB
/// less per connected node than 4 KiB, BENCHMARKS.md).
const READ_BUFFER: usize = 2 * 1024;
const WRITE_BUFFER: usize = 4 * 1024;
/// Frames batched into one flush by the writer.
const WRITE_BATCH: usize = 64;

/// Config for the unauthenticated phase: frames capped at 64 KiB.
pub fn pre_auth_config() -> WebSocketConfig {
    let max = gsv_protocol::limits::PRE_AUTH_MAX_FRAME_BYTES;
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_write_buffer_size(WRITE_BUFFER + max)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// Config after `hello-ok`: frames up to the negotiated maximum.
pub fn session_config() -> WebSocketConfig {
    let max = gsv_protocol::limits::MAX_FRAME_BYTES;
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_write_buffer_size(WRITE_BUFFER + max)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("connection closed")]
    Closed,
    #[error("peer is not reading; connection closed")]
    SlowConsumer,
}

/// The sending half of a connection: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::Sender<Message>,
    /// Bytes of text queued and not yet handed to the socket.
    queued: Arc<AtomicUsize>,
    close: CancellationToken,
    close_frame: Arc<Mutex<Option<CloseFrame>>>,
}

impl Outbound {
    /// Queues a text frame. A full queue means the peer does not keep up: the
    /// connection is closed and the frame dropped.
    pub fn send(&self, text: String) -> Result<(), SendError> {
        if self.close.is_cancelled() {
            return Err(SendError::Closed);
        }
        let len = text.len();
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > SEND_QUEUE_BYTES {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            return Err(self.slow_consumer());
        }
        match self.tx.try_send(Message::Text(text.into())) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.queued.fetch_sub(len, Ordering::AcqRel);
                match e {
                    mpsc::error::TrySendError::Full(_) => Err(self.slow_consumer()),
                    mpsc::error::TrySendError::Closed(_) => Err(SendError::Closed),
                }
            }
        }
    }

    /// Closes a peer whose queue is full; logs once, when this call is the one closing.
    fn slow_consumer(&self) -> SendError {
        if !self.close.is_cancelled() {
            tracing::warn!("send queue full: closing slow consumer");
        }
        self.close_with(CloseCode::Again, "slow consumer: send queue full");
        SendError::SlowConsumer
    }

    /// Closes the connection with a close code and a short reason.
    pub fn close_with(&self, code: CloseCode, reason: &str) {
        if let Ok(mut slot) = self.close_frame.lock() {
            if slot.is_none() {
                let reason: String = reason.chars().take(100).collect();
                *slot = Some(CloseFrame {
                    code,
                    reason: reason.into(),
                });
            }
        }
        self.close.cancel();
    }

    /// Closes the connection normally.
    pub fn close(&self) {
        self.close.cancel();
    }

    pub fn is_closed(&self) -> bool {
        self.close.is_cancelled()
    }

    /// The token cancelled when this connection closes.
    pub fn closed_token(&self) -> &CancellationToken {
        &self.close
    }
}

/// Creates a connection's send queue: the handle that queues frames, and the end
/// that [`drive`] takes them from.
pub fn queue(close: CancellationToken) -> (Outbound, Queue) {
    let (tx, rx) = mpsc::channel(SEND_QUEUE_FRAMES);
    let out = Outbound {
        tx,
        queued: Arc::new(AtomicUsize::new(0)),
        close,
        close_frame: Arc::new(Mutex::new(None)),
    };
    let queue = Queue {
        rx,
        queued: out.queued.clone(),
        close_frame: out.close_frame.clone(),
    };
    (out, queue)
}

/// The connection's end of its send queue: takes frames off and gives their bytes back.
pub struct Queue {
    rx: mpsc::Receiver<Message>,
    queued: Arc<AtomicUsize>,
    close_frame: Arc<Mutex<Option<CloseFrame>>>,
}

impl Queue {
    fn taken(&self, m: Message) -> Message {
        if let Message::Text(t) = &m {
            self.queued.fetch_sub(t.len(), Ordering::AcqRel);
        }
        m
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.rx.poll_recv(cx).map(|m| m.map(|m| self.taken(m)))
    }

    fn try_recv(&mut self) -> Option<Message> {
        let m = self.rx.try_recv().ok()?;
        Some(self.taken(m))
    }
}

/// Sends a close frame directly on a stream that has no writer task yet (handshake).
pub async fn close_stream(ws: &mut Ws, code: CloseCode, reason: &str) {
    let reason: String = reason.chars().take(100).collect();
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = ws.send(Message::Close(Some(frame))).await;
        let _ = ws.close(None).await;
    })
    .await;
}

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

/// What woke the connection's task.
enum Wake {
    Closed,
    WriteFailed,
    Silent,
    Frame(Option<Result<Message, tokio_tungstenite::tungstenite::Error>>),
}

/// Runs a connection until it ends: reads frames, handing each text frame to
/// `on_text`, and writes what is queued on `queue`, in one task. One task per
/// connection means one waker: a socket event wakes one task on one worker, where a
/// reader and a writer task sharing a split stream would both be woken and one of them
/// stolen by another worker (a thread wake-up per frame, tens of µs on a small machine).
/// Writing never waits on reading or the reverse: both are polled every turn, so a peer
/// that does not read cannot stop this side from reading. The writer sends the
/// heartbeat pings; any received frame (pongs included) proves the peer alive, and two
/// silent intervals end the connection. Once it ends, what is still queued, a close
/// frame and the close handshake are sent by a task of their own (at most 1 s), so the
/// caller can clean up at once.
pub async fn drive(
    mut ws: Ws,
    mut queue: Queue,
    out: &Outbound,
    heartbeat: Duration,
    closing: &tokio_util::task::TaskTracker,
    mut on_text: impl FnMut(&str),
) -> EndReason {
    use futures_util::{Sink, Stream};
    use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
    let silence = heartbeat * 2;
    let mut last_seen = tokio::time::Instant::now();
    // One timer and one close wait for the whole connection, not a new timer entry and
    // a new waiter per frame: a frame only moves `last_seen`, and the timer, when it
    // fires, checks it and re-arms for the real deadline.
    let deadline = tokio::time::sleep_until(last_seen + silence);
    tokio::pin!(deadline);
    let closed = out.closed_token().cancelled();
    tokio::pin!(closed);
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Frames handed to the socket and not yet flushed.
    let mut unflushed = false;
    let reason = loop {
        let wake = std::future::poll_fn(|cx| {
            if closed.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Closed);
            }
            // Writes: move queued frames (and a due ping) to the socket while it takes
            // them, at most a batch per turn so reads get their turn too.
            let mut batch = 0;
            loop {
                match Pin::new(&mut ws).poll_ready(cx) {
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(_)) => return Poll::Ready(Wake::WriteFailed),
                    Poll::Pending => break,
                }
                if batch == WRITE_BATCH {
                    // More may be queued: come back after the reads.
                    cx.waker().wake_by_ref();
                    break;
                }
                let next = match ping.poll_tick(cx) {
                    Poll::Ready(_) => Some(Message::Ping(Default::default())),
                    Poll::Pending => match queue.poll_recv(cx) {
                        Poll::Ready(m) => m,
                        Poll::Pending => None,
                    },
                };
                let Some(m) = next else { break };
                if Pin::new(&mut ws).start_send(m).is_err() {
                    return Poll::Ready(Wake::WriteFailed);
                }
                unflushed = true;
                batch += 1;
            }
            if unflushed {
                match Pin::new(&mut ws).poll_flush(cx) {
                    Poll::Ready(Ok(())) => unflushed = false,
                    Poll::Ready(Err(_)) => return Poll::Ready(Wake::WriteFailed),
                    Poll::Pending => {}
                }
            }
            if let Poll::Ready(m) = Pin::new(&mut ws).poll_next(cx) {
                return Poll::Ready(Wake::Frame(m));
            }
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Silent);
            }
            Poll::Pending
        })
        .await;
        let msg = match wake {
            Wake::Closed => break EndReason::Closed,
            Wake::WriteFailed => {
                out.close();
                break EndReason::PeerGone;
            }
            Wake::Silent => {
                let due = last_seen + silence;
                if tokio::time::Instant::now() < due {
                    deadline.as_mut().reset(due);
                    continue;
                }
                out.close_with(CloseCode::Away, "heartbeat lost");
                break EndReason::HeartbeatLost;
            }
            Wake::Frame(m) => m,
        };
        last_seen = tokio::time::Instant::now();
        match msg {
            Some(Ok(Message::Text(t))) => on_text(t.as_str()),
            Some(Ok(Message::Binary(_))) => {
                let err = gsv_protocol::ErrorShape::new(
                    gsv_protocol::ErrorCode::InvalidFrame,
                    "binary frames are not part of the protocol; send JSON text frames",
                );
                let _ = out.send(gsv_protocol::frame::encode_err("", &err));
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
            Some(Ok(Message::Close(_))) | None => {
                out.close();
                break EndReason::PeerGone;
            }
            Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                let reason = format!("too_large: frame of {size} bytes exceeds {max_size}");
                out.close_with(CloseCode::Size, &reason);
                break EndReason::TooLarge;
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, "connection error");
                out.close();
                break EndReason::PeerGone;
            }
        }
    };
    out.close();
    // Tracked, not detached: a stopping gateway waits for these (bounded) so the last
    // results and the shutdown notice queued for a peer reach it.
    closing.spawn(finish(ws, queue));
    reason
}

/// Best effort after a connection ended: delivers what is queued (a shutdown notice, a
/// last result), says why, then closes. Bounded so a dead or slow peer cannot hold it.
async fn finish(mut ws: Ws, mut queue: Queue) {
    let frame = queue.close_frame.lock().ok().and_then(|mut f| f.take());
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Some(m) = queue.try_recv() {
            if ws.feed(m).await.is_err() {
                break;
            }
        }
        let _ = ws.send(Message::Close(frame)).await;
        let _ = ws.close(None).await;
    })
    .await;
}
