//! The node's bulk lane: a second connection to the gateway that carries only the
//! chunks of this connection's transfers, read and written on a thread of its own
//! below the node's other work (`connect.lane`, docs/protocol.md).
//!
//! On one connection a call's request waited behind an upload's chunks in the
//! gateway's and the node's readers, at the same priority; with the bytes on their own
//! connection and threads, a call is served first at both ends. The lane is dialled
//! when a transfer opens (nothing for a node that never copies a file), ends with the
//! connection it belongs to or after [`IDLE`] without a transfer on it, and a gateway
//! that refuses it (an older one, a replica that does not hold this node) leaves the
//! transfers on the connection, asked again only after [`RETRY_AFTER`].

use crate::state::NodeState;
use gsv_protocol::handshake::{LaneKind, LaneParams};
use gsv_transport::tungstenite::Bytes;
use gsv_transport::{Driver, Event, Paired};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// A lane with no transfer on it for this long is closed.
pub const IDLE: Duration = Duration::from_secs(60);
/// After a lane could not be opened, transfers use the connection for this long.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);
/// Chunks queued for the lane's socket.
const QUEUE_CHUNKS: usize = 16;
/// How long an ended lane may take to send what it queued and close.
const FINISH: Duration = Duration::from_secs(1);

/// Where the connection the lane belongs to was dialled.
#[derive(Clone)]
pub(crate) struct LaneDial {
    pub url: String,
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// What the lane does with a chunk it reads (hands it to its transfer).
pub(crate) type Deliver = Arc<dyn Fn(Bytes) + Send + Sync>;

/// The lane of one connection to the gateway.
pub(crate) struct Lane {
    dial: Option<LaneDial>,
    node: Arc<NodeState>,
    deliver: Deliver,
    state: tokio::sync::Mutex<State>,
    /// Cancelled when the connection (and so this) ends.
    ended: CancellationToken,
}

#[derive(Default)]
struct State {
    open: Option<Open>,
    refused_at: Option<Instant>,
}

/// An open lane.
#[derive(Clone)]
struct Open {
    binary: mpsc::Sender<Vec<u8>>,
    closed: CancellationToken,
    users: Arc<AtomicUsize>,
}

/// One transfer's hold on the lane: where its chunks go, and whether the lane ended.
/// While any is held, the lane is not idle.
pub(crate) struct LaneUse {
    pub binary: mpsc::Sender<Vec<u8>>,
    pub closed: CancellationToken,
    users: Arc<AtomicUsize>,
}

impl Drop for LaneUse {
    fn drop(&mut self) {
        self.users.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Open {
    fn hold(&self) -> LaneUse {
        self.users.fetch_add(1, Ordering::AcqRel);
        LaneUse {
            binary: self.binary.clone(),
            closed: self.closed.clone(),
            users: Arc::clone(&self.users),
        }
    }
}

impl Lane {
    pub fn new(node: Arc<NodeState>, dial: Option<LaneDial>, deliver: Deliver) -> Lane {
        Lane {
            dial,
            node,
            deliver,
            state: tokio::sync::Mutex::new(State::default()),
            ended: CancellationToken::new(),
        }
    }

    /// The lane for one more transfer, opened now if it is not; `None`: the transfer
    /// uses the connection.
    pub async fn hold(&self) -> Option<LaneUse> {
        let dial = self.dial.as_ref()?;
        let mut state = self.state.lock().await;
        if let Some(open) = state.open.as_ref().filter(|o| !o.closed.is_cancelled()) {
            return Some(open.hold());
        }
        if state
            .refused_at
            .is_some_and(|at| at.elapsed() < RETRY_AFTER)
        {
            return None;
        }
        let limit = self.node.config.connect_timeout;
        let opened = tokio::time::timeout(limit, self.open(dial.clone())).await;
        match opened {
            Ok(Ok(open)) => {
                let held = open.hold();
                state.open = Some(open);
                state.refused_at = None;
                Some(held)
            }
            Ok(Err(why)) => {
                warn!(%why, "no bulk lane: transfers share the connection with calls");
                state.refused_at = Some(Instant::now());
                None
            }
            Err(_) => {
                warn!("no bulk lane within the connect timeout: transfers share the connection with calls");
                state.refused_at = Some(Instant::now());
                None
            }
        }
    }

    /// Dials the lane on a thread of its own (below the node's other work) and waits
    /// for the gateway's `hello-ok`.
    async fn open(&self, dial: LaneDial) -> Result<Open, String> {
        let (ready, answer) = oneshot::channel();
        let node = Arc::clone(&self.node);
        let deliver = Arc::clone(&self.deliver);
        let ended = self.ended.child_token();
        std::thread::Builder::new()
            .name("gsv-lane".into())
            .spawn(move || {
                gsv_transport::priority::lower_this_thread();
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(format!("lane runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(serve(node, dial, deliver, ended, ready));
            })
            .map_err(|e| format!("lane thread: {e}"))?;
        answer
            .await
            .map_err(|_| "the lane's thread ended".to_owned())?
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

/// The lane's thread: dial, handshake, then read chunks and write the queued ones
/// until the connection ends, the lane is idle for [`IDLE`], or it breaks.
async fn serve(
    node: Arc<NodeState>,
    dial: LaneDial,
    deliver: Deliver,
    closed: CancellationToken,
    ready: oneshot::Sender<Result<Open, String>>,
) {
    let tls = dial.tls.filter(|_| dial.url.starts_with("wss://"));
    let mut ws = match gsv_transport::dial(&dial.url, tls, node.config.connect_timeout).await {
        Ok(ws) => ws,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    let params = |nonce| {
        node.lane_params(
            nonce,
            LaneParams {
                kind: LaneKind::Bulk,
                instance: Some(node.instance.clone()),
            },
        )
    };
    if let Err(e) = gsv_transport::handshake(&mut ws, params).await {
        let _ = ready.send(Err(e.to_string()));
        return;
    }
    let (binary, chunks) = mpsc::channel::<Vec<u8>>(QUEUE_CHUNKS);
    // Nothing but chunks goes on a lane: the text side stays open and empty.
    let (_text, no_text) = mpsc::channel::<String>(1);
    let users = Arc::new(AtomicUsize::new(0));
    let open = Open {
        binary,
        closed: closed.clone(),
        users: Arc::clone(&users),
    };
    if ready.send(Ok(open)).is_err() {
        return;
    }
    info!("bulk lane open");
    let mut driver = Driver::new(
        ws,
        Paired {
            text: no_text,
            binary: chunks,
        },
        node.config.heartbeat,
    );
    let mut idle_since = Instant::now();
    let mut check = tokio::time::interval(IDLE / 6);
    let why = loop {
        tokio::select! {
            _ = closed.cancelled() => break "the connection ended",
            _ = check.tick() => {
                if users.load(Ordering::Acquire) > 0 {
                    idle_since = Instant::now();
                } else if idle_since.elapsed() >= IDLE {
                    break "idle";
                }
            }
            event = driver.next() => match event {
                Event::Binary(frame) => (deliver)(frame),
                Event::Text(_) => debug!("text frame on the bulk lane ignored"),
                Event::Silent => break "the gateway went silent",
                Event::TooLarge { .. } => break "a frame over the limit",
                Event::Close(_) | Event::Ended | Event::WriteFailed(_) | Event::ReadFailed(_) => {
                    break "the gateway closed it"
                }
            },
        }
    };
    closed.cancel();
    info!(why, "bulk lane closed");
    driver.finish(FINISH).await;
}
