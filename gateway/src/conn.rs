//! WebSocket plumbing shared by node and agent connections.
//!
//! Each connection has one reader (the session loop) and one writer task fed by a
//! queue bounded in frames and in bytes. Nothing ever waits on a peer while holding
//! anything else: a sender that finds the queue full closes the connection (a slow
//! consumer is cut off, never buffered without bound). The bounds are wide enough for
//! every legitimate burst (a node's whole pending window, a few of the largest
//! results), so a peer that reads is never cut off for a burst, only one that stops
//! reading. The writer also sends the heartbeat pings; the reader declares the peer
//! dead after two silent intervals.

use futures_util::stream::SplitSink;
use futures_util::SinkExt;
use hyper_util::rt::TokioIo;
use gsv_protocol::limits::{SEND_QUEUE_BYTES, SEND_QUEUE_FRAMES};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

/// Small buffers: a gateway holds thousands of mostly idle connections.
const READ_BUFFER: usize = 4 * 1024;
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

/// Starts the writer task for `sink`; returns the handle to queue frames.
pub fn spawn_writer(
    sink: SplitSink<Ws, Message>,
    close: CancellationToken,
    heartbeat: Duration,
) -> (Outbound, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(SEND_QUEUE_FRAMES);
    let out = Outbound {
        tx,
        queued: Arc::new(AtomicUsize::new(0)),
        close: close.clone(),
        close_frame: Arc::new(Mutex::new(None)),
    };
    let queue = Queue {
        rx,
        queued: out.queued.clone(),
    };
    let frame_slot = out.close_frame.clone();
    let task = tokio::spawn(writer(sink, queue, close, heartbeat, frame_slot));
    (out, task)
}

/// The writer's end of the queue: takes frames off and gives their bytes back.
struct Queue {
    rx: mpsc::Receiver<Message>,
    queued: Arc<AtomicUsize>,
}

impl Queue {
    fn taken(&self, m: Message) -> Message {
        if let Message::Text(t) = &m {
            self.queued.fetch_sub(t.len(), Ordering::AcqRel);
        }
        m
    }

    async fn recv(&mut self) -> Option<Message> {
        let m = self.rx.recv().await?;
        Some(self.taken(m))
    }

    fn try_recv(&mut self) -> Option<Message> {
        let m = self.rx.try_recv().ok()?;
        Some(self.taken(m))
    }
}

async fn writer(
    mut sink: SplitSink<Ws, Message>,
    mut rx: Queue,
    close: CancellationToken,
    heartbeat: Duration,
    close_frame: Arc<Mutex<Option<CloseFrame>>>,
) {
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // One wait on the close token for the whole loop: a fresh `cancelled()` per frame
    // would register (and drop) a waiter under the token's lock every time.
    let closed = close.cancelled();
    tokio::pin!(closed);
    loop {
        let first = tokio::select! {
            biased;
            _ = &mut closed => break,
            m = rx.recv() => match m {
                Some(m) => m,
                None => break,
            },
            _ = ping.tick() => Message::Ping(Default::default()),
        };
        let write = async {
            sink.feed(first).await?;
            for _ in 1..WRITE_BATCH {
                match rx.try_recv() {
                    Some(m) => sink.feed(m).await?,
                    None => break,
                }
            }
            sink.flush().await
        };
        let ok = tokio::select! {
            r = write => r.is_ok(),
            _ = &mut closed => false,
        };
        if !ok {
            close.cancel();
            break;
        }
    }
    // Best effort: deliver what is queued (a shutdown notice, a last result), say why,
    // then close. Bounded so a dead or slow peer cannot hold the task.
    let frame = close_frame.lock().ok().and_then(|mut f| f.take());
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Some(m) = rx.try_recv() {
            if sink.feed(m).await.is_err() {
                break;
            }
        }
        let _ = sink.send(Message::Close(frame)).await;
        let _ = sink.close().await;
    })
    .await;
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

/// Reads frames until the connection ends, handing each text frame to `on_text`.
/// Any received frame (pongs included) proves the peer alive.
pub async fn read_loop(
    mut stream: futures_util::stream::SplitStream<Ws>,
    out: &Outbound,
    heartbeat: Duration,
    mut on_text: impl FnMut(&str),
) -> EndReason {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
    let silence = heartbeat * 2;
    let mut last_seen = tokio::time::Instant::now();
    // One timer and one close wait for the whole loop, not a new timer entry and a new
    // waiter per frame: a frame only moves `last_seen`, and the timer, when it fires,
    // checks it and re-arms for the real deadline.
    let deadline = tokio::time::sleep_until(last_seen + silence);
    tokio::pin!(deadline);
    let closed = out.closed_token().cancelled();
    tokio::pin!(closed);
    loop {
        let msg = tokio::select! {
            biased;
            _ = &mut closed => return EndReason::Closed,
            _ = &mut deadline => {
                let due = last_seen + silence;
                if tokio::time::Instant::now() < due {
                    deadline.as_mut().reset(due);
                    continue;
                }
                out.close_with(CloseCode::Away, "heartbeat lost");
                return EndReason::HeartbeatLost;
            }
            m = stream.next() => m,
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
                return EndReason::PeerGone;
            }
            Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                let reason = format!("too_large: frame of {size} bytes exceeds {max_size}");
                out.close_with(CloseCode::Size, &reason);
                return EndReason::TooLarge;
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, "connection error");
                out.close();
                return EndReason::PeerGone;
            }
        }
    }
}
