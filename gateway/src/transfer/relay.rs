//! Relaying a transfer's chunks and events between its two connections, and ending
//! the transfers of a connection that goes away.

use super::{end, Route};
use crate::registry::NodeHandle;
use crate::state::{AgentHandle, Shared};
use gsv_protocol::frame::encode_req;
use gsv_protocol::transfer::{CancelParams, Chunk, Direction, Failed};
use gsv_protocol::{ErrorCode, ErrorShape, EventName, Method};
use gsv_transport::tungstenite::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A binary frame from an agent: a chunk of one of its puts, sent on to the node.
pub fn from_agent(shared: &Shared, agent: &Arc<AgentHandle>, frame: Bytes) {
    let Some(id) = Chunk::peek_id(&frame) else {
        // Not a chunk at all: a protocol error, answered as before transfers existed.
        let err =
            crate::error::WireError::to_shape(&crate::session_error::SessionError::BinaryFrame);
        let _ = agent.out.send(gsv_protocol::frame::encode_err("", &err));
        return;
    };
    // A chunk for no transfer of this connection (one just cancelled, say) is dropped.
    let Some(route) = shared.transfers.of_agent(id, agent) else {
        tracing::debug!(agent = %agent.name, "binary frame for no transfer of this connection dropped");
        return;
    };
    if route.direction != Direction::Put {
        fail(shared, &route, wrong_way());
        return;
    }
    if forward(shared, &route, frame, &route.node.out) == Forwarded::Gone {
        fail(shared, &route, gone(&route));
    }
}

/// A binary frame from a node: a chunk of one of its gets, sent on to the agent.
pub fn from_node(shared: &Shared, node: &NodeHandle, frame: Bytes) {
    let Some(route) = Chunk::peek_id(&frame).and_then(|id| of_node(shared, id, node)) else {
        tracing::debug!(node = %node.id, "binary frame for no transfer of this connection dropped");
        return;
    };
    if route.direction != Direction::Get {
        fail(shared, &route, wrong_way());
        return;
    }
    if forward(shared, &route, frame, &route.agent.out) == Forwarded::Gone {
        // The agent is gone: its transfers end with it.
        agent_gone(shared, &route.agent.conn_id);
    }
}

/// What became of a chunk sent on.
#[derive(PartialEq, Eq)]
enum Forwarded {
    Sent,
    /// Over the sender's window: the transfer was ended.
    OverWindow,
    /// The receiving connection is closed.
    Gone,
}

/// Sends a chunk of `route` on to `to` within the sender's window (a sender over it
/// loses the transfer); counts its bytes.
fn forward(
    shared: &Shared,
    route: &Route,
    frame: Bytes,
    to: &gsv_transport::Outbound,
) -> Forwarded {
    let len = frame
        .len()
        .saturating_sub(gsv_protocol::transfer::HEADER_BYTES) as u64;
    if !route.in_flight.take(len) {
        fail(shared, route, over_window());
        return Forwarded::OverWindow;
    }
    if to.send_binary(frame).is_err() {
        return Forwarded::Gone;
    }
    route.bytes.fetch_add(len, Ordering::Relaxed);
    Forwarded::Sent
}

/// Only the id of a transfer event's payload.
#[derive(Deserialize)]
struct IdOnly {
    id: uuid::Uuid,
}

/// The end of a `get` as the node reports it.
#[derive(Deserialize)]
struct Ended {
    bytes: u64,
    sha256: String,
}

/// A `transfer.credit`, `transfer.end` or `transfer.failed` event from a node, sent on
/// to the agent of the transfer (the last two end it).
pub fn node_event(
    shared: &Shared,
    node: &NodeHandle,
    event: EventName,
    payload: Option<Box<RawValue>>,
) {
    let raw = payload.as_deref().map(RawValue::get).unwrap_or("null");
    let Some(route) = serde_json::from_str::<IdOnly>(raw)
        .ok()
        .and_then(|p| of_node(shared, p.id, node))
    else {
        tracing::debug!(node = %node.id, event = event.as_str(), "transfer event for no transfer of this connection");
        return;
    };
    match event {
        EventName::TransferCredit => {
            if let Ok(c) = serde_json::from_str::<gsv_protocol::transfer::Credit>(raw) {
                route.in_flight.give(c.bytes);
            }
        }
        EventName::TransferEnd => match serde_json::from_str::<Ended>(raw) {
            Ok(e) => end(shared, &route, "ok", Some(&e.sha256), Some(e.bytes)),
            Err(_) => end(shared, &route, "internal", None, None),
        },
        EventName::TransferFailed => {
            let code = serde_json::from_str::<Failed>(raw)
                .map(|f| f.error.code.as_str())
                .unwrap_or("internal");
            end(shared, &route, code, None, None);
        }
        _ => {}
    }
    route.agent.send_event(event, &payload);
}

/// Ends every transfer of the agent connection `conn_id`, cancelling it on its node
/// (a put's partial file stays there for a resumed copy).
pub fn agent_gone(shared: &Shared, conn_id: &str) {
    let mine: Vec<Arc<Route>> = shared
        .transfers
        .routes
        .iter()
        .filter(|r| r.agent.conn_id == conn_id)
        .map(|r| r.clone())
        .collect();
    for route in mine {
        end(shared, &route, "cancelled", None, None);
        tell_node_cancel(&route);
    }
}

/// Ends every transfer of the node connection `node`, telling each agent.
pub fn node_gone(shared: &Shared, node: &NodeHandle) {
    let theirs: Vec<Arc<Route>> = shared
        .transfers
        .routes
        .iter()
        .filter(|r| r.node.conn_id == node.conn_id)
        .map(|r| r.clone())
        .collect();
    for route in theirs {
        fail(shared, &route, gone(&route));
    }
}

/// Ends `route` on `error`: the agent hears `transfer.failed`, the node a cancel.
fn fail(shared: &Shared, route: &Route, error: ErrorShape) {
    end(shared, route, error.code.as_str(), None, None);
    route.agent.send_event(
        EventName::TransferFailed,
        &Failed {
            id: route.id,
            error,
        },
    );
    tell_node_cancel(route);
}

/// Sends the node a `transfer.cancel` without waiting for its answer.
fn tell_node_cancel(route: &Route) {
    if route.node.out.is_closed() {
        return;
    }
    let Ok((call_id, rx)) = route.node.begin_call() else {
        return;
    };
    let params = CancelParams {
        id: route.id,
        discard: false,
    };
    if route
        .node
        .out
        .send(encode_req(
            &call_id.to_string(),
            Method::TransferCancel,
            &params,
        ))
        .is_err()
    {
        route.node.abandon_call(call_id);
        return;
    }
    let node = route.node.clone();
    tokio::spawn(async move {
        if tokio::time::timeout(std::time::Duration::from_secs(30), rx)
            .await
            .is_err()
        {
            node.abandon_call(call_id);
        }
    });
}

fn of_node(shared: &Shared, id: uuid::Uuid, node: &NodeHandle) -> Option<Arc<Route>> {
    shared
        .transfers
        .routes
        .get(&id)
        .map(|r| r.clone())
        .filter(|r| r.node.conn_id == node.conn_id)
}

fn wrong_way() -> ErrorShape {
    ErrorShape::new(
        ErrorCode::InvalidFrame,
        "a chunk sent against the transfer's direction",
    )
}

fn over_window() -> ErrorShape {
    ErrorShape::new(
        ErrorCode::InvalidFrame,
        format!(
            "more than {} bytes sent ahead of the receiver's credits",
            gsv_protocol::transfer::WINDOW_BYTES
        ),
    )
}

fn gone(route: &Route) -> ErrorShape {
    ErrorShape::new(
        ErrorCode::NodeDisconnected,
        format!("node {} went away during the transfer", route.node.id),
    )
}
