//! The fleet as one MCP session may see it: the nodes its token can reach (and its
//! `?select=` picks), each with its labels, facts and the names of the tools the token
//! may call there.
//!
//! Every fleet-shaped answer is built from this one list — `fleet_nodes`,
//! `fleet_tools`, the `gsv://nodes` resources and the flat listing's node set — so a
//! token sees the same nodes and tools in every view and resource: a node shows only
//! when the token may call at least one of its tools, and then only those tools.
//!
//! In cluster mode the list holds the other replicas' online nodes too: a request that
//! lists first gathers what they hold that its token may see there ([`with_remote`],
//! the same gathering as `nodes.list` and `tools.list`), and the list is built from
//! both, an online node over this replica's memory of it as offline.

use super::result::BadCursor;
use super::view::{Lens, RemoteFleet};
use crate::fleet::Fleet;
use crate::inventory;
use crate::policy::Policy;
use crate::registry::Viewer;
use gsv_protocol::inventory::{Facts, Labels};
use gsv_protocol::method::{NodeSummary, ToolEntry};
use gsv_protocol::selector::Selector;
use gsv_protocol::tool_class::ToolClasses;
use serde::Serialize;
use std::collections::HashSet;
use std::sync::Arc;

/// Nodes one `fleet_nodes` page holds at most.
pub const NODES_PAGE: usize = 50;

/// The prefix of node cursors (opaque to clients).
const CURSOR_PREFIX: &str = "after:";

/// One node as a session sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCard {
    pub id: String,
    pub online: bool,
    /// `facts.os` when the node reported facts, else the OS of its runtime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// The operator's labels.
    pub labels: Labels,
    /// What the node reports about its host (absent from older nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub facts: Option<Facts>,
    /// The bare names of the tools the token may call there, sorted.
    pub tools: Vec<String>,
}

/// `lens` with what the other replicas hold for it (cluster mode; unchanged
/// otherwise, or when it has it already).
pub async fn with_remote(fleet: &Fleet, mut lens: Lens) -> Lens {
    if fleet.alone() || lens.remote.is_some() {
        return lens;
    }
    let select = lens.select.as_ref().map(|s| s.to_string());
    let token = lens.who.token_id.clone();
    if let Some((nodes, entries)) = fleet.elsewhere(&token, select.as_deref()).await {
        lens.remote = Some(Arc::new(RemoteFleet { nodes, entries }));
    }
    lens
}

/// Every node `policy` lets the caller reach that every selector in `selects` picks,
/// sorted by id; `remote`'s nodes too (cluster mode). Visibility first, then the
/// selectors (the gateway's one matching rule, [`crate::inventory::selected`]), so a
/// selector never widens what a token sees.
pub fn visible_nodes(
    fleet: &Fleet,
    policy: &Policy,
    selects: &[&Selector],
    remote: Option<&RemoteFleet>,
) -> Vec<NodeCard> {
    let viewer = Viewer {
        visible: |n: &str, c: ToolClasses| policy.visible(n, c),
        operator: false,
    };
    let local = fleet.local_nodes(&viewer, None);
    let summaries = match remote {
        Some(r) => crate::fleet::merge_nodes(local, r.nodes.clone()),
        None => local,
    };
    let mut cards: Vec<NodeCard> = summaries
        .into_iter()
        .filter(|s| selects.iter().all(|sel| inventory::selected(s, Some(sel))))
        .map(card)
        .collect();
    cards.sort_by(|a, b| a.id.cmp(&b.id));
    cards
}

/// A node's summary as a session sees it.
fn card(s: NodeSummary) -> NodeCard {
    let facts = s.runtime.facts.map(|f| *f);
    let os = facts
        .as_ref()
        .map(|f| f.os.clone())
        .filter(|o| !o.is_empty())
        .or(Some(s.runtime.host_os).filter(|o| !o.is_empty()));
    let mut tools = s.tools;
    tools.sort();
    NodeCard {
        id: s.id,
        online: s.online,
        os,
        labels: s.labels,
        facts,
        tools,
    }
}

/// The nodes `lens` sees, narrowed further by `extra` (`fleet_nodes {select}`).
pub fn lens_nodes(fleet: &Fleet, lens: &Lens, extra: Option<&Selector>) -> Vec<NodeCard> {
    let selects: Vec<&Selector> = lens.select.as_deref().into_iter().chain(extra).collect();
    visible_nodes(fleet, &lens.who.policy, &selects, lens.remote.as_deref())
}

/// About how many bytes the node tools the flat listing `lens` would get take (the
/// gateway tools beside them aside), adding no further than past `limit` (enough for
/// `auto`'s choice). Without `?select=` no listing is built: a
/// session-less request asks this every time, whatever the fleet's size.
pub fn lens_listing_bytes(fleet: &Fleet, lens: &Lens, limit: usize) -> usize {
    let listed = |name: &str| {
        name.split_once("__")
            .is_some_and(|(_, tool)| lens.listed.lists(tool))
    };
    let remote = || {
        lens.remote.as_ref().map_or(0, |r| {
            r.entries
                .iter()
                .filter(|e| listed(&e.name))
                .map(entry_bytes)
                .sum()
        })
    };
    match lens.select {
        None => {
            fleet.local_listing_bytes(
                |name, c| lens.who.policy.visible(name, c) && listed(name),
                limit,
            ) + remote()
        }
        Some(_) => {
            let nodes = lens_nodes(fleet, lens, None);
            listed_entries(fleet, lens, &nodes)
                .iter()
                .map(entry_bytes)
                .sum::<usize>()
        }
    }
}

/// The bytes of one listed tool, as [`super::result::tool_on`] writes it.
fn entry_bytes(e: &ToolEntry) -> usize {
    serde_json::to_string(&super::result::tool_on(e, None)).map_or(0, |s| s.len())
}

/// Whether `node` is one of the nodes `lens` sees (reachable by its token, picked by
/// its `?select=`), looking at that node alone.
pub fn lens_has_node(fleet: &Fleet, lens: &Lens, node: &str) -> bool {
    card_of(fleet, lens, node).is_some()
}

/// `node` as `lens` sees it, looked up alone: `None` unless its token may reach it
/// and its `?select=` picks it.
pub fn card_of(fleet: &Fleet, lens: &Lens, node: &str) -> Option<NodeCard> {
    let policy = &lens.who.policy;
    let viewer = Viewer {
        visible: |n: &str, c: ToolClasses| policy.visible(n, c),
        operator: false,
    };
    let local = fleet.local_node(node, &viewer);
    let summary = match local {
        // An online node over this replica's memory of it as offline (cluster mode).
        Some(s) if s.online => s,
        local => lens
            .remote
            .as_ref()
            .and_then(|r| r.nodes.iter().find(|n| n.id == node).cloned())
            .or(local)?,
    };
    inventory::selected(&summary, lens.select.as_deref()).then(|| card(summary))
}

/// The nodes `lens` brought into its listing ([`super::used`]) that it still sees,
/// and every tool its token may call on them.
pub fn used_listing(fleet: &Fleet, lens: &Lens) -> (Vec<NodeCard>, Vec<ToolEntry>) {
    let cards: Vec<NodeCard> = lens
        .used
        .nodes()
        .iter()
        .filter_map(|id| card_of(fleet, lens, id))
        .collect();
    let entries = entries_where(fleet, lens, &cards, |_, _| true);
    (cards, entries)
}

/// What the session's `tools/list` names beside the gateway tools, and the nodes
/// those belong to: in the flat view the tools [`Lens::listed`] names on every node
/// it sees and every tool of the nodes in use; in the fleet view only the latter.
pub fn listing(fleet: &Fleet, lens: &Lens) -> (Vec<NodeCard>, Vec<ToolEntry>) {
    match lens.shown {
        super::view::Shown::Fleet => used_listing(fleet, lens),
        super::view::Shown::Flat => {
            let nodes = lens_nodes(fleet, lens, None);
            let entries = listed_entries(fleet, lens, &nodes);
            (nodes, entries)
        }
    }
}

/// The tools `lens` sees on `nodes` (what [`lens_nodes`] returned), sorted by
/// namespaced name: every tool the token may call there.
pub fn lens_entries(fleet: &Fleet, lens: &Lens, nodes: &[NodeCard]) -> Vec<ToolEntry> {
    entries_where(fleet, lens, nodes, |_, _| true)
}

/// The tools a flat listing of `lens` names on `nodes`: those of [`lens_entries`] the
/// session lists ([`Lens::listed`]), and every one of the nodes it uses.
pub fn listed_entries(fleet: &Fleet, lens: &Lens, nodes: &[NodeCard]) -> Vec<ToolEntry> {
    if lens.listed.is_all() {
        return lens_entries(fleet, lens, nodes);
    }
    let used: HashSet<String> = lens.used.nodes().into_iter().collect();
    entries_where(fleet, lens, nodes, |node, tool| {
        lens.listed.lists(tool) || used.contains(node)
    })
}

/// The tools the token may call on `nodes` that pass `named` (node, bare name), sorted.
fn entries_where(
    fleet: &Fleet,
    lens: &Lens,
    nodes: &[NodeCard],
    named: impl Fn(&str, &str) -> bool,
) -> Vec<ToolEntry> {
    let ids: HashSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    let policy = &lens.who.policy;
    let named = |name: &str| {
        name.split_once("__")
            .is_some_and(|(node, tool)| ids.contains(node) && named(node, tool))
    };
    let local = fleet.local_tools_of(nodes.iter().map(|n| n.id.as_str()), |name, c| {
        policy.visible(name, c) && named(name)
    });
    match &lens.remote {
        Some(r) => {
            let remote = r
                .entries
                .iter()
                .filter(|e| named(&e.name))
                .cloned()
                .collect();
            crate::fleet::merge_tools(local, remote)
        }
        None => local,
    }
}

/// One page of `nodes` (sorted by id) after `cursor`, and the cursor of the next page.
pub fn page<'a>(
    nodes: &'a [NodeCard],
    cursor: Option<&str>,
    size: usize,
) -> Result<(&'a [NodeCard], Option<String>), BadCursor> {
    let start = match cursor {
        None => 0,
        Some(c) => {
            let after = c
                .strip_prefix(CURSOR_PREFIX)
                .ok_or_else(|| BadCursor(c.to_owned()))?;
            nodes.partition_point(|n| n.id.as_str() <= after)
        }
    };
    let end = (start + size.max(1)).min(nodes.len());
    let slice = &nodes[start..end];
    let next = (end < nodes.len())
        .then(|| slice.last().map(|n| format!("{CURSOR_PREFIX}{}", n.id)))
        .flatten();
    Ok((slice, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(id: &str) -> NodeCard {
        NodeCard {
            id: id.to_owned(),
            online: true,
            os: Some("linux".into()),
            labels: Labels::new(),
            facts: None,
            tools: vec!["Read".into()],
        }
    }

    #[test]
    fn node_pages_follow_cursors() {
        let nodes: Vec<NodeCard> = ["a", "b", "c", "d", "e"].map(card).into();
        let (p1, c1) = page(&nodes, None, 2).unwrap();
        assert_eq!((p1.len(), c1.as_deref()), (2, Some("after:b")));
        let (p2, c2) = page(&nodes, c1.as_deref(), 2).unwrap();
        assert_eq!(p2[0].id, "c");
        let (p3, c3) = page(&nodes, c2.as_deref(), 2).unwrap();
        assert_eq!((p3.len(), c3), (1, None));
        // A node that went away between pages: the next page still starts after it.
        let (p, _) = page(&nodes, Some("after:bb"), 2).unwrap();
        assert_eq!(p[0].id, "c");
        assert!(page(&nodes, Some("c"), 2).is_err());
        let (empty, none) = page(&nodes, Some("after:z"), 2).unwrap();
        assert!(empty.is_empty() && none.is_none());
    }

    #[test]
    fn cards_serialize_compactly() {
        let v = serde_json::to_value(card("web1")).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id": "web1", "online": true, "os": "linux", "labels": {}, "tools": ["Read"]})
        );
    }
}
