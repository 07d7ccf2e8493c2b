//! The fleet as the ways in ask for it: each operation written once, in the same order
//! — this gateway's part under the caller's policy, then (cluster mode) the other
//! replicas' part, asked of them as the same token, then one merged answer (an online
//! copy of a node or tool wins over an offline one).
//!
//! The agent WebSocket, the HTTP API, MCP and the console call these instead of the
//! inventory and the cluster backend each on their own, so a node list, a node's
//! detail, a tool list or an approval page is the same whichever door it is asked
//! through, and a door never reaches the cluster itself.
//!
//! A door holds a [`Fleet`], never the gateway's state: what it may do is what
//! `Fleet` offers (the `impl Fleet` blocks of this module's files).

mod accept_tools;
mod agent_link;
mod audit_reads;
mod authenticated;
mod calls;
mod copies;
mod fanouts;
mod gateway;
mod job_reads;
mod local_inventory;
mod local_view;
mod login_limits;
mod merge;
mod node_admin;
mod node_link;
mod pending_args;
mod process_sessions;
mod token_records;
mod tool_changes;
pub(crate) use node_link::{StrayCount, Stream};

use crate::approvals::{ApprovalError, ApprovalRequest, ListPage, ListQuery, Verdict};
use crate::inventory::{self, InventoryError};
use crate::jobs::{self, JobError, Reader};
use crate::offers::OfferError;
use crate::peers::ClusterStatus;
use crate::policy::Policy;
use crate::state::Shared;
use gsv_protocol::job::Job;
use gsv_protocol::method::{NodeSummary, ToolEntry};
use gsv_protocol::offer::NodeDetail;
use std::sync::Arc;

/// The fleet as a door sees it: one per gateway, cheap to clone. Its state is the
/// fleet floor's own; a door asks for what it needs through these methods.
#[derive(Clone)]
pub struct Fleet {
    shared: Arc<Shared>,
}

impl Fleet {
    /// The fleet of the gateway whose state is `shared` (made once, by the assembly).
    pub fn new(shared: Arc<Shared>) -> Fleet {
        Fleet { shared }
    }

    /// Every node `policy` may see, narrowed by the selector `select` (checked first: a
    /// bad one is an error before anything is asked), sorted by id; in cluster mode the
    /// other replicas' nodes too, as `token_id` sees them there.
    pub async fn nodes(
        &self,
        policy: &Policy,
        token_id: &str,
        select: Option<&str>,
    ) -> Result<Vec<NodeSummary>, InventoryError> {
        let selector = select.map(inventory::parse_selector).transpose()?;
        let local =
            inventory::visible_nodes(&self.shared, &inventory::viewer(policy), selector.as_ref());
        if self.alone() {
            return Ok(local);
        }
        Ok(merge::nodes(
            local,
            self.shared.peers.nodes(token_id, select).await,
        ))
    }

    /// One node as `policy` may see it: this gateway's copy, or in cluster mode the
    /// replica's that holds it online when this one does not.
    pub async fn node(
        &self,
        policy: &Policy,
        token_id: &str,
        id: &str,
    ) -> Result<NodeDetail, OfferError> {
        let local = inventory::show_node(&self.shared, policy, id);
        if !self.alone() && !local.as_ref().is_ok_and(|d| d.node.online) {
            if let Some(detail) = self.shared.peers.node(token_id, id).await {
                return Ok(detail);
            }
        }
        local
    }

    /// Every tool `policy` may see, by namespaced name; in cluster mode the other
    /// replicas' tools too.
    pub async fn tools(&self, policy: &Policy, token_id: &str) -> Vec<ToolEntry> {
        let local = self
            .shared
            .registry
            .tool_entries(|n, c| policy.visible(n, c));
        if self.alone() {
            return local;
        }
        merge::tools(local, self.shared.peers.tools(token_id).await)
    }

    /// One page of approval requests, every replica's in cluster mode.
    /// The caller was judged an operator already.
    pub async fn approvals(&self, query: ListQuery) -> Result<ListPage, ApprovalError> {
        if self.alone() {
            return self.shared.approvals.list(query).await;
        }
        // Each replica's newest `offset + limit` requests, merged into the page.
        let limit = query.limit.clamp(1, crate::approvals::MAX_PAGE);
        let upto = query
            .offset
            .saturating_add(limit)
            .min(crate::approvals::MAX_LISTED_EVERYWHERE);
        let (local, remote) = tokio::join!(
            self.shared.approvals.page(query.all, upto, 0),
            self.shared.peers.approval_pages(query.all, upto),
        );
        Ok(merge::pages(
            std::iter::once(local?).chain(remote),
            query.offset,
            limit,
        ))
    }

    /// Decides approval request `id` as `by` (the CLI, the HTTP API, the WebSocket method
    /// and the console all come here): this replica's request, or in cluster mode the
    /// replica's that opened it; recorded in the audit log and told to operators and
    /// agents once, whichever decided it.
    pub async fn decide_approval(
        &self,
        id: &str,
        decision: Verdict,
        by: &str,
    ) -> Result<ApprovalRequest, ApprovalError> {
        let result = self.shared.approvals.decide(id, decision, by).await;
        let result = match &result {
            Err(ApprovalError::NotFound { .. }) if !self.alone() => self
                .shared
                .peers
                .decide(id, decision, by)
                .await
                .unwrap_or(result),
            _ => result,
        };
        self.shared.announce_decision(id, decision, by, &result);
        result
    }

    /// `jobs.cancel`: cancels a running job `reader` may cancel, wherever it runs (in
    /// cluster mode another replica's job is cancelled by that replica); the job as it is
    /// then.
    pub async fn cancel_job(&self, reader: Reader<'_>, id: &str) -> Result<Job, JobError> {
        jobs::cancellable(&self.shared, reader, id).await?;
        if !self.alone() {
            if let Some(owner) = jobs::owner_elsewhere(&self.shared, id).await? {
                return self
                    .shared
                    .peers
                    .cancel_job(&owner, id)
                    .await
                    .map_err(JobError::Elsewhere);
            }
        }
        jobs::cancel(&self.shared, reader, id).await
    }

    /// What the other replicas hold for `token_id` (nodes narrowed by `select`, and
    /// tools), for a door that keeps it to merge with later listings of its own; `None`
    /// on a gateway that runs alone.
    pub async fn elsewhere(
        &self,
        token_id: &str,
        select: Option<&str>,
    ) -> Option<(Vec<NodeSummary>, Vec<ToolEntry>)> {
        if self.alone() {
            return None;
        }
        Some(tokio::join!(
            self.shared.peers.nodes(token_id, select),
            self.shared.peers.tools(token_id),
        ))
    }

    /// A number that moves whenever which replica holds which node changes (cluster
    /// mode; `None` alone): what [`Fleet::elsewhere`] found stays good while it stands still.
    pub fn elsewhere_epoch(&self) -> Option<u64> {
        self.shared.peers.epoch()
    }

    /// Whether this gateway runs alone (no `--cluster`): nothing is asked elsewhere.
    pub fn alone(&self) -> bool {
        alone(&self.shared)
    }

    /// `GET /v1/cluster`: the cluster as this replica sees it; `None` alone.
    pub fn cluster_status(&self) -> Option<ClusterStatus> {
        self.shared
            .peers
            .status(self.shared.registry.online_count())
    }

    /// Brings the gauges of the link to the other replicas up to date (`/metrics`).
    pub fn measure_peers(&self) {
        if let Some(health) = self.shared.peers.health() {
            self.shared.metrics.set_cluster_connected(health.connected);
            self.shared.metrics.set_cluster_refused(health.refused);
        }
    }
}

/// `local` and another replica's nodes as one list by id, an online copy first.
pub fn merge_nodes(local: Vec<NodeSummary>, remote: Vec<NodeSummary>) -> Vec<NodeSummary> {
    merge::nodes(local, remote)
}

/// `local` and another replica's tools as one list by name, an online copy first.
pub fn merge_tools(local: Vec<ToolEntry>, remote: Vec<ToolEntry>) -> Vec<ToolEntry> {
    merge::tools(local, remote)
}

/// Whether the gateway of `shared` runs alone (no `--cluster`; the fan-out asks).
pub(crate) fn alone(shared: &Shared) -> bool {
    shared.peers.replica().is_none()
}
