//! Node → gateway events, for tools that have something to report outside a call's
//! result (a background process that exited, progress of a long call).
//!
//! Events go out on whichever connection is current when they are sent: the runner
//! attaches each new connection's send queue after `hello-ok` and detaches it when the
//! connection ends. Sequence numbers grow over the life of the process, so the gateway
//! can order and de-duplicate them across reconnects.

use gsv_protocol::frame::encode_event;
use gsv_protocol::EventName;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use thiserror::Error;
use tokio::sync::mpsc;

/// Why an event could not be queued.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EventError {
    #[error("not connected to the gateway")]
    NotConnected,
}

/// A cheap, cloneable handle for sending events to the gateway.
#[derive(Clone, Default)]
pub struct EventSender {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    current: Mutex<Option<mpsc::Sender<String>>>,
    seq: AtomicU64,
}

impl EventSender {
    /// A sender attached to no connection (every send fails with `NotConnected` until
    /// the runner attaches one). Also what tests hand to tools.
    pub fn detached() -> Self {
        EventSender::default()
    }

    /// Whether a connection is attached now.
    pub fn is_connected(&self) -> bool {
        self.lock().as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Queues `event` with `payload` on the current connection, waiting for room in the
    /// bounded send queue. Returns the event's sequence number.
    pub async fn send<P: Serialize + ?Sized>(
        &self,
        event: EventName,
        payload: &P,
    ) -> Result<u64, EventError> {
        let tx = self.lock().clone().ok_or(EventError::NotConnected)?;
        // Reserve first, number second: sequence numbers then follow queue order even
        // when several tasks send at once.
        let permit = tx.reserve().await.map_err(|_| EventError::NotConnected)?;
        let seq = self.inner.seq.fetch_add(1, Ordering::Relaxed) + 1;
        permit.send(encode_event(event, payload, seq));
        Ok(seq)
    }

    /// Makes `tx` the connection events go to.
    pub(crate) fn attach(&self, tx: mpsc::Sender<String>) {
        *self.lock() = Some(tx);
    }

    /// Detaches `tx` if it is still the current connection.
    pub(crate) fn detach(&self, tx: &mpsc::Sender<String>) {
        let mut current = self.lock();
        if current.as_ref().is_some_and(|c| c.same_channel(tx)) {
            *current = None;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<mpsc::Sender<String>>> {
        // The guarded value is a plain Option; a panic elsewhere cannot leave it torn.
        self.inner
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::Frame;
    use serde_json::json;

    #[tokio::test]
    async fn detached_sender_refuses() {
        let events = EventSender::detached();
        assert!(!events.is_connected());
        let err = events.send(EventName::CallProgress, &json!({})).await;
        assert_eq!(err, Err(EventError::NotConnected));
    }

    #[tokio::test]
    async fn events_follow_the_current_connection_with_growing_seq() {
        let events = EventSender::detached();
        let (tx1, mut rx1) = mpsc::channel(4);
        events.attach(tx1.clone());
        assert!(events.is_connected());
        let payload = json!({"callId": "c1", "message": "half way"});
        assert_eq!(events.send(EventName::CallProgress, &payload).await, Ok(1));
        let text = rx1.recv().await.unwrap();
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
        assert_eq!(
            events.send(EventName::ProcessExited, &json!({})).await,
            Ok(2)
        );
        assert!(rx2.recv().await.unwrap().contains(r#""seq":2"#));
        assert!(rx1.try_recv().is_err());

        events.detach(&tx2);
        assert!(!events.is_connected());
        assert_eq!(
            events.send(EventName::ProcessExited, &json!({})).await,
            Err(EventError::NotConnected)
        );
    }

    #[tokio::test]
    async fn a_closed_connection_is_not_connected() {
        let events = EventSender::detached();
        let (tx, rx) = mpsc::channel(1);
        events.attach(tx);
        drop(rx);
        assert!(!events.is_connected());
        assert_eq!(
            events.send(EventName::CallProgress, &json!({})).await,
            Err(EventError::NotConnected)
        );
    }
}
