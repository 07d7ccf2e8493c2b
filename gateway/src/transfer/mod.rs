//! File transfers (`gsv cp`, `transfer.*`): the gateway checks and opens them, then
//! relays their chunks and credits without looking at the bytes.
//!
//! A transfer is a [`Route`] between one node connection and its far end, found by the
//! id the gateway gave it: an agent connection ([`agent`]: a put or a get), or the
//! other leg of a node → node copy that the gateway itself drives ([`copy`]). A chunk
//! or event is relayed only from the side that sends in that direction, on the
//! connection that opened it, so no other connection can write into or read from a
//! transfer. The flow is the receiver's business (credits of at most
//! [`WINDOW_BYTES`]): the gateway holds no more than what its bounded send queues
//! already allow, and a peer that does not read is closed like any other. A transfer
//! nobody moves for [`crate::config::DEFAULT_TRANSFER_IDLE`] is ended ([`idle`]). Each transfer ends in one audit row.

mod agent;
mod approval;
mod copy;
mod ending;
mod error;
mod grant;
mod idle;
mod relay;
mod tree;
mod tree_top;
pub mod uploads;

pub use agent::request;
pub use copy::{copy, Requester};
pub use error::TransferError;
pub use grant::{GRANT_LIFE, MAX_GRANTS_PER_CONN};
pub use idle::sweep;
pub use relay::{agent_gone, from_agent, from_node, lane_gone, node_event, node_gone};
pub use uploads::Uploads;

use crate::agent_handle::AgentHandle;
use crate::registry::NodeHandle;
use dashmap::DashMap;
use gsv_protocol::transfer::{Direction, OpenResult, WINDOW_BYTES};
use gsv_protocol::Method;
use serde::Serialize;
use serde_json::value::RawValue;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Transfers one token runs at once (a node → node copy counts once).
pub const MAX_PER_TOKEN: usize = 4;
/// Transfers one node takes part in at once (through this gateway): with one window
/// each, they hold at most half of its connection's send queue.
pub const MAX_PER_NODE: usize = 4;
/// Of those, the most one token may hold: half, so no token takes a node's whole
/// transfer capacity.
pub const MAX_PER_TOKEN_ON_NODE: usize = MAX_PER_NODE / 2;
/// How long a node may take to open or cancel a transfer.
const NODE_ANSWER: Duration = Duration::from_secs(30);
/// How long a node may take to check and place a received file (its last writes
/// reach the disk here).
const FINISH_ANSWER: Duration = Duration::from_secs(300);

/// The open transfers of the gateway.
#[derive(Default)]
pub struct Transfers {
    routes: DashMap<uuid::Uuid, Arc<Route>>,
    /// Makes the limit check and the insert of a new transfer one step.
    admit: std::sync::Mutex<()>,
    /// Approved directory copies: their files need no approval of their own.
    grants: grant::Grants,
}

/// Whose a transfer is: the token it counts against and is audited for.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    pub name: String,
    pub token_id: String,
}

/// Where a transfer's node sends its chunks and events, and where the node's chunks
/// and credits come from.
pub(crate) enum Far {
    /// An agent connection (`transfer.open`).
    Agent(Arc<AgentHandle>),
    /// The other leg of a node → node copy, driven by the gateway.
    Leg(Leg),
}

/// One leg of a node → node copy: its peer leg and the copy's driver.
pub(crate) struct Leg {
    /// The other leg's transfer id: a get's chunks go to it, a put's credits to it.
    peer: uuid::Uuid,
    /// The copy's driver hears how its legs end.
    events: mpsc::UnboundedSender<LegEvent>,
    /// The agent connection that asked for the copy, if one did (the copy ends with
    /// it).
    conn: Option<String>,
}

/// What a copy's driver hears from its legs.
#[derive(Debug)]
pub(crate) enum LegEvent {
    /// The put leg's node wrote `bytes` more.
    Credited(u64),
    /// The get leg's node sent its last byte; the whole file's SHA-256.
    Sent { sha256: String },
    /// A leg ended on an error.
    Failed(gsv_protocol::ErrorShape),
}

/// One open transfer: who is at each end.
pub struct Route {
    pub id: uuid::Uuid,
    pub direction: Direction,
    owner: Owner,
    pub node: Arc<NodeHandle>,
    far: Far,
    /// The file on the node, resolved (set when the node answers the open).
    path: std::sync::OnceLock<String>,
    /// The file as the agent named it, until then.
    asked: String,
    started: Instant,
    /// Bytes relayed so far.
    bytes: AtomicU64,
    /// Bytes relayed toward the receiver and not yet credited back.
    in_flight: Window,
    /// When a chunk, credit or event of it last passed (ms after `started`).
    seen: AtomicU64,
    /// The gateway waits on the node (it places a received file): not idle.
    waiting: AtomicBool,
    /// The node's bulk lane (its connection id and queue) this put's chunks go on,
    /// when the node's open answer asked for it and the lane was joined.
    lane: std::sync::OnceLock<(String, gsv_transport::Outbound)>,
}

/// A transfer's bytes in flight: never over [`WINDOW_BYTES`], or the transfer ends.
#[derive(Default)]
struct Window(AtomicU64);

impl Window {
    /// Counts a chunk of `len` bytes about to be relayed; `false` (relay nothing) when
    /// it would put the sender over its window.
    fn take(&self, len: u64) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| {
                (f.saturating_add(len) <= WINDOW_BYTES).then_some(f + len)
            })
            .is_ok()
    }

    /// The receiver credited `bytes` back.
    fn give(&self, bytes: u64) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| {
                Some(f.saturating_sub(bytes))
            });
    }
}

impl Route {
    fn new(
        id: uuid::Uuid,
        direction: Direction,
        owner: Owner,
        node: Arc<NodeHandle>,
        far: Far,
        asked: String,
    ) -> Route {
        if let (Far::Agent(agent), Direction::Put) = (&far, direction) {
            agent.uploads.begin();
        }
        Route {
            id,
            direction,
            owner,
            node,
            far,
            path: std::sync::OnceLock::new(),
            asked,
            started: Instant::now(),
            bytes: AtomicU64::new(0),
            in_flight: Window::default(),
            seen: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            lane: std::sync::OnceLock::new(),
        }
    }

    /// Takes the node's answer to `transfer.open`: the resolved path and, when the node
    /// moves this transfer's chunks on its bulk lane, that lane for a put's chunks (a
    /// lane gone meanwhile leaves them on the node's connection, which the node reads
    /// chunks from as well). The lane is the node's business: the answer passed on
    /// says nothing of it.
    fn opened(&self, mut answer: OpenResult) -> OpenResult {
        let _ = self.path.set(answer.path.clone());
        if answer.lane && self.direction == Direction::Put {
            if let Some(lane) = self.node.lane() {
                let _ = self.lane.set(lane);
            }
        }
        answer.lane = false;
        answer
    }

    /// Where this transfer's chunks to its node go: its bulk lane, or the connection.
    fn chunks_out(&self) -> &gsv_transport::Outbound {
        self.lane.get().map_or(&self.node.out, |(_, out)| out)
    }

    /// Whether its chunks go on bulk lane `conn_id`.
    fn on_lane(&self, conn_id: &str) -> bool {
        self.lane.get().is_some_and(|(id, _)| id == conn_id)
    }

    /// The file tool this transfer stands for (policy, audit).
    fn tool(&self) -> &'static str {
        tool_of(self.direction)
    }

    /// The file on the node: resolved once the node opened it, else as asked.
    pub fn path(&self) -> &str {
        self.path.get().map_or(self.asked.as_str(), String::as_str)
    }

    /// Something of this transfer passed now.
    fn touch(&self) {
        self.seen
            .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// How long nothing of this transfer passed.
    fn idle_for(&self) -> Duration {
        let seen = Duration::from_millis(self.seen.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(seen)
    }

    /// The agent connection this transfer ends with, if any.
    fn conn_id(&self) -> Option<&str> {
        match &self.far {
            Far::Agent(a) => Some(a.conn_id.as_str()),
            Far::Leg(l) => l.conn.as_deref(),
        }
    }

    /// Whether it counts against its token's [`MAX_PER_TOKEN`]: a copy's put leg
    /// does not (the copy counts once, by its get leg).
    fn counts_for_token(&self) -> bool {
        !matches!(self.far, Far::Leg(_)) || self.direction == Direction::Get
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if let (Far::Agent(agent), Direction::Put) = (&self.far, self.direction) {
            agent.uploads.end();
        }
    }
}

/// What a copy's side does, for a policy's `class:` entries: a listing or a get
/// reads files (`Read`), a put or a placing writes them (`Write`).
fn capability_of(tool: &str) -> gsv_protocol::capability::Capability {
    use gsv_protocol::capability::Capability;
    if tool == "Read" {
        Capability::FilesystemRead
    } else {
        Capability::FilesystemWrite
    }
}

fn tool_of(direction: Direction) -> &'static str {
    match direction {
        Direction::Get => "Read",
        Direction::Put => "Write",
    }
}

impl Transfers {
    /// The route of transfer `id` if `agent` opened it.
    fn of_agent(&self, id: uuid::Uuid, agent: &AgentHandle) -> Option<Arc<Route>> {
        self.routes
            .get(&id)
            .map(|r| r.clone())
            .filter(|r| matches!(&r.far, Far::Agent(a) if a.conn_id == agent.conn_id))
    }

    /// The route of transfer `id`, whoever's.
    fn get(&self, id: uuid::Uuid) -> Option<Arc<Route>> {
        self.routes.get(&id).map(|r| r.clone())
    }

    /// Registers `new` (one transfer, or the two legs of a copy) if its token and its
    /// nodes stay under their limits; the counting and the insert are one step, so
    /// racing opens cannot pass together.
    fn admit(&self, new: &[Arc<Route>]) -> Result<(), TransferError> {
        let _admit = self.admit.lock().unwrap_or_else(|p| p.into_inner());
        let Some(first) = new.first() else {
            return Ok(());
        };
        let token_id = &first.owner.token_id;
        let mine = self
            .routes
            .iter()
            .filter(|r| &r.owner.token_id == token_id && r.counts_for_token())
            .count()
            + new.iter().filter(|r| r.counts_for_token()).count();
        if mine > MAX_PER_TOKEN {
            return Err(TransferError::TooMany {
                per_token: MAX_PER_TOKEN,
            });
        }
        for route in new {
            let node = &route.node.id;
            let (mut on_node, mut mine_on_node) = (0, 0);
            for r in self
                .routes
                .iter()
                .map(|r| r.clone())
                .chain(new.iter().cloned())
            {
                if &r.node.id == node {
                    on_node += 1;
                    mine_on_node += usize::from(&r.owner.token_id == token_id);
                }
            }
            if on_node > MAX_PER_NODE {
                return Err(TransferError::NodeBusy {
                    node: node.to_string(),
                    per_node: MAX_PER_NODE,
                });
            }
            if mine_on_node > MAX_PER_TOKEN_ON_NODE {
                return Err(TransferError::TokenBusyOnNode {
                    node: node.to_string(),
                    per_token: MAX_PER_TOKEN_ON_NODE,
                });
            }
        }
        for route in new {
            route.touch();
            self.routes.insert(route.id, route.clone());
        }
        Ok(())
    }

    /// Transfers open now.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// Sends `method` to `node` and waits (at most `limit`) for its answer.
async fn ask_node<P: Serialize>(
    node: &NodeHandle,
    method: Method,
    params: &P,
    limit: Duration,
) -> Result<Box<RawValue>, TransferError> {
    use crate::registry::AskError;
    node.ask(method, params, limit).await.map_err(|e| match e {
        AskError::Busy { node } => TransferError::Busy { node },
        AskError::Gone { node } => TransferError::Disconnected { node },
        AskError::Timeout { node } => TransferError::Timeout { node },
        AskError::Refused { shape, .. } => TransferError::Node(shape),
    })
}

/// Decodes a node's answer.
fn decode<T: serde::de::DeserializeOwned>(raw: &RawValue) -> Result<T, TransferError> {
    serde_json::from_str(raw.get()).map_err(|e| {
        TransferError::Node(gsv_protocol::ErrorShape::new(
            gsv_protocol::ErrorCode::Internal,
            format!("the node's transfer answer does not decode: {e}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{Window, WINDOW_BYTES};

    #[test]
    fn a_sender_gets_one_window_ahead_and_no_more() {
        let w = Window::default();
        let chunk = gsv_protocol::transfer::CHUNK_BYTES as u64;
        for _ in 0..WINDOW_BYTES / chunk {
            assert!(w.take(chunk));
        }
        assert!(!w.take(1), "over the window");
        w.give(chunk);
        assert!(w.take(chunk), "a credit makes room again");
        assert!(!w.take(1));
        w.give(u64::MAX);
        assert!(
            w.take(WINDOW_BYTES),
            "credits never go below zero in flight"
        );
    }
}
