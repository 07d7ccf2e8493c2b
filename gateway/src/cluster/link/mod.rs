//! Direct links between replicas, for the calls they forward to each other.
//!
//! Over NATS a forwarded call and its answer cross the NATS server twice each way
//! (replica → server → replica); a link is one WebSocket from the forwarding replica
//! to the holder, on the holder's own listener (`/v1/replica`: TLS when the gateway has
//! it), so they cross once. NATS stays the cluster's backbone: a replica says in its
//! hello where its link is, its certificate's fingerprint (pinned by whoever dials it:
//! the hello comes over NATS sealed with the cluster key, [`super::seal`]) and a random secret of this run;
//! a replica that dials proves it heard that hello (an HMAC of a fresh challenge under
//! the secret, [`wire`]). Everything else still goes over NATS, and a call falls back
//! to it whenever there is no link: the first call to a replica (its link is dialled
//! then, in the background), a link that is down, a message too large for a frame. An
//! answer or a progress event whose link dropped is published on NATS instead
//! (`gsv.answer.REPLICA.KEY`, the call's progress subject), where the forwarding
//! replica also listens; a cancel always travels on NATS.
//!
//! A message is written on the link by the task that sends it (no writer task between:
//! a hand-off less each way on every forwarded call); senders take turns on the
//! link's sink, and the last of a group that queued up flushes for all of them. A
//! send that cannot finish within [`STALL`] (a holder that stopped reading) marks the
//! link dead: that message and every later one go over NATS.
//!
//! Without `--cluster-advertise`, a replica listening on a wildcard address
//! (`0.0.0.0`) has no address to give and offers no link: its calls go over NATS.

mod accept;
mod dial;
pub(crate) mod wire;

pub use accept::router;

use dashmap::DashMap;
use futures_util::{Sink, SinkExt};
use gsv_transport::tungstenite::{self, Message};
use serde::{Deserialize, Serialize};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long one message may take to be written on a link before the link counts as
/// dead.
const STALL: Duration = Duration::from_secs(5);
/// How long after a failed dial a replica is not dialled again.
const REDIAL: Duration = Duration::from_secs(2);
/// How long the opening of a link may take.
pub const OPENING: Duration = Duration::from_secs(5);
/// The largest message a link carries (a frame); larger ones go over NATS.
pub const MAX_MESSAGE: usize = gsv_protocol::limits::MAX_FRAME_BYTES - 4096;

/// How to reach a replica's link, as its hello says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// `ws://HOST:PORT/v1/replica` or `wss://…`.
    pub url: String,
    /// The SHA-256 fingerprint of its TLS certificate (`wss://`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<String>,
    /// This run's secret, proven by whoever dials.
    pub secret: String,
}

/// The sending half of a link's WebSocket.
type LinkSink = Pin<Box<dyn Sink<Message, Error = tungstenite::Error> + Send>>;

/// One open link's sending side.
struct Wire {
    sink: tokio::sync::Mutex<LinkSink>,
    /// Senders between wanting the sink and having fed it their message: the one that
    /// leaves it at zero flushes.
    sending: AtomicUsize,
    /// Fired when the link ended or stalled: sends fail at once (to go over NATS).
    dead: CancellationToken,
}

/// One open link, as its users send on it.
#[derive(Clone)]
pub(crate) struct Peer {
    wire: Arc<Wire>,
    /// Tells this link from a later one to the same replica.
    id: u64,
}

impl Peer {
    /// Writes `out` on the link; gives it back when the link is dead, stalls or the
    /// message is too large for a frame (to go over NATS instead).
    pub(crate) async fn send(&self, out: Outgoing) -> Result<(), Box<Outgoing>> {
        if self.wire.dead.is_cancelled() {
            return Err(Box::new(out));
        }
        let text = match serde_json::to_string(&out.msg) {
            Ok(t) if t.len() <= MAX_MESSAGE => t,
            _ => return Err(Box::new(out)),
        };
        let mut turn = Turn::take(&self.wire);
        let written = tokio::time::timeout(STALL, async {
            let mut sink = self.wire.sink.lock().await;
            sink.feed(Message::text(text)).await?;
            if turn.leave() {
                // Others fed theirs counting on this flush: should this send be given
                // up half-way (its caller went away), the flush goes on without it.
                let mut pending = Unflushed(Some(Arc::clone(&self.wire)));
                sink.flush().await?;
                pending.0 = None;
            }
            Ok::<(), tungstenite::Error>(())
        })
        .await;
        match written {
            Ok(Ok(())) => Ok(()),
            _ => {
                // Whether the peer got it is unknown; the link is not used again.
                self.wire.dead.cancel();
                Err(Box::new(out))
            }
        }
    }

    fn dead(&self) -> bool {
        self.wire.dead.is_cancelled()
    }

    /// Marks the link dead and closes its sink (bounded).
    async fn close(&self) {
        self.wire.dead.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let _ = self.wire.sink.lock().await.close().await;
        })
        .await;
    }
}

/// A flush under way; dropped before it finished, it finishes in a task of its own
/// (bounded by [`STALL`], after which the link is dead).
struct Unflushed(Option<Arc<Wire>>);

impl Drop for Unflushed {
    fn drop(&mut self) {
        let Some(wire) = self.0.take() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            let flushed =
                tokio::time::timeout(STALL, async { wire.sink.lock().await.flush().await }).await;
            if !matches!(flushed, Ok(Ok(()))) {
                wire.dead.cancel();
            }
        });
    }
}

/// A sender's place among those waiting for a link's sink.
struct Turn<'a> {
    wire: &'a Arc<Wire>,
    counted: bool,
}

impl<'a> Turn<'a> {
    fn take(wire: &'a Arc<Wire>) -> Self {
        wire.sending.fetch_add(1, Ordering::AcqRel);
        Turn {
            wire,
            counted: true,
        }
    }

    /// Leaves the group; true for the last one (it flushes for all).
    fn leave(&mut self) -> bool {
        self.counted = false;
        self.wire.sending.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        // Given up before its turn (its caller went away): when it was the last one
        // waiting, the frames fed before it counting on its flush are flushed anyway.
        if self.counted && self.wire.sending.fetch_sub(1, Ordering::AcqRel) == 1 {
            drop(Unflushed(Some(Arc::clone(self.wire))));
        }
    }
}

/// A message for a link, with where it goes on NATS should the link fail first.
pub(crate) struct Outgoing {
    pub msg: wire::LinkMsg,
    /// The NATS subject (and reply subject) for the message's body.
    pub fallback: Option<(String, Option<String>)>,
}

impl Outgoing {
    /// Publishes the message's body on its NATS subject instead (nothing when it has
    /// none).
    pub(crate) async fn over_nats(self, client: &super::bus::Bus) {
        let Some((subject, reply)) = self.fallback else {
            return;
        };
        let body = match &self.msg {
            wire::LinkMsg::Call { call, .. } => serde_json::to_vec(call),
            wire::LinkMsg::Answer { answer, .. } => serde_json::to_vec(answer),
            wire::LinkMsg::Progress { progress, .. } => serde_json::to_vec(progress),
            wire::LinkMsg::Holder { holder, .. } => serde_json::to_vec(holder),
        };
        let Ok(body) = body else { return };
        let sent = match reply {
            Some(reply) => client.publish_with_reply(subject, reply, body.into()).await,
            None => client.publish(subject, body.into()).await,
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "cluster: a message whose link failed could not go over NATS either");
        }
    }
}

/// A replica's links.
#[derive(Default)]
pub struct Links {
    /// This replica's own link, once it knows its address.
    pub(crate) own: OnceLock<LinkInfo>,
    /// The other replicas' links, from their hellos.
    known: DashMap<String, LinkInfo>,
    /// Links dialled from here, by replica.
    open: DashMap<String, Peer>,
    /// When each replica was last dialled.
    dialled: DashMap<String, Instant>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Links {
    /// Sets where this replica's link is (once).
    pub fn offer(&self, url: String, pin: Option<String>) {
        let _ = self.own.set(LinkInfo {
            url,
            pin,
            secret: wire::random_hex(),
        });
    }

    /// Remembers replica `name`'s link from its hello (a changed one closes the link
    /// dialled to the old one).
    pub(crate) fn heard(&self, name: &str, info: Option<LinkInfo>) {
        let Some(info) = info.filter(acceptable) else {
            self.known.remove(name);
            return;
        };
        let changed = self.known.get(name).is_none_or(|k| *k != info);
        if changed {
            self.known.insert(name.to_owned(), info);
            self.open.remove(name);
        }
    }

    /// The open link to `replica`, if there is one.
    pub(crate) fn to(&self, replica: &str) -> Option<Peer> {
        self.open
            .get(replica)
            .map(|p| p.clone())
            .filter(|p| !p.dead())
    }

    /// Forgets the link `peer` to `replica` (it ended).
    fn closed(&self, replica: &str, peer: &Peer) {
        self.open.remove_if(replica, |_, p| p.id == peer.id);
    }

    /// Whether `replica` should be dialled now (it has a link, none is open, and it
    /// was not dialled lately); marks it dialled.
    fn should_dial(&self, replica: &str) -> Option<LinkInfo> {
        if self.to(replica).is_some() {
            return None;
        }
        let info = self.known.get(replica)?.clone();
        let now = Instant::now();
        let mut due = false;
        self.dialled
            .entry(replica.to_owned())
            .and_modify(|t| {
                if now.duration_since(*t) >= REDIAL {
                    *t = now;
                    due = true;
                }
            })
            .or_insert_with(|| {
                due = true;
                now
            });
        due.then_some(info)
    }
}

/// Whether a link from a hello can be dialled.
fn acceptable(info: &LinkInfo) -> bool {
    let url_ok = (info.url.starts_with("ws://") || info.url.starts_with("wss://"))
        && info.url.len() <= 512
        && info.url.bytes().all(|b| b.is_ascii_graphic());
    let pin_ok = info
        .pin
        .as_deref()
        .is_none_or(|p| gsv_transport::tls::parse_pin(p).is_ok());
    url_ok && pin_ok && (32..=256).contains(&info.secret.len())
}

/// Dials `replica`'s link in the background when it has one and none is open.
pub(crate) fn want(cluster: &std::sync::Arc<super::Cluster>, replica: &str) {
    if let Some(info) = cluster.links.should_dial(replica) {
        tokio::spawn(dial::run(
            std::sync::Arc::clone(cluster),
            replica.to_owned(),
            info,
        ));
    }
}

/// A new link's sending side, on `sink`.
fn peer<S>(links: &Links, sink: S) -> Peer
where
    S: Sink<Message, Error = tungstenite::Error> + Send + 'static,
{
    let id = links.next_id.fetch_add(1, Ordering::Relaxed);
    Peer {
        wire: Arc::new(Wire {
            sink: tokio::sync::Mutex::new(Box::pin(sink)),
            sending: AtomicUsize::new(0),
            dead: CancellationToken::new(),
        }),
        id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(url: &str) -> LinkInfo {
        LinkInfo {
            url: url.into(),
            pin: None,
            secret: wire::random_hex(),
        }
    }

    #[test]
    fn only_links_that_can_be_dialled_are_kept() {
        let links = Links::default();
        links.heard("a", Some(info("ws://127.0.0.2:4000/v1/replica")));
        assert!(links.known.contains_key("a"));
        for bad in [
            info("http://127.0.0.2/v1/replica"),
            info("ws://host with space/"),
            LinkInfo {
                secret: "short".into(),
                ..info("ws://127.0.0.2:1/v1/replica")
            },
            LinkInfo {
                pin: Some("not a pin".into()),
                ..info("wss://127.0.0.2:1/v1/replica")
            },
        ] {
            links.heard("b", Some(bad.clone()));
            assert!(!links.known.contains_key("b"), "{bad:?}");
        }
        // A replica that stops offering a link is forgotten.
        links.heard("a", None);
        assert!(!links.known.contains_key("a"));
    }

    /// A sink whose peer stopped reading: nothing is ever written.
    struct Stalled;

    impl Sink<Message> for Stalled {
        type Error = tungstenite::Error;
        fn poll_ready(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Pending
        }
        fn start_send(self: Pin<&mut Self>, _: Message) -> Result<(), Self::Error> {
            Ok(())
        }
        fn poll_flush(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Pending
        }
        fn poll_close(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    fn holder_word(key: &str) -> Outgoing {
        Outgoing {
            msg: wire::LinkMsg::Holder {
                key: key.into(),
                holder: crate::cluster::call_book::Holder {
                    holder: "a".into(),
                    dispatch: None,
                },
            },
            fallback: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_link_that_stalls_gives_the_message_back_and_is_not_used_again() {
        let links = Links::default();
        let peer = peer(&links, Stalled);
        let started = tokio::time::Instant::now();
        assert!(
            peer.send(holder_word("k1")).await.is_err(),
            "a stalled write is given back"
        );
        assert!(started.elapsed() >= STALL);
        assert!(peer.dead());
        // Later messages are given back at once, for NATS.
        let again = tokio::time::Instant::now();
        assert!(peer.send(holder_word("k2")).await.is_err());
        assert_eq!(again.elapsed(), Duration::ZERO);
    }

    /// A sink that keeps what is flushed through it.
    #[derive(Clone, Default)]
    struct Kept {
        fed: Arc<std::sync::Mutex<Vec<String>>>,
        flushed: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl Sink<Message> for Kept {
        type Error = tungstenite::Error;
        fn poll_ready(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn start_send(self: Pin<&mut Self>, m: Message) -> Result<(), Self::Error> {
            if let (Message::Text(t), Ok(mut fed)) = (m, self.fed.lock()) {
                fed.push(t.as_str().to_owned());
            }
            Ok(())
        }
        fn poll_flush(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            if let (Ok(mut fed), Ok(mut flushed)) = (self.fed.lock(), self.flushed.lock()) {
                flushed.append(&mut fed);
            }
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_close(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// How many frames `kept` flushed, once it flushed any (waiting up to 2 s).
    async fn flushed_soon(kept: &Kept) -> usize {
        for _ in 0..200 {
            let flushed = kept.flushed.lock().expect("lock").len();
            if flushed > 0 {
                return flushed;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        0
    }

    #[tokio::test]
    async fn every_message_sent_is_flushed_whole_and_in_its_senders_order() {
        let links = Links::default();
        let kept = Kept::default();
        let peer = peer(&links, kept.clone());
        let senders: Vec<_> = (0..8)
            .map(|s| {
                let peer = peer.clone();
                tokio::spawn(async move {
                    for i in 0..50 {
                        assert!(peer.send(holder_word(&format!("s{s}-{i}"))).await.is_ok());
                    }
                })
            })
            .collect();
        for s in senders {
            s.await.expect("sender");
        }
        let flushed = kept.flushed.lock().expect("lock").clone();
        assert_eq!(flushed.len(), 400, "everything sent is flushed");
        assert!(kept.fed.lock().expect("lock").is_empty());
        for s in 0..8 {
            let order: Vec<usize> = flushed
                .iter()
                .filter_map(|f| {
                    let key = format!("\"s{s}-");
                    let at = f.find(&key)? + key.len();
                    f[at..].split('"').next()?.parse().ok()
                })
                .collect();
            assert_eq!(order, (0..50).collect::<Vec<_>>(), "sender {s}");
        }
        assert!(!peer.dead());
    }

    /// A sink whose flushes wait for a gate to open (a peer slow to read).
    #[derive(Clone, Default)]
    struct Gated {
        open: Arc<std::sync::atomic::AtomicBool>,
        waker: Arc<std::sync::Mutex<Option<std::task::Waker>>>,
        kept: Kept,
    }

    impl Gated {
        fn open(&self) {
            self.open.store(true, Ordering::SeqCst);
            if let Some(w) = self.waker.lock().expect("lock").take() {
                w.wake();
            }
        }
    }

    impl Sink<Message> for Gated {
        type Error = tungstenite::Error;
        fn poll_ready(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn start_send(self: Pin<&mut Self>, m: Message) -> Result<(), Self::Error> {
            let mut kept = self.kept.clone();
            Pin::new(&mut kept).start_send(m)
        }
        fn poll_flush(
            self: Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            if !self.open.load(Ordering::SeqCst) {
                *self.waker.lock().expect("lock") = Some(cx.waker().clone());
                return std::task::Poll::Pending;
            }
            let mut kept = self.kept.clone();
            Pin::new(&mut kept).poll_flush(cx)
        }
        fn poll_close(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_flush_its_sender_gave_up_half_way_still_happens() {
        let links = Links::default();
        let gated = Gated::default();
        let peer = peer(&links, gated.clone());
        // The sender's flush waits on a slow peer; its caller goes away meanwhile.
        let sending = tokio::spawn({
            let peer = peer.clone();
            async move { peer.send(holder_word("k1")).await.is_ok() }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        sending.abort();
        let _ = sending.await;
        assert!(gated.kept.flushed.lock().expect("lock").is_empty());
        // The peer reads again: the frame goes out all the same.
        gated.open();
        assert_eq!(
            flushed_soon(&gated.kept).await,
            1,
            "the frame fed before its sender went away was flushed"
        );
        assert!(!peer.dead());
    }

    #[tokio::test]
    async fn the_last_sender_in_line_going_away_flushes_what_the_others_fed() {
        let links = Links::default();
        let kept = Kept::default();
        let peer = peer(&links, kept.clone());
        // X feeds while Y waits its turn: X leaves the flush to Y.
        let mut x = Turn::take(&peer.wire);
        let y = Turn::take(&peer.wire);
        peer.wire
            .sink
            .lock()
            .await
            .feed(Message::text("x"))
            .await
            .expect("feed");
        assert!(!x.leave(), "X is not the last: Y flushes");
        // Y goes away before its turn: X's frame is flushed all the same.
        drop(y);
        assert_eq!(flushed_soon(&kept).await, 1);
    }

    #[test]
    fn a_replica_is_dialled_again_only_after_a_pause() {
        let links = Links::default();
        assert!(links.should_dial("a").is_none(), "unknown: not dialled");
        links.heard("a", Some(info("ws://127.0.0.2:4000/v1/replica")));
        assert!(links.should_dial("a").is_some());
        assert!(links.should_dial("a").is_none(), "dialled just now");
    }
}
