//! Prometheus metrics of the gateway, served at `GET /metrics`.
//!
//! Counters are labelled by bare tool name (not namespaced: the fleet's size must not
//! multiply the series) and by outcome, so an operator sees what fails and how often.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub tool: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShedLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PathLabels {
    pub path: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    pub role: String,
    pub code: String,
}

/// Every metric the gateway exports.
pub struct Metrics {
    registry: Registry,
    pub connected_nodes: Gauge,
    pub connected_agents: Gauge,
    pub pending_calls: Gauge,
    pub calls: Family<CallLabels, Counter>,
    pub call_latency: Histogram,
    pub refused_connects: Family<RefusedLabels, Counter>,
    pub stray_results: Counter,
    pub resumed_calls: Counter,
    pub shed_connections: Family<ShedLabels, Counter>,
    /// Set from the admission counts when metrics are read.
    pub unauthenticated_connections: Gauge,
    /// 1 while this replica is connected to NATS (cluster mode).
    pub cluster_connected: Gauge,
    /// Messages from NATS refused at the envelope since start (cluster mode).
    pub cluster_refused: Gauge,
    /// Nodes' bulk lanes open now.
    pub bulk_lanes: Gauge,
    /// Transfer chunks carried by nodes' bulk lanes, both ways.
    pub lane_chunks: Counter,
    /// Calls forwarded to another replica (cluster mode), by path (`link`, `nats`).
    pub forwarded_calls: Family<PathLabels, Counter>,
    /// Node and tool lists this replica built for the other replicas (cluster mode).
    pub list_answers: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gsv");
        let connected_nodes = Gauge::default();
        let connected_agents = Gauge::default();
        let pending_calls = Gauge::default();
        let calls = Family::<CallLabels, Counter>::default();
        // 50 µs .. ~27 min in 26 doubling buckets.
        let call_latency = Histogram::new(exponential_buckets(0.00005, 2.0, 26));
        let refused_connects = Family::<RefusedLabels, Counter>::default();
        let stray_results = Counter::default();
        let resumed_calls = Counter::default();
        let shed_connections = Family::<ShedLabels, Counter>::default();
        let unauthenticated_connections = Gauge::default();
        let cluster_connected = Gauge::default();
        let cluster_refused = Gauge::default();
        let bulk_lanes = Gauge::default();
        let lane_chunks = Counter::default();
        let forwarded_calls = Family::<PathLabels, Counter>::default();
        let list_answers = Counter::default();
        registry.register(
            "cluster_list_answers",
            "Node and tool lists this replica built and sent for the other replicas (cluster mode)",
            list_answers.clone(),
        );
        registry.register(
            "forwarded_calls",
            "Calls forwarded to the replica holding their node (cluster mode), by path: link (direct) or nats",
            forwarded_calls.clone(),
        );
        registry.register(
            "bulk_lanes",
            "Nodes' bulk lanes (second connections carrying transfer chunks) open now",
            bulk_lanes.clone(),
        );
        registry.register(
            "lane_chunks",
            "Transfer chunks carried by nodes' bulk lanes, both ways",
            lane_chunks.clone(),
        );
        registry.register(
            "cluster_refused_messages",
            "Messages from NATS this replica refused since it started (cluster mode): not sealed with the cluster key for their subject, replayed, or outside the replay window",
            cluster_refused.clone(),
        );
        registry.register(
            "cluster_connected",
            "1 while this replica is connected to NATS (cluster mode), else 0",
            cluster_connected.clone(),
        );
        registry.register(
            "connected_nodes",
            "Nodes connected now",
            connected_nodes.clone(),
        );
        registry.register(
            "connected_agents",
            "Agent WebSocket connections open now",
            connected_agents.clone(),
        );
        registry.register(
            "pending_calls",
            "Tool calls dispatched to nodes and not answered yet",
            pending_calls.clone(),
        );
        registry.register(
            "calls",
            "Tool calls by bare tool name and outcome",
            calls.clone(),
        );
        registry.register(
            "call_latency_seconds",
            "Tool call latency at the gateway, from request to answer",
            call_latency.clone(),
        );
        registry.register(
            "refused_connects",
            "Handshakes refused, by role and error code",
            refused_connects.clone(),
        );
        registry.register(
            "stray_results",
            "Results for call ids the connection was never sent (dropped)",
            stray_results.clone(),
        );
        registry.register(
            "resumed_calls",
            "Calls asked for again on a node's new connection after it dropped mid-call",
            resumed_calls.clone(),
        );
        registry.register(
            "connections_shed",
            "New connections closed at accept because too many unauthenticated ones were open (reason: global or per_source cap)",
            shed_connections.clone(),
        );
        registry.register(
            "unauthenticated_connections",
            "Connections open now that have not presented a valid token",
            unauthenticated_connections.clone(),
        );
        Metrics {
            registry,
            connected_nodes,
            connected_agents,
            pending_calls,
            calls,
            call_latency,
            refused_connects,
            stray_results,
            resumed_calls,
            shed_connections,
            unauthenticated_connections,
            bulk_lanes,
            lane_chunks,
            forwarded_calls,
            list_answers,
            cluster_connected,
            cluster_refused,
        }
    }

    /// Records whether this replica is connected to NATS.
    pub fn set_cluster_connected(&self, connected: bool) {
        self.cluster_connected.set(i64::from(connected));
    }

    /// Records how many messages from NATS the replica refused so far.
    pub fn set_cluster_refused(&self, refused: u64) {
        self.cluster_refused
            .set(i64::try_from(refused).unwrap_or(i64::MAX));
    }

    /// Counts a call forwarded to another replica on `path` (`link` or `nats`).
    pub fn forwarded(&self, path: &'static str) {
        self.forwarded_calls
            .get_or_create(&PathLabels { path })
            .inc();
    }

    /// Counts a connection closed at accept (`reason`: which cap).
    pub fn shed(&self, reason: &'static str) {
        self.shed_connections
            .get_or_create(&ShedLabels { reason })
            .inc();
    }

    pub fn call_done(&self, tool: &str, outcome: &str, seconds: f64) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        self.call_latency.observe(seconds);
    }

    pub fn refused(&self, role: &str, code: &str) {
        self.refused_connects
            .get_or_create(&RefusedLabels {
                role: role.to_owned(),
                code: code.to_owned(),
            })
            .inc();
    }

    /// The OpenMetrics text exposition (which Prometheus scrapes natively).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        out
    }
}
