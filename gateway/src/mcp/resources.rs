//! MCP resources for clients that use them: `gsv://nodes` (every node the session
//! sees) and `gsv://nodes/{id}` (one), as JSON — the same inventory `fleet_nodes`
//! gives, from the same list ([`super::nodes`]), so a token learns nothing here that
//! its tools would not tell it. Sessions hear `notifications/resources/list_changed`
//! when a node they see joins, leaves or goes offline (see the handler's watcher).

use super::nodes::{self, NodeCard};
use super::view::Lens;
use crate::fleet::Fleet;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use rmcp::ErrorData;
use serde::Serialize;
use std::hash::{Hash, Hasher};

/// The URI of the whole inventory.
pub const NODES_URI: &str = "gsv://nodes";
/// The prefix of one node's URI (`gsv://nodes/{id}`).
const NODE_PREFIX: &str = "gsv://nodes/";
/// Node resources listed per `resources/list` page.
const PAGE: usize = 100;
const JSON: &str = "application/json";

/// `resources/list`: `gsv://nodes` first, then one resource per node, paged.
pub fn list(
    fleet: &Fleet,
    lens: &Lens,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, ErrorData> {
    let all = nodes::lens_nodes(fleet, lens, None);
    let (page, next) = nodes::page(&all, cursor, PAGE)
        .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
    let mut resources = Vec::with_capacity(page.len() + 1);
    if cursor.is_none() {
        resources.push(
            Resource::new(NODES_URI, "nodes")
                .with_description(
                    "Every node you can use: id, online, os, labels, facts, tool names",
                )
                .with_mime_type(JSON),
        );
    }
    resources.extend(page.iter().map(|n| {
        Resource::new(format!("{NODE_PREFIX}{}", n.id), n.id.clone())
            .with_description(format!("node {}", n.id))
            .with_mime_type(JSON)
    }));
    let mut out = ListResourcesResult::with_all_items(resources);
    out.next_cursor = next;
    Ok(out)
}

/// `resources/templates/list`: `gsv://nodes/{id}`.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![ResourceTemplate::new(
        format!("{NODE_PREFIX}{{id}}"),
        "node",
    )
    .with_description("One node: id, online, os, labels, facts, tool names")
    .with_mime_type(JSON)])
}

#[derive(Serialize)]
struct All<'a> {
    nodes: &'a [NodeCard],
}

/// `resources/read`. A node the session does not see is answered exactly like one
/// that does not exist.
pub fn read(fleet: &Fleet, lens: &Lens, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let unknown = || ErrorData::resource_not_found(format!("unknown resource: {uri}"), None);
    let all = nodes::lens_nodes(fleet, lens, None);
    let text = if uri == NODES_URI {
        serde_json::to_string(&All { nodes: &all })
    } else {
        let id = uri.strip_prefix(NODE_PREFIX).ok_or_else(unknown)?;
        let card = all.iter().find(|n| n.id == id).ok_or_else(unknown)?;
        serde_json::to_string(card)
    }
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        text, uri,
    )
    .with_mime_type(JSON)]))
}

/// A digest of which nodes the session sees and whether each is online: when it
/// changes, the resource list has.
pub fn digest(fleet: &Fleet, lens: &Lens) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for n in nodes::lens_nodes(fleet, lens, None) {
        n.id.hash(&mut h);
        n.online.hash(&mut h);
    }
    h.finish()
}
