//! The fleet's inventory as callers see it: every node listing with the node's labels,
//! the one place a selector is matched, and the one place an operator relabels a node.
//!
//! Every list of nodes an agent gets (`nodes.list`, `GET /v1/nodes`, `nodes.show`,
//! `GET /v1/nodes/{id}`, and the MCP fleet view) goes through [`visible_nodes`] or
//! [`with_labels`], so labels appear the same everywhere, and through [`selected`] when
//! it is narrowed by a selector. The order is fixed: first what the caller's token may
//! see (the registry's visibility rules), then the selector over those only, so a
//! selector can never widen what a token sees.
//!
//! Labels come from operators only; facts come from the node and are self-reported:
//! they help pick a host, nothing here lets them decide what a token may do.

mod error;

pub use error::InventoryError;

use crate::audit::{self, AuditEvent};
use crate::offers::OfferError;
use crate::policy::Policy;
use crate::registry::Viewer;
use crate::state::Shared;
use crate::store::{read_node_labels, write_node_labels};
use gsv_protocol::inventory::{check_label_key, check_label_value, check_labels, Labels};
use gsv_protocol::method::{LabelsChange, NodeLabelsResult, NodeSummary};
use gsv_protocol::offer::NodeDetail;
use gsv_protocol::tool_class::ToolClasses;
use gsv_protocol::{NodeId, Selector};
use rusqlite::TransactionBehavior;

/// Who looks at the registry through this policy: an operator when it is the admin's.
pub fn viewer(policy: &Policy) -> Viewer<impl Fn(&str, ToolClasses) -> bool + '_> {
    Viewer {
        visible: |n: &str, c: ToolClasses| policy.visible(n, c),
        operator: policy.sees_all(),
    }
}

/// `nodes.show` (and `GET /v1/nodes/{id}`): one node as `policy` may see it.
pub fn show_node(shared: &Shared, policy: &Policy, id: &str) -> Result<NodeDetail, OfferError> {
    let (node, tools) =
        shared
            .registry
            .detail(id, &viewer(policy))
            .ok_or_else(|| OfferError::UnknownNode {
                node: id.to_owned(),
            })?;
    Ok(NodeDetail {
        node: with_labels(shared, node),
        tools,
        gateway_version: crate::VERSION.to_owned(),
    })
}

/// Parses a selector as a caller sent it (`nodes.list {select}`, `?select=`), with the
/// parser's message (which names the bad term) as an `invalid_args` error.
pub fn parse_selector(text: &str) -> Result<Selector, InventoryError> {
    Selector::parse(text).map_err(InventoryError::Selector)
}

/// Whether `summary` (a node as the caller may already see it, labels filled in by
/// [`with_labels`]) is one `selector` picks: its id, its operator-given labels and
/// its self-reported facts (`runtime.facts`; none reported reads as no facts). `None`
/// picks every node.
///
/// The one matching rule of the gateway: `nodes.list`, `GET /v1/nodes` and the MCP
/// fleet view (`fleet_nodes {select}`, `/mcp?select=`) all call it. Call it only on
/// summaries the caller may see: it narrows, it never decides visibility.
pub fn selected(summary: &NodeSummary, selector: Option<&Selector>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let no_facts = gsv_protocol::inventory::Facts::default();
    let facts = summary.runtime.facts.as_deref().unwrap_or(&no_facts);
    selector.matches(&summary.id, &summary.labels, facts)
}

/// `summary` with the labels operators gave its node.
pub fn with_labels(shared: &Shared, mut summary: NodeSummary) -> NodeSummary {
    summary.labels = (*shared.labels.get(&summary.id)).clone();
    // Cluster mode: this replica holds it (or, offline, last knew of it).
    summary.replica = shared.peers.replica().map(str::to_owned);
    summary
}

/// Every node `viewer` may see (the registry's order: online, then offline, each by
/// id), with its labels, narrowed to those `selector` picks.
pub fn visible_nodes<F: Fn(&str, ToolClasses) -> bool>(
    shared: &Shared,
    viewer: &Viewer<F>,
    selector: Option<&Selector>,
) -> Vec<NodeSummary> {
    shared
        .registry
        .summaries(viewer)
        .into_iter()
        .map(|s| with_labels(shared, s))
        .filter(|s| selected(s, selector))
        .collect()
}

/// The nodes `viewer` may see that `selector` picks, as (id, online, since): the same
/// nodes as [`visible_nodes`], without their summaries (a fan-out's targets).
pub fn picked_nodes<F: Fn(&str, ToolClasses) -> bool>(
    shared: &Shared,
    viewer: &Viewer<F>,
    selector: &Selector,
) -> Vec<(String, bool, u64)> {
    let no_facts = gsv_protocol::inventory::Facts::default();
    shared.registry.pick(viewer, |id, facts| {
        let labels = shared.labels.get(id);
        selector.matches(id, &labels, facts.unwrap_or(&no_facts))
    })
}

/// Applies an operator's change to `node`'s labels (`by`: `operator` for the
/// WebSocket, `admin-api` for HTTP): checks every key and value first, then in one
/// store transaction reads the labels, applies `remove` then `set`, checks the count,
/// writes them and records `node.labels_changed` (only when something changed), then
/// updates the gateway's copy. The node must be known: registered since the gateway
/// started, or holding an active node or join token, or labelled before.
pub async fn relabel(
    shared: &Shared,
    node: &str,
    change: LabelsChange,
    by: &'static str,
) -> Result<NodeLabelsResult, InventoryError> {
    let unknown = || InventoryError::UnknownNode {
        node: node.to_owned(),
    };
    let id = NodeId::parse(node).map_err(|_| unknown())?;
    for key in &change.remove {
        check_label_key(key).map_err(InventoryError::Label)?;
    }
    for (key, value) in &change.set {
        check_label_key(key).map_err(InventoryError::Label)?;
        check_label_value(value).map_err(InventoryError::Label)?;
    }
    let registered = shared.registry.tool_set(id.as_str()).is_some();
    let node_id = id.to_string();
    let outcome = shared
        .store
        .blocking(move |s| -> Result<Labels, InventoryError> {
            if !registered && !s.knows_node(&node_id)? {
                return Err(InventoryError::UnknownNode { node: node_id });
            }
            s.with_conn(|conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let before = read_node_labels(&tx, &node_id)?;
                let mut after = before.clone();
                for key in &change.remove {
                    after.remove(key);
                }
                after.extend(change.set);
                if let Err(e) = check_labels(&after) {
                    return Ok(Err(InventoryError::Label(e)));
                }
                if after != before {
                    let now = gsv_protocol::now_ms();
                    write_node_labels(&tx, &node_id, &after, by, now)?;
                    let event = AuditEvent::NodeLabelsChanged {
                        by,
                        node: &node_id,
                        before: &before,
                        after: &after,
                    };
                    audit::append_in(&tx, &[(now, event.into())])?;
                    tx.commit()?;
                }
                Ok(Ok(after))
            })?
        })
        .await??;
    let labels = shared.labels.remember(id.as_str(), outcome);
    shared.changes.send(crate::changes::Topic::Nodes);
    tracing::info!(node_id = %id, by, labels = ?labels, "node labels set");
    Ok(NodeLabelsResult {
        id: id.to_string(),
        labels: (*labels).clone(),
    })
}
