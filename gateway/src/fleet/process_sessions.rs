//! The background process sessions of the nodes, as one caller may see and steer
//! them (`GET /v1/sessions`, the console's sessions page): `Process` calls routed
//! like any other, under the caller's policy.

use crate::router::Caller;
use gsv_protocol::method::SessionsPage;
use gsv_protocol::ToolResult;
use serde_json::Value;

impl super::Fleet {
    /// The sessions of every node `caller` may run `Process` on.
    pub async fn sessions(&self, caller: &Caller<'_>) -> SessionsPage {
        crate::process_sessions::gather(&self.shared, caller).await
    }

    /// One `Process` call on node `node` with `args`, as `caller`.
    pub async fn process(
        &self,
        caller: &Caller<'_>,
        node: &str,
        args: &Value,
    ) -> Result<ToolResult, gsv_protocol::ErrorShape> {
        crate::process_sessions::process(&self.shared, caller, node, args).await
    }
}
