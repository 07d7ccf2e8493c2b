//! The other replicas, as the core sees them. The core asks them through [`Peers`]
//! and never names cluster mode: a gateway that runs alone has [`Alone`], which holds
//! nothing and answers at once, and `--cluster` puts its NATS backend here
//! (`cluster::peers`).
//!
//! What is asked: a call for a node this gateway does not hold ([`Peers::forward`]);
//! the other replicas' part of a node list, a node, a tool list, an approval page
//! (the fleet floor merges it with this gateway's); an approval decision or a job
//! cancel for what another replica opened; and what this gateway tells them (a node's
//! tools changed, a token was revoked).

use crate::approvals::{ApprovalError, ApprovalRequest, ListPage, Verdict};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::registry::ProgressSink;
use crate::router::error::RouteError;
use futures_util::future::BoxFuture;
use gsv_protocol::error::ErrorShape;
use gsv_protocol::job::Job;
use gsv_protocol::method::{NodeSummary, ToolEntry, ToolsCallParams};
use gsv_protocol::offer::NodeDetail;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

/// A call another replica routed: its outcome, and whether that replica (the node's
/// holder) wrote its audit row.
pub struct RoutedElsewhere {
    pub outcome: Result<Box<RawValue>, RouteError>,
    pub audited: bool,
}

impl From<Result<Box<RawValue>, RouteError>> for RoutedElsewhere {
    /// An outcome this replica settled itself (it writes the row).
    fn from(outcome: Result<Box<RawValue>, RouteError>) -> RoutedElsewhere {
        RoutedElsewhere {
            outcome,
            audited: false,
        }
    }
}

/// Whom a forwarded call is made for: what the replica that holds the node needs to
/// route it as its own caller's (the token, judged there by its own policy) and to send
/// its progress back.
pub struct ForwardedFor<'a> {
    pub token_id: &'a str,
    pub policy: &'a Policy,
    /// Where the node's `call.progress` events go, if the caller wants them.
    pub progress: Option<&'a ProgressSink>,
}

/// One replica as this one hears it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSeen {
    pub name: String,
    /// Nodes it holds.
    pub nodes: usize,
    /// Milliseconds since it was last heard from (0 for this replica).
    pub seen_ms_ago: u64,
}

/// `GET /v1/cluster`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// This replica's name.
    pub replica: String,
    /// Its slot (call ids no other replica gives out), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u64>,
    /// `ok` (connected to NATS) or `degraded` (not: serving its own nodes only).
    pub state: String,
    /// Every replica heard from lately, this one included, by name.
    pub replicas: Vec<ReplicaSeen>,
    /// Nodes in this replica's copy of the node directory (which replica holds
    /// which node): every replica's nodes, once it has caught up.
    #[serde(default)]
    pub directory: usize,
}

/// How the link to the other replicas is doing, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeersHealth {
    /// Connected to the cluster's bus now.
    pub connected: bool,
    /// Messages refused since start (not sealed with the cluster's key).
    pub refused: u64,
}

/// What the core asks of the other replicas. Every question has an answer for a
/// gateway alone ([`Alone`]): nothing elsewhere.
pub trait Peers: Send + Sync {
    /// This replica's name in its cluster; `None` for a gateway that runs alone.
    fn replica(&self) -> Option<&str>;

    /// Sends `caller`'s call for `node`, which this gateway does not hold, to the
    /// replica that does; `None` when no replica holds it (or none can be reached):
    /// the caller then gets the same answer as on one gateway.
    fn forward<'a>(
        &'a self,
        metrics: &'a Metrics,
        caller: ForwardedFor<'a>,
        node: &'a str,
        params: &'a ToolsCallParams,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<RoutedElsewhere>>;

    /// The online nodes the other replicas hold that `token_id` may see there
    /// (`select` applied there), each with its replica's name.
    fn nodes<'a>(
        &'a self,
        token_id: &'a str,
        select: Option<&'a str>,
    ) -> BoxFuture<'a, Vec<NodeSummary>>;

    /// Node `id` as the replica holding it online shows it to `token_id`.
    fn node<'a>(&'a self, token_id: &'a str, id: &'a str) -> BoxFuture<'a, Option<NodeDetail>>;

    /// The tools of the other replicas' nodes that `token_id` may see there.
    fn tools<'a>(&'a self, token_id: &'a str) -> BoxFuture<'a, Vec<ToolEntry>>;

    /// The first `upto` approval requests (pending only unless `all`) of every other
    /// replica, a page each.
    fn approval_pages(&self, all: bool, upto: u32) -> BoxFuture<'_, Vec<ListPage>>;

    /// Has the replica that opened approval request `id` decide it; `None` when no
    /// replica answers (none holds it, or none can be reached).
    fn decide<'a>(
        &'a self,
        id: &'a str,
        verdict: Verdict,
        by: &'a str,
    ) -> BoxFuture<'a, Option<Result<ApprovalRequest, ApprovalError>>>;

    /// Has replica `owner` cancel its job `id`.
    fn cancel_job<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Job, ErrorShape>>;

    /// A number that moves whenever which replica holds which node changes (`None`
    /// alone): what [`Peers::nodes`] and [`Peers::tools`] answered stays good while it
    /// stands still.
    fn epoch(&self) -> Option<u64>;

    /// Tells the other replicas that `node`'s tools changed (`shown`: those its
    /// agents may be shown), in the background.
    fn tools_changed(&self, node: &str, shown: Vec<String>, change: &str);

    /// Forgets what was kept for `token_id`, now revoked.
    fn token_revoked(&self, token_id: &str);

    /// How the link to the others is doing; `None` alone.
    fn health(&self) -> Option<PeersHealth>;

    /// The cluster as this replica sees it (`own_nodes`: the nodes it holds); `None`
    /// alone.
    fn status(&self, own_nodes: usize) -> Option<ClusterStatus>;
}

/// A gateway on its own: no other replica holds anything.
pub struct Alone;

impl Peers for Alone {
    fn replica(&self) -> Option<&str> {
        None
    }

    fn forward<'a>(
        &'a self,
        _metrics: &'a Metrics,
        _caller: ForwardedFor<'a>,
        _node: &'a str,
        _params: &'a ToolsCallParams,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<RoutedElsewhere>> {
        Box::pin(async { None })
    }

    fn nodes<'a>(&'a self, _: &'a str, _: Option<&'a str>) -> BoxFuture<'a, Vec<NodeSummary>> {
        Box::pin(async { Vec::new() })
    }

    fn node<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Option<NodeDetail>> {
        Box::pin(async { None })
    }

    fn tools<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Vec<ToolEntry>> {
        Box::pin(async { Vec::new() })
    }

    fn approval_pages(&self, _: bool, _: u32) -> BoxFuture<'_, Vec<ListPage>> {
        Box::pin(async { Vec::new() })
    }

    fn decide<'a>(
        &'a self,
        _: &'a str,
        _: Verdict,
        _: &'a str,
    ) -> BoxFuture<'a, Option<Result<ApprovalRequest, ApprovalError>>> {
        Box::pin(async { None })
    }

    fn cancel_job<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Job, ErrorShape>> {
        // Alone, no job runs elsewhere: nothing asks this (the store names no other
        // owner), and if something did, the answer says so.
        Box::pin(async move {
            Err(ErrorShape::new(
                gsv_protocol::error::ErrorCode::NotFound,
                format!("job {id} runs on replica {owner}, and this gateway is in no cluster"),
            ))
        })
    }

    fn epoch(&self) -> Option<u64> {
        None
    }

    fn tools_changed(&self, _: &str, _: Vec<String>, _: &str) {}

    fn token_revoked(&self, _: &str) {}

    fn health(&self) -> Option<PeersHealth> {
        None
    }

    fn status(&self, _: usize) -> Option<ClusterStatus> {
        None
    }
}
