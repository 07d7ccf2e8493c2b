//! File transfers (`gsv cp`, `transfer.*`): the gateway checks and opens them, then
//! relays their chunks and credits between the agent and the node without looking at
//! the bytes.
//!
//! A transfer is a [`Route`] between one agent connection and one node connection,
//! found by the id the gateway gave it; a chunk or event is relayed only from the side
//! that sends in that direction, on the connection that opened it, so no other
//! connection can write into or read from a transfer. The flow is the node's and the
//! agent's business (credits of at most [`WINDOW_BYTES`]): the gateway holds no more
//! than what its bounded send queues already allow, and a peer that does not read is
//! closed like any other. Each transfer ends in one audit row.

mod error;
mod relay;
mod tree;

pub use error::TransferError;
pub use relay::{agent_gone, from_agent, from_node, node_event, node_gone};

use crate::audit::AuditEvent;
use crate::error::WireError;
use crate::policy::Decision;
use crate::registry::NodeHandle;
use crate::state::{AgentHandle, Shared};
use dashmap::DashMap;
use gsv_protocol::frame::{encode_err, encode_ok, encode_req};
use gsv_protocol::names::{NamespacedName, NodeId};
use gsv_protocol::transfer::{
    AgentOpenParams, CancelParams, Credit, Direction, FinishParams, Finished, OpenParams,
    OpenResult, WINDOW_BYTES,
};
use gsv_protocol::{EventName, Method};
use serde::Serialize;
use serde_json::value::RawValue;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Transfers one token runs at once.
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
}

/// One open transfer: who is at each end.
pub struct Route {
    pub id: uuid::Uuid,
    pub direction: Direction,
    pub agent: Arc<AgentHandle>,
    pub node: Arc<NodeHandle>,
    /// The file on the node, resolved (set when the node answers the open).
    path: std::sync::OnceLock<String>,
    /// The file as the agent named it, until then.
    asked: String,
    started: Instant,
    /// Bytes relayed so far.
    bytes: AtomicU64,
    /// Bytes relayed toward the receiver and not yet credited back.
    in_flight: Window,
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
    /// The file tool this transfer stands for (policy, audit).
    fn tool(&self) -> &'static str {
        tool_of(self.direction)
    }

    /// The file on the node: resolved once the node opened it, else as asked.
    pub fn path(&self) -> &str {
        self.path.get().map_or(self.asked.as_str(), String::as_str)
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
            .filter(|r| r.agent.conn_id == agent.conn_id)
    }

    /// Registers `route` if its token and its node are under their limits; the
    /// counting and the insert are one step, so racing opens cannot pass together.
    fn admit(&self, route: Arc<Route>) -> Result<(), TransferError> {
        let _admit = self.admit.lock().unwrap_or_else(|p| p.into_inner());
        let token_id = &route.agent.token_id;
        let (mut mine, mut on_node, mut mine_on_node) = (0, 0, 0);
        for r in self.routes.iter() {
            let same_token = &r.agent.token_id == token_id;
            let same_node = r.node.id == route.node.id;
            mine += usize::from(same_token);
            on_node += usize::from(same_node);
            mine_on_node += usize::from(same_token && same_node);
        }
        let node = || route.node.id.to_string();
        if mine >= MAX_PER_TOKEN {
            return Err(TransferError::TooMany {
                per_token: MAX_PER_TOKEN,
            });
        }
        if on_node >= MAX_PER_NODE {
            return Err(TransferError::NodeBusy {
                node: node(),
                per_node: MAX_PER_NODE,
            });
        }
        if mine_on_node >= MAX_PER_TOKEN_ON_NODE {
            return Err(TransferError::TokenBusyOnNode {
                node: node(),
                per_token: MAX_PER_TOKEN_ON_NODE,
            });
        }
        self.routes.insert(route.id, route);
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

/// Handles a `transfer.*` request from `agent` (answered on its connection).
pub fn request(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    id: String,
    method: Method,
    params: Option<Box<RawValue>>,
) {
    let shared = shared.clone();
    let agent = agent.clone();
    tokio::spawn(async move {
        let raw = params.as_deref().map(RawValue::get).unwrap_or("{}");
        let frame = match method {
            Method::TransferOpen => answer(&id, open(&shared, &agent, raw).await),
            Method::TransferFinish => answer(&id, finish(&shared, &agent, raw).await),
            Method::TransferCancel => answer(&id, cancel(&shared, &agent, raw).await),
            Method::TransferList => answer(&id, tree::list(&shared, &agent, raw).await),
            Method::TransferPlace => answer(&id, tree::place(&shared, &agent, raw).await),
            _ => answer(&id, credit(&shared, &agent, raw)),
        };
        let _ = agent.out.send(frame);
    });
}

fn answer<T: Serialize>(id: &str, result: Result<T, TransferError>) -> String {
    match result {
        Ok(r) => encode_ok(id, &r),
        Err(e) => encode_err(id, &e.to_shape()),
    }
}

fn parse<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T, TransferError> {
    serde_json::from_str(raw).map_err(TransferError::BadParams)
}

/// `transfer.open`: the policy, the node, then the node's own checks.
async fn open(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<OpenResult, TransferError> {
    let p: AgentOpenParams = parse(raw)?;
    let node_id = NodeId::parse(&p.node).map_err(|_| TransferError::BadNode(p.node.clone()))?;
    let tool = tool_of(p.direction);
    let name = NamespacedName::join(node_id.as_str(), tool);
    let refused = match agent.policy.decide(&name) {
        Decision::Allow => None,
        Decision::Confirm => Some(TransferError::NeedsApproval { name }),
        Decision::Deny => Some(TransferError::Denied { name }),
    };
    if let Some(e) = refused {
        // Refused by the policy, like a call outside it: logged and on the record.
        tracing::warn!(agent = %agent.name, node = %node_id, tool, path = ?p.path, "transfer refused by the token's policy");
        shared.audit.record(AuditEvent::Transfer {
            agent: &agent.name,
            token_id: &agent.token_id,
            node: node_id.as_str(),
            tool,
            path: &p.path,
            bytes: 0,
            sha256: None,
            outcome: e.code().as_str(),
            duration_ms: 0,
        });
        return Err(e);
    }
    let node = shared
        .registry
        .get(node_id.as_str())
        .filter(|n| !n.out.is_closed())
        .ok_or_else(|| TransferError::NodeOffline {
            node: p.node.clone(),
        })?;
    if shared.registry.tool(&node, tool).is_none() {
        return Err(TransferError::NoTool {
            node: p.node.clone(),
            tool,
        });
    }
    let id = uuid::Uuid::new_v4();
    // Registered before the node is asked: a node sends a `get`'s first chunks as
    // soon as it has opened the file, and they may arrive before its answer is read.
    let route = Arc::new(Route {
        id,
        direction: p.direction,
        agent: agent.clone(),
        node: node.clone(),
        path: std::sync::OnceLock::new(),
        asked: p.path.clone(),
        started: Instant::now(),
        bytes: AtomicU64::new(0),
        in_flight: Window::default(),
    });
    shared.transfers.admit(route.clone())?;
    let params = OpenParams {
        id,
        direction: p.direction,
        path: p.path,
        meta: p.meta,
        sha256: p.sha256,
        offset: p.offset,
    };
    let opened = ask_node(&node, Method::TransferOpen, &params, NODE_ANSWER)
        .await
        .and_then(|raw| {
            serde_json::from_str::<OpenResult>(raw.get())
                .map_err(|e| TransferError::Node(malformed(&e)))
        });
    let opened = match opened {
        Ok(o) => o,
        Err(e) => {
            shared.transfers.routes.remove(&id);
            return Err(e);
        }
    };
    let _ = route.path.set(opened.path.clone());
    // The agent may have gone while the node opened it.
    if agent.out.is_closed() {
        relay::agent_gone(shared, &agent.conn_id);
    }
    tracing::info!(
        transfer = %id,
        agent = %agent.name,
        node = %route.node.id,
        tool = route.tool(),
        path = ?route.path(),
        "transfer opened"
    );
    Ok(opened)
}

/// `transfer.finish` (a put): the node checks and places the file.
async fn finish(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<Finished, TransferError> {
    let p: FinishParams = parse(raw)?;
    let route = shared
        .transfers
        .of_agent(p.id, agent)
        .ok_or(TransferError::Unknown { id: p.id })?;
    if route.direction != Direction::Put {
        return Err(TransferError::NotAPut {
            what: "transfer.finish",
        });
    }
    let outcome = ask_node(&route.node, Method::TransferFinish, &p, FINISH_ANSWER).await;
    let done = outcome.and_then(|raw| {
        serde_json::from_str::<Finished>(raw.get()).map_err(|e| TransferError::Node(malformed(&e)))
    });
    match &done {
        Ok(f) => end(shared, &route, "ok", Some(&f.sha256), Some(f.bytes)),
        Err(e) => end(shared, &route, e.code().as_str(), None, None),
    }
    done
}

/// `transfer.cancel`: ends the transfer on the node too.
async fn cancel(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<serde_json::Value, TransferError> {
    let p: CancelParams = parse(raw)?;
    let route = shared
        .transfers
        .of_agent(p.id, agent)
        .ok_or(TransferError::Unknown { id: p.id })?;
    end(shared, &route, "cancelled", None, None);
    ask_node(&route.node, Method::TransferCancel, &p, NODE_ANSWER).await?;
    Ok(serde_json::json!({}))
}

/// `transfer.credit` (a get): the agent wrote bytes; the node may send more.
fn credit(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<serde_json::Value, TransferError> {
    let p: Credit = parse(raw)?;
    let route = shared
        .transfers
        .of_agent(p.id, agent)
        .ok_or(TransferError::Unknown { id: p.id })?;
    if route.direction != Direction::Get {
        return Err(TransferError::NotAGet {
            what: "transfer.credit",
        });
    }
    let credit = Credit {
        id: p.id,
        bytes: p.bytes.min(WINDOW_BYTES),
    };
    route.in_flight.give(credit.bytes);
    let _ = route.node.out.send(gsv_protocol::frame::encode_event(
        EventName::TransferCredit,
        &credit,
        0,
    ));
    Ok(serde_json::json!({}))
}

/// Sends `method` to `node` and waits (at most `limit`) for its answer.
async fn ask_node<P: Serialize>(
    node: &NodeHandle,
    method: Method,
    params: &P,
    limit: Duration,
) -> Result<Box<RawValue>, TransferError> {
    let (call_id, rx) = node.begin_call().map_err(|_| TransferError::Busy {
        node: node.id.to_string(),
    })?;
    let gone = || TransferError::Disconnected {
        node: node.id.to_string(),
    };
    if node
        .out
        .send(encode_req(&call_id.to_string(), method, params))
        .is_err()
    {
        node.abandon_call(call_id);
        return Err(gone());
    }
    match tokio::time::timeout(limit, rx).await {
        Ok(Ok(outcome)) => outcome.map_err(TransferError::Node),
        Ok(Err(_)) => Err(gone()),
        Err(_) => {
            node.abandon_call(call_id);
            Err(TransferError::Timeout {
                node: node.id.to_string(),
            })
        }
    }
}

fn malformed(e: &serde_json::Error) -> gsv_protocol::ErrorShape {
    gsv_protocol::ErrorShape::new(
        gsv_protocol::ErrorCode::Internal,
        format!("the node's transfer answer does not decode: {e}"),
    )
}

/// Ends `route` once (the first ending wins) and records it.
fn end(shared: &Shared, route: &Route, outcome: &str, sha256: Option<&str>, bytes: Option<u64>) {
    if shared.transfers.routes.remove(&route.id).is_none() {
        return;
    }
    let bytes = bytes.unwrap_or_else(|| route.bytes.load(Ordering::Relaxed));
    tracing::info!(transfer = %route.id, outcome, bytes, "transfer ended");
    shared.audit.record(AuditEvent::Transfer {
        agent: &route.agent.name,
        token_id: &route.agent.token_id,
        node: route.node.id.as_str(),
        tool: route.tool(),
        path: route.path(),
        bytes,
        sha256,
        outcome,
        duration_ms: route.started.elapsed().as_millis() as u64,
    });
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
