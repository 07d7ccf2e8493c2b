//! Cluster mode as the core's [`Peers`]: the questions the core asks of the other
//! replicas, answered over NATS and the replica links.

use super::Cluster;
use crate::metrics::Metrics;
use crate::peers::{Peers, RoutedElsewhere};
use crate::router::Caller;
use futures_util::future::BoxFuture;
use gsv_protocol::method::ToolsCallParams;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// This replica's view of the others.
pub struct ClusterPeers(pub Arc<Cluster>);

impl Peers for ClusterPeers {
    fn forward<'a>(
        &'a self,
        metrics: &'a Metrics,
        caller: &'a Caller<'a>,
        node: &'a str,
        params: &'a ToolsCallParams,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<RoutedElsewhere>> {
        Box::pin(super::calls::forward(
            &self.0, metrics, caller, node, params, cancel,
        ))
    }
}
