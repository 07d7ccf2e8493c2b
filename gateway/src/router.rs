//! Routing one agent call to the node its name points at, and back.
//!
//! Order of checks: name → policy → node → tool → arguments (against the tool's JSON
//! Schema) → dispatch. Arguments and the result cross the gateway as the exact bytes
//! received; only validation parses the arguments. One deadline covers the call; the
//! node gets the same deadline, and the gateway waits a short slack past it so a
//! node's own timeout answer arrives first.

use crate::policy::{Decision, Policy};
use crate::registry::{CallOutcome, PendingError};
use crate::state::Shared;
use gsv_protocol::frame::{encode_cancel, encode_req};
use gsv_protocol::method::{ToolInvokeOut, ToolsCallParams};
use gsv_protocol::{ErrorCode, ErrorShape, Method, NamespacedName};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How long past the deadline the gateway waits for the node's own answer.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);

fn not_found(message: String) -> ErrorShape {
    ErrorShape::new(ErrorCode::NotFound, message)
}

/// Routes one `tools.call`. `cancel` fires when the caller cancels or goes away.
pub async fn call(
    shared: &Shared,
    policy: &Policy,
    params: ToolsCallParams,
    cancel: CancellationToken,
) -> CallOutcome {
    let started = Instant::now();
    let name = match NamespacedName::parse(&params.name) {
        Ok(n) => n,
        Err(e) => return Err(not_found(format!("no tool {:?}: {e}", params.name))),
    };
    let span = tracing::info_span!("call", node = %name.node, tool = %name.tool, call_id = tracing::field::Empty);
    let tool_label = name.tool.as_str().to_owned();
    let outcome = route(shared, policy, &name, &params, cancel)
        .instrument(span)
        .await;
    let label = match &outcome {
        Ok(raw) if is_tool_error(raw.get()) => "tool_error",
        Ok(_) => "ok",
        Err(e) => e.code.as_str(),
    };
    shared
        .metrics
        .call_done(&tool_label, label, started.elapsed().as_secs_f64());
    outcome
}

/// Whether a raw result says `"isError":true` (for metrics only; cheap and exact
/// enough because results are produced by our serializer without spaces).
fn is_tool_error(raw: &str) -> bool {
    raw.contains("\"isError\":true")
}

async fn route(
    shared: &Shared,
    policy: &Policy,
    name: &NamespacedName,
    params: &ToolsCallParams,
    cancel: CancellationToken,
) -> CallOutcome {
    let full = params.name.as_str();
    match policy.decide(full) {
        Decision::Allow => {}
        Decision::Deny => {
            tracing::warn!(tool = full, "call outside the agent's policy");
            return Err(ErrorShape::new(
                ErrorCode::Forbidden,
                format!("this token may not call {full}"),
            ));
        }
        Decision::Confirm => {
            return Err(ErrorShape::new(
                ErrorCode::ApprovalRequired,
                format!(
                "{full} needs an operator's approval, and this gateway has no approval queue yet"
            ),
            ))
        }
    }
    let node_id = name.node.as_str();
    let Some(node) = shared.registry.get(node_id) else {
        if let Some(since) = shared.registry.offline_since(node_id) {
            return Err(ErrorShape::new(
                ErrorCode::NodeOffline,
                format!(
                    "node {node_id} is offline since {}",
                    crate::time::rfc3339(since)
                ),
            )
            .with_details(json!({ "node": node_id, "since": since })));
        }
        return Err(not_found(format!("no node named {node_id} is connected")));
    };
    let Some(spec) = node.tools.get(name.tool.as_str()) else {
        return Err(not_found(format!(
            "node {node_id} has no tool named {}",
            name.tool
        )));
    };
    let args: serde_json::Value = serde_json::from_str(params.args.get()).map_err(|e| {
        ErrorShape::new(
            ErrorCode::InvalidArgs,
            format!("args are not valid JSON: {e}"),
        )
    })?;
    spec.validate_args(&args)?;
    let timeout_ms = params
        .timeout_ms
        .or(spec.def.default_timeout_ms)
        .unwrap_or(gsv_protocol::limits::DEFAULT_CALL_TIMEOUT_MS)
        .clamp(1, gsv_protocol::limits::MAX_CALL_TIMEOUT_MS);

    let (call_id, rx) = match node.begin_call() {
        Ok(x) => x,
        Err(PendingError::Full) => {
            return Err(ErrorShape::new(
                ErrorCode::Overloaded,
                format!("node {node_id} has too many calls pending"),
            ))
        }
        Err(PendingError::Closed) => {
            return Err(ErrorShape::new(
                ErrorCode::NodeOffline,
                format!("node {node_id} is disconnecting"),
            ))
        }
    };
    tracing::Span::current().record("call_id", call_id);
    let id = call_id.to_string();
    let frame = encode_req(
        &id,
        Method::ToolInvoke,
        &ToolInvokeOut {
            tool: name.tool.as_str(),
            args: &params.args,
            timeout_ms,
        },
    );
    shared.metrics.pending_calls.inc();
    let outcome = dispatch(shared, &node, call_id, &id, frame, rx, timeout_ms, cancel).await;
    shared.metrics.pending_calls.dec();
    outcome
}

#[allow(clippy::too_many_arguments)]
async fn dispatch(
    _shared: &Shared,
    node: &crate::registry::NodeHandle,
    call_id: u64,
    id: &str,
    frame: String,
    rx: tokio::sync::oneshot::Receiver<CallOutcome>,
    timeout_ms: u64,
    cancel: CancellationToken,
) -> CallOutcome {
    if node.out.send(frame).is_err() {
        node.abandon_call(call_id);
        return Err(ErrorShape::new(
            ErrorCode::NodeDisconnected,
            format!("node {} closed before the call could be sent", node.id),
        )
        .with_details(json!({ "dispatched": false, "node": node.id.as_str() })));
    }
    let deadline = Duration::from_millis(timeout_ms) + DEADLINE_SLACK;
    tokio::select! {
        r = rx => match r {
            Ok(outcome) => outcome,
            // The sender is dropped only when the pending entry is removed without an
            // answer, which happens when the connection goes away.
            Err(_) => Err(crate::registry::disconnected(&node.id)),
        },
        _ = tokio::time::sleep(deadline) => {
            node.abandon_call(call_id);
            let _ = node.out.send(encode_cancel(id));
            tracing::info!("call timed out");
            Err(ErrorShape::new(
                ErrorCode::Timeout,
                format!("no result within {timeout_ms} ms; the call was cancelled on the node"),
            ))
        }
        _ = cancel.cancelled() => {
            node.abandon_call(call_id);
            let _ = node.out.send(encode_cancel(id));
            tracing::info!("call cancelled by the caller");
            Err(ErrorShape::new(ErrorCode::Cancelled, "cancelled by the caller"))
        }
    }
}
