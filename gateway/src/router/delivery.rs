//! Delivering a routed call to its node and its answer back: the call is registered as
//! pending on the node's connection (within the node's and the token's shares), sent
//! as `tool.invoke`, and awaited until the deadline (plus a short slack, so the node's
//! own timeout answer arrives first). When the node's connection drops mid-call, the
//! call follows the same node process across its reconnect within the grace period.

use super::{RouteError, Routed, Scope};
use crate::registry::{CallOutcome, Disconnected, NodeHandle, PendingError, TokenShare};
use crate::router::Caller;
use crate::state::Shared;
use gsv_protocol::frame::{encode_cancel, encode_req};
use gsv_protocol::method::{InvokeCallerOut, ToolInvokeOut, ToolsCallParams};
use gsv_protocol::Method;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long past the deadline the gateway waits for the node's own answer.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);
/// How long a forwarded call waits for its dispatch record to be on its way to the
/// forwarding replica before it is sent to the node anyway.
const DISPATCH_ACK: Duration = Duration::from_secs(2);

/// The caller's token with its share of a node's pending calls.
fn token_share<'a>(shared: &Shared, caller: &Caller<'a>) -> TokenShare<'a> {
    TokenShare {
        token: caller.token_id,
        share: shared.config.pending_calls_per_token,
    }
}

/// Sends one `tool.invoke` for the call and waits for its answer (or the deadline),
/// following the call across reconnects of its node within the grace period.
pub(super) async fn send(
    call: &Scope<'_>,
    node: &NodeHandle,
    params: &ToolsCallParams,
    approval: Option<&str>,
) -> Routed {
    let Scope {
        shared,
        caller,
        name,
        deadline,
        ..
    } = *call;
    let node_id = name.node.as_str();
    // A forwarded call comes with the id its forwarding replica gave it (and described
    // it by, to ask the node's next holder for it should this replica die).
    let begun = match caller.from_replica.and_then(|f| f.call_id) {
        Some(id) => node
            .begin_call_as(
                id,
                Some(token_share(shared, caller)),
                caller.progress.clone(),
            )
            .map(|rx| (id, rx)),
        None => node
            .begin_call_with_progress(Some(token_share(shared, caller)), caller.progress.clone()),
    };
    let (call_id, rx) = match begun {
        Ok(x) => x,
        Err(PendingError::Taken) => {
            return Err(RouteError::Node(gsv_protocol::ErrorShape::new(
                gsv_protocol::ErrorCode::Internal,
                "the forwarding replica gave this call an id already pending on the node",
            )))
        }
        Err(PendingError::Full) => {
            return Err(RouteError::NodeFull {
                node: node_id.to_owned(),
            })
        }
        Err(PendingError::TokenShare) => {
            return Err(RouteError::TokenShare {
                node: node_id.to_owned(),
                share: shared.config.pending_calls_per_token,
            })
        }
        Err(PendingError::Closed) => {
            return Err(RouteError::NodeClosing {
                node: node_id.to_owned(),
            })
        }
    };
    tracing::Span::current().record("call_id", call_id);
    let invoke = Invoke {
        id: call_id.to_string(),
        call_id,
        tool: name.tool.as_str(),
        params,
        approval,
        deadline,
        caller: InvokeCallerOut {
            token_id: caller.token_id,
            operator: caller.policy.is_full(),
        },
    };
    let Some(frame) = invoke.frame(false) else {
        node.abandon_call(call_id);
        return Err(RouteError::DeadlineBeforeDispatch);
    };
    if frame.len() > gsv_protocol::limits::MAX_FRAME_BYTES {
        node.abandon_call(call_id);
        return Err(RouteError::ArgsTooLarge);
    }
    // A forwarded call is described by its forwarding replica before it leaves there,
    // except for the approval it got here: a call sent with one is described again.
    let tell = caller.from_replica.filter(|_| approval.is_some());
    if caller.job.is_some() || tell.is_some() {
        let left = deadline.saturating_duration_since(Instant::now());
        let dispatch = crate::reattach::Dispatch {
            node: node_id.to_owned(),
            instance: node.instance.clone(),
            call_id,
            tool: name.tool.to_string(),
            args: params.args.clone(),
            approval: approval.map(str::to_owned),
            deadline_ms: gsv_protocol::now_ms() + left.as_millis() as u64,
            token_id: caller.token_id.to_owned(),
            operator: caller.policy.is_full(),
        };
        if let Some(job) = caller.job {
            crate::reattach::remember(shared, job, &dispatch).await;
        }
        if let Some(from) = tell {
            // The forwarding replica knows how to ask for the call again before the
            // node can have it (bounded: a stuck publisher delays the call, never holds it).
            let _ = tokio::time::timeout(DISPATCH_ACK, (from.dispatched)(dispatch)).await;
        }
    }
    shared.metrics.pending_calls.inc();
    let outcome = dispatch(call, node, &invoke, frame, rx).await;
    shared.metrics.pending_calls.dec();
    outcome
}

/// One call as sent to a node, enough to send it again after a reconnect.
struct Invoke<'a> {
    /// The call id as text (the frame's id).
    id: String,
    call_id: u64,
    tool: &'a str,
    params: &'a ToolsCallParams,
    approval: Option<&'a str>,
    deadline: Instant,
    /// Who the call is for: the node gives sessions it starts to this token.
    caller: InvokeCallerOut<'a>,
}

impl Invoke<'_> {
    /// The `tool.invoke` frame carrying what is left of the deadline, or `None` when
    /// nothing is left.
    fn frame(&self, resume: bool) -> Option<String> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return None;
        }
        Some(encode_req(
            &self.id,
            Method::ToolInvoke,
            &ToolInvokeOut {
                tool: self.tool,
                args: &self.params.args,
                timeout_ms: (remaining.as_millis() as u64).max(1),
                approval: self.approval,
                resume,
                caller: Some(self.caller),
            },
        ))
    }
}

/// Sends `frame` and waits for the call's outcome. When the node's connection drops
/// first, waits up to the grace period (never past the deadline) for the same node
/// process to reconnect, registers the call on the new connection and asks again
/// (`resume`): the node answers with the result it kept, or the running call's result
/// when it ends, or runs the call if it never got it. Otherwise the caller gets
/// `node_disconnected` with `dispatched: true`.
async fn dispatch(
    call: &Scope<'_>,
    first: &NodeHandle,
    invoke: &Invoke<'_>,
    frame: String,
    rx: tokio::sync::oneshot::Receiver<CallOutcome>,
) -> Routed {
    let cancel = call.cancel;
    if first.out.send(frame).is_err() {
        first.abandon_call(invoke.call_id);
        return Err(RouteError::NotSent {
            node: first.id.to_string(),
        });
    }
    let mut current: Option<std::sync::Arc<NodeHandle>> = None;
    let mut rx = rx;
    let give_up = invoke.deadline + DEADLINE_SLACK;
    loop {
        let node = current.as_deref().unwrap_or(first);
        let outcome = tokio::select! {
            r = &mut rx => r,
            _ = tokio::time::sleep_until(give_up.into()) => {
                node.abandon_call(invoke.call_id);
                let _ = node.out.send(encode_cancel(&invoke.id));
                tracing::info!("call timed out");
                return Err(RouteError::Deadline);
            }
            _ = cancel.cancelled() => {
                node.abandon_call(invoke.call_id);
                let _ = node.out.send(encode_cancel(&invoke.id));
                tracing::info!("call cancelled by the caller");
                return Err(RouteError::Cancelled);
            }
        };
        match outcome {
            Ok(outcome) => return outcome.map_err(RouteError::Node),
            // The pending entry was released without an answer: the connection is gone.
            Err(_) => {
                let (next, next_rx) = resume(call, node, invoke).await?;
                current = Some(next);
                rx = next_rx;
            }
        }
    }
}

/// Waits for `gone`'s node process to reconnect (within the grace period and the
/// deadline), then registers the call on the new connection and asks for it again.
async fn resume(
    call: &Scope<'_>,
    gone: &NodeHandle,
    invoke: &Invoke<'_>,
) -> Result<
    (
        std::sync::Arc<NodeHandle>,
        tokio::sync::oneshot::Receiver<CallOutcome>,
    ),
    RouteError,
> {
    let Scope {
        shared,
        caller,
        cancel,
        ..
    } = *call;
    // A job has no caller waiting: it waits for its node as long as the call's deadline
    // allows, not only the grace period (its node may be restarting).
    let until = match caller.job {
        Some(_) => invoke.deadline,
        None => (Instant::now() + shared.config.grace).min(invoke.deadline),
    };
    tracing::info!(
        grace_ms = shared.config.grace.as_millis() as u64,
        "node dropped mid-call; waiting for it to come back"
    );
    loop {
        let arrived = shared.registry.arrivals().notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        if let Some(node) = shared.registry.get(gone.id.as_str()) {
            if node.conn_id != gone.conn_id {
                let same = !gone.instance.is_empty() && node.instance == gone.instance;
                if !same && !node.journal {
                    tracing::info!("node came back as a new process; the call's result is lost");
                    return Err(RouteError::Restarted {
                        node: gone.id.to_string(),
                    });
                }
                if !same {
                    tracing::info!(
                        "node came back as a new process that keeps a journal; asking it for the call"
                    );
                }
                let rx = match node.resume_call(
                    invoke.call_id,
                    Some(token_share(shared, caller)),
                    caller.progress.clone(),
                ) {
                    Ok(rx) => rx,
                    // Closing again already: wait for the next connection.
                    Err(PendingError::Closed) => {
                        wait_arrival(arrived, until, cancel, gone).await?;
                        continue;
                    }
                    Err(PendingError::Full | PendingError::TokenShare | PendingError::Taken) => {
                        return Err(RouteError::BackTooBusy {
                            node: gone.id.to_string(),
                        });
                    }
                };
                let Some(frame) = invoke.frame(true) else {
                    node.abandon_call(invoke.call_id);
                    return Err(disconnected(gone));
                };
                if node.out.send(frame).is_err() {
                    // Its pending entry goes with the closing connection; wait again.
                    node.abandon_call(invoke.call_id);
                    wait_arrival(arrived, until, cancel, gone).await?;
                    continue;
                }
                shared.metrics.resumed_calls.inc();
                tracing::info!(conn = %node.conn_id, "node is back; asked for the call's result again");
                return Ok((node, rx));
            }
        }
        wait_arrival(arrived, until, cancel, gone).await?;
    }
}

/// Waits for a node to connect, or fails at `until` or on cancel.
async fn wait_arrival(
    arrived: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    until: Instant,
    cancel: &CancellationToken,
    gone: &NodeHandle,
) -> Result<(), RouteError> {
    tokio::select! {
        _ = arrived => Ok(()),
        _ = tokio::time::sleep_until(until.into()) => Err(disconnected(gone)),
        _ = cancel.cancelled() => Err(RouteError::CancelledWhileDisconnected),
    }
}

/// The call's node went away and did not come back in time.
fn disconnected(gone: &NodeHandle) -> RouteError {
    RouteError::Disconnected(Disconnected {
        node: gone.id.clone(),
    })
}
