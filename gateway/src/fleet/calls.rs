//! One agent's call routed to its node (policy, approvals, audit and metrics as for
//! every door), and what a question about approving it shows, for a door that routes
//! calls itself (MCP).

use crate::registry::CallOutcome;
use crate::router::Caller;
use gsv_protocol::method::ToolsCallParams;
use serde_json::Value;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl super::Fleet {
    /// Routes `params` for `caller` to its node ([`crate::router::call`]); cancelling
    /// `cancel` cancels the call on the node.
    pub async fn call(
        &self,
        caller: &Caller<'_>,
        params: ToolsCallParams,
        cancel: CancellationToken,
    ) -> CallOutcome {
        crate::router::call(&self.shared, caller, params, cancel).await
    }

    /// What the node resolves the paths of call `name` with `args` to, as an approval
    /// question shows it ([`crate::router::plan_for`]); `None` when there is nothing to
    /// show or the node is not held here.
    pub async fn approval_plan(&self, name: &str, args: &Value) -> Option<String> {
        crate::router::plan_for(&self.shared, name, args).await
    }

    /// How long an approval request stays open.
    pub fn approval_ttl(&self) -> Duration {
        self.shared.approvals.ttl
    }
}
