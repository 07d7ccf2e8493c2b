//! How a transfer ends, and how one refused before it began is recorded: the one audit
//! row each transfer gets.

use super::{Owner, Route};
use crate::audit::AuditEvent;
use crate::state::Shared;
use std::sync::atomic::Ordering;

/// Ends `route` once (the first ending wins) and records it.
pub(super) fn end(
    shared: &Shared,
    route: &Route,
    outcome: &str,
    sha256: Option<&str>,
    bytes: Option<u64>,
) {
    if shared.transfers.routes.remove(&route.id).is_none() {
        return;
    }
    let bytes = bytes.unwrap_or_else(|| route.bytes.load(Ordering::Relaxed));
    tracing::info!(transfer = %route.id, node = %route.node.id, outcome, bytes, "transfer ended");
    shared.audit.record(AuditEvent::Transfer {
        agent: &route.owner.name,
        token_id: &route.owner.token_id,
        node: route.node.id.as_str(),
        tool: route.tool(),
        path: route.path(),
        bytes,
        sha256,
        outcome,
        duration_ms: route.started.elapsed().as_millis() as u64,
    });
}

/// Records a transfer the gateway refused before it began (policy, approval).
pub(super) fn refused(
    shared: &Shared,
    owner: &Owner,
    node: &str,
    tool: &str,
    path: &str,
    outcome: &str,
) {
    tracing::warn!(agent = %owner.name, node, tool, path = ?path, outcome, "transfer refused");
    shared.audit.record(AuditEvent::Transfer {
        agent: &owner.name,
        token_id: &owner.token_id,
        node,
        tool,
        path,
        bytes: 0,
        sha256: None,
        outcome,
        duration_ms: 0,
    });
}
