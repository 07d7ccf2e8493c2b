//! The fleet's background process sessions, as an operator's door lists and acts on
//! them: one `Process` call per node, each an ordinary audited call through the
//! router ([`crate::process_sessions`]), so a door asks for them here instead of
//! holding the router's state itself.

use crate::router::Caller;
use gsv_protocol::method::SessionsPage;
use gsv_protocol::ToolResult;
use serde_json::Value;

impl super::Fleet {
    /// One `Process` call on node `node` with `args`, as `caller`: the tool's result,
    /// or the error that kept it from one.
    pub async fn call_process(
        &self,
        caller: &Caller<'_>,
        node: &str,
        args: &Value,
    ) -> Result<ToolResult, gsv_protocol::ErrorShape> {
        crate::process_sessions::process(&self.shared, caller, node, args).await
    }

    /// The process sessions of every node `caller` may run `Process` on, each tagged
    /// with its node; a node that does not answer is listed under `errors`.
    pub async fn process_sessions(&self, caller: &Caller<'_>) -> SessionsPage {
        crate::process_sessions::gather(&self.shared, caller).await
    }
}
