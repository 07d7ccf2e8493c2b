//! Relaying a transfer's chunks and events between its two connections (an agent and
//! a node, or the two nodes of a copy), and ending the transfers of a connection that
//! goes away.

use super::ending::end;
use super::{Far, LegEvent, Route};
use crate::agent_handle::AgentHandle;
use crate::registry::NodeHandle;
use crate::state::Shared;
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
    route.touch();
    if route.direction != Direction::Put {
        fail(shared, &route, wrong_way());
        return;
    }
    agent.uploads.chunk(frame.len());
    if route.lane.get().is_some() {
        shared.metrics.lane_chunks.inc();
    }
    if forward(shared, &route, frame, route.chunks_out()) == Forwarded::Gone {
        fail(shared, &route, gone(&route));
    }
}

/// A binary frame from a node: a chunk of one of its gets, sent on to the agent, or
/// to the node of the copy's other leg.
pub fn from_node(shared: &Shared, node: &NodeHandle, frame: Bytes) {
    let Some(route) = Chunk::peek_id(&frame).and_then(|id| of_node(shared, id, node)) else {
        tracing::debug!(node = %node.id, "binary frame for no transfer of this connection dropped");
        return;
    };
    route.touch();
    if route.direction != Direction::Get {
        fail(shared, &route, wrong_way());
        return;
    }
    match &route.far {
        Far::Agent(agent) => {
            if forward(shared, &route, frame, &agent.out) == Forwarded::Gone {
                // The agent is gone: its transfers end with it.
                agent_gone(shared, &agent.conn_id);
            }
        }
        Far::Leg(leg) => {
            let Some(peer) = shared.transfers.get(leg.peer) else {
                fail(shared, &route, peer_gone());
                return;
            };
            peer.touch();
            let frame = renamed(frame, leg.peer);
            if peer.lane.get().is_some() {
                shared.metrics.lane_chunks.inc();
            }
            if forward(shared, &route, frame, peer.chunks_out()) == Forwarded::Gone {
                fail(shared, &peer, gone(&peer));
                fail(shared, &route, gone(&peer));
            }
        }
    }
}

/// `frame` with its transfer id replaced by `id` (a copy's chunk, passed from its
/// get leg to its put leg); the data is copied only when the frame is shared.
fn renamed(frame: Bytes, id: uuid::Uuid) -> Bytes {
    let mut frame = frame
        .try_into_mut()
        .unwrap_or_else(|shared| bytes::BytesMut::from(&shared[..]));
    if let Some(at) = frame.get_mut(1..17) {
        at.copy_from_slice(id.as_bytes());
    }
    frame.freeze()
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

/// A `transfer.credit` (a put's), `transfer.end` (a get's) or `transfer.failed` event
/// from a node, sent on to the agent of the transfer or handled for a copy's driver
/// (the last two end it).
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
    route.touch();
    let leg = match &route.far {
        Far::Agent(_) => None,
        Far::Leg(leg) => Some(leg),
    };
    // A node credits only what it receives (a put) and ends only what it sends (a
    // get): anything else would let it widen its own window or end a transfer early.
    let from_receiver = route.direction == Direction::Put;
    if (event == EventName::TransferCredit && !from_receiver)
        || (event == EventName::TransferEnd && from_receiver)
    {
        tracing::debug!(node = %node.id, event = event.as_str(), "transfer event against the transfer's direction dropped");
        return;
    }
    match event {
        EventName::TransferCredit => {
            let Ok(c) = serde_json::from_str::<gsv_protocol::transfer::Credit>(raw) else {
                return;
            };
            let Some(leg) = leg else {
                route.in_flight.give(c.bytes);
                route.far_event(event, &payload);
                return;
            };
            // A copy's put leg wrote bytes: its get leg may send that many more.
            if let Some(peer) = shared.transfers.get(leg.peer) {
                peer.touch();
                peer.in_flight.give(c.bytes);
                let credit = gsv_protocol::transfer::Credit {
                    id: peer.id,
                    bytes: c.bytes,
                };
                let _ = peer.node.out.send(gsv_protocol::frame::encode_event(
                    EventName::TransferCredit,
                    &credit,
                    0,
                ));
            }
            let _ = leg.events.send(LegEvent::Credited(c.bytes));
            return;
        }
        EventName::TransferEnd => match serde_json::from_str::<Ended>(raw) {
            Ok(e) => {
                end(shared, &route, "ok", Some(&e.sha256), Some(e.bytes));
                if let Some(leg) = leg {
                    let _ = leg.events.send(LegEvent::Sent { sha256: e.sha256 });
                    return;
                }
            }
            Err(_) => {
                fail(
                    shared,
                    &route,
                    ErrorShape::new(
                        ErrorCode::Internal,
                        "the node's transfer.end does not decode",
                    ),
                );
                return;
            }
        },
        EventName::TransferFailed => {
            let error = serde_json::from_str::<Failed>(raw)
                .map(|f| f.error)
                .unwrap_or_else(|_| {
                    ErrorShape::new(
                        ErrorCode::Internal,
                        "the node's transfer.failed does not decode",
                    )
                });
            end(shared, &route, error.code.as_str(), None, None);
            if let Some(leg) = leg {
                let _ = leg.events.send(LegEvent::Failed(error));
                return;
            }
        }
        _ => {}
    }
    route.far_event(event, &payload);
}

impl Route {
    /// Passes a node's event on to this transfer's agent (a copy's leg has none).
    fn far_event(&self, event: EventName, payload: &Option<Box<RawValue>>) {
        if let Far::Agent(agent) = &self.far {
            agent.send_event(event, payload);
        }
    }
}

/// Ends every transfer of the agent connection `conn_id`, cancelling it on its node
/// (a put's partial file stays there for a resumed copy).
pub fn agent_gone(shared: &Shared, conn_id: &str) {
    shared.transfers.grants.drop_conn(conn_id);
    let mine: Vec<Arc<Route>> = shared
        .transfers
        .routes
        .iter()
        .filter(|r| r.conn_id() == Some(conn_id))
        .map(|r| r.clone())
        .collect();
    for route in mine {
        cancel_on_node(shared, &route, "cancelled");
        if let Far::Leg(leg) = &route.far {
            let _ = leg.events.send(LegEvent::Failed(ErrorShape::new(
                ErrorCode::Cancelled,
                "the agent that asked for the copy went away",
            )));
        }
    }
}

/// Ends `route` as `outcome` and cancels it on its node (a put's partial file is
/// kept for a resumed copy).
pub(super) fn cancel_on_node(shared: &Shared, route: &Route, outcome: &str) {
    if shared.transfers.routes.contains_key(&route.id) {
        end(shared, route, outcome, None, None);
        tell_node_cancel(route, false);
    }
}

/// [`cancel_on_node`] for a put the operator did not approve: the partial file its
/// open made is removed too (`discard`), so a refused copy leaves nothing behind. A
/// partial file an earlier, interrupted copy left (`resumable`) is kept.
pub(super) fn refuse_on_node(shared: &Shared, route: &Route, outcome: &str, resumable: bool) {
    if shared.transfers.routes.contains_key(&route.id) {
        end(shared, route, outcome, None, None);
        tell_node_cancel(route, route.direction == Direction::Put && !resumable);
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

/// Ends every transfer whose chunks went on node `node`'s bulk lane `conn_id`, which
/// ended: what it still carried is lost, so each is failed (retryable) and resumes
/// from what its receiver verified.
pub fn lane_gone(shared: &Shared, node: &NodeHandle, conn_id: &str) {
    let theirs: Vec<Arc<Route>> = shared
        .transfers
        .routes
        .iter()
        .filter(|r| r.node.conn_id == node.conn_id && r.on_lane(conn_id))
        .map(|r| r.clone())
        .collect();
    for route in theirs {
        fail(shared, &route, gone(&route));
    }
}

/// Ends `route` on `error`: the agent (or the copy's driver) hears it, the node gets
/// a cancel.
pub(super) fn fail(shared: &Shared, route: &Route, error: ErrorShape) {
    if !shared.transfers.routes.contains_key(&route.id) {
        return;
    }
    end(shared, route, error.code.as_str(), None, None);
    tell_node_cancel(route, false);
    match &route.far {
        Far::Agent(agent) => agent.send_event(
            EventName::TransferFailed,
            &Failed {
                id: route.id,
                error,
            },
        ),
        Far::Leg(leg) => {
            let _ = leg.events.send(LegEvent::Failed(error));
        }
    }
}

/// Sends the node a `transfer.cancel` without waiting for its answer.
fn tell_node_cancel(route: &Route, discard: bool) {
    if route.node.out.is_closed() {
        return;
    }
    let Ok((call_id, rx)) = route.node.begin_call() else {
        return;
    };
    let params = CancelParams {
        id: route.id,
        discard,
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

fn peer_gone() -> ErrorShape {
    ErrorShape::new(ErrorCode::Cancelled, "the other end of the copy ended")
}

fn gone(route: &Route) -> ErrorShape {
    ErrorShape::new(
        ErrorCode::NodeDisconnected,
        format!("node {} went away during the transfer", route.node.id),
    )
}
