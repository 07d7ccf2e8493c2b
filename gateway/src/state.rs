//! State shared by every connection and HTTP handler of one gateway.
//!
//! One `Shared` per running gateway, behind an `Arc`. The maps in it are sharded
//! (`DashMap`) so no global lock sits on the call path.

use crate::admission::Admission;
use crate::approvals::Approvals;
use crate::audit::{AuditEvent, AuditLog};
use crate::config::GatewayConfig;
use crate::error::WireError;
use crate::metrics::Metrics;
use crate::ratelimit::AuthLimiter;
use crate::registry::Registry;
use crate::store::Store;
use crate::toolset::ToolSet;
use dashmap::DashMap;
use gsv_protocol::event::ToolsChanged;
use gsv_protocol::EventName;
use serde::Serialize;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use crate::agent_handle::AgentHandle;

/// Everything one gateway shares.
pub struct Shared {
    pub config: GatewayConfig,
    pub store: Arc<Store>,
    pub registry: Registry,
    pub agents: DashMap<String, Arc<AgentHandle>>,
    pub metrics: Metrics,
    pub audit: AuditLog,
    pub approvals: Approvals,
    pub auth_limiter: AuthLimiter,
    /// Caps on unauthenticated connections, and who is under them.
    pub admission: Admission,
    /// Refused authentications, gathered into bounded audit rows.
    pub refusals: crate::refusals::Refusals,
    pub shutdown: CancellationToken,
    /// The background tasks (sweepers, watchers, cluster mode's): they end at
    /// `shutdown`, and a stopping gateway waits for them.
    pub background: crate::background::Background,
    /// Cancelled when a graceful shutdown begins: new agent connections and new calls
    /// are refused, calls in flight may finish (up to `config.drain`), nodes may still
    /// reconnect to deliver their results.
    pub draining: CancellationToken,
    /// Calls being routed now (from request to answer, approval waits included).
    /// Each holds a token of this tracker while it lives, so shutdown waits for them
    /// (`TaskTracker::wait`) instead of polling a counter.
    pub in_flight: tokio_util::task::TaskTracker,
    /// Registered sessions, and connections delivering what is left in their queue after
    /// they ended (each at most a second): a stopping gateway waits for them.
    pub closing: tokio_util::task::TaskTracker,
    /// Bumped whenever a node's tool set comes, goes or is replaced: MCP sessions watch
    /// it to send `notifications/tools/list_changed`.
    pub tools_epoch: tokio::sync::watch::Sender<u64>,
    /// Agent tokens revoked recently, for nodes that connect.
    pub revoked_recent: crate::recent_revocations::RecentRevocations,
    /// Bytes of call arguments in flight, per token and in all.
    pub pending_bytes: crate::budget::PendingBytes,
    /// Open agent WebSocket connections, per token and in all.
    pub agent_conns: crate::budget::Places,
    /// Bytes of node results running fan-outs keep, per token and in all.
    pub fanout_result_bytes: crate::budget::PendingBytes,
    /// The accepted offers of the node ids seen (`crate::offers`).
    pub offers: crate::offers::Offers,
    /// The labels operators gave node ids (`crate::labels`).
    pub labels: crate::labels::LabelBook,
    /// The jobs running in this gateway, by id: whose each is and how to cancel it
    /// (`crate::jobs`).
    pub running_jobs: DashMap<String, RunningJob>,
    /// Where new approval requests are announced to operators away from the gateway
    /// (`--approval-webhook`).
    pub webhook: Option<crate::webhook::Webhook>,
    /// The other replicas, as the core asks them ([`crate::peers`]): [`Alone`] unless
    /// `--cluster`.
    ///
    /// [`Alone`]: crate::peers::Alone
    pub peers: Arc<dyn crate::peers::Peers>,
    /// The file transfers open now (`transfer.*`).
    pub transfers: crate::transfer::Transfers,
    /// Fan-outs running per token id (`crate::fanout::MAX_FANOUTS_PER_TOKEN`).
    pub fanouts: DashMap<String, usize>,
    /// What holds something of a token outside the core (the console's sessions),
    /// told when a token is revoked.
    pub token_holders: crate::token_holders::TokenHolders,
    /// What changed, for whoever shows the fleet live ([`crate::changes`]).
    pub changes: crate::changes::Changes,
}

/// A job running in this gateway.
pub struct RunningJob {
    /// The token that started it: revoking the token cancels it.
    pub token_id: String,
    pub cancel: CancellationToken,
}

impl Shared {
    /// Decides a request this replica opened, records the decision in the audit log and
    /// tells operators and agents. Lives here, not in `approvals`, so approvals do not
    /// depend on the state that holds them. The doors decide through
    /// [`crate::fleet::decide_approval`], which finds another replica's request too;
    /// this is also how a replica decides for another replica's operator.
    pub(crate) async fn decide_here(
        &self,
        id: &str,
        decision: crate::approvals::Verdict,
        by: &str,
    ) -> Result<crate::approvals::ApprovalRequest, crate::approvals::ApprovalError> {
        let result = self.approvals.decide(id, decision, by).await;
        self.announce_decision(id, decision, by, &result);
        result
    }

    /// The audit row, the console's refresh and the agents' events of a decision.
    pub(crate) fn announce_decision(
        &self,
        id: &str,
        decision: crate::approvals::Verdict,
        by: &str,
        result: &Result<crate::approvals::ApprovalRequest, crate::approvals::ApprovalError>,
    ) {
        self.audit.record(AuditEvent::ApprovalDecided {
            by,
            approval: id,
            verdict: decision,
            result: result.as_ref().map_err(|e| e.code()),
        });
        self.changes.send(crate::changes::Topic::Approvals);
        if let Ok(req) = &result {
            let payload = gsv_protocol::event::ApprovalResolved {
                id: req.id.clone(),
                state: req.state.clone(),
                decided_by: Some(by.to_owned()),
            };
            for a in self.agents.iter() {
                if a.authority.reads_all() || a.token_id == req.token_id {
                    a.send_event(gsv_protocol::EventName::ApprovalResolved, &payload);
                }
            }
        }
    }

    pub fn new(config: GatewayConfig, store: Arc<Store>, audit: AuditLog) -> Self {
        let shutdown = CancellationToken::new();
        Shared {
            approvals: Approvals::new(store.clone(), config.approval_ttl)
                .with_per_token(config.approvals_per_token),
            pending_bytes: crate::budget::PendingBytes::new(
                config.pending_bytes_per_token,
                config.pending_bytes_max,
            ),
            fanout_result_bytes: crate::budget::PendingBytes::new(
                config.fanout_result_bytes_per_token,
                config.fanout_result_bytes_max,
            ),
            agent_conns: crate::agent_conns::places(
                config.agent_conns_per_token,
                config.agent_conns_max,
            ),
            auth_limiter: AuthLimiter::new(config.auth_failures_per_minute),
            admission: Admission::new(config.caps),
            refusals: crate::refusals::Refusals::new(audit.clone(), config.refusal_interval),
            config,
            store,
            registry: Registry::default(),
            agents: DashMap::new(),
            metrics: Metrics::new(),
            audit,
            background: crate::background::Background::new(shutdown.clone()),
            shutdown,
            draining: CancellationToken::new(),
            in_flight: tokio_util::task::TaskTracker::new(),
            closing: tokio_util::task::TaskTracker::new(),
            revoked_recent: Default::default(),
            offers: Default::default(),
            labels: Default::default(),
            tools_epoch: tokio::sync::watch::Sender::new(0),
            running_jobs: DashMap::new(),
            webhook: None,
            transfers: Default::default(),
            fanouts: DashMap::new(),
            token_holders: Default::default(),
            changes: Default::default(),
            peers: Arc::new(crate::peers::Alone),
        }
    }

    /// Sends an event to every operator connection (admin or operator token) and, if
    /// given, to
    /// one more agent (the caller concerned), once each.
    pub fn notify_operators<P: Serialize + ?Sized>(
        &self,
        event: EventName,
        payload: &P,
        also: Option<&str>,
    ) {
        if matches!(
            event,
            EventName::ApprovalRequested | EventName::ApprovalResolved
        ) {
            self.changes.send(crate::changes::Topic::Approvals);
        }
        for a in self.agents.iter() {
            if a.authority.reads_all() || Some(a.conn_id.as_str()) == also {
                a.send_event(event, payload);
            }
        }
    }

    /// Tells every agent that may see some of the node's tools (not counting those
    /// hidden until accepted) that the set changed.
    pub fn tools_changed(&self, node: &str, set: &ToolSet, change: &str) {
        let payload = ToolsChanged {
            node: node.to_owned(),
            change: change.to_owned(),
        };
        let pending = self.registry.unaccepted.get(node);
        let hidden = |tool: &str| pending.as_ref().is_some_and(|p| p.hides(tool));
        for a in self.agents.iter() {
            if a.sees_any(node, set, hidden) {
                a.send_event(EventName::ToolsChanged, &payload);
            }
        }
        if self.peers.replica().is_some() {
            // The other replicas' agents hear of it too.
            let shown = set
                .tools
                .iter()
                .filter(|t| !hidden(&t.def.name))
                .map(|t| t.def.name.to_string())
                .collect();
            self.peers.tools_changed(node, shown, change);
        }
        self.tools_epoch.send_modify(|e| *e = e.wrapping_add(1));
        self.changes.send(crate::changes::Topic::Nodes);
    }
}
