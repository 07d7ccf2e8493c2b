//! The node registry: who is connected, with which tools, and their pending calls.
//!
//! One entry per node id, replaced atomically when the same node connects again. Each
//! entry owns the pending calls of its own connection, so a result is matched by
//! (node, connection, call id): a result arriving on any other connection can never
//! complete a call it was not sent. Nodes that went away stay listed as offline with the
//! time they left, so a caller hears "offline since …" rather than "unknown".
//!
//! When a connection drops, its pending calls are not failed at once: their callers
//! are told the connection is gone (their receiver closes) and wait a grace period for
//! the same node process to come back (see `router`), then register the same call id
//! on the new connection and ask for the result again. [`Registry::arrivals`] wakes
//! them when any node connects.
//!
//! What a node offers that no operator accepted is kept per node id ([`unaccepted`]);
//! every list this registry gives agents, and [`Registry::tool`] on the call path,
//! leave out the tools it hides (`--pin-tools`).

mod ask;
pub mod call_ids;
mod error;
pub mod unaccepted;

pub use ask::AskError;
pub use error::Disconnected;
pub use unaccepted::{PendingOffer, Unaccepted};

use crate::toolset::{Interner, ToolSet, ToolSpec};
pub use call_ids::CallIds;
use dashmap::DashMap;
use gsv_protocol::method::{NodeSummary, ToolEntry};
use gsv_protocol::names::NamespacedName;
use gsv_protocol::offer::{NodeTool, UnacceptedOffer};
use gsv_protocol::tool_class::ToolClasses;
use gsv_protocol::{ErrorShape, HostRole, NodeId, Runtime};
use gsv_transport::tungstenite::protocol::frame::coding::CloseCode;
use gsv_transport::Outbound;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// What a pending call receives: the node's raw result, or an error.
pub type CallOutcome = Result<Box<RawValue>, ErrorShape>;

/// Where the `call.progress` events of one pending call go (bounded: when the caller
/// reads too slowly, progress is dropped, never the node's read loop blocked).
pub type ProgressSink = tokio::sync::mpsc::Sender<gsv_protocol::event::CallProgress>;

/// A connected node.
pub struct NodeHandle {
    pub id: NodeId,
    pub conn_id: String,
    /// The token this connection authenticated with (closed when it is revoked).
    pub token_id: String,
    pub out: Outbound,
    pub tools: Arc<ToolSet>,
    pub host_role: HostRole,
    pub runtime: Mutex<Runtime>,
    /// When this connection was accepted (ms since epoch).
    pub since: u64,
    pub remote: SocketAddr,
    /// The node process's random instance id (empty from nodes that send none): a
    /// call can be resumed on a new connection only of the same instance.
    pub instance: String,
    /// The node journals its calls (`NodeInfo.journal`): a restarted process of it still
    /// answers, on `resume`, for calls the previous one was sent.
    pub journal: bool,
    /// The gsv version the node reported (`client.version`, bounded; may be empty).
    pub version: String,
    calls: Mutex<Calls>,
    /// The gateway's call ids.
    call_ids: Arc<CallIds>,
    /// The node's bulk lane while one is joined: its connection id and send queue.
    lane: Mutex<Option<(String, Outbound)>>,
}

/// The calls of one connection: pending ones, and the ids of the last few the caller
/// gave up on (timed out, cancelled), whose late answers are expected and dropped
/// quietly instead of being counted as stray.
#[derive(Default)]
struct Calls {
    pending: HashMap<u64, Pending>,
    /// Pending calls by the caller's token id: no token may hold more than its share
    /// of a node's pending calls ([`MAX_PENDING_PER_TOKEN`] by default).
    by_token: HashMap<Arc<str>, usize>,
    /// Progress sinks of the pending calls whose caller wants progress.
    progress: HashMap<u64, ProgressSink>,
    abandoned: std::collections::VecDeque<u64>,
}

/// One pending call: where its outcome goes, and whose it is.
struct Pending {
    tx: oneshot::Sender<CallOutcome>,
    token: Option<Arc<str>>,
}

/// The default of the most calls one token may have pending on one node: half the
/// node's capacity, so another agent always has room (`--pending-calls-per-token`).
pub const MAX_PENDING_PER_TOKEN: usize = gsv_protocol::limits::MAX_PENDING_PER_NODE / 2;

impl Calls {
    /// Removes a pending call and its place in its token's share.
    fn take(&mut self, id: u64) -> Option<oneshot::Sender<CallOutcome>> {
        let p = self.pending.remove(&id)?;
        if let Some(t) = p.token {
            if let Some(n) = self.by_token.get_mut(&t) {
                *n -= 1;
                if *n == 0 {
                    self.by_token.remove(&t);
                }
            }
        }
        Some(p.tx)
    }
}

/// How many abandoned call ids a connection remembers.
const ABANDONED_MEMORY: usize = 256;

/// What became of a result a node sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// It completed a pending call.
    Delivered,
    /// Its call had been abandoned by the caller; dropped.
    Late,
    /// This connection was never sent such a call.
    Stray,
}

/// A caller's token and its share of a node's pending calls.
#[derive(Debug, Clone, Copy)]
pub struct TokenShare<'a> {
    pub token: &'a str,
    /// The most calls the token may have pending on the node.
    pub share: usize,
}

/// Why a call could not be registered as pending.
pub enum PendingError {
    /// The node already has the maximum number of calls pending.
    Full,
    /// The caller's token already holds its share.
    TokenShare,
    /// The connection closed.
    Closed,
    /// A call under this id is pending here already (an id given by a forwarding
    /// replica, which never gives one twice).
    Taken,
}

impl NodeHandle {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: NodeId,
        conn_id: String,
        token_id: String,
        out: Outbound,
        tools: Arc<ToolSet>,
        host_role: HostRole,
        runtime: Runtime,
        remote: SocketAddr,
        instance: String,
        journal: bool,
        version: String,
        call_ids: Arc<CallIds>,
    ) -> Self {
        NodeHandle {
            call_ids,
            id,
            conn_id,
            token_id,
            out,
            tools,
            host_role,
            runtime: Mutex::new(runtime),
            since: gsv_protocol::now_ms(),
            remote,
            instance,
            journal,
            version,
            calls: Mutex::new(Calls::default()),
            lane: Mutex::new(None),
        }
    }

    /// Joins bulk lane `conn_id` to this connection; a lane it had before is closed.
    pub fn join_lane(&self, conn_id: &str, out: Outbound) {
        let old = self
            .lane
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace((conn_id.to_owned(), out));
        if let Some((_, old)) = old {
            old.close_with(CloseCode::Normal, "replaced by a new bulk lane");
        }
    }

    /// Forgets lane `conn_id` if it is still the one joined (it ended).
    pub fn leave_lane(&self, conn_id: &str) {
        let mut lane = self.lane.lock().unwrap_or_else(|p| p.into_inner());
        if lane.as_ref().is_some_and(|(id, _)| id == conn_id) {
            *lane = None;
        }
    }

    /// The bulk lane (connection id, send queue), while one is joined and open.
    pub fn lane(&self) -> Option<(String, Outbound)> {
        let lane = self.lane.lock().unwrap_or_else(|p| p.into_inner());
        lane.as_ref().filter(|(_, out)| !out.is_closed()).cloned()
    }

    /// Closes the bulk lane with this connection (it ended).
    pub fn close_lane(&self) {
        if let Some((_, out)) = self.lane.lock().unwrap_or_else(|p| p.into_inner()).take() {
            out.close();
        }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new pending call on this connection; returns its id and receiver.
    pub fn begin_call(&self) -> Result<(u64, oneshot::Receiver<CallOutcome>), PendingError> {
        self.begin_call_with_progress(None, None)
    }

    /// [`NodeHandle::begin_call`] for the caller's token (counted against its share of
    /// the node's pending calls), with a sink for the call's `call.progress` events.
    pub fn begin_call_with_progress(
        &self,
        token: Option<TokenShare<'_>>,
        progress: Option<ProgressSink>,
    ) -> Result<(u64, oneshot::Receiver<CallOutcome>), PendingError> {
        let id = self.call_ids.next();
        let rx = self.resume_call(id, token, progress)?;
        Ok((id, rx))
    }

    /// Registers the call `id` (first sent on an earlier connection of this node) as
    /// pending on this one.
    pub fn resume_call(
        &self,
        id: u64,
        token: Option<TokenShare<'_>>,
        progress: Option<ProgressSink>,
    ) -> Result<oneshot::Receiver<CallOutcome>, PendingError> {
        self.register(id, token, progress, false)
    }

    /// [`NodeHandle::begin_call_with_progress`] under the id `id` a forwarding replica
    /// chose (cluster mode: ids are unique across replicas, [`CallIds::partition`]);
    /// an id pending here already is refused.
    pub fn begin_call_as(
        &self,
        id: u64,
        token: Option<TokenShare<'_>>,
        progress: Option<ProgressSink>,
    ) -> Result<oneshot::Receiver<CallOutcome>, PendingError> {
        self.register(id, token, progress, true)
    }

    fn register(
        &self,
        id: u64,
        token: Option<TokenShare<'_>>,
        progress: Option<ProgressSink>,
        fresh: bool,
    ) -> Result<oneshot::Receiver<CallOutcome>, PendingError> {
        if self.out.is_closed() {
            return Err(PendingError::Closed);
        }
        let (tx, rx) = oneshot::channel();
        let mut calls = self.calls();
        if fresh && calls.pending.contains_key(&id) {
            return Err(PendingError::Taken);
        }
        if calls.pending.len() >= gsv_protocol::limits::MAX_PENDING_PER_NODE {
            return Err(PendingError::Full);
        }
        let token = match token {
            Some(TokenShare { token: t, share }) => {
                let key = match calls.by_token.get_key_value(t) {
                    Some((_, &n)) if n >= share => return Err(PendingError::TokenShare),
                    Some((k, _)) => Arc::clone(k),
                    None => Arc::from(t),
                };
                *calls.by_token.entry(Arc::clone(&key)).or_default() += 1;
                Some(key)
            }
            None => None,
        };
        calls.pending.insert(id, Pending { tx, token });
        if let Some(sink) = progress {
            calls.progress.insert(id, sink);
        }
        Ok(rx)
    }

    /// Hands a `call.progress` event to the pending call's sink, if it has one. A full
    /// sink drops the event (progress is advisory); returns whether it was delivered.
    pub fn progress(&self, id: u64, event: gsv_protocol::event::CallProgress) -> bool {
        let calls = self.calls();
        match calls.progress.get(&id) {
            Some(sink) => sink.try_send(event).is_ok(),
            None => false,
        }
    }

    /// Forgets a pending call (timed out or cancelled by the caller).
    pub fn abandon_call(&self, id: u64) {
        let mut calls = self.calls();
        calls.progress.remove(&id);
        if calls.take(id).is_some() {
            if calls.abandoned.len() >= ABANDONED_MEMORY {
                calls.abandoned.pop_front();
            }
            calls.abandoned.push_back(id);
        }
    }

    /// Completes a pending call with what the node sent.
    pub fn complete_call(&self, id: u64, outcome: CallOutcome) -> Completion {
        let mut calls = self.calls();
        calls.progress.remove(&id);
        match calls.take(id) {
            Some(tx) => {
                drop(calls);
                // The caller may have gone in the meantime; that is fine.
                let _ = tx.send(outcome);
                Completion::Delivered
            }
            None if calls.abandoned.contains(&id) => Completion::Late,
            None => Completion::Stray,
        }
    }

    /// Lets go of every pending call: the connection is gone. Each caller sees its
    /// receiver close and decides (grace period, resume, or `node_disconnected`).
    pub fn release_all_pending(&self) -> usize {
        let mut calls = self.calls();
        calls.progress.clear();
        calls.by_token.clear();
        let n = calls.pending.len();
        calls.pending.clear();
        n
    }

    /// Fails every pending call with `node_disconnected` at once (the gateway is
    /// stopping: there is nothing to wait for).
    pub fn fail_all_pending(&self) -> usize {
        let drained: Vec<_> = {
            let mut calls = self.calls();
            calls.progress.clear();
            calls.by_token.clear();
            calls.pending.drain().collect()
        };
        let n = drained.len();
        for (_, p) in drained {
            let _ = p.tx.send(Err(Disconnected {
                node: self.id.clone(),
            }
            .into()));
        }
        n
    }

    pub fn pending_len(&self) -> usize {
        self.calls().pending.len()
    }

    pub fn summary(&self) -> NodeSummary {
        NodeSummary {
            id: self.id.to_string(),
            online: true,
            since: self.since,
            host_role: self.host_role,
            capabilities: self.tools.capabilities.clone(),
            tools: self
                .tools
                .tools
                .iter()
                .map(|t| t.def.name.clone())
                .collect(),
            runtime: self.runtime.lock().map(|r| r.clone()).unwrap_or_default(),
            conn_id: Some(self.conn_id.clone()),
            remote_addr: Some(self.remote.to_string()),
            version: self.version.clone(),
            unaccepted: None,
            labels: Default::default(),
            replica: None,
        }
    }
}

/// Cuts `summary` down to the tools of `set` that pass `shown` (by bare name) and the
/// capabilities those tools declare. False when no tool is shown.
fn restrict(
    summary: &mut NodeSummary,
    set: &ToolSet,
    mut shown: impl FnMut(&str, ToolClasses) -> bool,
) -> bool {
    let kept: Vec<&ToolSpec> = set
        .tools
        .iter()
        .filter(|t| shown(&t.def.name, t.classes))
        .map(|t| t.as_ref())
        .collect();
    if kept.len() < set.tools.len() {
        summary.tools = kept.iter().map(|t| t.def.name.clone()).collect();
        summary
            .capabilities
            .retain(|c| kept.iter().any(|t| &t.def.capability == c));
    }
    !kept.is_empty()
}

/// What of an unaccepted offer a caller is shown: everything for operators; for an
/// agent nothing of hidden tools, else only the tools (and capabilities) `summary`
/// already shows it.
fn unaccepted_for(
    offer: &UnacceptedOffer,
    summary: &NodeSummary,
    operator: bool,
) -> Option<UnacceptedOffer> {
    if operator {
        return Some(offer.clone());
    }
    if offer.hidden {
        return None;
    }
    let shown = UnacceptedOffer {
        tools: offer
            .tools
            .iter()
            .filter(|t| summary.tools.contains(t))
            .cloned()
            .collect(),
        capabilities: offer
            .capabilities
            .iter()
            .filter(|c| summary.capabilities.contains(c))
            .cloned()
            .collect(),
        hidden: false,
    };
    (!shown.is_empty()).then_some(shown)
}

/// Who is looking at the registry: what their token lets them see, and whether they
/// are an operator (the admin token), who sees every node and what it offers.
pub struct Viewer<F: Fn(&str, ToolClasses) -> bool> {
    /// Whether a namespaced tool name is visible to the caller's policy.
    pub visible: F,
    pub operator: bool,
}

/// A node that was connected and is not now.
pub struct OfflineNode {
    pub tools: Arc<ToolSet>,
    pub host_role: HostRole,
    pub runtime: Runtime,
    pub since: u64,
    pub version: String,
}

impl OfflineNode {
    fn summary(&self, id: &str) -> NodeSummary {
        NodeSummary {
            id: id.to_owned(),
            online: false,
            since: self.since,
            host_role: self.host_role,
            capabilities: self.tools.capabilities.clone(),
            tools: self
                .tools
                .tools
                .iter()
                .map(|t| t.def.name.clone())
                .collect(),
            runtime: self.runtime.clone(),
            conn_id: None,
            remote_addr: None,
            version: self.version.clone(),
            unaccepted: None,
            labels: Default::default(),
            replica: None,
        }
    }
}

/// Every node, online and recently offline.
#[derive(Default)]
pub struct Registry {
    nodes: DashMap<NodeId, Arc<NodeHandle>>,
    offline: DashMap<NodeId, OfflineNode>,
    pub interner: Interner,
    /// What each node offers that was not accepted (and, pinned, is hidden).
    pub unaccepted: Unaccepted,
    /// Woken whenever a node connection is registered.
    arrivals: tokio::sync::Notify,
    /// Told of every node id that comes online (`true`) or goes offline (`false`),
    /// once someone watches ([`Registry::watch`]: cluster mode).
    watcher: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<(NodeId, bool)>>,
    /// Per node id: the instance and the highest reliable event `seq` received from
    /// it, to drop events a node sends again after a reconnect.
    event_seqs: DashMap<NodeId, (String, u64)>,
    /// The ids its calls are given.
    pub call_ids: Arc<CallIds>,
}

impl Registry {
    /// Makes `handle` the node's current connection; returns the one it replaces.
    pub fn insert(&self, handle: Arc<NodeHandle>) -> Option<Arc<NodeHandle>> {
        self.offline.remove(handle.id.as_str());
        let id = handle.id.clone();
        let old = self.nodes.insert(handle.id.clone(), handle);
        self.arrivals.notify_waiters();
        if let Some(w) = self.watcher.get() {
            let _ = w.send((id, true));
        }
        old
    }

    /// Every node id that comes online or goes offline from now on, after the ones
    /// online now; `None` when someone already watches.
    pub fn watch(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<(NodeId, bool)>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.watcher.set(tx.clone()).ok()?;
        for id in self.nodes.iter().map(|e| e.key().clone()) {
            let _ = tx.send((id, true));
        }
        Some(rx)
    }

    /// Woken when any node connects. Create the `notified()` future (and `enable` it)
    /// before looking at the registry, so no arrival is missed.
    pub fn arrivals(&self) -> &tokio::sync::Notify {
        &self.arrivals
    }

    /// Whether the reliable event `seq` from this node connection is new (and records
    /// it). Sequence numbers grow over a node process's life; a new instance starts
    /// again.
    pub fn first_event(&self, handle: &NodeHandle, seq: u64) -> bool {
        let mut entry = self
            .event_seqs
            .entry(handle.id.clone())
            .or_insert_with(|| (handle.instance.clone(), 0));
        let (instance, last) = entry.value_mut();
        if *instance != handle.instance || handle.instance.is_empty() {
            *instance = handle.instance.clone();
            *last = 0;
        }
        if seq > *last {
            *last = seq;
            true
        } else {
            false
        }
    }

    /// Removes the node if `handle` is still its current connection (a replaced
    /// connection must not remove its successor). Returns whether it did.
    pub fn remove_if_current(&self, handle: &NodeHandle) -> bool {
        let removed = self
            .nodes
            .remove_if(handle.id.as_str(), |_, h| h.conn_id == handle.conn_id);
        if let Some((id, h)) = removed {
            if let Some(w) = self.watcher.get() {
                let _ = w.send((id.clone(), false));
            }
            self.offline.insert(
                id,
                OfflineNode {
                    tools: h.tools.clone(),
                    host_role: h.host_role,
                    runtime: h.runtime.lock().map(|r| r.clone()).unwrap_or_default(),
                    since: gsv_protocol::now_ms(),
                    version: h.version.clone(),
                },
            );
            drop(h);
            self.interner.sweep();
            true
        } else {
            false
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<NodeHandle>> {
        self.nodes.get(id).map(|e| e.value().clone())
    }

    /// When a known node went offline, if it did.
    pub fn offline_since(&self, id: &str) -> Option<u64> {
        self.offline.get(id).map(|o| o.since)
    }

    pub fn online_count(&self) -> usize {
        self.nodes.len()
    }

    /// The tool `name` of `node` as agents may call it: `None` when the node does not
    /// offer it, or offers it unaccepted under `--pin-tools` (to the caller, exactly
    /// as if it did not exist).
    pub fn tool<'a>(&self, node: &'a NodeHandle, name: &str) -> Option<&'a Arc<ToolSpec>> {
        if self.unaccepted.hides(node.id.as_str(), name) {
            return None;
        }
        node.tools.get(name)
    }

    /// The classes of the tool `namespaced` names on a node this gateway holds, if
    /// it has that tool (and it is not hidden until accepted).
    pub fn classes_of(&self, namespaced: &str) -> Option<ToolClasses> {
        let name = NamespacedName::parse(namespaced).ok()?;
        let node = self.get(name.node.as_str())?;
        self.tool(&node, name.tool.as_str()).map(|t| t.classes)
    }

    /// The tools a known node (online or offline) offers now.
    pub fn tool_set(&self, id: &str) -> Option<Arc<ToolSet>> {
        self.nodes
            .get(id)
            .map(|h| h.tools.clone())
            .or_else(|| self.offline.get(id).map(|o| o.tools.clone()))
    }

    /// The node as `viewer` may see it: only tools its policy lets it see and that are
    /// not hidden (with the capabilities those declare), and what of the node's
    /// unaccepted offer it may know. `None` when an agent may see no tool of it;
    /// operators see every node.
    fn view<F: Fn(&str, ToolClasses) -> bool>(
        &self,
        mut summary: NodeSummary,
        set: &ToolSet,
        viewer: &Viewer<F>,
    ) -> Option<NodeSummary> {
        let pending = self.unaccepted.get(&summary.id);
        // One buffer for every `{node}__{tool}` name asked about: a listing or a
        // fan-out asks this for each tool of each node.
        let mut name = String::with_capacity(summary.id.len() + 2 + 32);
        name.push_str(&summary.id);
        name.push_str(gsv_protocol::names::NAMESPACE_SEPARATOR);
        let prefix = name.len();
        let any = restrict(&mut summary, set, |tool, classes| {
            if pending.as_ref().is_some_and(|p| p.hides(tool)) {
                return false;
            }
            name.truncate(prefix);
            name.push_str(tool);
            (viewer.visible)(&name, classes)
        });
        if !any && !viewer.operator {
            return None;
        }
        summary.unaccepted =
            pending.and_then(|p| unaccepted_for(&p.offer, &summary, viewer.operator));
        Some(summary)
    }

    /// Whether `viewer` may see node `id` with tool set `set` (as [`Registry::view`]
    /// decides, without building its summary): an operator sees every node, another
    /// viewer a node with at least one tool it may see.
    fn may_see<F: Fn(&str, ToolClasses) -> bool>(
        &self,
        id: &str,
        set: &ToolSet,
        viewer: &Viewer<F>,
    ) -> bool {
        if viewer.operator {
            return true;
        }
        let pending = self.unaccepted.get(id);
        let mut name = String::with_capacity(id.len() + 2 + 32);
        name.push_str(id);
        name.push_str(gsv_protocol::names::NAMESPACE_SEPARATOR);
        let prefix = name.len();
        set.tools.iter().any(|t| {
            let tool = t.def.name.as_str();
            if pending.as_ref().is_some_and(|p| p.hides(tool)) {
                return false;
            }
            name.truncate(prefix);
            name.push_str(tool);
            (viewer.visible)(&name, t.classes)
        })
    }

    /// The nodes `viewer` may see that `pick` accepts (given the node's id and runtime
    /// facts), as (id, online, since): online first, then offline, each by id. What
    /// [`Registry::summaries`] then a filter give, without copying every node's
    /// summary (a fan-out over thousands of nodes needs only these three).
    pub fn pick<F, P>(&self, viewer: &Viewer<F>, pick: P) -> Vec<(String, bool, u64)>
    where
        F: Fn(&str, ToolClasses) -> bool,
        P: Fn(&str, Option<&gsv_protocol::inventory::Facts>) -> bool,
    {
        let mut online: Vec<(String, bool, u64)> = self
            .nodes
            .iter()
            .filter(|e| {
                let n = e.value();
                let facts = n.runtime.lock().ok();
                let facts = facts.as_ref().and_then(|r| r.facts.as_deref());
                self.may_see(n.id.as_str(), &n.tools, viewer) && pick(n.id.as_str(), facts)
            })
            .map(|e| (e.value().id.to_string(), true, e.value().since))
            .collect();
        online.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut offline: Vec<(String, bool, u64)> = self
            .offline
            .iter()
            .filter(|e| {
                let o = e.value();
                self.may_see(e.key().as_str(), &o.tools, viewer)
                    && pick(e.key().as_str(), o.runtime.facts.as_deref())
            })
            .map(|e| (e.key().to_string(), false, e.value().since))
            .collect();
        offline.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        online.extend(offline);
        online
    }

    /// Every node `viewer` may see ([`Registry::view`]), online first, then offline,
    /// each sorted by id: a token allowed one tool of a node learns nothing of the
    /// node's other tools.
    pub fn summaries<F: Fn(&str, ToolClasses) -> bool>(
        &self,
        viewer: &Viewer<F>,
    ) -> Vec<NodeSummary> {
        let mut online: Vec<NodeSummary> = self
            .nodes
            .iter()
            .filter_map(|e| self.view(e.value().summary(), &e.value().tools, viewer))
            .collect();
        online.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let mut offline: Vec<NodeSummary> = self
            .offline
            .iter()
            .filter_map(|e| {
                self.view(
                    e.value().summary(e.key().as_str()),
                    &e.value().tools,
                    viewer,
                )
            })
            .collect();
        offline.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        online.extend(offline);
        online
    }

    /// One node as `viewer` may see it, with its tools (name, capability,
    /// description, whether unaccepted or hidden), sorted by name. `None` when the
    /// node is unknown or the viewer may see none of it.
    pub fn detail<F: Fn(&str, ToolClasses) -> bool>(
        &self,
        id: &str,
        viewer: &Viewer<F>,
    ) -> Option<(NodeSummary, Vec<NodeTool>)> {
        let (summary, set) = match self.nodes.get(id) {
            Some(h) => (h.summary(), h.tools.clone()),
            None => {
                let o = self.offline.get(id)?;
                (o.summary(id), o.tools.clone())
            }
        };
        let pending = self.unaccepted.get(id);
        let summary = self.view(summary, &set, viewer)?;
        let mut tools: Vec<NodeTool> = set
            .tools
            .iter()
            .filter(|t| viewer.operator || summary.tools.contains(&t.def.name))
            .map(|t| {
                let name = &t.def.name;
                let unaccepted = pending
                    .as_ref()
                    .is_some_and(|p| p.offer.tools.contains(name));
                NodeTool {
                    name: name.clone(),
                    capability: t.def.capability.clone(),
                    description: t.def.description.clone(),
                    unaccepted,
                    hidden: pending.as_ref().is_some_and(|p| p.hides(name)),
                }
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Some((summary, tools))
    }

    /// Whether any known node, online or offline, declares a tool with this bare name.
    pub fn declares_tool(&self, tool: &str) -> bool {
        self.nodes
            .iter()
            .any(|e| e.value().tools.get(tool).is_some())
            || self
                .offline
                .iter()
                .any(|e| e.value().tools.get(tool).is_some())
    }

    /// About how many bytes an MCP listing of the tools that pass `visible` takes
    /// (each tool's [`ToolSpec::listed_bytes`] and its node's name, which a listing
    /// repeats in the name, the title and the description), adding no further than
    /// past `limit`: what MCP's `auto` view weighs, without building a listing.
    pub fn listing_bytes(
        &self,
        visible: impl Fn(&str, ToolClasses) -> bool,
        limit: usize,
    ) -> usize {
        let mut n = 0;
        let mut add = |node: &str, set: &ToolSet| {
            for t in &set.tools {
                if n > limit {
                    return;
                }
                if !self.unaccepted.hides(node, &t.def.name)
                    && visible(&NamespacedName::join(node, &t.def.name), t.classes)
                {
                    n += t.listed_bytes + 3 * node.len() + 16;
                }
            }
        };
        for e in self.nodes.iter() {
            add(e.key().as_str(), &e.value().tools);
        }
        for e in self.offline.iter() {
            add(e.key().as_str(), &e.value().tools);
        }
        n
    }

    /// Every tool of every known node whose namespaced name passes `visible`, sorted;
    /// never a tool hidden until accepted (`--pin-tools`).
    pub fn tool_entries(&self, visible: impl Fn(&str, ToolClasses) -> bool) -> Vec<ToolEntry> {
        let mut out = Vec::new();
        for e in self.nodes.iter() {
            self.push_entries(&mut out, e.key().as_str(), &e.value().tools, true, &visible);
        }
        for e in self.offline.iter() {
            self.push_entries(
                &mut out,
                e.key().as_str(),
                &e.value().tools,
                false,
                &visible,
            );
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// [`Registry::tool_entries`] of the nodes `ids` names only (looked up one by one:
    /// a few nodes of a large fleet cost what they hold, not what the fleet holds).
    pub fn tool_entries_of<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
        visible: impl Fn(&str, ToolClasses) -> bool,
    ) -> Vec<ToolEntry> {
        let mut out = Vec::new();
        for id in ids {
            if let Some(h) = self.nodes.get(id) {
                self.push_entries(&mut out, id, &h.tools, true, &visible);
            } else if let Some(o) = self.offline.get(id) {
                self.push_entries(&mut out, id, &o.tools, false, &visible);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Appends the entries of one node's tools that pass `visible` and are not hidden.
    fn push_entries(
        &self,
        out: &mut Vec<ToolEntry>,
        node: &str,
        set: &ToolSet,
        online: bool,
        visible: &impl Fn(&str, ToolClasses) -> bool,
    ) {
        for t in &set.tools {
            if self.unaccepted.hides(node, &t.def.name) {
                continue;
            }
            let name = NamespacedName::join(node, &t.def.name);
            if visible(&name, t.classes) {
                out.push(ToolEntry {
                    name,
                    node: node.to_owned(),
                    tool: t.def.name.clone(),
                    description: t.def.description.clone(),
                    input_schema: t.def.input_schema.clone(),
                    capability: t.def.capability.clone(),
                    annotations: t.def.annotations.clone(),
                    requires_approval: t.def.requires_approval,
                    online,
                });
            }
        }
    }

    /// Every online node handle (for shutdown).
    pub fn all(&self) -> Vec<Arc<NodeHandle>> {
        self.nodes.iter().map(|e| e.value().clone()).collect()
    }
}
