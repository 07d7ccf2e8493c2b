//! What the admin changes or asks of one node (`gsv nodes label`, `gsv nodes probe`,
//! and their HTTP and WebSocket methods).

use crate::inventory::InventoryError;
use crate::probe::ProbeError;
use gsv_protocol::method::{LabelsChange, NodeLabelsResult, ProbeResult};

impl super::Fleet {
    /// Sets and removes labels of node `node`, recorded as by `by`.
    pub async fn relabel(
        &self,
        node: &str,
        change: LabelsChange,
        by: &'static str,
    ) -> Result<NodeLabelsResult, InventoryError> {
        crate::inventory::relabel(&self.shared, node, change, by).await
    }

    /// Asks node `node` which of `bins` it has on its `PATH`.
    pub async fn probe(&self, node: &str, bins: Vec<String>) -> Result<ProbeResult, ProbeError> {
        crate::probe::probe(&self.shared, node, bins).await
    }
}
