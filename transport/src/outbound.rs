//! The queues a connection's [`Driver`](crate::Driver) writes from.
//!
//! Two policies, one per kind of sender:
//!
//! - [`Outbound`] / [`Queue`] (the gateway): bounded in frames and in bytes, and it
//!   never waits. A sender that finds it full closes the connection: a peer that
//!   stops reading is cut off, never buffered without bound, and no gateway task
//!   ever waits on one peer while holding anything else. The bounds are wide enough
//!   for every legitimate burst (a node's whole pending window, a few of the largest
//!   results), so a peer that reads is never cut off.
//! - a bounded `mpsc::Receiver<String>` (nodes and agent clients): a full queue makes
//!   the sender wait, so a slow gateway pushes back on the producers instead of
//!   growing memory.
//!
//! Both implement [`Outbox`], what the driver needs from a queue.

use futures_util::task::AtomicWaker;
use gsv_protocol::limits::{SEND_QUEUE_BYTES, SEND_QUEUE_FRAMES};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// What the driver takes frames from.
pub trait Outbox: Unpin + Send {
    /// The next frame to write; `Ready(None)` once every sender is gone (nothing more
    /// to write, the connection itself stays up).
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>>;
    /// The next frame if one is queued now.
    fn try_frame(&mut self) -> Option<Message>;
    /// The close frame to send when the connection ends (code and reason), if a
    /// sender chose one.
    fn close_frame(&mut self) -> Option<CloseFrame> {
        None
    }
}

impl Outbox for mpsc::Receiver<String> {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.poll_recv(cx).map(|t| t.map(Message::text))
    }

    fn try_frame(&mut self) -> Option<Message> {
        self.try_recv().ok().map(Message::text)
    }
}

/// A node's or agent client's queue: text frames and binary frames (transfer chunks)
/// on two bounded channels whose senders wait when full. Text goes first when both
/// have frames; a transfer never needs the two in order, since it sends its closing
/// request only once every chunk is credited back.
pub struct Paired {
    pub text: mpsc::Receiver<String>,
    pub binary: mpsc::Receiver<Vec<u8>>,
}

impl Outbox for Paired {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        match self.text.poll_recv(cx) {
            Poll::Ready(Some(t)) => return Poll::Ready(Some(Message::text(t))),
            Poll::Ready(None) => {
                return self
                    .binary
                    .poll_recv(cx)
                    .map(|b| b.map(|b| Message::Binary(b.into())))
            }
            Poll::Pending => {}
        }
        match self.binary.poll_recv(cx) {
            Poll::Ready(Some(b)) => Poll::Ready(Some(Message::Binary(b.into()))),
            // The text side is still open: wait for it.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    fn try_frame(&mut self) -> Option<Message> {
        if let Ok(t) = self.text.try_recv() {
            return Some(Message::text(t));
        }
        self.binary
            .try_recv()
            .ok()
            .map(|b| Message::Binary(b.into()))
    }
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("connection closed")]
    Closed,
    #[error("peer is not reading; connection closed")]
    SlowConsumer,
}

/// The binary half of a gateway connection's queue, made at its first frame: most
/// connections never carry a transfer, and a channel holds its first block of slots
/// (~1.8 KiB) from the moment it is made, on every connected node.
struct LazyBinary {
    tx: OnceLock<mpsc::Sender<Message>>,
    /// The receiving end, until the queue takes it.
    rx: Mutex<Option<mpsc::Receiver<Message>>>,
    /// Wakes a queue waiting for text only when the first binary frame comes.
    made: AtomicWaker,
}

impl LazyBinary {
    fn sender(&self) -> &mpsc::Sender<Message> {
        self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::channel(SEND_QUEUE_FRAMES);
            if let Ok(mut slot) = self.rx.lock() {
                *slot = Some(rx);
            }
            tx
        })
    }
}

/// The sending half of a gateway connection: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::Sender<Message>,
    /// Binary frames (transfer chunks) wait in their own queue, behind every text
    /// frame: a call's frames never queue behind a transfer's megabytes.
    binary: Arc<LazyBinary>,
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

    /// Queues a binary frame (a transfer's chunk), counted against the same bounds as
    /// text: a peer that does not read is closed, never buffered without bound.
    pub fn send_binary(
        &self,
        data: impl Into<tokio_tungstenite::tungstenite::Bytes>,
    ) -> Result<(), SendError> {
        if self.close.is_cancelled() {
            return Err(SendError::Closed);
        }
        let data: tokio_tungstenite::tungstenite::Bytes = data.into();
        let len = data.len();
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > SEND_QUEUE_BYTES {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            return Err(self.slow_consumer());
        }
        match self.binary.sender().try_send(Message::Binary(data)) {
            Ok(()) => {
                self.binary.made.wake();
                Ok(())
            }
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

    /// Closes the connection with a close code and a short reason (the first reason
    /// given wins).
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

/// Creates a gateway connection's send queue: the handle that queues frames, and the
/// end the driver takes them from. Cancelling `close` closes the connection.
pub fn queue(close: CancellationToken) -> (Outbound, Queue) {
    let (tx, rx) = mpsc::channel(SEND_QUEUE_FRAMES);
    let binary = Arc::new(LazyBinary {
        tx: OnceLock::new(),
        rx: Mutex::new(None),
        made: AtomicWaker::new(),
    });
    let out = Outbound {
        tx,
        binary: binary.clone(),
        queued: Arc::new(AtomicUsize::new(0)),
        close,
        close_frame: Arc::new(Mutex::new(None)),
    };
    let queue = Queue {
        rx,
        binary: None,
        lazy: binary,
        queued: out.queued.clone(),
        close_frame: out.close_frame.clone(),
    };
    (out, queue)
}

/// The connection's end of its [`Outbound`] queue: takes frames off and gives their
/// bytes back.
pub struct Queue {
    rx: mpsc::Receiver<Message>,
    /// The binary half, once a sender made it.
    binary: Option<mpsc::Receiver<Message>>,
    lazy: Arc<LazyBinary>,
    queued: Arc<AtomicUsize>,
    close_frame: Arc<Mutex<Option<CloseFrame>>>,
}

impl Queue {
    /// The binary half, taken from the senders' side once they made it.
    fn binary(&mut self) -> Option<&mut mpsc::Receiver<Message>> {
        if self.binary.is_none() {
            if let Ok(mut slot) = self.lazy.rx.lock() {
                self.binary = slot.take();
            }
        }
        self.binary.as_mut()
    }

    fn taken(&self, m: Message) -> Message {
        match &m {
            Message::Text(t) => {
                self.queued.fetch_sub(t.len(), Ordering::AcqRel);
            }
            Message::Binary(b) => {
                self.queued.fetch_sub(b.len(), Ordering::AcqRel);
            }
            _ => {}
        }
        m
    }
}

impl Outbox for Queue {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        // Text first; binary only when no text frame waits. Every sender holds both
        // halves, so both end together.
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(m)) => return Poll::Ready(Some(self.taken(m))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if self.binary.is_none() {
            // Registered before looking, so a first binary frame queued meanwhile
            // wakes this poll again.
            self.lazy.made.register(cx.waker());
        }
        let Some(binary) = self.binary() else {
            return Poll::Pending;
        };
        match binary.poll_recv(cx) {
            Poll::Ready(Some(m)) => Poll::Ready(Some(self.taken(m))),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    fn try_frame(&mut self) -> Option<Message> {
        let m = match self.rx.try_recv() {
            Ok(m) => m,
            Err(_) => self.binary()?.try_recv().ok()?,
        };
        Some(self.taken(m))
    }

    fn close_frame(&mut self) -> Option<CloseFrame> {
        self.close_frame.lock().ok().and_then(|mut f| f.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_frames_go_before_queued_binary_frames() {
        let (out, mut q) = queue(CancellationToken::new());
        for _ in 0..3 {
            assert_eq!(out.send_binary(vec![0u8; 1024]), Ok(()));
        }
        assert_eq!(out.send("call".into()), Ok(()));
        assert!(matches!(q.try_frame(), Some(Message::Text(t)) if t.as_str() == "call"));
        for _ in 0..3 {
            assert!(matches!(q.try_frame(), Some(Message::Binary(b)) if b.len() == 1024));
        }
        assert!(q.try_frame().is_none());
        assert_eq!(out.queued.load(Ordering::Acquire), 0, "bytes given back");
    }

    #[tokio::test]
    async fn a_first_binary_frame_wakes_a_queue_waiting_for_text() {
        let (out, mut q) = queue(CancellationToken::new());
        assert!(
            q.binary.is_none(),
            "no binary channel until a chunk is sent"
        );
        let sender = out.clone();
        let later = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert_eq!(sender.send_binary(vec![7u8; 16]), Ok(()));
        });
        let frame = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            std::future::poll_fn(|cx| q.poll_frame(cx)),
        )
        .await
        .expect("woken by the first binary frame");
        assert!(matches!(frame, Some(Message::Binary(b)) if b.len() == 16));
        later.await.expect("sender");
        // Every sender gone: the queue ends.
        drop(out);
        let end = std::future::poll_fn(|cx| q.poll_frame(cx)).await;
        assert!(end.is_none());
    }

    #[test]
    fn a_full_queue_closes_the_connection_and_keeps_the_first_reason() {
        let close = CancellationToken::new();
        let (out, mut q) = queue(close.clone());
        let big = "x".repeat(SEND_QUEUE_BYTES);
        // The first frame always fits, however large (an empty queue takes one frame).
        assert_eq!(out.send(big.clone()), Ok(()));
        assert_eq!(out.send("y".into()), Err(SendError::SlowConsumer));
        assert!(close.is_cancelled());
        out.close_with(CloseCode::Away, "later reason");
        let frame = q.close_frame().expect("close frame");
        assert_eq!(frame.code, CloseCode::Again);
        assert_eq!(out.send("z".into()), Err(SendError::Closed));
        // Bytes are given back as frames are taken.
        assert!(matches!(q.try_frame(), Some(Message::Text(t)) if t.len() == big.len()));
        assert_eq!(out.queued.load(Ordering::Acquire), 0);
    }

    #[test]
    fn close_reasons_are_cut_to_100_characters() {
        let (out, mut q) = queue(CancellationToken::new());
        out.close_with(CloseCode::Policy, &"é".repeat(300));
        let frame = q.close_frame().expect("close frame");
        assert_eq!(frame.reason.as_str().chars().count(), 100);
    }
}
