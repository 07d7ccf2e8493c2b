//! The human decision a call may need before it runs: the policy's `confirm`, or a
//! node guard's `approval_required`. The caller's own user decides when the token
//! allows it (`--self-confirm`, MCP elicitation); otherwise the request waits in the
//! operator queue, is audited, and is announced to operators, until it is decided,
//! expires, or the caller goes away.

use super::{ApprovalAsker, ApprovalQuestion, RouteError, Scope};
use crate::approvals::{NewRequest, Verdict};
use crate::audit::{args_hash, AuditEvent};
use crate::summary::summary_of;
use gsv_protocol::{EventName, NamespacedName};
use serde_json::Value;
use std::time::Instant;

/// A short, human-readable form of a call for the operator.
fn summary(name: &NamespacedName, args: &Value) -> String {
    summary_of(&name.to_string(), args)
}

/// What [`await_approval`] answers when the caller's own user approved (MCP elicitation,
/// tokens made with `--self-confirm`): no operator request exists then, and nothing is
/// sent to the node as an approval, so a node guard still asks an operator.
pub(super) const CALLER_APPROVAL: &str = "caller";

/// Who may decide a call that needs approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deciders {
    /// Only an operator (admin token): every node guard's question, and `confirm` for
    /// tokens without `--self-confirm`.
    Operator,
    /// The caller's own user first (MCP elicitation), else an operator: `confirm` for
    /// tokens made with `--self-confirm`.
    CallerOrOperator,
}

/// Waits for a human's decision on a call that needs one: the policy's `confirm`, or a
/// node guard's `approval_required` (with the tool's dry-run `plan`, when it gave
/// one). Returns the operator request's id (for `tool.invoke.approval`) or
/// [`CALLER_APPROVAL`].
pub(super) async fn await_approval(
    call: &Scope<'_>,
    args: &Value,
    reason: String,
    plan: Option<String>,
    deciders: Deciders,
) -> Result<String, RouteError> {
    match call.caller.fanout {
        Some(group) => {
            group
                .decide(deciders, || ask(call, args, reason, plan, deciders))
                .await
        }
        None => ask(call, args, reason, plan, deciders).await,
    }
}

/// Asks for the decision: the caller's user when `deciders` allows, else an operator
/// request (one for the whole fan-out when the call is part of one).
async fn ask(
    call: &Scope<'_>,
    args: &Value,
    reason: String,
    plan: Option<String>,
    deciders: Deciders,
) -> Result<String, RouteError> {
    let Scope {
        shared,
        caller,
        name,
        deadline,
        cancel,
    } = *call;
    if let (Some(asker), Deciders::CallerOrOperator) = (caller.asker, deciders) {
        if let Some(answer) = ask_caller(call, asker, args, &reason, plan.as_deref()).await? {
            return answer.map(|()| CALLER_APPROVAL.to_owned());
        }
    }
    let (node, summary, nodes) = match caller.fanout {
        Some(group) => (
            group.select.clone(),
            format!(
                "fan-out to {} nodes (selected by {}): {}",
                group.nodes.len(),
                crate::summary::quoted(&group.select),
                summary_of(name.tool.as_str(), args)
            ),
            group.nodes.clone(),
        ),
        None => (name.node.to_string(), summary(name, args), Vec::new()),
    };
    let (request, rx) = shared
        .approvals
        .open(NewRequest {
            agent: caller.name.to_owned(),
            token_id: caller.token_id.to_owned(),
            node,
            tool: name.tool.to_string(),
            args_hash: args_hash(args),
            summary,
            reason,
            plan,
            nodes,
            args: crate::approvals::shown_args(args),
        })
        .await?;
    tracing::info!(approval = %request.id, "call waits for approval");
    shared.audit.record(AuditEvent::ApprovalRequested {
        agent: caller.name,
        request: &request,
    });
    let conn = caller.agent.map(|a| a.conn_id.as_str());
    shared.notify_operators(EventName::ApprovalRequested, &request, conn);
    if let Some(hook) = &shared.webhook {
        hook.notify(&request);
    }
    if let Some(asker) = caller.asker {
        asker.queued(&request);
    }

    let ttl = shared.approvals.ttl;
    let wait = deadline.saturating_duration_since(Instant::now()).min(ttl);
    let resolved = |state: &str| gsv_protocol::event::ApprovalResolved {
        id: request.id.clone(),
        state: state.to_owned(),
        decided_by: None,
    };
    tokio::select! {
        d = rx => match d {
            Ok(Verdict::Approve) => Ok(request.id.clone()),
            Ok(Verdict::Deny) => Err(RouteError::Denied { approval: request.id.clone() }),
            Err(_) => Err(RouteError::ApprovalDropped),
        },
        _ = tokio::time::sleep(wait) => {
            shared.approvals.expire(&request.id).await;
            shared.notify_operators(EventName::ApprovalResolved, &resolved("expired"), conn);
            Err(RouteError::ApprovalTimedOut { approval: request.id.clone() })
        }
        _ = cancel.cancelled() => {
            shared.approvals.expire(&request.id).await;
            shared.notify_operators(EventName::ApprovalResolved, &resolved("expired"), conn);
            Err(RouteError::CancelledAwaitingApproval)
        }
    }
}

/// Puts the question to the caller's own user. `Ok(None)`: they cannot be asked (use
/// the operator queue); `Ok(Some(answer))`: their decision, already audited.
async fn ask_caller(
    call: &Scope<'_>,
    asker: &dyn ApprovalAsker,
    args: &Value,
    reason: &str,
    plan: Option<&str>,
) -> Result<Option<Result<(), RouteError>>, RouteError> {
    let Scope {
        shared,
        caller,
        name,
        deadline,
        cancel,
    } = *call;
    let question = ApprovalQuestion {
        name,
        args,
        summary: summary(name, args),
        reason,
        plan,
    };
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .min(shared.approvals.ttl);
    let answer = tokio::select! {
        a = asker.ask(&question) => a,
        _ = tokio::time::sleep(wait) => {
            return Err(RouteError::NobodyAnswered { name: name.to_string() })
        }
        _ = cancel.cancelled() => {
            return Err(RouteError::CancelledAwaitingApproval)
        }
    };
    let Some(decision) = answer else {
        return Ok(None);
    };
    let outcome = match decision {
        Verdict::Approve => "approved",
        Verdict::Deny => "denied",
    };
    tracing::info!(outcome, "the caller's user decided on the call");
    shared.audit.record(AuditEvent::CallerDecided {
        agent: caller.name,
        token_id: caller.token_id,
        name,
        args_hash: args_hash(args),
        verdict: decision,
    });
    Ok(Some(match decision {
        Verdict::Approve => Ok(()),
        Verdict::Deny => Err(RouteError::UserDeclined {
            name: name.to_string(),
        }),
    }))
}
