//! The other replicas, as the core sees them. The core asks them through [`Peers`]
//! and never names cluster mode: a gateway that runs alone has [`Alone`], which holds
//! nothing, and `--cluster` puts its NATS backend here (`cluster::peers`).
//!
//! Today one question goes through it (a call for a node this gateway does not hold);
//! the rest of what the core asks of the other replicas moves here as it is taken out
//! of the core's hands.

use crate::metrics::Metrics;
use crate::router::{Caller, RouteError};
use futures_util::future::BoxFuture;
use gsv_protocol::method::ToolsCallParams;
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

/// What the core asks of the other replicas.
pub trait Peers: Send + Sync {
    /// Sends `caller`'s call for `node`, which this gateway does not hold, to the
    /// replica that does; `None` when no replica holds it (or none can be reached):
    /// the caller then gets the same answer as on one gateway.
    fn forward<'a>(
        &'a self,
        metrics: &'a Metrics,
        caller: &'a Caller<'a>,
        node: &'a str,
        params: &'a ToolsCallParams,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<RoutedElsewhere>>;
}

/// A gateway on its own: no other replica holds anything.
pub struct Alone;

impl Peers for Alone {
    fn forward<'a>(
        &'a self,
        _metrics: &'a Metrics,
        _caller: &'a Caller<'a>,
        _node: &'a str,
        _params: &'a ToolsCallParams,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Option<RoutedElsewhere>> {
        Box::pin(async { None })
    }
}
