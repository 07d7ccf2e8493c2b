//! A forwarded call whose holder died after sending it to the node, asked for again.
//!
//! The node keeps running a call when the gateway that sent it dies, and keeps its
//! result (`docs/protocol.md` §10.3). The forwarding replica describes a call before
//! it leaves ([`crate::reattach::Dispatch`]: node process from the directory, a call
//! id it gives the call, tool, arguments, deadline, caller); a holder that sends the
//! call with an approval it got describes it again first (published and flushed).
//! When the holder then stops saying hello, the forwarding replica does not fail the
//! call: it asks whichever replica holds the node next for the same call
//! ([`ask_again`]), until the call's deadline (at least [`FIND_AGAIN`]). That holder
//! ([`answer`]) asks the node for it again under the same call id
//! ([`crate::reattach::ask_again`]): the node answers with the kept result, or the
//! running call's result when it ends — never runs it a second time — so the caller
//! gets the one real outcome. A node that came back as a new process without a journal
//! cannot know the call: that is the answer then, as on one gateway.

use super::call_book::{call_subject, Answer, Forwarded};
use super::calls::Forget;
use super::Cluster;
use crate::policy::Decision;
use crate::reattach::Dispatch;
use crate::router::RouteError;
use crate::state::Shared;
use gsv_protocol::{ErrorCode, ErrorShape};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long at least the forwarding replica looks for the node's next holder.
pub const FIND_AGAIN: Duration = Duration::from_secs(30);
/// Between two looks while no replica holds the node.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// Past the call's deadline, how long the holder's answer is waited for.
const MARGIN: Duration = Duration::from_secs(10);

/// Asks the replica that holds `node` now for the call `dispatch` describes, until
/// it answers, the call's deadline (at least [`FIND_AGAIN`]) passes, or the caller
/// cancels.
pub(super) async fn ask_again(
    cluster: &Cluster,
    node: &str,
    dispatch: Dispatch,
    cancel: &CancellationToken,
) -> Result<Box<RawValue>, RouteError> {
    let left = Duration::from_millis(dispatch.deadline_ms.saturating_sub(gsv_protocol::now_ms()));
    let until = Instant::now() + left.max(FIND_AGAIN);
    let client = cluster.client();
    loop {
        let now = Instant::now();
        if now >= until {
            let mut shape = ErrorShape::new(
                ErrorCode::NodeDisconnected,
                format!(
                    "the gateway replica holding node {node:?} stopped during the call and no replica holds the node again; its outcome is unknown (it may have run)"
                ),
            );
            shape.retryable = true;
            return Err(RouteError::Node(shape));
        }
        // The node's entry in the directory names its next holder once it connects
        // there (a replica that is gone counts as none).
        let Some(holder) = cluster.directory.holder(cluster, node) else {
            tokio::select! {
                _ = cancel.cancelled() => return Err(RouteError::Cancelled),
                _ = tokio::time::sleep(LOOK_EVERY) => {}
            }
            continue;
        };
        let key = uuid::Uuid::new_v4().simple().to_string();
        let request = Forwarded {
            token_id: dispatch.token_id.clone(),
            name: format!("{node}__{}", dispatch.tool),
            args: dispatch.args.clone(),
            timeout_ms: None,
            key: key.clone(),
            progress_to: None,
            holder_to: Some(format!("gsv.holder.{}.{key}", cluster.replica)),
            origin: cluster.replica.clone(),
            call_id: None,
            resume: Some(dispatch.clone()),
        };
        let payload = serde_json::to_vec(&request)
            .map_err(|e| internal(format!("cannot encode the call: {e}")))?;
        cluster.calls.waiting.insert(key.clone(), ());
        let _forget = Forget {
            book: &cluster.calls,
            key: key.clone(),
        };
        let sent = client.send_request(
            call_subject(&holder),
            async_nats::Request::new()
                .payload(payload.into())
                .timeout(Some(until - now + MARGIN)),
        );
        tokio::pin!(sent);
        let mut watch = tokio::time::interval(Duration::from_millis(500));
        let answered = loop {
            tokio::select! {
                r = &mut sent => break Some(r),
                _ = cancel.cancelled() => {
                    let _ = client.publish(format!("gsv.cancel.{key}"), "".into()).await;
                    return Err(RouteError::Cancelled);
                }
                _ = watch.tick() => {
                    let gone = cluster
                        .calls
                        .holders
                        .get(&key)
                        .is_some_and(|h| cluster.gone(h.value()));
                    if gone {
                        // That holder died too: look for the next one.
                        break None;
                    }
                }
            }
        };
        match answered {
            Some(Ok(message)) => {
                return match serde_json::from_slice::<Answer>(&message.payload) {
                    Ok(Answer::Ok { result, .. }) => Ok(result),
                    Ok(Answer::Err { error, .. }) => Err(RouteError::Node(error)),
                    Err(e) => Err(internal(format!(
                        "unreadable answer from another replica: {e}"
                    ))),
                };
            }
            Some(Err(e)) if e.kind() == async_nats::RequestErrorKind::TimedOut => {
                return Err(RouteError::Deadline);
            }
            // That replica does not answer (or NATS hiccupped): look again shortly.
            Some(Err(_)) => tokio::time::sleep(LOOK_EVERY).await,
            None => {}
        }
    }
}

/// The holder's side: asks the node it holds for the call again and answers with
/// its outcome.
pub(super) async fn answer(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    call: Forwarded,
    dispatch: Dispatch,
) -> Answer {
    let Some(node) = shared.registry.get(&dispatch.node) else {
        let mut shape = ErrorShape::new(
            ErrorCode::NodeDisconnected,
            format!("node {:?} is not connected to this replica", dispatch.node),
        );
        shape.retryable = true;
        return Answer::err(shape);
    };
    // A tool the node does not have is of no class: refused below if the policy
    // allows it only by class, else answered by the node as before.
    let classes = shared
        .registry
        .tool(&node, &dispatch.tool)
        .map_or(gsv_protocol::tool_class::ToolClasses::NONE, |t| t.classes);
    drop(node);
    // The caller's token is judged here too: live, and its policy still lets this
    // tool through (one that needs approval only with the approval it was sent with).
    let judged = match super::calls::judge(shared, cluster, &dispatch.token_id).await {
        Ok(j) => j,
        Err(shape) => return Answer::err(shape),
    };
    let name = format!("{}__{}", dispatch.node, dispatch.tool);
    let allowed = match judged.1.decide(&name, classes) {
        Decision::Allow => true,
        Decision::Confirm if dispatch.approval.is_some() => true,
        Decision::Confirm => {
            // Its holder describes a call it sends with an approval before sending it:
            // without one, the call was still waiting for its approval there.
            let mut shape = ErrorShape::new(
                ErrorCode::NodeDisconnected,
                format!(
                    "the gateway replica holding node {:?} stopped while the call waited for its approval; it was not sent: call again",
                    dispatch.node
                ),
            );
            shape.retryable = true;
            return Answer::err(shape);
        }
        Decision::Deny => false,
    };
    if !allowed {
        return Answer::err(ErrorShape::new(
            ErrorCode::Forbidden,
            format!("the caller's token may not call {name:?}"),
        ));
    }
    let cancel = super::calls::take(cluster, &call).await;
    tracing::info!(
        node_id = %dispatch.node,
        call_id = dispatch.call_id,
        origin = ?call.origin,
        "cluster: asking the node again for a call its previous holder sent"
    );
    let outcome = tokio::select! {
        outcome = crate::reattach::ask_again(shared, &dispatch) => outcome,
        _ = cancel.cancelled() => Err(ErrorShape::new(ErrorCode::Cancelled, "cancelled by the caller")),
    };
    cluster.calls.running.remove(&call.key);
    match outcome {
        // No audit row here: the forwarding replica writes the call's.
        Ok(result) => Answer::Ok {
            result,
            progress: 0,
            audited: false,
        },
        Err(error) => Answer::err(error),
    }
}

fn internal(message: String) -> RouteError {
    RouteError::Node(ErrorShape::new(ErrorCode::Internal, message))
}
