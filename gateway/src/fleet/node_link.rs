//! A node's connection as the fleet sees it: entering the node (its declaration, its
//! credential, a join token's enrollment, the review of its offer), listing it,
//! relaying what it sends to whom it concerns, and taking it out when it goes.
//!
//! The node WebSocket (`node_session`) drives the connection and reads its frames;
//! what they change in the gateway happens here.

use crate::audit::{AuditEvent, Enrollment};
use crate::conn::{EndReason, Ws};
use crate::handshake::{Handshake, HandshakeError};
use crate::offers::Reviewed;
use crate::registry::NodeHandle;
use crate::state::Shared;
use crate::store::Redeem;
use crate::token::TokenKind;
use gsv_protocol::event::NodeEvent;
use gsv_protocol::names::NamespacedName;
use gsv_protocol::{EventName, Limits, NodeId};
use gsv_transport::{queue, Queue};
use serde_json::value::RawValue;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The connection, and its send queue, that a registered node's session drives.
pub(crate) type Stream = (Ws, Queue);

/// What [`super::Fleet::register_node`] hands the session: the node, its connection,
/// and how its offer compares with the accepted one.
pub(crate) type Registered = (Arc<NodeHandle>, Stream, Reviewed);

/// One connection's stray results, as its session counted them.
pub(crate) struct StrayCount {
    pub total: u64,
    pub cut_off: bool,
}

impl super::Fleet {
    /// Validates the node's declaration and credential, sends `hello-ok`, and enters the
    /// node in the registry.
    pub(crate) async fn register_node(&self, mut hs: Handshake) -> Option<Registered> {
        let shared = &self.shared;
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

    /// Lists a registered node: what it adds is flagged (pinned: hidden), the connection
    /// it replaces is closed and its callers move here, the connect is audited and agents
    /// hear of its tools.
    pub(crate) fn node_connected(&self, handle: &Arc<NodeHandle>, reviewed: Reviewed) {
        let shared = &self.shared;
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
        crate::offers::record_review(&shared.audit, handle, &reviewed, pin);
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
    }
    /// Takes a node's ended connection out: its transfers fail, its callers wait a grace
    /// period for it to come back (router), it leaves the registry unless a newer
    /// connection replaced it, and the disconnect is audited.
    pub(crate) fn node_disconnected(
        &self,
        handle: &NodeHandle,
        reason: &EndReason,
        strays: StrayCount,
    ) {
        let shared = &self.shared;
        handle.close_lane();
        crate::transfer::node_gone(shared, handle);

        handle.out.close();
        shared.metrics.connected_nodes.dec();
        // Callers wait a grace period for this node process to come back (router).
        let released = handle.release_all_pending();
        let current = shared.registry.remove_if_current(handle);
        tracing::info!(?reason, pending_calls = released, "node disconnected");
        shared.audit.record(AuditEvent::NodeDisconnected {
            node: handle.id.as_str(),
            reason,
            cut_off: strays.cut_off,
            pending_calls: released,
            conn_id: &handle.conn_id,
            stray_results: strays.total,
        });
        if current {
            shared.tools_changed(handle.id.as_str(), &handle.tools, "disconnected");
        }
        if *reason == EndReason::HeartbeatLost {
            tracing::warn!("node silent for two heartbeat intervals; dropped");
        }
    }

    /// A node's `process.exited`, first time seen: to the connections of the token that
    /// started the session (if it may use Process without approval) and to operators.
    pub(crate) fn process_exited(&self, handle: &NodeHandle, payload: Option<Box<RawValue>>) {
        let shared = &self.shared;
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
                && a.policy.decide(&process_tool, process_classes)
                    == crate::policy::Decision::Allow;
            if a.authority.reads_all() || owns {
                a.send_event(EventName::ProcessExited, &event);
            }
        }
        shared.changes.send(crate::changes::Topic::Sessions);
    }

    /// Whether event `seq` of `handle`'s node is new (a reconnect may send it again).
    pub(crate) fn first_node_event(&self, handle: &NodeHandle, seq: u64) -> bool {
        self.shared.registry.first_event(handle, seq)
    }

    /// A binary transfer frame from a node, relayed to its agent.
    pub(crate) fn node_transfer_frame(&self, handle: &NodeHandle, frame: bytes::Bytes) {
        crate::transfer::from_node(&self.shared, handle, frame)
    }

    /// A node's transfer event (credit, end, failure), relayed.
    pub(crate) fn node_transfer_event(
        &self,
        handle: &NodeHandle,
        event: EventName,
        payload: Option<Box<RawValue>>,
    ) {
        crate::transfer::node_event(&self.shared, handle, event, payload)
    }

    /// Serves a lane connection (`hs.params.lane`): a second connection of a registered
    /// node that carries bulk data.
    pub(crate) async fn serve_lane(&self, hs: Handshake) {
        crate::lane::run_node(self.shared.clone(), hs).await
    }
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
