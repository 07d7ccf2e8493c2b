//! The background process sessions of the fleet, as operators see them: gathered with
//! one `Process {action: list}` call per node (each an ordinary, audited call through
//! the router), and acted on with one `Process` call on one node.
//!
//! Shared by `GET /v1/sessions` and the console, so both list and act the same way.

use crate::error::WireError;
use crate::router::Caller;
use crate::state::Shared;
use gsv_protocol::method::{NodeFailure, SessionsPage, ToolsCallParams};
use gsv_protocol::names::NamespacedName;
use gsv_protocol::ToolResult;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Why a node's sessions could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// A node's answer to a `Process` call that is not a tool result (reported per
    /// node in `GET /v1/sessions` and the console, never as a response's status).
    #[error("{0}")]
    BadNodeResult(serde_json::Error),
}

impl WireError for SessionsError {
    fn code(&self) -> gsv_protocol::ErrorCode {
        match self {
            SessionsError::BadNodeResult(_) => gsv_protocol::ErrorCode::Internal,
        }
    }
}

/// How long one node may take to answer a `Process` call here.
pub const PROCESS_TIMEOUT_MS: u64 = 10_000;

/// One `Process` call on `node` with `args`, as `caller`: the tool's result, or the
/// error that kept it from one.
pub async fn process(
    shared: &Shared,
    caller: &Caller<'_>,
    node: &str,
    args: &Value,
) -> Result<ToolResult, gsv_protocol::ErrorShape> {
    let params = ToolsCallParams {
        name: NamespacedName::join(node, "Process"),
        args: serde_json::value::to_raw_value(args).unwrap_or_default(),
        timeout_ms: Some(PROCESS_TIMEOUT_MS),
        is_async: false,
    };
    let raw = crate::router::call(shared, caller, params, CancellationToken::new()).await?;
    serde_json::from_str::<ToolResult>(raw.get())
        .map_err(|e| SessionsError::BadNodeResult(e).to_shape())
}

/// The sessions of every node `caller` may run `Process` on, each tagged with its
/// `node`; a node that does not answer is listed under `errors`.
pub async fn gather(shared: &Shared, caller: &Caller<'_>) -> SessionsPage {
    let policy = caller.policy;
    let nodes: Vec<String> = shared
        .registry
        .all()
        .into_iter()
        .filter_map(|n| {
            let classes = shared.registry.tool(&n, "Process")?.classes;
            let id = n.id.to_string();
            let name = NamespacedName::join(&id, "Process");
            (policy.decide(&name, classes) == crate::policy::Decision::Allow).then_some(id)
        })
        .collect();
    let list = serde_json::json!({"action": "list"});
    let calls = nodes.iter().map(|node| {
        let list = &list;
        async move { (node.clone(), process(shared, caller, node, list).await) }
    });
    let mut sessions = Vec::new();
    let mut errors = Vec::new();
    for (node, outcome) in futures_util::future::join_all(calls).await {
        match outcome {
            Ok(r) if !r.is_error => {
                let list = r
                    .structured_content
                    .as_ref()
                    .and_then(|v| v.get("sessions"))
                    .and_then(|v| v.as_array())
                    .cloned()
                    .unwrap_or_default();
                for mut s in list {
                    if let Some(obj) = s.as_object_mut() {
                        obj.insert("node".into(), Value::String(node.clone()));
                    }
                    sessions.push(s);
                }
            }
            Ok(r) => errors.push(NodeFailure {
                node,
                error: r.joined_text(),
            }),
            Err(e) => errors.push(NodeFailure {
                node,
                error: e.to_string(),
            }),
        }
    }
    SessionsPage { sessions, errors }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::ErrorCode;

    #[test]
    fn a_bad_node_answer_is_an_internal_error() {
        let json = serde_json::from_str::<u8>("{").expect_err("not JSON");
        let why = json.to_string();
        let e = SessionsError::BadNodeResult(json);
        let shape = e.to_shape();
        assert_eq!(
            (shape.code, shape.message.as_str()),
            (ErrorCode::Internal, why.as_str())
        );
        assert_eq!(e.status().as_u16(), 500);
        assert_eq!(shape.to_string(), format!("internal: {why}"));
    }
}
