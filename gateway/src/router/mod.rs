//! Routing one agent call to the node its name points at, and back.
//!
//! Order of checks: name → policy (deny) → node → tool (one hidden until accepted,
//! `--pin-tools`, is answered as absent) → arguments (against the tool's JSON Schema)
//! → approval (policy `confirm`) → dispatch. A node guard may still answer
//! `approval_required` (e.g. a node in `--approve-shell` mode): the call then waits for
//! an approval exactly as for `confirm` and is sent again, with a new call id, carrying
//! the approval's id in `tool.invoke.approval`. A call approved once (by `confirm`)
//! carries that approval from its first dispatch: one human decision per call. Arguments and the result
//! cross the gateway as the exact bytes received; only validation parses the
//! arguments. One deadline covers the whole call, approval wait included; the node gets
//! what is left of it, and the gateway waits a short slack past it so a node's own
//! timeout answer arrives first. Every call ends in one audit row.
//!
//! This file holds the checks, in order, and the audit row; [`approval`] the human
//! decision; [`delivery`] the sending to the node and the following of a call across
//! the node's reconnects.

mod approval;
mod caller;
mod delivery;
pub mod error;
mod resolve;
mod shared_approval;

pub use caller::Caller;
pub use error::RouteError;
pub use resolve::plan_for;
pub use shared_approval::FanoutApproval;

use approval::{await_approval, Deciders, CALLER_APPROVAL};
use delivery::send;
use gsv_protocol::capability::Capability;
use gsv_protocol::tool_class::ToolClass;

/// [`approval`]'s short form of a call, for a namespaced name given as text (the MCP
/// handler asks 2026-07-28 clients before routing).
pub use crate::summary::summary_of;

use crate::approvals::{ApprovalRequest, Verdict};
use crate::audit::{args_hash, AuditEvent};
use crate::policy::Decision;
use crate::registry::CallOutcome;
use crate::state::Shared;
use futures_util::future::BoxFuture;
use gsv_protocol::method::ToolsCallParams;
use gsv_protocol::{ErrorCode, ErrorShape, NamespacedName};
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// A call another replica forwarded here (cluster mode).
pub struct FromReplica {
    /// That replica's name.
    pub name: String,
    /// The call id the forwarding replica gave the call: it is sent to the node under
    /// this id, so the forwarding replica can ask the node's next holder for the same
    /// call should this replica die mid-call ([`crate::cluster::calls`]).
    pub call_id: Option<u64>,
    /// Told how the call is sent to its node when it goes with an approval given here
    /// (which the forwarding replica cannot know), and waited on, before the
    /// `tool.invoke` leaves.
    pub dispatched: DispatchTx,
}

/// Tells the forwarding replica how a forwarded call is sent; the delivery waits for
/// the future (bounded) before the call leaves. Nothing is started until a call needs
/// it (most forwarded calls never do).
pub type DispatchTx =
    Box<dyn Fn(crate::reattach::Dispatch) -> BoxFuture<'static, ()> + Send + Sync>;

/// A call that needs approval, as put to the caller's user.
pub struct ApprovalQuestion<'a> {
    pub name: &'a NamespacedName,
    pub args: &'a Value,
    /// A short, human-readable form of the call, e.g. `laptop__Bash: rm -r build/`.
    pub summary: String,
    /// Why approval is needed.
    pub reason: &'a str,
    /// What the node resolved the call's paths to (the operator's card shows the same
    /// text), when it was asked.
    pub plan: Option<&'a str>,
}

/// Asks the caller's own user whether a call may run, in place of the operator queue.
pub trait ApprovalAsker: Send + Sync {
    /// The user's answer, or `None` when the user cannot be asked (the call then waits
    /// in the operator queue, as for any other caller).
    fn ask<'a>(&'a self, question: &'a ApprovalQuestion<'a>) -> BoxFuture<'a, Option<Verdict>>;

    /// Told when the call waits in the operator queue instead, so the caller can say so.
    fn queued(&self, _request: &ApprovalRequest) {}
}

/// One call being routed, past its checks: what approval and delivery need.
#[derive(Clone, Copy)]
struct Scope<'a> {
    shared: &'a Shared,
    caller: &'a Caller<'a>,
    name: &'a NamespacedName,
    /// The whole call's deadline, approval wait included.
    deadline: Instant,
    /// Fires when the caller cancels or goes away.
    cancel: &'a CancellationToken,
}

/// What routing a call comes to: the node's raw result, or why there is none.
type Routed = Result<Box<serde_json::value::RawValue>, RouteError>;

/// What the audit row of a call needs from routing.
#[derive(Default)]
struct Trace {
    /// SHA-256 of the arguments, once parsed.
    args_hash: Option<String>,
    /// The arguments as text, with `--audit-args`.
    args_text: Option<String>,
    /// The named node declares the tool (so its name may label a metric).
    known_tool: bool,
    /// Cluster mode: the replica that holds the node routed the call and wrote its
    /// audit row (this replica, which forwarded it, writes none).
    audited_elsewhere: bool,
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
        return Err(RouteError::ShuttingDown.into());
    }
    // Counted in `Shared::in_flight` while it lives (shutdown waits for it).
    let _in_flight = shared.in_flight.token();
    let name = match NamespacedName::parse(&params.name) {
        Ok(n) => n,
        Err(reason) => {
            return Err(RouteError::BadName {
                name: params.name.clone(),
                reason,
            }
            .into())
        }
    };
    let span = tracing::info_span!("call", agent = caller.name, node_id = %name.node, tool = %name.tool, call_id = tracing::field::Empty);
    let mut trace = Trace::default();
    let outcome: CallOutcome = route(shared, caller, &name, &params, cancel, &mut trace)
        .instrument(span)
        .await
        .map_err(ErrorShape::from);
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
    if !trace.audited_elsewhere {
        shared.audit.record(AuditEvent::Call {
            agent: caller.name,
            token_id: caller.token_id,
            name: &name,
            args_hash: trace.args_hash.take(),
            args: trace.args_text.take(),
            outcome: label,
            duration_ms: elapsed.as_millis() as u64,
        });
    }
    outcome
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
) -> Routed {
    let started = Instant::now();
    let full = params.name.as_str();
    // By name first, before anything is looked up (an agent cannot probe for nodes
    // or tools its policy names nowhere); with the tool's classes once it is found.
    let mut decision = caller.policy.precheck(full);
    if decision == Decision::Deny {
        tracing::warn!(tool = full, "call outside the agent's policy");
        return Err(RouteError::NotAllowed {
            name: full.to_owned(),
        });
    }
    // The arguments are held until the call ends: they count against the token's
    // share of the bytes in flight (`crate::budget`).
    let _bytes = shared
        .pending_bytes
        .reserve(caller.token_id, params.args.get().len())
        .map_err(RouteError::Budget)?;
    let node_id = name.node.as_str();
    let Some(node) = shared.registry.get(node_id) else {
        // Cluster mode: another replica may hold the node (a call forwarded here is
        // routed here or not at all).
        if caller.from_replica.is_none() {
            if let Some(routed) = shared
                .peers
                .forward(
                    &shared.metrics,
                    crate::peers::ForwardedFor {
                        token_id: caller.token_id,
                        policy: caller.policy,
                        progress: caller.progress.as_ref(),
                    },
                    node_id,
                    params,
                    &cancel,
                )
                .await
            {
                trace.audited_elsewhere = routed.audited;
                return routed.outcome;
            }
        }
        if caller.policy.allowed_by_class_only(full) {
            return Err(not_allowed(full));
        }
        if let Some(since) = shared.registry.offline_since(node_id) {
            return Err(RouteError::NodeOffline {
                node: node_id.to_owned(),
                since,
            });
        }
        return Err(RouteError::NoNode {
            node: node_id.to_owned(),
        });
    };
    // A tool hidden until accepted (`--pin-tools`) is answered exactly like one the
    // node does not have.
    let Some(spec) = shared.registry.tool(&node, name.tool.as_str()) else {
        if caller.policy.allowed_by_class_only(full) {
            return Err(not_allowed(full));
        }
        return Err(RouteError::NoTool {
            node: node_id.to_owned(),
            tool: name.tool.to_string(),
        });
    };
    decision = caller.policy.decide(full, spec.classes);
    if decision == Decision::Deny {
        return Err(not_allowed(full));
    }
    trace.known_tool = true;
    let mut args: Value =
        serde_json::from_str(params.args.get()).map_err(RouteError::ArgsNotJson)?;
    // `timeout: 1500.5` is 1500 ms: whole-number counts given with a fraction are
    // rounded down for every tool, and the call goes with the rounded value.
    let floored = spec.floor_counts(&mut args);
    spec.validate_args(&args)?;
    // Input to a running session is a command like any other (one input gate for
    // every session, whatever started it): it needs approval when any tool of the
    // node that runs code (class `run`: Bash, exec, and any later one) needs approval
    // for this token, so approving an interactive program — started by Bash or by
    // exec — does not approve everything typed into it later; the operator then sees
    // the exact text or keys. Text typed into a tmux pane (`term_send`) is judged
    // the same way, and more strictly: the pane is nobody's session (an operator's
    // shell, say), so a token that may not run Bash may not type there at all.
    let mut reason = None;
    if decision == Decision::Allow && is_session_input(name, &args) {
        if let Some(starter) = confirmed_runner(caller.policy, node_id, &node.tools) {
            decision = Decision::Confirm;
            reason = Some(format!(
                "input to a session is judged like a command: the token's policy requires approval for {starter}"
            ));
        }
        let bash = NamespacedName::join(node_id, "Bash");
        // Denied Bash: the token can own no Bash session; a terminal is refused here.
        if name.tool.as_str() == "term_send"
            && caller.policy.decide_as(&bash, Capability::ShellExec) == Decision::Deny
        {
            return Err(RouteError::ShellInputNotAllowed {
                name: full.to_owned(),
                bash: bash.to_string(),
            });
        }
    }
    let timeout_ms = params
        .timeout_ms
        .or(spec.def.default_timeout_ms)
        .unwrap_or(gsv_protocol::limits::DEFAULT_CALL_TIMEOUT_MS)
        .clamp(1, gsv_protocol::limits::MAX_CALL_TIMEOUT_MS);
    let deadline = started + Duration::from_millis(timeout_ms);
    let scope = Scope {
        shared,
        caller,
        name,
        deadline,
        cancel: &cancel,
    };
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
    // The approved call, when the node resolved its paths for the question: sent with
    // the absolute paths the operator read.
    let with_args = |args: &Value| {
        serde_json::value::to_raw_value(args)
            .ok()
            .map(|args| ToolsCallParams {
                name: params.name.clone(),
                args,
                timeout_ms: params.timeout_ms,
                is_async: params.is_async,
            })
    };
    let mut resolved_call = if floored { with_args(&args) } else { None };
    if decision == Decision::Confirm {
        let reason =
            reason.unwrap_or_else(|| format!("the token's policy requires approval for {full}"));
        // The caller's own user may answer only when the token says so (`--self-confirm`).
        let who = if caller.policy.self_confirm() {
            Deciders::CallerOrOperator
        } else {
            Deciders::Operator
        };
        let resolution = resolve::for_question(&node, spec.classes, &args).await;
        let plan = resolution.as_ref().map(|r| r.plan.clone());
        let id = await_approval(&scope, &args, reason, plan, who).await?;
        approval = (id != CALLER_APPROVAL).then_some(id);
        if let Some(call) = resolution.and_then(|r| r.args).and_then(|a| with_args(&a)) {
            resolved_call = Some(call);
        }
    }
    drop(args);
    let params = resolved_call.as_ref().unwrap_or(params);

    let outcome = send(&scope, &node, params, approval.as_deref()).await;
    match outcome {
        // A node-side guard asks for approval (e.g. `--approve-shell`): open a request
        // as for `confirm`, then send the same call again carrying its id.
        Err(RouteError::Node(e)) if e.code == ErrorCode::ApprovalRequired && approval.is_none() => {
            let reason = node_reason(&e);
            let plan = node_plan(&e);
            // Parsed again: the value was let go while the node worked (it parsed once,
            // so it parses again).
            let args: Value = serde_json::from_str(params.args.get()).unwrap_or(Value::Null);
            // A node guard's question is never the caller's to answer: its whole point is
            // that an operator decides, whatever the token allows.
            let approval = await_approval(&scope, &args, reason, plan, Deciders::Operator).await?;
            // The node may have reconnected while the operator decided.
            let Some(node) = shared.registry.get(node_id) else {
                return Err(RouteError::GoneDuringApproval {
                    node: node_id.to_owned(),
                });
            };
            send(&scope, &node, params, Some(&approval)).await
        }
        other => other,
    }
}

/// Whether a call sends input to a running program: Process `write`, `submit` or
/// `send-keys`, or `term_send` (keys typed into a tmux pane).
/// The refusal of a call outside the token's policy (logged: an agent trying).
fn not_allowed(full: &str) -> RouteError {
    tracing::warn!(tool = full, "call outside the agent's policy");
    RouteError::NotAllowed {
        name: full.to_owned(),
    }
}

/// The first tool of the node that starts sessions (class `run`, not one of the
/// session-input tools themselves) which this token may call only with approval.
fn confirmed_runner(
    policy: &crate::policy::Policy,
    node: &str,
    tools: &crate::toolset::ToolSet,
) -> Option<String> {
    tools
        .tools
        .iter()
        .filter(|t| t.classes.contains(ToolClass::Run))
        .filter(|t| !matches!(t.def.name.as_str(), "Process" | "term_send"))
        .map(|t| (NamespacedName::join(node, &t.def.name), t.classes))
        .find(|(name, classes)| policy.decide(name, *classes) == Decision::Confirm)
        .map(|(name, _)| name)
}

fn is_session_input(name: &NamespacedName, args: &Value) -> bool {
    match name.tool.as_str() {
        "term_send" => true,
        "Process" => matches!(
            args.get("action").and_then(Value::as_str),
            Some("write" | "submit" | "send-keys")
        ),
        _ => false,
    }
}

/// What the node's tool says the call would do (`details.plan`), cut to the bound
/// whatever the node sent.
fn node_plan(e: &ErrorShape) -> Option<String> {
    e.details
        .as_ref()
        .and_then(|d| d.get("plan"))
        .and_then(Value::as_str)
        .map(gsv_protocol::limits::cut_plan)
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
