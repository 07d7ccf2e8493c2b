//! Cluster mode as the core's [`Peers`]: the questions the core asks of the other
//! replicas, answered over NATS and the replica links.

use super::Cluster;
use crate::approvals::{ApprovalError, ApprovalRequest, ListPage, Verdict};
use crate::metrics::Metrics;
use crate::peers::{ClusterStatus, ForwardedFor, Peers, PeersHealth, RoutedElsewhere};
use futures_util::future::BoxFuture;
use gsv_protocol::error::ErrorShape;
use gsv_protocol::job::Job;
use gsv_protocol::method::{NodeSummary, ToolEntry, ToolsCallParams};
use gsv_protocol::offer::NodeDetail;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// This replica's view of the others.
pub struct ClusterPeers(pub Arc<Cluster>);

impl Peers for ClusterPeers {
    fn replica(&self) -> Option<&str> {
        Some(&self.0.replica)
    }

    fn forward<'a>(
        &'a self,
        metrics: &'a Metrics,
        caller: ForwardedFor<'a>,
        node: &'a str,
        params: &'a ToolsCallParams,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<RoutedElsewhere>> {
        Box::pin(super::calls::forward(
            &self.0, metrics, caller, node, params, cancel,
        ))
    }

    fn nodes<'a>(
        &'a self,
        token_id: &'a str,
        select: Option<&'a str>,
    ) -> BoxFuture<'a, Vec<NodeSummary>> {
        Box::pin(super::listing::gather(&self.0, token_id, select))
    }

    fn node<'a>(&'a self, token_id: &'a str, id: &'a str) -> BoxFuture<'a, Option<NodeDetail>> {
        Box::pin(super::listing::show_elsewhere(&self.0, token_id, id))
    }

    fn tools<'a>(&'a self, token_id: &'a str) -> BoxFuture<'a, Vec<ToolEntry>> {
        Box::pin(super::listing::gather_tools(&self.0, token_id))
    }

    fn approval_pages(&self, all: bool, upto: u32) -> BoxFuture<'_, Vec<ListPage>> {
        Box::pin(super::approvals::pages(&self.0, all, upto))
    }

    fn decide<'a>(
        &'a self,
        id: &'a str,
        verdict: Verdict,
        by: &'a str,
    ) -> BoxFuture<'a, Option<Result<ApprovalRequest, ApprovalError>>> {
        Box::pin(super::approvals::decide_elsewhere(&self.0, id, verdict, by))
    }

    fn cancel_job<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Job, ErrorShape>> {
        Box::pin(super::jobs::cancel_at(&self.0, owner, id))
    }

    fn epoch(&self) -> Option<u64> {
        Some(self.0.directory.epoch())
    }

    fn tools_changed(&self, node: &str, shown: Vec<String>, change: &str) {
        self.0.tools_changed(node, shown, change);
    }

    fn token_revoked(&self, token_id: &str) {
        self.0.calls.forget(token_id);
    }

    fn health(&self) -> Option<PeersHealth> {
        Some(PeersHealth {
            connected: self.0.connected(),
            refused: self.0.refused_messages(),
        })
    }

    fn status(&self, own_nodes: usize) -> Option<ClusterStatus> {
        Some(self.0.status(own_nodes))
    }
}
