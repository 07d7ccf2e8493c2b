//! Ending the process sessions of revoked tokens on the nodes.
//!
//! A session belongs to the token that started it (`tool.invoke.caller`). When that
//! token is revoked its connections close (`revocation`), and its sessions must stop
//! too: a revoked agent must not keep `sleep`s holding its share of a node, nor jobs
//! running that nobody may now see or stop. The gateway sends `sessions.end` with the
//! revoked ids to every connected node, and to each node that connects later the
//! agent tokens revoked in the last [`RECENT`] (a node offline at revocation time ends
//! them when it comes back).

use crate::registry::NodeHandle;
use crate::state::Shared;
use gsv_protocol::frame::encode_req;
use gsv_protocol::method::SessionsEndParams;
use gsv_protocol::Method;
use rusqlite::params;
use std::sync::Arc;
use std::time::Duration;

/// How far back a connecting node is told of revoked tokens.
pub const RECENT: Duration = Duration::from_secs(7 * 24 * 3600);
/// At most this many ids go to a connecting node (the most recent).
const MAX_IDS: usize = 1024;
/// How long the gateway waits for a node's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Tells `node` to end the sessions of `token_ids`, and waits (bounded) for its answer.
pub async fn end_on(node: Arc<NodeHandle>, token_ids: Vec<String>) {
    if token_ids.is_empty() {
        return;
    }
    let Ok((call_id, rx)) = node.begin_call() else {
        return;
    };
    let frame = encode_req(
        &call_id.to_string(),
        Method::SessionsEnd,
        &SessionsEndParams { token_ids },
    );
    if node.out.send(frame).is_err() {
        node.abandon_call(call_id);
        return;
    }
    match tokio::time::timeout(ANSWER_TIMEOUT, rx).await {
        Ok(Ok(Ok(raw))) => {
            tracing::info!(node_id = %node.id, result = raw.get(), "sessions of revoked tokens ended")
        }
        Ok(Ok(Err(e))) => {
            tracing::warn!(node_id = %node.id, error = %e.message, "sessions.end refused")
        }
        Ok(Err(_)) => {}
        Err(_) => node.abandon_call(call_id),
    }
}

/// Tells every connected node to end the sessions of `token_ids`.
pub fn end_everywhere(shared: &Shared, token_ids: Vec<String>) {
    for node in shared.registry.all() {
        tokio::spawn(end_on(node, token_ids.clone()));
    }
}

/// The recently revoked agent token ids, read from the store at most once a second:
/// a reconnect storm of thousands of nodes costs one query, not one per node.
#[derive(Default)]
pub struct RecentRevocations {
    cached: tokio::sync::Mutex<Option<(std::time::Instant, Arc<Vec<String>>)>>,
}

impl RecentRevocations {
    /// Forgets what was read (a token was just revoked).
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }
}

/// How long [`RecentRevocations`] keeps what it read.
const CACHE: Duration = Duration::from_secs(1);

/// Tells a node that just connected which agent tokens were revoked recently.
pub async fn on_connect(shared: Arc<Shared>, node: Arc<NodeHandle>) {
    let ids = {
        let mut cached = shared.revoked_recent.cached.lock().await;
        match &*cached {
            Some((at, ids)) if at.elapsed() < CACHE => Arc::clone(ids),
            _ => {
                let Some(ids) = read_recent(&shared).await else {
                    return;
                };
                let ids = Arc::new(ids);
                *cached = Some((std::time::Instant::now(), Arc::clone(&ids)));
                ids
            }
        }
    };
    end_on(node, ids.as_ref().clone()).await;
}

/// The agent tokens revoked in the last [`RECENT`], newest first.
async fn read_recent(shared: &Shared) -> Option<Vec<String>> {
    let since = gsv_protocol::now_ms().saturating_sub(RECENT.as_millis() as u64) as i64;
    let found = shared
        .store
        .blocking(move |store| {
            store.with_conn(|c| {
                let mut stmt = c.prepare(
                    "SELECT id FROM tokens WHERE kind = 'agent' AND revoked_at IS NOT NULL \
                     AND revoked_at >= ?1 ORDER BY revoked_at DESC LIMIT ?2",
                )?;
                let rows =
                    stmt.query_map(params![since, MAX_IDS as i64], |r| r.get::<_, String>(0))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
        })
        .await;
    match found {
        Ok(Ok(ids)) => Some(ids),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read revoked tokens");
            None
        }
        Err(_) => None,
    }
}
