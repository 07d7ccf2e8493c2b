//! This gateway's own part of the fleet as one caller's viewer sees it, for a door
//! that builds its listings itself (MCP's node cards and tool lists, merged with what
//! [`super::Fleet::elsewhere`] found; the console's pages of the nodes connected here).

use crate::registry::Viewer;
use gsv_protocol::method::{NodeSummary, ToolEntry};
use gsv_protocol::tool_class::ToolClasses;
use gsv_protocol::Selector;

impl super::Fleet {
    /// Every node of this gateway `viewer` sees (online, then offline, each by id),
    /// with its labels, narrowed to those `selector` picks.
    pub fn local_nodes<F: Fn(&str, ToolClasses) -> bool>(
        &self,
        viewer: &Viewer<F>,
        selector: Option<&Selector>,
    ) -> Vec<NodeSummary> {
        crate::inventory::visible_nodes(&self.shared, viewer, selector)
    }

    /// Node `id` of this gateway as `viewer` sees it, with its labels; `None` when
    /// this gateway does not know it or `viewer` may not see it.
    pub fn local_node<F: Fn(&str, ToolClasses) -> bool>(
        &self,
        id: &str,
        viewer: &Viewer<F>,
    ) -> Option<NodeSummary> {
        self.shared
            .registry
            .detail(id, viewer)
            .map(|(summary, _)| crate::inventory::with_labels(&self.shared, summary))
    }

    /// The tools of this gateway's nodes `ids` that pass `visible`, sorted by
    /// namespaced name.
    pub fn local_tools_of<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
        visible: impl Fn(&str, ToolClasses) -> bool,
    ) -> Vec<ToolEntry> {
        self.shared.registry.tool_entries_of(ids, visible)
    }

    /// About how many bytes the definitions of this gateway's tools that pass
    /// `visible` take, counted no further than past `limit`.
    pub fn local_listing_bytes(
        &self,
        visible: impl Fn(&str, ToolClasses) -> bool,
        limit: usize,
    ) -> usize {
        self.shared.registry.listing_bytes(visible, limit)
    }

    /// The classes of tool `namespaced` (`{node}__{tool}`) when this gateway holds
    /// its node; `None` otherwise.
    pub fn tool_classes(&self, namespaced: &str) -> Option<ToolClasses> {
        self.shared.registry.classes_of(namespaced)
    }
}
