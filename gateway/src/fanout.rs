//! `tools.fanout`: one bare tool run on every node a selector picks, each node call
//! routed exactly as a `tools.call` of `{node}__{tool}` ([`router::call`]), so policy,
//! approvals, node guards, budgets, audit rows and cancel are those of single calls.
//!
//! Order: the selector is parsed and matched over the nodes the token may see only
//! ([`crate::inventory::picked_nodes`]), sorted by id. A node whose `{node}__{tool}`
//! the policy denies is `denied` and an offline node `offline` at once, neither
//! called; the others are called in rolling batches ([`rolling`]): at most `batch` at
//! once, the next starting when one finishes. With `failFast`, after the first
//! failure no new node starts (those are `skipped`); a cancelled fan-out starts no
//! new node either. Each finished node is reported as it ends (the caller sends a
//! `fanout.result` event); the whole result lists every node sorted by id.

use crate::error::WireError;
use crate::inventory::viewer;
use crate::router::{self, Caller, RouteError};
use crate::state::Shared;
use futures_util::stream::{FuturesUnordered, StreamExt};
use gsv_protocol::fanout::{
    FanoutResult, FanoutSummary, NodeOutcome, NodeStatus, ToolsFanoutParams, MAX_FANOUT_NODES,
    MAX_WAIT_OFFLINE_MS,
};
use gsv_protocol::method::ToolsCallParams;
use gsv_protocol::names::NAMESPACE_SEPARATOR;
use gsv_protocol::tool_class::ToolClasses;
use gsv_protocol::{ErrorCode, ErrorShape, ToolName};
use serde_json::value::RawValue;
use std::future::Future;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Why a fan-out was refused as a whole (before any node was called).
#[derive(Debug, thiserror::Error)]
pub enum FanoutError {
    #[error("bad tool name {tool:?} for a fan-out: {reason} (give the bare tool name, without a node prefix)")]
    BadTool { tool: String, reason: String },
    #[error(transparent)]
    Selector(#[from] crate::inventory::InventoryError),
    #[error("the selector picks {count} nodes; a fan-out reaches at most {MAX_FANOUT_NODES}")]
    TooManyNodes { count: usize },
    #[error("bad batch: a count must be at least 1, a percent 1 to 100")]
    BadBatch,
    #[error("waitOfflineMs is at most {MAX_WAIT_OFFLINE_MS} (an hour)")]
    BadWaitOffline,
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The fan-out's job could not be recorded (the token's share of jobs is full,
    /// or the store failed).
    #[error("{}", .0.message)]
    Job(ErrorShape),
    #[error("this token already has {MAX_FANOUTS_PER_TOKEN} fan-outs running, its share of the gateway; retry when one ends")]
    TooManyRunning,
    /// An operator's token: it reads the fleet and decides approvals, and runs nothing.
    #[error("operator tokens cannot run tools, so they cannot start a fan-out")]
    ViewOnly,
}

/// Fan-outs one token may have running at once (async ones and those whose caller
/// left included): each holds its nodes' calls and results, so no token may hold the
/// gateway's memory with thousands of them.
pub const MAX_FANOUTS_PER_TOKEN: usize = 16;

/// One running fan-out counted against its token's share; released when dropped.
struct Admitted<'a> {
    shared: &'a Shared,
    token: String,
}

impl<'a> Admitted<'a> {
    fn new(shared: &'a Shared, token: &str) -> Option<Admitted<'a>> {
        let mut running = shared.fanouts.entry(token.to_owned()).or_insert(0);
        if *running >= MAX_FANOUTS_PER_TOKEN {
            return None;
        }
        *running += 1;
        Some(Admitted {
            shared,
            token: token.to_owned(),
        })
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.shared
            .fanouts
            .remove_if_mut(&self.token, |_, running| {
                *running = running.saturating_sub(1);
                *running == 0
            });
    }
}

impl FanoutError {
    pub fn to_shape(&self) -> ErrorShape {
        match self {
            FanoutError::Selector(e) => e.to_shape(),
            FanoutError::ShuttingDown => ErrorShape::from(RouteError::ShuttingDown),
            FanoutError::Job(e) => e.clone(),
            FanoutError::TooManyRunning => {
                ErrorShape::new(ErrorCode::Overloaded, self.to_string()).with(
                    gsv_protocol::ErrorDetails::limit("fanouts_per_token", MAX_FANOUTS_PER_TOKEN),
                )
            }
            FanoutError::ViewOnly => ErrorShape::new(ErrorCode::Forbidden, self.to_string()),
            _ => ErrorShape::new(ErrorCode::InvalidArgs, self.to_string()),
        }
    }
}

/// A node the selector picked.
struct Picked {
    id: String,
    online: bool,
    since: u64,
}

/// The nodes `selector` (`select` as text) picks among those `policy` lets the caller
/// see: held here, and in cluster mode online on another replica (asked there, with
/// the token's policy and the selector applied there; a node online elsewhere over
/// this replica's memory of it as offline). Its calls are routed like any call, so
/// those go to the replica that holds the node.
async fn pick(
    shared: &Shared,
    policy: &crate::policy::Policy,
    token_id: &str,
    selector: &gsv_protocol::selector::Selector,
    select: &str,
) -> Vec<Picked> {
    let mut nodes: Vec<Picked> = crate::inventory::picked_nodes(shared, &viewer(policy), selector)
        .into_iter()
        .map(|(id, online, since)| Picked { id, online, since })
        .collect();
    if !crate::fleet::alone(shared) {
        for remote in shared.peers.nodes(token_id, Some(select)).await {
            match nodes.iter_mut().find(|n| n.id == remote.id) {
                Some(n) => n.online = true,
                None => nodes.push(Picked {
                    id: remote.id,
                    online: true,
                    since: 0,
                }),
            }
        }
    }
    nodes
}

/// How many nodes a fan-out of `select` by this caller would pick now (0 for a bad
/// selector).
pub async fn count_picked(
    shared: &Shared,
    policy: &crate::policy::Policy,
    token_id: &str,
    select: &str,
) -> usize {
    match crate::inventory::parse_selector(select) {
        Ok(s) => pick(shared, policy, token_id, &s, select).await.len(),
        Err(_) => 0,
    }
}

/// A node to call, once denied and offline nodes are set aside.
struct Target {
    node: String,
    name: String,
    /// Offline when the fan-out started, and waited for until then (`waitOfflineMs`).
    wait_until: Option<Instant>,
}

/// Runs one fan-out for `caller` (its policy decides per node; its name and token own
/// the job); `started` is told the job's id once it is recorded (before any node is
/// called), `report` of each node as it finishes (denied and offline nodes first, at
/// once). `cancel` stops it: no new node starts, and the calls running are cancelled.
pub async fn run(
    shared: &Shared,
    caller: &Caller<'_>,
    params: ToolsFanoutParams,
    cancel: CancellationToken,
    started: impl FnOnce(&str),
    report: impl Fn(&NodeOutcome),
) -> Result<Ran, FanoutError> {
    if shared.draining.is_cancelled() {
        return Err(FanoutError::ShuttingDown);
    }
    if caller.policy.is_view_only() {
        return Err(FanoutError::ViewOnly);
    }
    ToolName::parse(&params.tool).map_err(|e| FanoutError::BadTool {
        tool: params.tool.clone(),
        reason: e.to_string(),
    })?;
    let selector = crate::inventory::parse_selector(&params.select)?;
    if let Some(batch) = params.batch {
        batch.size(1).ok_or(FanoutError::BadBatch)?;
    }
    if params
        .wait_offline_ms
        .is_some_and(|ms| ms > MAX_WAIT_OFFLINE_MS)
    {
        return Err(FanoutError::BadWaitOffline);
    }
    let mut nodes = pick(
        shared,
        caller.policy,
        caller.token_id,
        &selector,
        &params.select,
    )
    .await;
    if nodes.len() > MAX_FANOUT_NODES {
        return Err(FanoutError::TooManyNodes { count: nodes.len() });
    }
    nodes.sort_unstable_by(|a, b| a.id.cmp(&b.id));
    let _admitted = Admitted::new(shared, caller.token_id).ok_or(FanoutError::TooManyRunning)?;
    // A job from the start, so its outcome is kept and readable later (`jobs.get`).
    let job = crate::jobs::record(
        shared,
        caller,
        gsv_protocol::job::JobKind::Fanout,
        &params.tool,
        Some(&params.select),
        nodes.iter().map(|n| n.id.clone()).collect(),
    )
    .await
    .map_err(FanoutError::Job)?;
    // `jobs.cancel` ends it too, from any connection of the token.
    crate::jobs::running(shared, &job, caller.token_id, &cancel);
    started(&job);
    let wait_until = params
        .wait_offline_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let span = tracing::info_span!("fanout", %job, tool = %params.tool, nodes = nodes.len());
    // What the results kept until the fan-out ends cost, against the token's share
    // of the gateway's fan-out results budget; held until the fan-out is done.
    let kept_bytes = std::sync::Mutex::new(Vec::new());
    // `result_bytes`: the length of the node's raw result (0 when it gave none), so
    // nothing is encoded again to be measured.
    let keep_within = |outcome: NodeOutcome, result_bytes: usize| -> NodeOutcome {
        let size = result_bytes + OUTCOME_OVERHEAD;
        match shared.fanout_result_bytes.reserve(caller.token_id, size) {
            Ok(held) => {
                kept_bytes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(held);
                outcome
            }
            Err(over) => without_result(outcome, over),
        }
    };
    let keep_within = &keep_within;
    let outcome = async {
        let mut results = Vec::with_capacity(nodes.len());
        let mut targets = Vec::new();
        for n in nodes {
            let name = format!("{}{NAMESPACE_SEPARATOR}{}", n.id, params.tool);
            // By name only here: the call itself is judged with the tool's classes.
            let early = if caller.policy.precheck(&name) == crate::policy::Decision::Deny {
                Some(not_called(
                    &n.id,
                    NodeStatus::Denied,
                    RouteError::NotAllowed { name: name.clone() },
                ))
            } else if !n.online && wait_until.is_none() {
                let since = n.since;
                let node = n.id.clone();
                Some(not_called(
                    &n.id,
                    NodeStatus::Offline,
                    RouteError::NodeOffline { node, since },
                ))
            } else {
                None
            };
            match early {
                Some(outcome) => {
                    report(&outcome);
                    results.push(keep_within(outcome, 0));
                }
                None => targets.push(Target {
                    wait_until: (!n.online).then_some(wait_until).flatten(),
                    node: n.id,
                    name,
                }),
            }
        }
        let size = match params.batch {
            // Checked above: in range.
            Some(b) => b.size(targets.len()).unwrap_or(1),
            None => targets.len(),
        };
        tracing::info!(
            called = targets.len(),
            batch = size,
            fail_fast = params.fail_fast,
            "fan-out started"
        );
        // One approval decision for every node the fan-out calls.
        let group = router::FanoutApproval::new(
            params.select.clone(),
            targets.iter().map(|t| t.node.clone()).collect(),
        );
        let caller = caller.in_fanout(&group);
        let args = &params.args;
        let timeout_ms = params.timeout_ms;
        let report = &report;
        let called = rolling(
            targets,
            size,
            params.fail_fast,
            &cancel,
            |t: Target| {
                let caller = &caller;
                let cancel = cancel.child_token();
                async move {
                    if let Some(until) = t.wait_until {
                        if !until_online(shared, &t.node, until, &cancel).await {
                            let outcome =
                                classify(t.node.clone(), Err(offline(shared, &t.node).into()));
                            report(&outcome);
                            return keep_within(outcome, 0);
                        }
                    }
                    let call = ToolsCallParams {
                        name: t.name,
                        args: copy(args),
                        timeout_ms,
                        is_async: false,
                    };
                    let outcome = router::call(shared, caller, call, cancel).await;
                    let result_bytes = outcome.as_ref().map_or(0, |raw| raw.get().len());
                    let outcome = classify(t.node, outcome);
                    report(&outcome);
                    keep_within(outcome, result_bytes)
                }
            },
            |t| {
                let outcome = skipped(t.node);
                report(&outcome);
                keep_within(outcome, 0)
            },
        )
        .await;
        results.extend(called);
        results.sort_by(|a, b| a.node.cmp(&b.node));
        let mut summary = FanoutSummary::default();
        for r in &results {
            summary.add(r.status);
        }
        tracing::info!(?summary, "fan-out done");
        Ok(FanoutResult {
            job: job.clone(),
            results,
            summary,
            results_omitted: false,
        })
    }
    .instrument(span)
    .await;
    let encoded = keep(shared, &job, &outcome).await;
    drop(kept_bytes);
    shared.running_jobs.remove(&job);
    outcome.map(|result| Ran { result, encoded })
}

/// A fan-out that ran: its result, and that result's JSON when it was encoded whole to
/// be kept (the caller's answer reuses it instead of encoding it again).
pub struct Ran {
    pub result: FanoutResult,
    pub encoded: Option<Box<RawValue>>,
}

/// Stores a fan-out's outcome in its job: the whole result, or without the tool
/// results' bodies when it would be over what a job keeps.
async fn keep(
    shared: &Shared,
    job: &str,
    outcome: &Result<FanoutResult, FanoutError>,
) -> Option<Box<RawValue>> {
    let mut whole = None;
    let stored = match outcome {
        Ok(result) => {
            let encode = |r: &FanoutResult| serde_json::value::to_raw_value(r);
            match encode(result) {
                Ok(raw) if raw.get().len() <= crate::jobs::MAX_STORED_RESULT => {
                    whole = Some(raw.clone());
                    Ok(raw)
                }
                _ => encode(&result.clone().without_bodies()).map_err(|e| {
                    ErrorShape::new(
                        ErrorCode::Internal,
                        format!("the result did not encode: {e}"),
                    )
                }),
            }
        }
        Err(e) => Err(e.to_shape()),
    };
    crate::jobs::finish(&shared.store, job, stored).await;
    shared.changes.send(crate::changes::Topic::Jobs);
    whole
}

/// Waits until `node` is connected (true), or `until` passes or `cancel` fires (false).
async fn until_online(
    shared: &Shared,
    node: &str,
    until: Instant,
    cancel: &CancellationToken,
) -> bool {
    loop {
        let arrived = shared.registry.arrivals().notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        if shared.registry.get(node).is_some() {
            return true;
        }
        tokio::select! {
            _ = &mut arrived => {}
            _ = tokio::time::sleep_until(until.into()) => return false,
            _ = cancel.cancelled() => return false,
        }
    }
}

/// The error of a node still offline after the fan-out waited for it.
fn offline(shared: &Shared, node: &str) -> RouteError {
    let all = crate::registry::Viewer {
        visible: |_: &str, _: ToolClasses| true,
        operator: true,
    };
    let since = shared
        .registry
        .pick(&all, |id, _| id == node)
        .first()
        .map_or(0, |(_, _, since)| *since);
    RouteError::NodeOffline {
        node: node.to_owned(),
        since,
    }
}

/// A copy of the arguments' exact bytes, for one node's call.
fn copy(args: &RawValue) -> Box<RawValue> {
    args.to_owned()
}

/// Runs `call` on `items` in order, at most `size` at once, starting the next when one
/// finishes. After an item whose outcome is not ok (with `fail_fast`), or once
/// `cancel` fires, no new item starts: `skip` answers for each of the rest. Outcomes
/// come back in the order they finished (skipped ones last).
pub async fn rolling<T, Fut>(
    items: Vec<T>,
    size: usize,
    fail_fast: bool,
    cancel: &CancellationToken,
    call: impl Fn(T) -> Fut,
    skip: impl Fn(T) -> NodeOutcome,
) -> Vec<NodeOutcome>
where
    Fut: Future<Output = NodeOutcome>,
{
    let size = size.max(1);
    let mut out = Vec::with_capacity(items.len());
    let mut queue = items.into_iter();
    let mut running = FuturesUnordered::new();
    let mut stop = false;
    loop {
        while !stop && running.len() < size {
            if cancel.is_cancelled() {
                stop = true;
                break;
            }
            match queue.next() {
                Some(item) => running.push(call(item)),
                None => break,
            }
        }
        let Some(outcome) = running.next().await else {
            break;
        };
        if fail_fast && !outcome.ok {
            stop = true;
        }
        out.push(outcome);
    }
    out.extend(queue.map(skip));
    out
}

/// The outcome of a node that was not called, with the error a single call would get.
fn not_called(node: &str, status: NodeStatus, why: RouteError) -> NodeOutcome {
    NodeOutcome {
        node: node.to_owned(),
        ok: false,
        status,
        result: None,
        error: Some(ErrorShape::from(why)),
    }
}

/// The outcome of a node never started (`failFast`, or the fan-out was cancelled).
fn skipped(node: String) -> NodeOutcome {
    NodeOutcome {
        node,
        ok: false,
        status: NodeStatus::Skipped,
        result: None,
        error: Some(ErrorShape::new(
            ErrorCode::Cancelled,
            "not started: an earlier node failed (failFast) or the fan-out was cancelled",
        )),
    }
}

/// Whether a tool's result says it failed: `isError`, or a command that ran and
/// failed (`structuredContent.exitCode` not 0, or `timedOut`, as Bash and exec
/// report: a command's failure is a result, not a tool error, for a single call).
fn tool_failed(result: &serde_json::Value) -> bool {
    let flag = |v: &serde_json::Value, key: &str| {
        v.get(key)
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    };
    if flag(result, "isError") {
        return true;
    }
    let Some(sc) = result.get("structuredContent") else {
        return false;
    };
    let exit_failed = sc
        .get("exitCode")
        .and_then(serde_json::Value::as_i64)
        .is_some_and(|code| code != 0);
    exit_failed || flag(sc, "timedOut")
}

/// What a kept node outcome costs beyond its result's JSON (the outcome, the parsed
/// value's nodes), counted against the fan-out results budget.
const OUTCOME_OVERHEAD: usize = 512;

/// A node's outcome kept without its result, because the token's share of the fan-out
/// results budget (or the gateway's total) is used up: the node's call ran and its
/// status says how it ended; the caller had the whole result in its `fanout.result`
/// event.
fn without_result(outcome: NodeOutcome, over: crate::budget::BudgetError) -> NodeOutcome {
    let mut shape = ErrorShape::new(
        ErrorCode::Overloaded,
        format!(
            "the node's result was not kept: {} (fan-out results); the call ran, its status says how it ended, and its result went out in the fanout.result event",
            over
        ),
    );
    shape.retryable = false;
    NodeOutcome {
        result: None,
        error: outcome.error.or(Some(shape)),
        ..outcome
    }
}

/// One node call's outcome as a fan-out reports it: a result (ok unless `isError`),
/// or the call's error (`node_offline` reads as offline, `forbidden` as denied).
fn classify(node: String, outcome: crate::registry::CallOutcome) -> NodeOutcome {
    match outcome {
        Ok(raw) => match serde_json::from_str::<serde_json::Value>(raw.get()) {
            Ok(value) => {
                let failed = tool_failed(&value);
                NodeOutcome {
                    node,
                    ok: !failed,
                    status: if failed {
                        NodeStatus::Failed
                    } else {
                        NodeStatus::Ok
                    },
                    result: Some(value),
                    error: None,
                }
            }
            Err(e) => NodeOutcome {
                node,
                ok: false,
                status: NodeStatus::Failed,
                result: None,
                error: Some(ErrorShape::new(
                    ErrorCode::Internal,
                    format!("the node's result is not JSON: {e}"),
                )),
            },
        },
        Err(e) => {
            let status = match e.code {
                ErrorCode::NodeOffline => NodeStatus::Offline,
                ErrorCode::Forbidden => NodeStatus::Denied,
                _ => NodeStatus::Failed,
            };
            NodeOutcome {
                node,
                ok: false,
                status,
                result: None,
                error: Some(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    fn done(node: &str, ok: bool) -> NodeOutcome {
        NodeOutcome {
            node: node.into(),
            ok,
            status: if ok {
                NodeStatus::Ok
            } else {
                NodeStatus::Failed
            },
            result: None,
            error: None,
        }
    }

    #[tokio::test]
    async fn fanout_rolling_keeps_at_most_size_running() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let order = Mutex::new(Vec::new());
        let items: Vec<String> = (0..7).map(|i| format!("n{i}")).collect();
        let out = rolling(
            items,
            2,
            false,
            &CancellationToken::new(),
            |n| {
                let (running, most, order) = (&running, &most, &order);
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    order.lock().unwrap().push(n.clone());
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    done(&n, true)
                }
            },
            skipped,
        )
        .await;
        assert_eq!(out.len(), 7);
        assert_eq!(most.load(Ordering::SeqCst), 2);
        let started = order.lock().unwrap().clone();
        assert_eq!(started, (0..7).map(|i| format!("n{i}")).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn fanout_fail_fast_skips_the_rest() {
        let items: Vec<String> = (0..4).map(|i| format!("n{i}")).collect();
        let out = rolling(
            items,
            1,
            true,
            &CancellationToken::new(),
            |n| async move {
                let ok = n != "n1";
                done(&n, ok)
            },
            skipped,
        )
        .await;
        let statuses: Vec<(String, NodeStatus)> =
            out.iter().map(|o| (o.node.clone(), o.status)).collect();
        assert_eq!(
            statuses,
            vec![
                ("n0".into(), NodeStatus::Ok),
                ("n1".into(), NodeStatus::Failed),
                ("n2".into(), NodeStatus::Skipped),
                ("n3".into(), NodeStatus::Skipped),
            ]
        );
    }

    #[tokio::test]
    async fn fanout_cancelled_starts_nothing() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let out = rolling(
            vec!["a".to_string(), "b".to_string()],
            5,
            false,
            &cancel,
            |n| async move { done(&n, true) },
            skipped,
        )
        .await;
        assert!(out.iter().all(|o| o.status == NodeStatus::Skipped));
    }

    #[test]
    fn fanout_classify_reads_is_error_and_codes() {
        let raw = RawValue::from_string(r#"{"content":[],"isError":true}"#.into()).unwrap();
        assert_eq!(classify("a".into(), Ok(raw)).status, NodeStatus::Failed);
        let raw = RawValue::from_string(
            r#"{"content":[],"structuredContent":{"status":"failed","exitCode":3}}"#.into(),
        )
        .unwrap();
        assert_eq!(classify("a".into(), Ok(raw)).status, NodeStatus::Failed);
        let raw = RawValue::from_string(
            r#"{"content":[],"structuredContent":{"exitCode":0,"timedOut":false}}"#.into(),
        )
        .unwrap();
        assert_eq!(classify("a".into(), Ok(raw)).status, NodeStatus::Ok);
        let raw = RawValue::from_string(r#"{"content":[]}"#.into()).unwrap();
        let o = classify("a".into(), Ok(raw));
        assert!(o.ok && o.status == NodeStatus::Ok);
        let e = ErrorShape::new(ErrorCode::NodeOffline, "gone");
        assert_eq!(classify("a".into(), Err(e)).status, NodeStatus::Offline);
        let e = ErrorShape::new(ErrorCode::Overloaded, "busy");
        assert_eq!(classify("a".into(), Err(e)).status, NodeStatus::Failed);
    }
}
