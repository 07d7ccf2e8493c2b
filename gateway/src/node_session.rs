//! One node connection, from handshake to goodbye.
//!
//! After `hello-ok` the node is in the registry and receives `tool.invoke` requests;
//! its `res` frames complete the pending calls of this connection only. When the
//! connection ends (for any reason) the calls still pending on it wait a grace period
//! for the node to come back (`crate::router`), and agents hear that the node's tools
//! went offline.
//!
//! Before `hello-ok` the node's offer is compared with the one accepted for its id
//! (`crate::offers`); what it adds is entered, flagged (and under `--pin-tools`
//! hidden), in the registry together with the connection. What the connection changes
//! in the gateway happens on the fleet floor ([`crate::fleet::Fleet::register_node`]
//! and the methods beside it); this file drives the connection and reads its frames.

use crate::conn::{drive, Ws};
use crate::fleet::{Fleet, StrayCount, Stream};
use crate::offers::Reviewed;
use crate::registry::{Completion, NodeHandle};
use crate::session_error::SessionError;
use gsv_protocol::frame::{encode_err, encode_event};
use gsv_protocol::{ErrorShape, EventName, Frame, Role};
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
pub async fn run(fleet: Fleet, ws: Ws, peer: SocketAddr) {
    let Some(hs) = Box::pin(fleet.handshake(ws, Role::Node, peer)).await else {
        return;
    };
    if hs.params.lane.is_some() {
        Box::pin(fleet.serve_lane(hs)).await;
        return;
    }
    let Some((handle, stream, reviewed)) = Box::pin(fleet.register_node(hs)).await else {
        return;
    };
    // A stopping gateway waits (bounded) for its sessions to end and deliver what they
    // queued (the shutdown notice, cancels).
    let _session = fleet.closing().token();
    let span = tracing::info_span!("node", node_id = %handle.id, conn_id = %handle.conn_id);
    serve(fleet, handle, stream, reviewed)
        .instrument(span)
        .await;
}

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

async fn serve(fleet: Fleet, handle: Arc<NodeHandle>, (ws, queue): Stream, reviewed: Reviewed) {
    fleet.node_connected(&handle, reviewed);
    let mut strays = Strays::default();
    let reason = drive(
        ws,
        queue,
        &handle.out,
        fleet.config().heartbeat,
        fleet.closing(),
        |text| on_frame(&fleet, &handle, &mut strays, text),
        |frame| fleet.node_transfer_frame(&handle, frame),
    )
    .await;
    let count = StrayCount {
        total: strays.total,
        cut_off: strays.cut_off,
    };
    fleet.node_disconnected(&handle, &reason, count);
}

fn on_frame(fleet: &Fleet, handle: &NodeHandle, strays: &mut Strays, text: &str) {
    let frame = match Frame::decode(text) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "undecodable frame from node");
            let _ = handle.out.send(encode_err("", &e.to_shape()));
            return;
        }
    };
    match frame {
        Frame::Res { id, outcome } => on_result(fleet, handle, strays, &id, outcome),
        Frame::Event {
            event: EventName::ProcessExited,
            payload,
            seq,
        } => {
            // Acknowledged even when seen before: the earlier ack may have been lost.
            let first = fleet.first_node_event(handle, seq);
            let _ = handle.out.send(encode_event(
                EventName::EventsAck,
                &gsv_protocol::event::EventsAck { seq },
                0,
            ));
            if first {
                fleet.process_exited(handle, payload);
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
        } => fleet.node_transfer_event(handle, event, payload),
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
    fleet: &Fleet,
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
            fleet.metrics().stray_results.inc();
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
