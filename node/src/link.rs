//! The node's end of a registered connection, driven by one task.
//!
//! Everything the node sends goes through one bounded queue; the session's own task
//! both reads the gateway's frames and writes what is queued, polling the two sides
//! every turn. One task per connection means one waker: a socket event wakes one task
//! on one worker, where a reader and a writer task sharing a split stream would both be
//! woken and one of them stolen by the other worker (a thread wake-up per frame, tens
//! of µs on a small machine). Writing never waits on reading or the reverse, so a
//! gateway that is slow to read cannot stop the node from reading. The link also sends
//! a ping every heartbeat interval.

use crate::connection::WsStream;
use futures_util::{Sink, SinkExt, Stream};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// Frames written per turn before reads get their turn.
const WRITE_BATCH: usize = 64;

/// What the link brings back from the gateway.
pub(crate) enum LinkEvent {
    /// A frame from the gateway.
    Message(Message),
    /// The connection ended cleanly (the stream is over).
    Closed,
    /// Reading failed.
    ReadFailed(WsError),
    /// Writing failed.
    WriteFailed(WsError),
}

pub(crate) struct Link {
    ws: WsStream,
    rx: mpsc::Receiver<String>,
    ping: Interval,
    /// Frames handed to the socket and not yet flushed.
    unflushed: bool,
}

impl Link {
    pub(crate) fn new(ws: WsStream, rx: mpsc::Receiver<String>, heartbeat: Duration) -> Link {
        let mut ping = tokio::time::interval_at(Instant::now() + heartbeat, heartbeat);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Link {
            ws,
            rx,
            ping,
            unflushed: false,
        }
    }

    /// Writes what is queued (and a due ping) while waiting for the gateway's next
    /// frame. Cancel-safe: dropping the future loses nothing.
    pub(crate) async fn next(&mut self) -> LinkEvent {
        std::future::poll_fn(|cx| self.poll_next_event(cx)).await
    }

    fn poll_next_event(&mut self, cx: &mut Context<'_>) -> Poll<LinkEvent> {
        let mut batch = 0;
        loop {
            match Pin::new(&mut self.ws).poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(LinkEvent::WriteFailed(e)),
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
                Poll::Pending => match self.rx.poll_recv(cx) {
                    Poll::Ready(text) => text.map(Message::text),
                    Poll::Pending => None,
                },
            };
            let Some(m) = next else { break };
            if let Err(e) = Pin::new(&mut self.ws).start_send(m) {
                return Poll::Ready(LinkEvent::WriteFailed(e));
            }
            self.unflushed = true;
            batch += 1;
        }
        if self.unflushed {
            // Flushing also pushes out any pong tungstenite queued.
            match Pin::new(&mut self.ws).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Poll::Ready(LinkEvent::WriteFailed(e)),
                Poll::Pending => {}
            }
        }
        match Pin::new(&mut self.ws).poll_next(cx) {
            Poll::Ready(Some(Ok(m))) => Poll::Ready(LinkEvent::Message(m)),
            Poll::Ready(Some(Err(e))) => Poll::Ready(LinkEvent::ReadFailed(e)),
            Poll::Ready(None) => Poll::Ready(LinkEvent::Closed),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Sends what is still queued, then closes the connection; best effort, bounded
    /// by `limit`.
    pub(crate) async fn finish(mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            while let Ok(text) = self.rx.try_recv() {
                if self.ws.feed(Message::text(text)).await.is_err() {
                    return;
                }
            }
            let _ = self.ws.close(None).await;
        })
        .await
        .is_ok()
    }
}
