//! The connection driver: one task reads a WebSocket and writes what is queued for it.
//!
//! Every side of gsv (gateway, node, agent client) drives its connections with this.
//! One task per connection means one waker: a socket event wakes one task on one
//! worker, where a reader and a writer task sharing a split stream would both be woken
//! and one of them stolen by another worker (a thread wake-up per frame, tens of µs on
//! a small machine). Writing never waits on reading or the reverse: both are polled
//! every turn, so a peer that does not read cannot stop this side from reading. The
//! driver sends a ping every heartbeat interval; any frame received (pongs included)
//! proves the peer alive, and two silent intervals end the connection
//! ([`Event::Silent`]). One timer serves the whole connection: a frame only moves
//! `last_seen`, and the timer, when it fires, re-arms for the real deadline.

use crate::outbound::Outbox;
use futures_util::{Sink, SinkExt, Stream};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep};
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

/// Frames written per turn before reads get their turn.
const WRITE_BATCH: usize = 64;

/// What the driver brings back from the peer.
#[derive(Debug)]
pub enum Event {
    /// A text frame: a protocol frame to decode.
    Text(Utf8Bytes),
    /// A binary frame: a file transfer's chunk (`gsv_protocol::transfer::Chunk`).
    Binary(tokio_tungstenite::tungstenite::Bytes),
    /// The peer sent a close frame.
    Close(Option<CloseFrame>),
    /// The stream ended without a close frame.
    Ended,
    /// The peer sent a frame over the configured maximum.
    TooLarge { size: usize, max: usize },
    /// Reading failed.
    ReadFailed(WsError),
    /// Writing failed.
    WriteFailed(WsError),
    /// Nothing received for two heartbeat intervals.
    Silent,
}

/// One connection: its socket, the queue it writes from, the heartbeat.
pub struct Driver<S, O> {
    ws: WebSocketStream<S>,
    outbox: O,
    ping: Interval,
    /// Frames handed to the socket and not yet flushed.
    unflushed: bool,
    silence: Duration,
    last_seen: Instant,
    deadline: Pin<Box<Sleep>>,
}

impl<S, O> Driver<S, O>
where
    S: AsyncRead + AsyncWrite + Unpin,
    O: Outbox,
{
    /// Drives `ws`, writing what `outbox` yields and pinging every `heartbeat`.
    pub fn new(ws: WebSocketStream<S>, outbox: O, heartbeat: Duration) -> Self {
        // A zero period would make the ping interval panic.
        let heartbeat = heartbeat.max(Duration::from_millis(1));
        let now = Instant::now();
        let mut ping = tokio::time::interval_at(now + heartbeat, heartbeat);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let silence = heartbeat.saturating_mul(2);
        Driver {
            ws,
            outbox,
            ping,
            unflushed: false,
            silence,
            last_seen: now,
            deadline: Box::pin(tokio::time::sleep_until(now + silence)),
        }
    }

    /// Writes what is queued (and a due ping) while waiting for the peer's next
    /// frame. Cancel-safe: dropping the future loses nothing.
    pub async fn next(&mut self) -> Event {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        loop {
            if let Some(failed) = self.poll_writes(cx) {
                return Poll::Ready(Event::WriteFailed(failed));
            }
            match Pin::new(&mut self.ws).poll_next(cx) {
                Poll::Ready(Some(Ok(m))) => {
                    self.last_seen = Instant::now();
                    match m {
                        Message::Text(t) => return Poll::Ready(Event::Text(t)),
                        Message::Binary(b) => return Poll::Ready(Event::Binary(b)),
                        Message::Close(f) => return Poll::Ready(Event::Close(f)),
                        // Pings are answered by tungstenite on the next read or
                        // flush; pongs only prove liveness. Go round: the pong may
                        // need writing.
                        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
                    }
                }
                Poll::Ready(Some(Err(WsError::Capacity(CapacityError::MessageTooLong {
                    size,
                    max_size,
                })))) => {
                    return Poll::Ready(Event::TooLarge {
                        size,
                        max: max_size,
                    })
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Event::ReadFailed(e)),
                Poll::Ready(None) => return Poll::Ready(Event::Ended),
                Poll::Pending => {}
            }
            return self.poll_silence(cx);
        }
    }

    /// Moves queued frames (and a due ping) to the socket while it takes them, at most
    /// a batch per turn so reads get their turn too, then flushes. Returns the error
    /// if writing failed.
    fn poll_writes(&mut self, cx: &mut Context<'_>) -> Option<WsError> {
        let mut batch = 0;
        loop {
            match Pin::new(&mut self.ws).poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Some(e),
                Poll::Pending => break,
            }
            if batch == WRITE_BATCH {
                // More may be queued: come back after the read.
                cx.waker().wake_by_ref();
                break;
            }
            let next = match self.ping.poll_tick(cx) {
                Poll::Ready(_) => Some(Message::Ping(Default::default())),
                // A closed queue (every sender gone) only means nothing more to write.
                Poll::Pending => match self.outbox.poll_frame(cx) {
                    Poll::Ready(m) => m,
                    Poll::Pending => None,
                },
            };
            let Some(m) = next else { break };
            if let Err(e) = Pin::new(&mut self.ws).start_send(m) {
                return Some(e);
            }
            self.unflushed = true;
            batch += 1;
        }
        if self.unflushed {
            // Flushing also pushes out any pong tungstenite queued.
            match Pin::new(&mut self.ws).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Some(e),
                Poll::Pending => {}
            }
        }
        None
    }

    /// `Ready(Silent)` once nothing has been received for two heartbeat intervals.
    fn poll_silence(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let due = self.last_seen + self.silence;
            if Instant::now() >= due {
                return Poll::Ready(Event::Silent);
            }
            self.deadline.as_mut().reset(due);
        }
    }

    /// Best effort once the connection is over: delivers what is still queued (a
    /// shutdown notice, a last result), sends the close frame the queue holds (code and
    /// reason) or a plain one, and closes. Bounded by `limit`, so a dead or slow peer
    /// cannot hold it; false if it ran out of time.
    pub async fn finish(mut self, limit: Duration) -> bool {
        let frame = self.outbox.close_frame();
        tokio::time::timeout(limit, async {
            while let Some(m) = self.outbox.try_frame() {
                if self.ws.feed(m).await.is_err() {
                    return;
                }
            }
            let _ = self.ws.close(frame).await;
        })
        .await
        .is_ok()
    }
}

/// Sends a close frame on a stream no driver runs yet (during a handshake), bounded
/// to one second.
pub async fn close_stream<S>(ws: &mut WebSocketStream<S>, code: CloseCode, reason: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let reason: String = reason.chars().take(100).collect();
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(Some(frame))).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use tokio::io::DuplexStream;
    use tokio::sync::mpsc;
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

    /// A WebSocket pair over an in-memory pipe: (client side, server side).
    async fn pair(
        max_frame: usize,
    ) -> (WebSocketStream<DuplexStream>, WebSocketStream<DuplexStream>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let config = WebSocketConfig::default()
            .max_message_size(Some(max_frame))
            .max_frame_size(Some(max_frame));
        let client = WebSocketStream::from_raw_socket(a, Role::Client, Some(config)).await;
        let server = WebSocketStream::from_raw_socket(b, Role::Server, Some(config)).await;
        (client, server)
    }

    const HEARTBEAT: Duration = Duration::from_millis(100);
    /// Far beyond anything the tests wait for: catches a hang, not a slow machine.
    const HANG: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn writes_what_is_queued_and_reads_text_frames() {
        let (client, mut server) = pair(1 << 16).await;
        let (tx, rx) = mpsc::channel::<String>(8);
        let mut driver = Driver::new(client, rx, HEARTBEAT);
        for i in 0..3 {
            tx.send(format!("frame {i}")).await.unwrap();
        }
        server.send(Message::text("from the peer")).await.unwrap();
        let event = tokio::time::timeout(HANG, driver.next()).await.unwrap();
        assert!(
            matches!(&event, Event::Text(t) if t.as_str() == "from the peer"),
            "{event:?}"
        );
        for i in 0..3 {
            let m = tokio::time::timeout(HANG, server.next()).await.unwrap();
            assert_eq!(m.unwrap().unwrap(), Message::text(format!("frame {i}")));
        }
    }

    #[tokio::test]
    async fn a_silent_peer_is_declared_dead_and_pings_keep_one_alive() {
        let (client, mut server) = pair(1 << 16).await;
        let (_tx, rx) = mpsc::channel::<String>(8);
        let mut driver = Driver::new(client, rx, HEARTBEAT);
        // The peer answers pings (tungstenite does, while it reads): the driver stays
        // quiet for many heartbeat intervals.
        let answering = tokio::spawn(async move {
            let started = Instant::now();
            while started.elapsed() < HEARTBEAT * 6 {
                if tokio::time::timeout(HEARTBEAT, server.next())
                    .await
                    .is_ok_and(|m| m.is_none())
                {
                    break;
                }
            }
            server
        });
        let quiet = tokio::time::timeout(HEARTBEAT * 5, driver.next()).await;
        assert!(quiet.is_err(), "alive peer reported: {quiet:?}");
        // Now the peer stops reading (and so answering): silence within two intervals
        // after its last pong.
        let _server = answering.await.unwrap();
        let event = tokio::time::timeout(HANG, driver.next()).await.unwrap();
        assert!(matches!(event, Event::Silent), "{event:?}");
    }

    #[tokio::test]
    async fn finish_delivers_the_queue_then_the_close_frame() {
        let (client, mut server) = pair(1 << 16).await;
        let close = tokio_util::sync::CancellationToken::new();
        let (out, queue) = crate::queue(close);
        let driver = Driver::new(client, queue, HEARTBEAT);
        out.send("last result".into()).unwrap();
        out.close_with(CloseCode::Away, "shutting down");
        assert!(driver.finish(HANG).await);
        let m = server.next().await.unwrap().unwrap();
        assert_eq!(m, Message::text("last result"));
        match server.next().await.unwrap().unwrap() {
            Message::Close(Some(f)) => {
                assert_eq!(f.code, CloseCode::Away);
                assert_eq!(f.reason.as_str(), "shutting down");
            }
            other => panic!("expected a close frame, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_oversized_frame_is_reported_with_its_size() {
        let (client, mut server) = pair(1024).await;
        let (_tx, rx) = mpsc::channel::<String>(8);
        let mut driver = Driver::new(client, rx, HEARTBEAT);
        server.send(Message::text("x".repeat(1000))).await.unwrap();
        server.send(Message::text("y".repeat(1025))).await.unwrap();
        let first = tokio::time::timeout(HANG, driver.next()).await.unwrap();
        assert!(matches!(first, Event::Text(_)), "{first:?}");
        let second = tokio::time::timeout(HANG, driver.next()).await.unwrap();
        assert!(
            matches!(second, Event::TooLarge { size, max: 1024 } if size >= 1025),
            "{second:?}"
        );
    }

    #[tokio::test]
    async fn a_peer_going_away_ends_the_connection() {
        let (client, server) = pair(1 << 16).await;
        let (_tx, rx) = mpsc::channel::<String>(8);
        let mut driver = Driver::new(client, rx, HEARTBEAT);
        drop(server);
        let event = tokio::time::timeout(HANG, driver.next()).await.unwrap();
        assert!(
            matches!(
                event,
                Event::Ended | Event::ReadFailed(_) | Event::WriteFailed(_)
            ),
            "{event:?}"
        );
    }
}
