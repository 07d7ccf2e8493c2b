//! A node's bulk lane: a second connection from a node that carries only the chunks of
//! the transfers the node put on it, served on the bulk runtime ([`crate::bulk`]).
//!
//! On one connection a call to a node shared the node's socket and the gateway's
//! workers with the chunks of an upload to it. A lane moves the bytes to threads below
//! calls at both ends; calls, credits and every other transfer message stay on the
//! node's connection. A lane joins the connection of the same node process (its
//! `instance`), authenticated with the node's credential, and ends with it.

use crate::conn::drive;
use crate::handshake::{Handshake, HandshakeError};
use crate::state::Shared;
use crate::token::TokenKind;
use gsv_protocol::Limits;
use gsv_transport::queue;
use gsv_transport::tungstenite::protocol::frame::coding::CloseCode;
use std::sync::Arc;
use tracing::Instrument;

/// Close reason for a lane that sent a text frame.
const CLOSE_TEXT: &str = "a bulk lane carries transfer chunks only";

/// Serves a node's bulk lane (`connect.lane`) until it or the node's connection ends.
pub async fn run_node(shared: Arc<Shared>, hs: Handshake) {
    let instance = hs
        .params
        .lane
        .as_ref()
        .and_then(|l| l.instance.clone())
        .unwrap_or_default();
    if hs.token.kind != TokenKind::Node || instance.is_empty() {
        hs.refuse(&shared, HandshakeError::LaneNeedsConnection)
            .await;
        return;
    }
    let node = match shared.registry.get(&hs.token.subject) {
        Some(node) if node.instance == instance && !node.out.is_closed() => node,
        _ => {
            let node = hs.token.subject.clone();
            hs.refuse(&shared, HandshakeError::LaneWithoutConnection { node })
                .await;
            return;
        }
    };
    let conn_id = uuid::Uuid::new_v4().to_string();
    let limits = Limits::standard(0, shared.config.heartbeat.as_millis() as u64);
    let Some(ws) = hs.hello(&conn_id, limits, None).await else {
        return;
    };
    // Closed with the node's connection, and by a stopping gateway through it.
    let (out, queue) = queue(node.out.closed_token().child_token());
    node.join_lane(&conn_id, out.clone());
    let _session = shared.closing.token();
    let span = tracing::info_span!("lane", node_id = %node.id, conn_id = %conn_id);
    let work = async move {
        tracing::info!("bulk lane joined");
        shared.metrics.bulk_lanes.inc();
        let reason = drive(
            ws,
            queue,
            &out,
            shared.config.heartbeat,
            &shared.closing,
            |_| out.close_with(CloseCode::Policy, CLOSE_TEXT),
            |frame| {
                shared.metrics.lane_chunks.inc();
                crate::transfer::from_node(&shared, &node, frame)
            },
        )
        .await;
        shared.metrics.bulk_lanes.dec();
        node.leave_lane(&conn_id);
        crate::transfer::lane_gone(&shared, &node, &conn_id);
        tracing::info!(?reason, "bulk lane ended");
    };
    crate::bulk::run(work.instrument(span)).await;
}
