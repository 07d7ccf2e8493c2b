//! What a restarted node process does with the journal the one before it left, so a
//! node crash (SIGKILL, OOM kill, panic) loses nothing silently.
//!
//! At start, before the first dial ([`open`], then [`restore`] once the node state
//! exists): the session manager re-adopts the journaled sessions
//! ([`crate::sessions::SessionManager::adopt`]), and every journaled call gets an
//! answer in the ledger, so a `tool.invoke` with `resume: true` for it finds one:
//! - a call that finished: its kept result frame;
//! - a Bash call whose command was re-adopted: its result when the command ends (at
//!   once if it already has; for a `yieldMs` call, the "running in the background"
//!   result if it still runs), exactly as Bash would have answered;
//! - anything else (another tool's call that was running, a pty or exec command, a
//!   command whose supervisor is gone): `node_disconnected` with a message starting
//!   `lost:` that says why.

use crate::config::NodeConfig;
use crate::dispatch::encode_result;
use crate::journal::{Journal, LoadedCall};
use crate::registry::Registry;
use crate::sessions::adopt::Adoption;
use crate::sessions::session::KillReason;
use crate::sessions::Session;
use crate::state::NodeState;
use crate::tools::bash;
use gsv_protocol::frame::encode_err;
use gsv_protocol::limits::MAX_RESULT_BYTES;
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape};
use std::collections::HashMap;
use std::sync::Arc;
use tracing::{info, info_span, warn, Instrument};

/// The journal of a node with a data directory, with the sessions re-adopted; `None`
/// without a data directory, or if the journal cannot be opened (then the node runs
/// without one, and says so).
pub(crate) fn open(
    config: &NodeConfig,
    registry: &Registry,
) -> Option<(Journal, HashMap<String, Adoption>)> {
    let data_dir = config.data_dir.as_ref()?;
    let journal = match Journal::open(data_dir, config.id.as_str()) {
        Ok(journal) => journal,
        Err(e) => {
            warn!(error = %e, "no journal: calls and sessions will not survive a node crash");
            return None;
        }
    };
    info!(dir = ?journal.root(), "journaling calls and sessions");
    let adopted = match registry.sessions() {
        Some(sessions) => {
            sessions.attach_journal(journal.sessions_dir().to_owned());
            sessions.adopt()
        }
        None => HashMap::new(),
    };
    Some((journal, adopted))
}

/// Loads the journaled calls into the node's ledger (see the module docs).
pub(crate) fn restore(
    node: &Arc<NodeState>,
    journal: &Journal,
    mut adopted: HashMap<String, Adoption>,
) {
    let sessions = node.registry.sessions().cloned();
    for call in journal.calls().load() {
        match call {
            LoadedCall::Done { id, frame, done_at } => {
                node.ledger.restore_done(&id, frame, done_at);
            }
            LoadedCall::Forgotten { id } => node.ledger.restore_forgotten(&id),
            LoadedCall::Pending { id, tool, .. } => {
                node.ledger.restore_pending(&id);
                match adopted.remove(&id) {
                Some(Adoption::Session(session)) => answer_with(node, id, session),
                Some(Adoption::Lost(why)) => lost(node, &id, &why),
                None => lost(
                    node,
                    &id,
                    &format!(
                        "the node restarted while the call ran (tool {tool:?}); its outcome is unknown"
                    ),
                ),
                }
            }
        }
    }
    // Foreground sessions whose calls were answered already.
    if let Some(sessions) = sessions {
        for adoption in adopted.into_values() {
            if let Adoption::Session(session) = adoption {
                sessions.forget_adopted(&session);
            }
        }
    }
}

/// Answers call `id` with `lost: why`.
fn lost(node: &NodeState, id: &str, why: &str) {
    warn!(call_id = %id, why, "a journaled call cannot be recovered; reporting it lost");
    let e = ErrorShape::new(ErrorCode::NodeDisconnected, format!("lost: {why}"))
        .with(ErrorDetails::disconnected(true, node.config.id.as_str()));
    node.ledger.finish(id, &encode_err(id, &e));
}

/// Answers Bash call `id` with the result of its re-adopted `session`: now if it is
/// settled, else when its command ends.
fn answer_with(node: &Arc<NodeState>, id: String, session: Arc<Session>) {
    let forget = |session: &Session| {
        if let Some(sessions) = node.registry.sessions() {
            sessions.forget_adopted(session);
        }
    };
    if session.is_finished() {
        info!(call_id = %id, "a journaled call's command finished; its result is kept");
        let frame = encode_result(&id, &bash::finished_result(&session), MAX_RESULT_BYTES);
        node.ledger.finish(&id, &frame);
        return forget(&session);
    }
    if session.is_background() {
        // A `yieldMs` call that outlived its yield: the command goes on in the background.
        let frame = encode_result(
            &id,
            &bash::running_result(&session.snapshot()),
            MAX_RESULT_BYTES,
        );
        node.ledger.finish(&id, &frame);
        return;
    }
    info!(call_id = %id, session_id = %session.id(), "a journaled call's command was re-adopted; answering when it ends");
    let token = node.ledger.adopt(&id);
    let node = Arc::clone(node);
    let span = info_span!("call", node_id = %node.config.id, call_id = %id);
    let answer = async move {
        tokio::select! {
            _ = session.wait_finished() => {}
            _ = token.cancelled() => {
                session.kill(KillReason::CallEnded);
                session.wait_finished().await;
            }
        }
        let frame = encode_result(&id, &bash::finished_result(&session), MAX_RESULT_BYTES);
        if let Some(out) = node.ledger.finish(&id, &frame) {
            if out.send(frame).await.is_err() {
                info!("the connection closed before the result could be sent; result kept for redelivery");
            }
            node.ledger.sent();
        }
        if let Some(sessions) = node.registry.sessions() {
            sessions.forget_adopted(&session);
        }
    };
    tokio::spawn(answer.instrument(span));
}
