//! Ending the process sessions of revoked tokens on the nodes.
//!
//! A session belongs to the token that started it (`tool.invoke.caller`). When that
//! token is revoked its connections close (`revocation`), and its sessions must stop
//! too: a revoked agent must not keep `sleep`s holding its share of a node, nor jobs
//! running that nobody may now see or stop. The gateway sends `sessions.end` with the
//! revoked ids to every connected node, and to each node that connects later the
//! agent tokens revoked recently ([`crate::recent_revocations`]: a node offline at
//! revocation time ends them when it comes back).

use crate::registry::{AskError, NodeHandle};
use crate::state::Shared;
use gsv_protocol::method::SessionsEndParams;
use gsv_protocol::Method;
use std::sync::Arc;
use std::time::Duration;

/// How long the gateway waits for a node's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Tells `node` to end the sessions of `token_ids`, and waits (bounded) for its answer.
pub async fn end_on(node: Arc<NodeHandle>, token_ids: Vec<String>) {
    if token_ids.is_empty() {
        return;
    }
    let params = SessionsEndParams { token_ids };
    match node.ask(Method::SessionsEnd, &params, ANSWER_TIMEOUT).await {
        Ok(raw) => {
            tracing::info!(node_id = %node.id, result = raw.get(), "sessions of revoked tokens ended")
        }
        Err(AskError::Refused { shape, .. }) => {
            tracing::warn!(node_id = %node.id, error = %shape.message, "sessions.end refused")
        }
        Err(_) => {}
    }
}

/// Tells every connected node to end the sessions of `token_ids`.
pub fn end_everywhere(shared: &Shared, token_ids: Vec<String>) {
    for node in shared.registry.all() {
        tokio::spawn(end_on(node, token_ids.clone()));
    }
}

/// Tells a node that just connected which agent tokens were revoked recently.
pub async fn on_connect(shared: Arc<Shared>, node: Arc<NodeHandle>) {
    if let Some(ids) = shared.revoked_recent.get(&shared.store).await {
        end_on(node, ids.as_ref().clone()).await;
    }
}
