//! Node → gateway events, for tools that have something to report outside a call's
//! result (a background process that exited, progress of a long call).
//!
//! Every event is numbered and put in one bounded queue owned by the [`EventSender`];
//! while a connection is attached, a flusher task moves the queue into that
//! connection's send queue, in order. While no connection is attached (before the
//! first `hello-ok`, between a lost connection and the next registration) events wait
//! in the queue and go out, still in order, as soon as the runner attaches the next
//! connection: a background job that ends during a network blip is still reported.
//!
//! The queue holds at most [`MAX_QUEUED_EVENTS`] events and [`MAX_QUEUED_BYTES`]
//! bytes; past that the oldest are dropped, with a warning and a counter
//! ([`EventSender::dropped`]). Sequence numbers are given when an event is queued and
//! grow over the life of the process, so the gateway can order and de-duplicate
//! events across reconnects.
//!
//! Events that must not be lost (everything but `call.progress`, which is advisory)
//! stay held after they are handed to a connection, until the gateway acknowledges
//! them (`events.ack`, cumulative by `seq`). When the connection dies first, they go
//! out again, first and in order, on the next one; the gateway drops the ones it had
//! already received (it remembers the highest `seq` per node process), so each is
//! delivered once. Held events count against the same bounds as queued ones.

use gsv_protocol::frame::encode_event;
use gsv_protocol::EventName;
use serde::Serialize;
use std::collections::VecDeque;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use thiserror::Error;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Most events kept while they cannot be delivered.
pub const MAX_QUEUED_EVENTS: usize = 1024;
/// Most bytes (encoded frames) kept while they cannot be delivered (1 MiB).
pub const MAX_QUEUED_BYTES: usize = 1024 * 1024;

/// Why an event could not be queued.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EventError {
    /// One event larger than the whole queue.
    #[error("event of {bytes} bytes is larger than the event queue ({limit} bytes)")]
    TooLarge { bytes: usize, limit: usize },
}

/// A cheap, cloneable handle for sending events to the gateway.
#[derive(Clone, Default)]
pub struct EventSender {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    /// Woken when an event is queued or a connection attached.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// The attached connection, with the token that stops its flusher.
    current: Option<Attached>,
    /// Bumped on every attach and detach: a flusher of an older generation stops.
    generation: u64,
    queue: VecDeque<Queued>,
    /// Reliable events handed to a connection and not yet acknowledged, oldest first.
    unacked: VecDeque<Queued>,
    /// Bytes of `queue` and `unacked` together.
    queued_bytes: usize,
    seq: u64,
    dropped: u64,
}

struct Attached {
    tx: mpsc::Sender<String>,
    stop: CancellationToken,
}

struct Queued {
    seq: u64,
    frame: String,
    /// Held until acknowledged (see the module doc).
    reliable: bool,
}

impl EventSender {
    /// A sender attached to no connection: events queue until the runner attaches one.
    /// Also what tests hand to tools.
    pub fn detached() -> Self {
        EventSender::default()
    }

    /// Whether a live connection is attached now.
    pub fn is_connected(&self) -> bool {
        self.lock()
            .current
            .as_ref()
            .is_some_and(|c| !c.tx.is_closed())
    }

    /// Queues `event` with `payload` for the gateway and returns its sequence number.
    /// Never waits: delivery happens in the background, in order, on the current or
    /// next connection.
    pub async fn send<P: Serialize + ?Sized>(
        &self,
        event: EventName,
        payload: &P,
    ) -> Result<u64, EventError> {
        self.queue(event, payload)
    }

    /// [`EventSender::send`] for callers outside async code.
    pub fn queue<P: Serialize + ?Sized>(
        &self,
        event: EventName,
        payload: &P,
    ) -> Result<u64, EventError> {
        let seq = {
            let mut state = self.lock();
            let seq = state.seq + 1;
            let frame = encode_event(event, payload, seq);
            if frame.len() > MAX_QUEUED_BYTES {
                return Err(EventError::TooLarge {
                    bytes: frame.len(),
                    limit: MAX_QUEUED_BYTES,
                });
            }
            state.seq = seq;
            while state.queue.len() + state.unacked.len() >= MAX_QUEUED_EVENTS
                || state.queued_bytes + frame.len() > MAX_QUEUED_BYTES
            {
                let old = match state.unacked.pop_front() {
                    Some(old) => old,
                    None => match state.queue.pop_front() {
                        Some(old) => old,
                        None => break,
                    },
                };
                state.queued_bytes -= old.frame.len();
                state.dropped += 1;
                warn!(
                    seq = old.seq,
                    dropped = state.dropped,
                    "event queue full: dropped the oldest undelivered event"
                );
            }
            state.queued_bytes += frame.len();
            let reliable = event != EventName::CallProgress;
            state.queue.push_back(Queued {
                seq,
                frame,
                reliable,
            });
            seq
        };
        self.inner.wake.notify_waiters();
        Ok(seq)
    }

    /// Events waiting for a connection (or for room in its send queue).
    pub fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Reliable events sent and not yet acknowledged by the gateway.
    pub fn unacked(&self) -> usize {
        self.lock().unacked.len()
    }

    /// The gateway received every event up to `seq`: forget the held ones.
    pub fn ack(&self, seq: u64) {
        let mut state = self.lock();
        while state.unacked.front().is_some_and(|e| e.seq <= seq) {
            if let Some(e) = state.unacked.pop_front() {
                state.queued_bytes -= e.frame.len();
            }
        }
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Makes `tx` the connection events go to and starts flushing the queue into it.
    /// Must be called within a tokio runtime. The runner calls this after `hello-ok`;
    /// public for embedders and tests.
    pub fn attach(&self, tx: mpsc::Sender<String>) {
        let stop = CancellationToken::new();
        let generation = {
            let mut state = self.lock();
            if let Some(old) = state.current.take() {
                old.stop.cancel();
            }
            state.generation += 1;
            // Sent on an earlier connection but never acknowledged: these go first.
            while let Some(e) = state.unacked.pop_back() {
                state.queue.push_front(e);
            }
            state.current = Some(Attached {
                tx: tx.clone(),
                stop: stop.clone(),
            });
            state.generation
        };
        tokio::spawn(flush(Arc::clone(&self.inner), tx, stop, generation));
    }

    /// Detaches `tx` if it is still the current connection; undelivered events stay
    /// queued for the next one.
    pub fn detach(&self, tx: &mpsc::Sender<String>) {
        let mut state = self.lock();
        if state
            .current
            .as_ref()
            .is_some_and(|c| c.tx.same_channel(tx))
        {
            if let Some(old) = state.current.take() {
                old.stop.cancel();
            }
            // Its flusher must not hand over one more event.
            state.generation += 1;
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain data updated in single steps; a panic elsewhere cannot leave it torn.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Moves queued events into `tx`, in order, until `tx` closes, `stop` is cancelled or
/// a newer connection is attached.
async fn flush(inner: Arc<Inner>, tx: mpsc::Sender<String>, stop: CancellationToken, gen: u64) {
    loop {
        // Registered before looking at the queue, so no wake-up can be missed.
        let mut woken = pin!(inner.wake.notified());
        woken.as_mut().enable();
        loop {
            {
                let state = inner.lock();
                if state.generation != gen || state.queue.is_empty() {
                    break;
                }
            }
            let permit = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                permit = tx.reserve() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return,
                },
            };
            let mut state = inner.lock();
            if state.generation != gen {
                return;
            }
            // Popped only once there is room: an event leaves the queue only into a
            // connection's send queue.
            let Some(event) = state.queue.pop_front() else {
                break;
            };
            if event.reliable {
                permit.send(event.frame.clone());
                state.unacked.push_back(event);
            } else {
                state.queued_bytes -= event.frame.len();
                permit.send(event.frame);
            }
        }
        if inner.lock().generation != gen {
            return;
        }
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = tx.closed() => return,
            _ = woken => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::Frame;
    use serde_json::json;
    use std::time::Duration;

    fn seq_of(text: &str) -> u64 {
        match Frame::decode(text).unwrap() {
            Frame::Event { seq, .. } => seq,
            other => panic!("{other:?}"),
        }
    }

    async fn recv(rx: &mut mpsc::Receiver<String>) -> String {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("an event should arrive")
            .expect("the channel is open")
    }

    #[tokio::test]
    async fn detached_sender_queues_then_flushes_in_order() {
        let events = EventSender::detached();
        assert!(!events.is_connected());
        assert_eq!(
            events.send(EventName::CallProgress, &json!({"n": 1})).await,
            Ok(1)
        );
        assert_eq!(
            events.queue(EventName::ProcessExited, &json!({"n": 2})),
            Ok(2)
        );
        assert_eq!(events.queued(), 2);

        // A send queue smaller than the backlog: the flusher waits for room.
        let (tx, mut rx) = mpsc::channel(1);
        events.attach(tx);
        assert!(events.is_connected());
        assert_eq!(seq_of(&recv(&mut rx).await), 1);
        assert_eq!(seq_of(&recv(&mut rx).await), 2);
        assert_eq!(
            events.send(EventName::CallProgress, &json!({})).await,
            Ok(3)
        );
        let text = recv(&mut rx).await;
        assert_eq!(seq_of(&text), 3);
        assert_eq!(events.queued(), 0);
        assert_eq!(events.dropped(), 0);
    }

    #[tokio::test]
    async fn events_follow_the_current_connection_with_growing_seq() {
        let events = EventSender::detached();
        let (tx1, mut rx1) = mpsc::channel(4);
        events.attach(tx1.clone());
        let payload = json!({"callId": "c1", "message": "half way"});
        assert_eq!(events.send(EventName::CallProgress, &payload).await, Ok(1));
        let text = recv(&mut rx1).await;
        match Frame::decode(&text).unwrap() {
            Frame::Event {
                event,
                payload: p,
                seq,
            } => {
                assert_eq!(event, EventName::CallProgress);
                assert_eq!(seq, 1);
                let p: serde_json::Value = serde_json::from_str(p.unwrap().get()).unwrap();
                assert_eq!(p, payload);
            }
            other => panic!("{other:?}"),
        }

        // A newer connection takes over; detaching the old one then changes nothing.
        let (tx2, mut rx2) = mpsc::channel(4);
        events.attach(tx2.clone());
        events.detach(&tx1);
        assert!(events.is_connected());
        assert_eq!(
            events.send(EventName::ProcessExited, &json!({})).await,
            Ok(2)
        );
        assert!(recv(&mut rx2).await.contains(r#""seq":2"#));
        assert!(rx1.try_recv().is_err());
        events.ack(2);

        // Detached: queued, and delivered on the next connection.
        events.detach(&tx2);
        assert!(!events.is_connected());
        assert_eq!(
            events.send(EventName::ProcessExited, &json!({})).await,
            Ok(3)
        );
        assert_eq!(events.queued(), 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(rx2.try_recv().is_err());
        let (tx3, mut rx3) = mpsc::channel(4);
        events.attach(tx3);
        assert_eq!(seq_of(&recv(&mut rx3).await), 3);
    }

    #[tokio::test]
    async fn a_closed_connection_keeps_events_queued() {
        let events = EventSender::detached();
        let (tx, rx) = mpsc::channel(1);
        events.attach(tx);
        drop(rx);
        assert!(!events.is_connected());
        assert_eq!(
            events.send(EventName::CallProgress, &json!({})).await,
            Ok(1)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(events.queued(), 1);
        let (tx, mut rx) = mpsc::channel(1);
        events.attach(tx);
        assert_eq!(seq_of(&recv(&mut rx).await), 1);
    }

    #[tokio::test]
    async fn unacknowledged_events_go_again_on_the_next_connection() {
        let events = EventSender::detached();
        let (tx1, mut rx1) = mpsc::channel(8);
        events.attach(tx1.clone());
        events
            .queue(EventName::ProcessExited, &json!({"n": 1}))
            .unwrap();
        events
            .queue(EventName::CallProgress, &json!({"n": 2}))
            .unwrap();
        events
            .queue(EventName::ProcessExited, &json!({"n": 3}))
            .unwrap();
        for want in 1..=3 {
            assert_eq!(seq_of(&recv(&mut rx1).await), want);
        }
        assert_eq!(events.unacked(), 2);
        events.ack(1);
        assert_eq!(events.unacked(), 1);
        // The link dies before 3 is acknowledged: it goes again, before anything new.
        events.detach(&tx1);
        events
            .queue(EventName::ProcessExited, &json!({"n": 4}))
            .unwrap();
        let (tx2, mut rx2) = mpsc::channel(8);
        events.attach(tx2);
        assert_eq!(seq_of(&recv(&mut rx2).await), 3);
        assert_eq!(seq_of(&recv(&mut rx2).await), 4);
        events.ack(4);
        assert_eq!(events.unacked(), 0);
        assert_eq!(events.queued(), 0);
    }

    #[tokio::test]
    async fn the_queue_is_bounded_and_drops_the_oldest() {
        let events = EventSender::detached();
        for _ in 0..MAX_QUEUED_EVENTS + 5 {
            events.queue(EventName::CallProgress, &json!({})).unwrap();
        }
        assert_eq!(events.queued(), MAX_QUEUED_EVENTS);
        assert_eq!(events.dropped(), 5);
        let (tx, mut rx) = mpsc::channel(8);
        events.attach(tx);
        assert_eq!(seq_of(&recv(&mut rx).await), 6);

        // By bytes as well.
        let events = EventSender::detached();
        let big = "x".repeat(MAX_QUEUED_BYTES / 3);
        for _ in 0..4 {
            events
                .queue(EventName::CallProgress, &json!({ "b": big }))
                .unwrap();
        }
        assert_eq!(events.queued(), 2);
        assert_eq!(events.dropped(), 2);
        let huge = "x".repeat(MAX_QUEUED_BYTES);
        assert!(matches!(
            events.queue(EventName::CallProgress, &json!({ "b": huge })),
            Err(EventError::TooLarge { .. })
        ));
    }
}
