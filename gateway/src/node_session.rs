//! One node connection, from handshake to goodbye.
//!
//! After `hello-ok` the node is in the registry and receives `tool.invoke` requests;
//! its `res` frames complete the pending calls of this connection only. When the
//! connection ends (for any reason) every call still pending on it fails at once with
//! `node_disconnected`, and agents hear that the node's tools went offline.
//!
//! Before `hello-ok` the node's offer is compared with the one accepted for its id
//! (`crate::offers`); what it adds is entered, flagged (and under `--pin-tools`
//! hidden), in the registry together with the connection.

use crate::audit::{AuditEvent, Enrollment};
use crate::conn::{drive, EndReason, Ws};
use crate::handshake::{self, Handshake, HandshakeError};
use crate::offers::Reviewed;
use crate::registry::{Completion, NodeHandle};
use crate::session_error::SessionError;
use crate::state::Shared;
use crate::store::Redeem;
use crate::token::TokenKind;
use gsv_protocol::event::NodeEvent;
use gsv_protocol::frame::{encode_err, encode_event};
use gsv_protocol::names::NamespacedName;
use gsv_protocol::{ErrorShape, EventName, Frame, Limits, NodeId, Role};
use gsv_transport::{queue, Queue};
use serde_json::value::RawValue;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::Instrument;

/// Serves a node WebSocket until it closes.
///
/// The handshake, a lane's session and the registration run boxed: this future lives
/// as long as the node is connected, and an async function is as large as its largest
/// state, so the steps that end early would otherwise hold their room in every
/// connected node's task for good (several KiB a node, BENCHMARKS.md).
pub async fn run(shared: Arc<Shared>, ws: Ws, peer: SocketAddr) {
    let Some(hs) = Box::pin(handshake::accept(ws, &shared, Role::Node, peer)).await else {
        return;
    };
    if hs.params.lane.is_some() {
        Box::pin(crate::lane::run_node(shared, hs)).await;
        return;
    }
    let Some((handle, stream, reviewed)) = Box::pin(register(&shared, hs)).await else {
        return;
    };
    // A stopping gateway waits (bounded) for its sessions to end and deliver what they
    // queued (the shutdown notice, cancels).
    let _session = shared.closing.token();
    let span = tracing::info_span!("node", node_id = %handle.id, conn_id = %handle.conn_id);
    serve(shared, handle, stream, reviewed)
        .instrument(span)
        .await;
}

/// The connection, and its send queue, that a registered node's session drives.
type Stream = (Ws, Queue);

/// What [`register`] hands [`serve`]: the node, its connection, and how its offer
/// compares with the accepted one.
type Registered = (Arc<NodeHandle>, Stream, Reviewed);

/// The window over which a connection's stray results are counted against
/// [`gsv_protocol::limits::MAX_STRAY_RESULTS`].
const STRAY_WINDOW: Duration = Duration::from_secs(10);

/// Close reason for a node connection cut off for flooding stray results.
const CLOSE_STRAY: &str = "too many stray results: answers to calls this connection was never sent";

/// One connection's stray results: a node that floods them is cut off. Legitimate
/// strays (duplicates after a resume, late answers beyond the remembered abandoned ids)
/// come in bursts bounded by the pending calls, far below the limit.
#[derive(Default)]
struct Strays {
    /// Since when the current window counts, and how many it counted.
    window: Option<(Instant, usize)>,
    total: u64,
    cut_off: bool,
}

impl Strays {
    /// Counts one stray result; returns whether it is the first of its window (worth
    /// a warning) and whether the connection must now be cut off.
    fn count(&mut self, now: Instant) -> (bool, bool) {
        self.total += 1;
        let n = match &mut self.window {
            Some((start, n)) if now.duration_since(*start) < STRAY_WINDOW => {
                *n += 1;
                *n
            }
            w => {
                *w = Some((now, 1));
                1
            }
        };
        let over = n > gsv_protocol::limits::MAX_STRAY_RESULTS && !self.cut_off;
        self.cut_off |= over;
        (n == 1, over)
    }
}

/// Validates the node's declaration and credential, sends `hello-ok`, and enters the
/// node in the registry.
async fn register(shared: &Arc<Shared>, mut hs: Handshake) -> Option<Registered> {
    let Some(info) = hs.params.node.take() else {
        hs.refuse(shared, HandshakeError::NoNodeObject).await;
        return None;
    };
    let id = match NodeId::parse(&info.id) {
        Ok(id) => id,
        Err(e) => {
            hs.refuse(shared, HandshakeError::BadNodeId(e)).await;
            return None;
        }
    };
    if !matches!(hs.token.kind, TokenKind::Node | TokenKind::Join) {
        let kind = hs.token.kind;
        hs.refuse(shared, HandshakeError::NotANodeToken(kind)).await;
        return None;
    }
    if hs.token.subject != id.as_str() {
        tracing::warn!(
            peer = %hs.peer,
            claimed = %id,
            bound = %hs.token.subject,
            token_id = %hs.token.id,
            "node token used for another node id"
        );
        let err = HandshakeError::BoundToOtherNode {
            bound: hs.token.subject.clone(),
            claimed: id,
        };
        hs.refuse(shared, err).await;
        return None;
    }
    let tools = match shared
        .registry
        .interner
        .intern(&id, info.tools, info.capabilities)
    {
        Ok(t) => t,
        Err(e) => {
            hs.refuse(shared, e.into()).await;
            return None;
        }
    };
    let mut token_id = hs.token.id.clone();
    let mut credential = None;
    if hs.token.kind == TokenKind::Join {
        match enroll(shared, hs.token.id.clone(), hs.peer, &id).await {
            Ok((token, id)) => {
                credential = Some(token);
                token_id = id;
            }
            Err(e) => {
                hs.refuse(shared, e).await;
                return None;
            }
        }
    }
    // After enrollment, so a refused connect records no offer; before `hello-ok`, so
    // the node is never listed before what it adds is known.
    let reviewed = match shared.offers.review(&shared.store, &id, &tools).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(node_id = %id, error = %e, "cannot compare the node's offer with the accepted one");
            hs.refuse(shared, e.into()).await;
            return None;
        }
    };
    // The node's labels as the store has them now (`gsv token create node … --label`
    // writes them from another process). A store that cannot say refuses the connect,
    // like the offer review above: listing the node without its labels would let a
    // selector miss it or match it wrongly. The node retries with its backoff.
    if let Err(e) = shared.labels.refresh(&shared.store, id.as_str()).await {
        tracing::error!(node_id = %id, error = %e, "cannot read the node's labels");
        hs.refuse(shared, HandshakeError::Store(e)).await;
        return None;
    }
    let version = hs.params.client.bounded_version();
    let conn_id = uuid::Uuid::new_v4().to_string();
    let peer = hs.peer;
    let limits = Limits::standard(
        gsv_protocol::limits::MAX_PENDING_PER_NODE,
        shared.config.heartbeat.as_millis() as u64,
    );
    let ws = hs.hello(&conn_id, limits, credential).await?;
    let (out, queue) = queue(shared.shutdown.child_token());
    let mut runtime = info.runtime;
    runtime.login_profile = runtime.login_profile.map(|lp| Box::new(lp.bounded()));
    runtime.facts = runtime.facts.map(|f| Box::new(f.bounded()));
    let handle = Arc::new(NodeHandle::new(
        id,
        conn_id,
        token_id,
        out,
        tools,
        info.host_role,
        runtime,
        peer,
        info.instance,
        info.journal,
        version,
        shared.registry.call_ids.clone(),
    ));
    Some((handle, (ws, queue), reviewed))
}

/// Exchanges the connection's join token for the node's credential. Done last, after
/// everything else about the connect was validated, so a refused connect never burns
/// the join token.
async fn enroll(
    shared: &Shared,
    join_id: String,
    peer: SocketAddr,
    id: &NodeId,
) -> Result<(String, String), HandshakeError> {
    let (join, node) = (join_id.clone(), id.to_string());
    let redeemed = shared
        .store
        .blocking(move |store| store.redeem_join(&join, &node))
        .await??;
    let (outcome, result) = match redeemed {
        Redeem::Credential { token, id: cred_id } => {
            tracing::info!(node_id = %id, credential = %cred_id, "node enrolled with a join token");
            (Enrollment::Enrolled, Ok((token, cred_id)))
        }
        Redeem::AlreadyEnrolled => {
            tracing::warn!(node_id = %id, %peer, "join token presented for a node that is already enrolled");
            (
                Enrollment::AlreadyEnrolled,
                Err(HandshakeError::AlreadyEnrolled { node: id.clone() }),
            )
        }
        Redeem::AlreadyUsed => (
            Enrollment::JoinTokenUsed,
            Err(HandshakeError::JoinTokenUsed),
        ),
    };
    shared.audit.record(AuditEvent::NodeEnrollment {
        node: id.as_str(),
        join_token_id: &join_id,
        remote: peer,
        outcome,
    });
    result
}

async fn serve(
    shared: Arc<Shared>,
    handle: Arc<NodeHandle>,
    (ws, queue): Stream,
    reviewed: Reviewed,
) {
    let pin = shared.config.pin_tools;
    // What the node adds is flagged (pinned: hidden) before its connection is listed.
    shared
        .registry
        .unaccepted
        .set(handle.id.clone(), reviewed.pending(pin));
    let replaced = shared.registry.insert(handle.clone());
    if let Some(old) = &replaced {
        tracing::info!(old_conn = %old.conn_id, "node reconnected; closing its previous connection");
        old.out
            .close_with(CloseCode::Policy, gsv_protocol::limits::CLOSE_REPLACED);
        // Its callers move to this connection now, not when its read loop notices.
        old.release_all_pending();
    }
    shared.metrics.connected_nodes.inc();
    tracing::info!(remote = %handle.remote, tools = handle.tools.tools.len(), "node connected");
    let login_profile = handle
        .runtime
        .lock()
        .ok()
        .and_then(|r| r.login_profile.clone());
    if let Some(lp) = &login_profile {
        tracing::warn!(
            // Debug-formatted: the node's text, escaped.
            changed = ?lp.changed,
            "the node reports its login profile changed since its baseline"
        );
    }
    shared.audit.record(AuditEvent::NodeConnected {
        node: handle.id.as_str(),
        remote: handle.remote,
        conn_id: &handle.conn_id,
        login_profile_changed: login_profile.as_ref().map(|lp| lp.changed.as_slice()),
    });
    crate::offers::record_review(&shared.audit, &handle, &reviewed, pin);
    let change = if replaced.is_some() {
        "replaced"
    } else {
        "connected"
    };
    // Not kept for the connection's life: the review (a first registration's whole
    // offer) and the connection this one replaced.
    drop(reviewed);
    drop(replaced);
    shared.tools_changed(handle.id.as_str(), &handle.tools, change);
    tokio::spawn(crate::session_end::on_connect(
        shared.clone(),
        handle.clone(),
    ));

    let mut strays = Strays::default();
    let reason = drive(
        ws,
        queue,
        &handle.out,
        shared.config.heartbeat,
        &shared.closing,
        |text| on_frame(&shared, &handle, &mut strays, text),
        |frame| crate::transfer::from_node(&shared, &handle, frame),
    )
    .await;
    handle.close_lane();
    crate::transfer::node_gone(&shared, &handle);

    handle.out.close();
    shared.metrics.connected_nodes.dec();
    // Callers wait a grace period for this node process to come back (router).
    let released = handle.release_all_pending();
    let current = shared.registry.remove_if_current(&handle);
    tracing::info!(?reason, pending_calls = released, "node disconnected");
    shared.audit.record(AuditEvent::NodeDisconnected {
        node: handle.id.as_str(),
        reason: &reason,
        cut_off: strays.cut_off,
        pending_calls: released,
        conn_id: &handle.conn_id,
        stray_results: strays.total,
    });
    if current {
        shared.tools_changed(handle.id.as_str(), &handle.tools, "disconnected");
    }
    if reason == EndReason::HeartbeatLost {
        tracing::warn!("node silent for two heartbeat intervals; dropped");
    }
}

fn on_frame(shared: &Shared, handle: &NodeHandle, strays: &mut Strays, text: &str) {
    let frame = match Frame::decode(text) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "undecodable frame from node");
            let _ = handle.out.send(encode_err("", &e.to_shape()));
            return;
        }
    };
    match frame {
        Frame::Res { id, outcome } => on_result(shared, handle, strays, &id, outcome),
        Frame::Event {
            event: EventName::ProcessExited,
            payload,
            seq,
        } => {
            // Acknowledged even when seen before: the earlier ack may have been lost.
            let first = shared.registry.first_event(handle, seq);
            let _ = handle.out.send(encode_event(
                EventName::EventsAck,
                &gsv_protocol::event::EventsAck { seq },
                0,
            ));
            if first {
                relay_process_exited(shared, handle, payload);
            } else {
                tracing::debug!(seq, "process.exited sent again after a reconnect; dropped");
            }
        }
        Frame::Event {
            event: EventName::CallProgress,
            payload,
            ..
        } => relay_progress(handle, payload),
        Frame::Event {
            event:
                event @ (EventName::TransferCredit | EventName::TransferEnd | EventName::TransferFailed),
            payload,
            ..
        } => crate::transfer::node_event(shared, handle, event, payload),
        Frame::Event { event, .. } => {
            tracing::debug!(event = event.as_str(), "event from node ignored");
        }
        Frame::Req {
            id, method_name, ..
        } => {
            let err = SessionError::NodeRequest {
                method: method_name,
            };
            let _ = handle.out.send(encode_err(&id, &err.into()));
        }
        Frame::Cancel { .. } => {
            tracing::debug!("cancel from node ignored");
        }
    }
}

fn on_result(
    shared: &Shared,
    handle: &NodeHandle,
    strays: &mut Strays,
    id: &str,
    outcome: Result<Box<RawValue>, ErrorShape>,
) {
    let outcome = match outcome {
        Ok(raw) if raw.get().len() > gsv_protocol::limits::MAX_RESULT_BYTES => {
            Err(SessionError::ResultTooLarge {
                bytes: raw.get().len(),
            }
            .into())
        }
        other => other,
    };
    let completion = id
        .parse::<u64>()
        .map(|call| handle.complete_call(call, outcome))
        .unwrap_or(Completion::Stray);
    match completion {
        Completion::Delivered => {}
        Completion::Late => {
            tracing::debug!(call_id = id, "late result for an abandoned call dropped");
        }
        Completion::Stray => {
            shared.metrics.stray_results.inc();
            let (first, over) = strays.count(Instant::now());
            if first {
                tracing::warn!(
                    call_id = id,
                    "result for a call id this connection was never sent; dropped"
                );
            } else {
                tracing::debug!(call_id = id, "stray result dropped");
            }
            if over {
                tracing::warn!(
                    strays = strays.total,
                    limit = gsv_protocol::limits::MAX_STRAY_RESULTS,
                    window_s = STRAY_WINDOW.as_secs(),
                    "node floods stray results; closing its connection"
                );
                handle.out.close_with(CloseCode::Policy, CLOSE_STRAY);
            }
        }
    }
}

/// Hands a `call.progress` event to the caller of that call on this connection (if it
/// asked for progress). Progress for a call this connection does not have pending is
/// dropped: a node can only report on its own calls.
fn relay_progress(handle: &NodeHandle, payload: Option<Box<RawValue>>) {
    let Some(progress) = payload
        .and_then(|p| serde_json::from_str::<gsv_protocol::event::CallProgress>(p.get()).ok())
    else {
        tracing::debug!("malformed call.progress from node ignored");
        return;
    };
    match progress.call_id.parse::<u64>() {
        Ok(id) => {
            handle.progress(id, progress);
        }
        Err(_) => {
            tracing::debug!(call_id = %progress.call_id, "call.progress for a foreign call id ignored")
        }
    }
}

fn relay_process_exited(shared: &Shared, handle: &NodeHandle, payload: Option<Box<RawValue>>) {
    let data = payload
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or(serde_json::Value::Null);
    let event = NodeEvent {
        node: handle.id.to_string(),
        data,
    };
    // A session belongs to the token that started it: its end (command line, output
    // tail) goes to that token's connections — only if it may use Process without an
    // operator's approval, since the event shows what Process would — and to operators.
    let owner = event.data.get("owner").and_then(|o| o.as_str());
    let process_tool = NamespacedName::join(handle.id.as_str(), "Process");
    let process_classes = handle.tools.get("Process").map_or_else(
        || {
            gsv_protocol::tool_class::ToolClasses::of(&gsv_protocol::CapabilityId::Builtin(
                gsv_protocol::capability::Capability::ProcessManage,
            ))
        },
        |t| t.classes,
    );
    for a in shared.agents.iter() {
        let owns = owner == Some(a.token_id.as_str())
            && a.policy.decide(&process_tool, process_classes) == crate::policy::Decision::Allow;
        if a.authority.reads_all() || owns {
            a.send_event(EventName::ProcessExited, &event);
        }
    }
    shared.changes.send(crate::changes::Topic::Sessions);
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::limits::MAX_STRAY_RESULTS;

    #[test]
    fn strays_cut_off_only_past_the_limit_within_one_window() {
        let t0 = Instant::now();
        let mut s = Strays::default();
        assert_eq!(s.count(t0), (true, false));
        for _ in 1..MAX_STRAY_RESULTS {
            assert_eq!(s.count(t0), (false, false));
        }
        // A new window starts over: a steady trickle is never cut off.
        let t1 = t0 + STRAY_WINDOW;
        assert_eq!(s.count(t1), (true, false));
        for _ in 1..MAX_STRAY_RESULTS {
            assert_eq!(s.count(t1), (false, false));
        }
        assert_eq!(s.count(t1), (false, true), "one past the limit cuts off");
        assert_eq!(s.count(t1), (false, false), "and only once");
        assert!(s.cut_off);
        assert_eq!(s.total, 2 * MAX_STRAY_RESULTS as u64 + 2);
    }
}
