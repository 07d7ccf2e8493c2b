//! Where a transfer's frames go: the connection's task hands every chunk frame and
//! every `transfer.*` event to the inbox of the transfer it names.

use gsv_protocol::frame::encode_req;
use gsv_protocol::transfer::{CancelParams, Chunk, Credit, Failed, Finished, OpenResult};
use gsv_protocol::{ErrorShape, EventName, Method};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc;
use uuid::Uuid;

/// What reaches a transfer.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// `data` belongs at `offset` (a `get`).
    Chunk { offset: u64, data: Vec<u8> },
    /// The node may take this many more bytes (a `put`).
    Credit(u64),
    /// The node sent every byte (a `get`).
    End(Finished),
    /// The node or the gateway ended the transfer.
    Failed(ErrorShape),
}

/// The transfers of one connection: those being opened (by `transfer.open` request
/// id) and those open (by transfer id).
pub(crate) struct Routes {
    inner: Mutex<Inner>,
    /// The connection's text queue, to cancel a transfer whose opener gave up.
    frames: mpsc::Sender<String>,
}

#[derive(Default)]
struct Inner {
    opening: HashMap<String, mpsc::Sender<Inbound>>,
    open: HashMap<Uuid, mpsc::Sender<Inbound>>,
}

impl Routes {
    pub(crate) fn new(frames: mpsc::Sender<String>) -> Routes {
        Routes {
            inner: Mutex::new(Inner::default()),
            frames,
        }
    }

    /// A `res` arrived: if it answers a `transfer.open`, the transfer's inbox is
    /// registered now, before its first chunk can be read.
    pub(crate) fn on_res(&self, req: &str, outcome: &Result<Box<RawValue>, ErrorShape>) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let Some(tx) = inner.opening.remove(req) else {
            return;
        };
        let Ok(raw) = outcome else {
            return;
        };
        let Ok(result) = serde_json::from_str::<OpenResult>(raw.get()) else {
            return;
        };
        if tx.is_closed() {
            // Whoever opened it is gone: the node must not wait for it.
            let cancel = encode_req(
                "transfer-abandoned",
                Method::TransferCancel,
                &CancelParams {
                    id: result.id,
                    discard: false,
                },
            );
            let _ = self.frames.try_send(cancel);
        } else {
            inner.open.insert(result.id, tx);
        }
    }

    /// A binary frame arrived.
    pub(crate) fn on_binary(&self, frame: &[u8]) {
        match Chunk::decode(frame) {
            Ok(c) => self.deliver(
                c.id,
                Inbound::Chunk {
                    offset: c.offset,
                    data: c.data.to_vec(),
                },
            ),
            Err(e) => tracing::debug!(error = %e, "ignoring a binary frame from the gateway"),
        }
    }

    /// An event arrived; true when it was a transfer's (handled here).
    pub(crate) fn on_event(&self, event: EventName, payload: Option<&RawValue>) -> bool {
        let text = payload.map_or("null", RawValue::get);
        let routed = match event {
            EventName::TransferCredit => {
                serde_json::from_str::<Credit>(text).map(|c| (c.id, Inbound::Credit(c.bytes)))
            }
            EventName::TransferEnd => {
                serde_json::from_str::<Finished>(text).map(|f| (f.id, Inbound::End(f)))
            }
            EventName::TransferFailed => {
                serde_json::from_str::<Failed>(text).map(|f| (f.id, Inbound::Failed(f.error)))
            }
            _ => return false,
        };
        match routed {
            Ok((id, m)) => self.deliver(id, m),
            Err(e) => {
                tracing::debug!(event = event.as_str(), error = %e, "ignoring a malformed transfer event")
            }
        }
        true
    }

    /// Hands `m` to transfer `id`. An unknown id is ignored; a transfer whose inbox is
    /// full (it does not keep up with what the window allows) is dropped: its inbox
    /// closes and it fails.
    fn deliver(&self, id: Uuid, m: Inbound) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let Some(tx) = inner.open.get(&id) else {
            tracing::debug!(%id, "ignoring a frame of an unknown transfer");
            return;
        };
        match tx.try_send(m) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(%id, "a transfer fell behind: dropping it");
                inner.open.remove(&id);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                inner.open.remove(&id);
            }
        }
    }

    /// Forgets transfer `id`.
    pub(crate) fn remove(&self, id: Uuid) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.open.remove(&id);
        }
    }

    /// Forgets every transfer (the connection is gone): their inboxes close.
    pub(crate) fn clear(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.open.clear();
            inner.opening.clear();
        }
    }
}

/// A `transfer.open` in flight: registered under its request id until its answer.
pub(crate) struct PendingOpen<'a> {
    routes: &'a Routes,
    req: String,
}

impl<'a> PendingOpen<'a> {
    pub(crate) fn new(routes: &'a Routes, req: &str, tx: mpsc::Sender<Inbound>) -> Self {
        if let Ok(mut inner) = routes.inner.lock() {
            inner.opening.insert(req.to_owned(), tx);
        }
        PendingOpen {
            routes,
            req: req.to_owned(),
        }
    }

    /// The answer arrived (the transfer is registered if it opened).
    pub(crate) fn settled(self) {}
}

impl Drop for PendingOpen<'_> {
    fn drop(&mut self) {
        if let Ok(mut inner) = self.routes.inner.lock() {
            inner.opening.remove(&self.req);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(v: serde_json::Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).expect("raw")
    }

    #[tokio::test]
    async fn frames_reach_the_transfer_they_name_once_its_open_is_answered() {
        let (frames, _frames_rx) = mpsc::channel(4);
        let routes = Routes::new(frames);
        let (tx, mut rx) = mpsc::channel(4);
        let id = Uuid::from_u128(7);
        let _pending = PendingOpen::new(&routes, "r1", tx);
        let chunk = Chunk {
            id,
            offset: 0,
            data: b"abc",
        }
        .encode();
        // Before the answer the id is unknown: ignored.
        routes.on_binary(&chunk);
        assert!(rx.try_recv().is_err());
        routes.on_res(
            "r1",
            &Ok(raw(serde_json::json!({
                "id": id, "path": "/w/a", "meta": {"size": 3}, "offset": 0
            }))),
        );
        routes.on_binary(&chunk);
        assert!(matches!(rx.try_recv(), Ok(Inbound::Chunk { offset: 0, data }) if data == b"abc"));
        let credit = raw(serde_json::json!({"id": id, "bytes": 5}));
        assert!(routes.on_event(EventName::TransferCredit, Some(&credit)));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Credit(5))));
        let failed =
            raw(serde_json::json!({"id": id, "error": {"code": "not_found", "message": "gone"}}));
        assert!(routes.on_event(EventName::TransferFailed, Some(&failed)));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Failed(e)) if e.message == "gone"));
        // Other events are not a transfer's; another transfer's frames are ignored.
        assert!(!routes.on_event(EventName::ToolsChanged, None));
        let other = Chunk {
            id: Uuid::from_u128(8),
            offset: 0,
            data: b"x",
        }
        .encode();
        routes.on_binary(&other);
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn an_open_answered_after_its_opener_left_is_cancelled() {
        let (frames, mut frames_rx) = mpsc::channel(4);
        let routes = Routes::new(frames);
        let (tx, rx) = mpsc::channel(4);
        let pending = PendingOpen::new(&routes, "r1", tx);
        drop(rx);
        // The res is read before the opener's future notices: still registered.
        routes.on_res(
            "r1",
            &Ok(raw(serde_json::json!({
                "id": Uuid::from_u128(9), "path": "/w/a", "meta": {"size": 3}, "offset": 0
            }))),
        );
        drop(pending);
        let sent = frames_rx.try_recv().expect("a cancel");
        assert!(sent.contains("transfer.cancel"), "{sent}");
    }
}
