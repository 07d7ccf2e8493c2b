//! Where a transfer's frames go: the connection's task hands every chunk frame and
//! every `transfer.*` event to the inbox of the transfer it names.

use gsv_protocol::frame::encode_req;
use gsv_protocol::transfer::{CancelParams, Chunk, Credit, Failed, Finished, OpenResult};
use gsv_protocol::transfer::{CHUNK_BYTES, WINDOW_BYTES};
use gsv_protocol::{ErrorShape, EventName, Method};
use gsv_transport::tungstenite::Bytes;
use serde_json::value::RawValue;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::mpsc;
use uuid::Uuid;

/// What reaches a transfer.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// `data` belongs at `offset` (a `get`).
    Chunk { offset: u64, data: Bytes },
    /// The node may take this many more bytes (a `put`).
    Credit(u64),
    /// The node sent every byte (a `get`).
    End(Finished),
    /// The node or the gateway ended the transfer.
    Failed(ErrorShape),
}

/// Messages kept for a transfer not registered yet (see [`Inner::orphans`]).
const ORPHANS: usize = 64;
/// Chunk bytes kept for a transfer not registered yet: the sender's window and a chunk.
const ORPHAN_BYTES: usize = WINDOW_BYTES as usize + CHUNK_BYTES;

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
    /// What arrived for an unknown transfer while a `transfer.open` was unanswered:
    /// the node may send a `get`'s first chunks as soon as it opens the file, and
    /// the gateway may relay them before it answers the open. Handed over when the
    /// answer registers the transfer; bounded by [`ORPHANS`] and [`ORPHAN_BYTES`].
    orphans: VecDeque<(Uuid, Inbound)>,
    orphan_bytes: usize,
}

impl Inner {
    /// Keeps `m` for a transfer that may be about to open, if there is one and room.
    fn keep_orphan(&mut self, id: Uuid, m: Inbound) {
        let len = match &m {
            Inbound::Chunk { data, .. } => data.len(),
            _ => 0,
        };
        if self.opening.is_empty()
            || self.orphans.len() >= ORPHANS
            || self.orphan_bytes + len > ORPHAN_BYTES
        {
            tracing::debug!(%id, "ignoring a frame of an unknown transfer");
            return;
        }
        self.orphan_bytes += len;
        self.orphans.push_back((id, m));
    }

    /// Takes the kept messages of `id`, in order; forgets every kept one once no
    /// open is pending.
    fn take_orphans(&mut self, id: Uuid) -> Vec<Inbound> {
        let mut mine = Vec::new();
        let mut rest = VecDeque::new();
        for (of, m) in self.orphans.drain(..) {
            if of == id {
                mine.push(m);
            } else if !self.opening.is_empty() {
                rest.push_back((of, m));
            }
        }
        self.orphans = rest;
        self.orphan_bytes = self
            .orphans
            .iter()
            .map(|(_, m)| match m {
                Inbound::Chunk { data, .. } => data.len(),
                _ => 0,
            })
            .sum();
        mine
    }
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
        let Some(result) = outcome
            .as_ref()
            .ok()
            .and_then(|raw| serde_json::from_str::<OpenResult>(raw.get()).ok())
        else {
            inner.take_orphans(Uuid::nil());
            return;
        };
        let early = inner.take_orphans(result.id);
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
            // The inbox is new and larger than what may be kept: all of it fits.
            for m in early {
                let _ = tx.try_send(m);
            }
            inner.open.insert(result.id, tx);
        }
    }

    /// A binary frame arrived.
    pub(crate) fn on_binary(&self, frame: Bytes) {
        match Chunk::decode(&frame) {
            Ok(c) => {
                // The data stays in the frame's memory: no copy on the way to the disk.
                let (id, offset, from) = (c.id, c.offset, frame.len() - c.data.len());
                self.deliver(
                    id,
                    Inbound::Chunk {
                        offset,
                        data: frame.slice(from..),
                    },
                )
            }
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
            inner.keep_orphan(id, m);
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
            inner.orphans.clear();
            inner.orphan_bytes = 0;
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
            // Nothing kept can be claimed once no open is pending.
            inner.take_orphans(Uuid::nil());
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
        // Before the answer the id is unknown: kept, and handed over with the answer.
        routes.on_binary(Bytes::from(chunk.clone()));
        assert!(rx.try_recv().is_err());
        routes.on_res(
            "r1",
            &Ok(raw(serde_json::json!({
                "id": id, "path": "/w/a", "meta": {"size": 3}, "offset": 0
            }))),
        );
        assert!(
            matches!(rx.try_recv(), Ok(Inbound::Chunk { offset: 0, data }) if &data[..] == b"abc")
        );
        routes.on_binary(Bytes::from(chunk.clone()));
        assert!(
            matches!(rx.try_recv(), Ok(Inbound::Chunk { offset: 0, data }) if &data[..] == b"abc")
        );
        assert!(rx.try_recv().is_err());
        let credit = raw(serde_json::json!({"id": id, "bytes": 5}));
        assert!(routes.on_event(EventName::TransferCredit, Some(&credit)));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Credit(5))));
        let failed =
            raw(serde_json::json!({"id": id, "error": {"code": "not_found", "message": "gone"}}));
        assert!(routes.on_event(EventName::TransferFailed, Some(&failed)));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Failed(e)) if e.message == "gone"));
        // Other events are not a transfer's; another transfer's frames are ignored
        // (and not kept: no open is pending).
        assert!(!routes.on_event(EventName::ToolsChanged, None));
        let other = Chunk {
            id: Uuid::from_u128(8),
            offset: 0,
            data: b"x",
        }
        .encode();
        routes.on_binary(Bytes::from(other.clone()));
        assert!(rx.try_recv().is_err());
        assert!(routes.inner.lock().expect("lock").orphans.is_empty());
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
