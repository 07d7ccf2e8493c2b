//! This gateway's own nodes and tool sets, without asking the other replicas: for a
//! door that shows the nodes connected here (the console's node pages), where
//! [`super::Fleet::nodes`] and [`super::Fleet::node`] would merge in the cluster's.

use crate::inventory;
use crate::offers::OfferError;
use crate::policy::Policy;
use crate::toolset::ToolSet;
use gsv_protocol::offer::NodeDetail;
use std::sync::Arc;

impl super::Fleet {
    /// One node of this gateway as `policy` may see it (`nodes.show`): this replica's
    /// copy only.
    pub fn local_node_detail(&self, policy: &Policy, id: &str) -> Result<NodeDetail, OfferError> {
        inventory::show_node(&self.shared, policy, id)
    }

    /// The tool set node `id` offers on this gateway (its tools' definitions), if it
    /// is known here.
    pub fn local_tool_set(&self, id: &str) -> Option<Arc<ToolSet>> {
        self.shared.registry.tool_set(id)
    }
}
