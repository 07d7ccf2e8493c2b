//! Routing one agent call to the node its name points at, and back.
//!
//! Order of checks: name → policy (deny) → node → tool → arguments (against the tool's
//! JSON Schema) → approval (policy `confirm`) → dispatch. A node guard may still answer
//! `approval_required` (e.g. a node in `--approve-shell` mode): the call then waits for
//! an approval exactly as for `confirm` and is sent again, with a new call id, carrying
//! the approval's id in `tool.invoke.approval`. A call approved once (by `confirm`)
//! carries that approval from its first dispatch: one human decision per call. Arguments and the result
//! cross the gateway as the exact bytes received; only validation parses the
//! arguments. One deadline covers the whole call, approval wait included; the node gets
//! what is left of it, and the gateway waits a short slack past it so a node's own
//! timeout answer arrives first. Every call ends in one audit row.

use crate::approvals::{ApprovalRequest, Decision as Approval, NewRequest};
use crate::audit::{args_hash, AuditEntry, AuditKind};
use crate::policy::{Decision, Policy};
use crate::registry::{CallOutcome, NodeHandle, PendingError, ProgressSink, TokenShare};
use crate::state::{AgentHandle, Shared};
use futures_util::future::BoxFuture;
use gsv_protocol::frame::{encode_cancel, encode_req};
use gsv_protocol::method::{InvokeCallerOut, ToolInvokeOut, ToolsCallParams};
use gsv_protocol::{ErrorCode, ErrorShape, EventName, Method, NamespacedName};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How long past the deadline the gateway waits for the node's own answer.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);

/// Who is calling.
pub struct Caller<'a> {
    pub name: &'a str,
    pub token_id: &'a str,
    pub policy: &'a Policy,
    /// The caller's WebSocket connection, for approval events.
    pub agent: Option<&'a AgentHandle>,
    /// Where the node's `call.progress` events for this call go, if the caller wants them.
    pub progress: Option<ProgressSink>,
    /// Asks the caller's own user to approve a call that needs approval, before (or
    /// instead of) the operator queue: the MCP client's user through elicitation.
    pub asker: Option<&'a dyn ApprovalAsker>,
}

/// A call that needs approval, as put to the caller's user.
pub struct ApprovalQuestion<'a> {
    pub name: &'a NamespacedName,
    pub args: &'a Value,
    /// A short, human-readable form of the call, e.g. `laptop__Bash: rm -r build/`.
    pub summary: String,
    /// Why approval is needed.
    pub reason: &'a str,
}

/// Asks the caller's own user whether a call may run, in place of the operator queue.
pub trait ApprovalAsker: Send + Sync {
    /// The user's answer, or `None` when the user cannot be asked (the call then waits
    /// in the operator queue, as for any other caller).
    fn ask<'a>(&'a self, question: &'a ApprovalQuestion<'a>) -> BoxFuture<'a, Option<Approval>>;

    /// Told when the call waits in the operator queue instead, so the caller can say so.
    fn queued(&self, _request: &ApprovalRequest) {}
}

impl<'a> Caller<'a> {
    pub fn from_agent(agent: &'a AgentHandle) -> Self {
        Caller {
            name: &agent.name,
            token_id: &agent.token_id,
            policy: &agent.policy,
            agent: Some(agent),
            progress: None,
            asker: None,
        }
    }

    /// The same caller, with a sink for the call's progress events.
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }
}

fn not_found(message: String) -> ErrorShape {
    ErrorShape::new(ErrorCode::NotFound, message)
}

/// What the audit row of a call needs from routing.
#[derive(Default)]
struct Trace {
    /// SHA-256 of the arguments, once parsed.
    args_hash: Option<String>,
    /// The arguments as text, with `--audit-args`.
    args_text: Option<String>,
    /// The named node declares the tool (so its name may label a metric).
    known_tool: bool,
}

/// The `tool` label of a call's metrics: the bare tool name when some node declares it,
/// else [`UNKNOWN_TOOL_LABEL`], so names an agent makes up never become series.
fn tool_label<'a>(shared: &Shared, name: &'a NamespacedName, trace: &Trace) -> &'a str {
    let tool = name.tool.as_str();
    if trace.known_tool || shared.registry.declares_tool(tool) {
        tool
    } else {
        UNKNOWN_TOOL_LABEL
    }
}

/// The metrics label of calls to a tool no node declares.
pub const UNKNOWN_TOOL_LABEL: &str = "_unknown";

/// Routes one `tools.call`. `cancel` fires when the caller cancels or goes away.
pub async fn call(
    shared: &Shared,
    caller: &Caller<'_>,
    params: ToolsCallParams,
    cancel: CancellationToken,
) -> CallOutcome {
    let started = Instant::now();
    if shared.draining.is_cancelled() {
        return Err(ErrorShape::new(
            ErrorCode::Overloaded,
            "the gateway is shutting down; retry on its successor",
        )
        .with_details(json!({ "shutdown": true })));
    }
    let _in_flight = InFlight::enter(shared);
    let name = match NamespacedName::parse(&params.name) {
        Ok(n) => n,
        Err(e) => return Err(not_found(format!("no tool {:?}: {e}", params.name))),
    };
    let span = tracing::info_span!("call", agent = caller.name, node = %name.node, tool = %name.tool, call_id = tracing::field::Empty);
    let mut trace = Trace::default();
    let outcome = route(shared, caller, &name, &params, cancel, &mut trace)
        .instrument(span)
        .await;
    let label = match &outcome {
        Ok(raw) if is_tool_error(raw.get()) => "tool_error",
        Ok(_) => "ok",
        Err(e) => e.code.as_str(),
    };
    let elapsed = started.elapsed();
    shared.metrics.call_done(
        tool_label(shared, &name, &trace),
        label,
        elapsed.as_secs_f64(),
    );
    let mut entry = AuditEntry::new(AuditKind::Call, format!("agent:{}", caller.name), label);
    entry.node = Some(name.node.to_string());
    entry.tool = Some(name.tool.to_string());
    entry.args_hash = trace.args_hash.take();
    entry.args = trace.args_text.take();
    entry.duration_ms = Some(elapsed.as_millis() as u64);
    entry.detail = Some(json!({ "tokenId": caller.token_id }));
    shared.audit.record(entry);
    outcome
}

/// Counts a call in [`Shared::in_flight`] while it lives.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> Self {
        shared
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether a raw result says `"isError":true` (for metrics only; exact because
/// results come from our serializer, which writes no spaces).
fn is_tool_error(raw: &str) -> bool {
    raw.contains("\"isError\":true")
}

async fn route(
    shared: &Shared,
    caller: &Caller<'_>,
    name: &NamespacedName,
    params: &ToolsCallParams,
    cancel: CancellationToken,
    trace: &mut Trace,
) -> CallOutcome {
    let started = Instant::now();
    let full = params.name.as_str();
    let mut decision = caller.policy.decide(full);
    if decision == Decision::Deny {
        tracing::warn!(tool = full, "call outside the agent's policy");
        return Err(ErrorShape::new(
            ErrorCode::Forbidden,
            format!("this token may not call {full}"),
        ));
    }
    // The arguments are held until the call ends: they count against the token's
    // share of the bytes in flight (`crate::budget`).
    let _bytes = shared
        .pending_bytes
        .reserve(caller.token_id, params.args.get().len())
        .map_err(|e| {
            ErrorShape::new(
                ErrorCode::Overloaded,
                format!("{e}; retry when some of its calls finish"),
            )
            .with_details(json!({ "limit": e.limit(), "max": e.max() }))
        })?;
    let node_id = name.node.as_str();
    let Some(node) = shared.registry.get(node_id) else {
        if let Some(since) = shared.registry.offline_since(node_id) {
            return Err(ErrorShape::new(
                ErrorCode::NodeOffline,
                format!(
                    "node {node_id} is offline since {}",
                    crate::time::rfc3339(since)
                ),
            )
            .with_details(json!({ "node": node_id, "since": since })));
        }
        return Err(not_found(format!("no node named {node_id} is connected")));
    };
    let Some(spec) = node.tools.get(name.tool.as_str()) else {
        return Err(not_found(format!(
            "node {node_id} has no tool named {}",
            name.tool
        )));
    };
    trace.known_tool = true;
    let args: Value = serde_json::from_str(params.args.get()).map_err(|e| {
        ErrorShape::new(
            ErrorCode::InvalidArgs,
            format!("args are not valid JSON: {e}"),
        )
    })?;
    spec.validate_args(&args)?;
    // Input to a running session is a command like any other: the token's `confirm`
    // on the node's Bash covers what it types into a session too (the operator then
    // sees the exact text or keys), so approving an interactive program does not
    // approve everything typed into it later.
    // Written only for calls that wait (no formatting on the call path).
    let mut reason = None;
    if decision == Decision::Allow && is_session_input(name, &args) {
        let bash = NamespacedName::join(node_id, "Bash");
        // Denied Bash: the token can own no session, so the node answers "no such
        // session" by itself; only `confirm` asks an operator.
        if caller.policy.decide(&bash) == Decision::Confirm {
            decision = Decision::Confirm;
            reason = Some(format!(
                "input to a session is judged like a command: the token's policy requires approval for {bash}"
            ));
        }
    }
    let timeout_ms = params
        .timeout_ms
        .or(spec.def.default_timeout_ms)
        .unwrap_or(gsv_protocol::limits::DEFAULT_CALL_TIMEOUT_MS)
        .clamp(1, gsv_protocol::limits::MAX_CALL_TIMEOUT_MS);
    let deadline = started + Duration::from_millis(timeout_ms);
    // The audit row keeps the hash (and with `--audit-args` the text), not the parsed
    // value: a call holds one copy of its arguments while it waits, the raw text it
    // forwards (`crate::budget` counts it).
    trace.args_hash = Some(args_hash(&args));
    if shared.config.audit_args {
        trace.args_text = Some(params.args.get().to_owned());
    }

    // One operator decision per call: an operator's approval obtained for the policy's
    // `confirm` travels with the first dispatch, so a node guard that would ask again
    // accepts it. The caller's own answer (`--self-confirm`) is not sent: a node guard
    // that asks then still gets an operator's decision.
    let mut approval = None;
    if decision == Decision::Confirm {
        let reason =
            reason.unwrap_or_else(|| format!("the token's policy requires approval for {full}"));
        // The caller's own user may answer only when the token says so (`--self-confirm`).
        let who = if caller.policy.self_confirm() {
            Deciders::CallerOrOperator
        } else {
            Deciders::Operator
        };
        let id =
            await_approval(shared, caller, name, &args, reason, who, deadline, &cancel).await?;
        approval = (id != CALLER_APPROVAL).then_some(id);
    }
    drop(args);

    let outcome = send(
        shared,
        caller,
        &node,
        name,
        params,
        approval.as_deref(),
        deadline,
        cancel.clone(),
    )
    .await;
    match outcome {
        // A node-side guard asks for approval (e.g. `--approve-shell`): open a request
        // as for `confirm`, then send the same call again carrying its id.
        Err(e) if e.code == ErrorCode::ApprovalRequired && approval.is_none() => {
            let reason = node_reason(&e);
            // Parsed again: the value was let go while the node worked (it parsed once,
            // so it parses again).
            let args: Value = serde_json::from_str(params.args.get()).unwrap_or(Value::Null);
            // A node guard's question is never the caller's to answer: its whole point is
            // that an operator decides, whatever the token allows.
            let approval = await_approval(
                shared,
                caller,
                name,
                &args,
                reason,
                Deciders::Operator,
                deadline,
                &cancel,
            )
            .await?;
            // The node may have reconnected while the operator decided.
            let Some(node) = shared.registry.get(node_id) else {
                return Err(ErrorShape::new(
                    ErrorCode::NodeOffline,
                    format!("node {node_id} went away while the call waited for approval"),
                )
                .with_details(json!({ "node": node_id })));
            };
            send(
                shared,
                caller,
                &node,
                name,
                params,
                Some(&approval),
                deadline,
                cancel,
            )
            .await
        }
        other => other,
    }
}

/// Whether a call sends input to a running session: Process `write`, `submit` or
/// `send-keys`.
fn is_session_input(name: &NamespacedName, args: &Value) -> bool {
    name.tool.as_str() == "Process"
        && matches!(
            args.get("action").and_then(Value::as_str),
            Some("write" | "submit" | "send-keys")
        )
}

/// Why a node asked for approval: its `details.reason`, else its message.
fn node_reason(e: &ErrorShape) -> String {
    let reason = e
        .details
        .as_ref()
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or(&e.message);
    format!(
        "node guard: {}",
        reason.chars().take(500).collect::<String>()
    )
}

/// The caller's token with its share of a node's pending calls.
fn token_share<'a>(shared: &Shared, caller: &Caller<'a>) -> TokenShare<'a> {
    TokenShare {
        token: caller.token_id,
        share: shared.config.pending_calls_per_token,
    }
}

/// Sends one `tool.invoke` for the call and waits for its answer (or the deadline),
/// following the call across reconnects of its node within the grace period.
#[allow(clippy::too_many_arguments)]
async fn send(
    shared: &Shared,
    caller: &Caller<'_>,
    node: &NodeHandle,
    name: &NamespacedName,
    params: &ToolsCallParams,
    approval: Option<&str>,
    deadline: Instant,
    cancel: CancellationToken,
) -> CallOutcome {
    let node_id = name.node.as_str();
    let (call_id, rx) =
        match node.begin_call_with_progress(Some(token_share(shared, caller)), caller.progress.clone()) {
        Ok(x) => x,
        Err(PendingError::Full) => {
            return Err(ErrorShape::new(
                ErrorCode::Overloaded,
                format!("node {node_id} has too many calls pending"),
            ))
        }
        Err(PendingError::TokenShare) => {
            return Err(ErrorShape::new(
                ErrorCode::Overloaded,
                format!(
                    "this token already has {} calls pending on node {node_id}, its share of the node's {}; retry when some finish",
                    shared.config.pending_calls_per_token,
                    gsv_protocol::limits::MAX_PENDING_PER_NODE
                ),
            )
            .with_details(json!({ "limit": "pending_calls_per_token", "max": shared.config.pending_calls_per_token })))
        }
        Err(PendingError::Closed) => {
            return Err(ErrorShape::new(
                ErrorCode::NodeOffline,
                format!("node {node_id} is disconnecting"),
            ))
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
        return Err(ErrorShape::new(
            ErrorCode::Timeout,
            "the deadline passed before dispatch",
        ));
    };
    if frame.len() > gsv_protocol::limits::MAX_FRAME_BYTES {
        node.abandon_call(call_id);
        return Err(ErrorShape::new(
            ErrorCode::TooLarge,
            format!(
                "the call's arguments do not fit in one {}-byte frame",
                gsv_protocol::limits::MAX_FRAME_BYTES
            ),
        ));
    }
    shared.metrics.pending_calls.inc();
    let outcome = dispatch(shared, caller, node, &invoke, frame, rx, cancel).await;
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

/// A short, human-readable form of a call for the operator.
fn summary(name: &NamespacedName, args: &Value) -> String {
    summary_of(&name.to_string(), args)
}

/// [`summary`] for a namespaced name given as text (the MCP handler asks 2026-07-28
/// clients before routing).
pub use crate::summary::summary_of;

/// What [`await_approval`] answers when the caller's own user approved (MCP elicitation,
/// tokens made with `--self-confirm`): no operator request exists then, and nothing is
/// sent to the node as an approval, so a node guard still asks an operator.
const CALLER_APPROVAL: &str = "caller";

/// Who may decide a call that needs approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deciders {
    /// Only an operator (admin token): every node guard's question, and `confirm` for
    /// tokens without `--self-confirm`.
    Operator,
    /// The caller's own user first (MCP elicitation), else an operator: `confirm` for
    /// tokens made with `--self-confirm`.
    CallerOrOperator,
}

/// Waits for a human's decision on a call that needs one: the policy's `confirm`, or a
/// node guard's `approval_required`. Returns the operator request's id (for
/// `tool.invoke.approval`) or [`CALLER_APPROVAL`].
#[allow(clippy::too_many_arguments)]
async fn await_approval(
    shared: &Shared,
    caller: &Caller<'_>,
    name: &NamespacedName,
    args: &Value,
    reason: String,
    deciders: Deciders,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<String, ErrorShape> {
    if let (Some(asker), Deciders::CallerOrOperator) = (caller.asker, deciders) {
        if let Some(answer) =
            ask_caller(shared, caller, asker, name, args, &reason, deadline, cancel).await?
        {
            return answer.map(|()| CALLER_APPROVAL.to_owned());
        }
    }
    let (request, rx) = shared
        .approvals
        .open(NewRequest {
            agent: caller.name.to_owned(),
            token_id: caller.token_id.to_owned(),
            node: name.node.to_string(),
            tool: name.tool.to_string(),
            args_hash: args_hash(args),
            summary: summary(name, args),
            reason,
        })
        .await?;
    tracing::info!(approval = %request.id, "call waits for approval");
    let mut entry = AuditEntry::new(
        AuditKind::Approval,
        format!("agent:{}", caller.name),
        "requested",
    );
    entry.node = Some(request.node.clone());
    entry.tool = Some(request.tool.clone());
    entry.args_hash = Some(request.args_hash.clone());
    entry.detail = Some(json!({ "approval": request.id }));
    shared.audit.record(entry);
    let conn = caller.agent.map(|a| a.conn_id.as_str());
    shared.notify_operators(EventName::ApprovalRequested, &request, conn);
    if let Some(asker) = caller.asker {
        asker.queued(&request);
    }

    let ttl = shared.approvals.ttl;
    let wait = deadline.saturating_duration_since(Instant::now()).min(ttl);
    let resolved = |state: &str| json!({ "id": request.id, "state": state });
    tokio::select! {
        d = rx => match d {
            Ok(Approval::Approve) => Ok(request.id.clone()),
            Ok(Approval::Deny) => Err(ErrorShape::new(
                ErrorCode::Denied,
                format!("an operator denied approval request {}", request.id),
            ).with_details(json!({ "approval": request.id }))),
            Err(_) => Err(ErrorShape::new(ErrorCode::Internal, "approval queue dropped the request")),
        },
        _ = tokio::time::sleep(wait) => {
            shared.approvals.expire(&request.id).await;
            shared.notify_operators(EventName::ApprovalResolved, &resolved("expired"), conn);
            Err(ErrorShape::new(
                ErrorCode::Timeout,
                format!("approval request {} was not decided in time", request.id),
            ).with_details(json!({ "approval": request.id })))
        }
        _ = cancel.cancelled() => {
            shared.approvals.expire(&request.id).await;
            shared.notify_operators(EventName::ApprovalResolved, &resolved("expired"), conn);
            Err(ErrorShape::new(ErrorCode::Cancelled, "cancelled by the caller while waiting for approval"))
        }
    }
}

/// Puts the question to the caller's own user. `Ok(None)`: they cannot be asked (use
/// the operator queue); `Ok(Some(answer))`: their decision, already audited.
#[allow(clippy::too_many_arguments)]
async fn ask_caller(
    shared: &Shared,
    caller: &Caller<'_>,
    asker: &dyn ApprovalAsker,
    name: &NamespacedName,
    args: &Value,
    reason: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Option<Result<(), ErrorShape>>, ErrorShape> {
    let question = ApprovalQuestion {
        name,
        args,
        summary: summary(name, args),
        reason,
    };
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .min(shared.approvals.ttl);
    let answer = tokio::select! {
        a = asker.ask(&question) => a,
        _ = tokio::time::sleep(wait) => {
            return Err(ErrorShape::new(
                ErrorCode::Timeout,
                format!("nobody answered whether {name} may run in time"),
            ))
        }
        _ = cancel.cancelled() => {
            return Err(ErrorShape::new(
                ErrorCode::Cancelled,
                "cancelled by the caller while waiting for approval",
            ))
        }
    };
    let Some(decision) = answer else {
        return Ok(None);
    };
    let outcome = match decision {
        Approval::Approve => "approved",
        Approval::Deny => "denied",
    };
    tracing::info!(outcome, "the caller's user decided on the call");
    let mut entry = AuditEntry::new(
        AuditKind::Approval,
        format!("agent:{}", caller.name),
        outcome,
    );
    entry.node = Some(name.node.to_string());
    entry.tool = Some(name.tool.to_string());
    entry.args_hash = Some(args_hash(args));
    entry.detail = Some(json!({ "via": "caller", "tokenId": caller.token_id }));
    shared.audit.record(entry);
    Ok(Some(match decision {
        Approval::Approve => Ok(()),
        Approval::Deny => Err(ErrorShape::new(
            ErrorCode::Denied,
            format!("the user declined to run {name} when asked"),
        )
        .with_details(json!({ "via": "caller" }))),
    }))
}

/// Sends `frame` and waits for the call's outcome. When the node's connection drops
/// first, waits up to the grace period (never past the deadline) for the same node
/// process to reconnect, registers the call on the new connection and asks again
/// (`resume`): the node answers with the result it kept, or the running call's result
/// when it ends, or runs the call if it never got it. Otherwise the caller gets
/// `node_disconnected` with `dispatched: true`.
async fn dispatch(
    shared: &Shared,
    caller: &Caller<'_>,
    first: &NodeHandle,
    invoke: &Invoke<'_>,
    frame: String,
    rx: tokio::sync::oneshot::Receiver<CallOutcome>,
    cancel: CancellationToken,
) -> CallOutcome {
    if first.out.send(frame).is_err() {
        first.abandon_call(invoke.call_id);
        return Err(ErrorShape::new(
            ErrorCode::NodeDisconnected,
            format!("node {} closed before the call could be sent", first.id),
        )
        .with_details(json!({ "dispatched": false, "node": first.id.as_str() })));
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
                return Err(ErrorShape::new(
                    ErrorCode::Timeout,
                    "no result before the call's deadline; the call was cancelled on the node",
                ));
            }
            _ = cancel.cancelled() => {
                node.abandon_call(invoke.call_id);
                let _ = node.out.send(encode_cancel(&invoke.id));
                tracing::info!("call cancelled by the caller");
                return Err(ErrorShape::new(ErrorCode::Cancelled, "cancelled by the caller"));
            }
        };
        match outcome {
            Ok(outcome) => return outcome,
            // The pending entry was released without an answer: the connection is gone.
            Err(_) => {
                let (next, next_rx) = resume(shared, caller, node, invoke, &cancel).await?;
                current = Some(next);
                rx = next_rx;
            }
        }
    }
}

/// Waits for `gone`'s node process to reconnect (within the grace period and the
/// deadline), then registers the call on the new connection and asks for it again.
async fn resume(
    shared: &Shared,
    caller: &Caller<'_>,
    gone: &NodeHandle,
    invoke: &Invoke<'_>,
    cancel: &CancellationToken,
) -> Result<
    (
        std::sync::Arc<NodeHandle>,
        tokio::sync::oneshot::Receiver<CallOutcome>,
    ),
    ErrorShape,
> {
    let until = (Instant::now() + shared.config.grace).min(invoke.deadline);
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
                if gone.instance.is_empty() || node.instance != gone.instance {
                    tracing::info!("node came back as a new process; the call's result is lost");
                    return Err(ErrorShape::new(
                        ErrorCode::NodeDisconnected,
                        format!(
                            "node {} restarted while the call was running; it may have run",
                            gone.id
                        ),
                    )
                    .with_details(
                        json!({ "dispatched": true, "node": gone.id.as_str(), "restarted": true }),
                    ));
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
                    Err(PendingError::Full | PendingError::TokenShare) => {
                        return Err(ErrorShape::new(
                            ErrorCode::NodeDisconnected,
                            format!("node {} came back with too many calls pending to take this one again; it may have run", gone.id),
                        )
                        .with_details(json!({ "dispatched": true, "node": gone.id.as_str() })));
                    }
                };
                let Some(frame) = invoke.frame(true) else {
                    node.abandon_call(invoke.call_id);
                    return Err(crate::registry::disconnected(&gone.id));
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
) -> Result<(), ErrorShape> {
    tokio::select! {
        _ = arrived => Ok(()),
        _ = tokio::time::sleep_until(until.into()) => Err(crate::registry::disconnected(&gone.id)),
        _ = cancel.cancelled() => Err(ErrorShape::new(
            ErrorCode::Cancelled,
            "cancelled by the caller while its node was disconnected",
        )),
    }
}
