//! `tools.fanout`: one tool run on every node a selector picks, and its answers.
//!
//! The request names a bare tool (no node prefix) and a selector; the gateway runs
//! `{node}__{tool}` on each node the token may see that the selector picks, in
//! rolling batches, and sends one `fanout.result` event per node as it finishes,
//! then the whole result as the request's `res`.

use crate::ErrorShape;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// Most nodes one fan-out may reach: a selector picking more is refused.
pub const MAX_FANOUT_NODES: usize = 10_000;

/// The longest a fan-out waits for an offline node to come back (`waitOfflineMs`).
pub const MAX_WAIT_OFFLINE_MS: u64 = 60 * 60 * 1000;

/// Params of `tools.fanout`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsFanoutParams {
    /// The bare tool name (`Bash`, not `laptop__Bash`).
    pub tool: String,
    /// A selector (`env=prod`, `id~*` for every node the token may see). Required:
    /// reaching every node must be said.
    pub select: String,
    /// The arguments, sent as these exact bytes to every node.
    #[serde(default = "crate::method::empty_object")]
    pub args: Box<RawValue>,
    /// How many node calls run at once; absent: all at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Batch>,
    /// After the first node that fails, start no more (they are `skipped`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_fast: bool,
    /// Each node call's deadline (as `tools.call`'s `timeoutMs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Wait up to this long for a node that is offline to come back (then it is called
    /// like the others; still offline then: `offline`). Absent: offline at once. At most
    /// [`MAX_WAIT_OFFLINE_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_offline_ms: Option<u64>,
    /// Answer at once with the fan-out's job id (`{"job": ID}`); it runs on and
    /// `jobs.get` reads its outcome.
    #[serde(default, rename = "async", skip_serializing_if = "std::ops::Not::not")]
    pub is_async: bool,
}

/// A rolling batch: `{"count": N}` nodes at once, or `{"percent": P}` of the selected
/// nodes (rounded up, at least one). The next node starts when one finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Batch {
    Count(u32),
    Percent(u8),
}

impl Batch {
    /// Node calls at once for `nodes` nodes to call, or `None` when the batch is out
    /// of range (a count of 0, a percent outside 1..=100).
    pub fn size(self, nodes: usize) -> Option<usize> {
        match self {
            Batch::Count(0) => None,
            Batch::Count(n) => Some(n as usize),
            Batch::Percent(p) if p == 0 || p > 100 => None,
            Batch::Percent(p) => Some((nodes * p as usize).div_ceil(100).max(1)),
        }
    }
}

/// How one node's part of a fan-out ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeStatus {
    /// The tool ran and succeeded.
    Ok,
    /// The tool reported an error (`result` with `isError`), or the call failed
    /// (`error`: timeout, not_found, overloaded, ...).
    Failed,
    /// The node is known but not connected: not called.
    Offline,
    /// The token may not call `{node}__{tool}`: not called.
    Denied,
    /// Not started: `failFast` after a failure, or the fan-out was cancelled.
    Skipped,
}

/// One node's answer (in the final result, and in its `fanout.result` event).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOutcome {
    pub node: String,
    /// True only for `status: ok`.
    pub ok: bool,
    pub status: NodeStatus,
    /// The tool's result (as for `tools.call`), when the tool ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why there is no result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorShape>,
}

/// Payload of the `fanout.result` event: one node finished (`id` is the request's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutResultEvent {
    pub id: String,
    #[serde(flatten)]
    pub outcome: NodeOutcome,
}

/// [`FanoutResultEvent`] as the gateway writes it: borrowed, so sending a node's
/// outcome copies nothing (the same JSON).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutResultEventOut<'a> {
    pub id: &'a str,
    pub node: &'a str,
    pub ok: bool,
    pub status: NodeStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a ErrorShape>,
}

impl<'a> FanoutResultEventOut<'a> {
    pub fn new(id: &'a str, o: &'a NodeOutcome) -> Self {
        FanoutResultEventOut {
            id,
            node: &o.node,
            ok: o.ok,
            status: o.status,
            result: o.result.as_ref(),
            error: o.error.as_ref(),
        }
    }
}

/// Counts of a fan-out's nodes by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutSummary {
    pub ok: usize,
    pub failed: usize,
    pub offline: usize,
    pub denied: usize,
    pub skipped: usize,
}

impl FanoutSummary {
    /// Counts one node.
    pub fn add(&mut self, status: NodeStatus) {
        match status {
            NodeStatus::Ok => self.ok += 1,
            NodeStatus::Failed => self.failed += 1,
            NodeStatus::Offline => self.offline += 1,
            NodeStatus::Denied => self.denied += 1,
            NodeStatus::Skipped => self.skipped += 1,
        }
    }

    /// Whether every node succeeded (true for zero nodes).
    pub fn all_ok(&self) -> bool {
        self.failed + self.offline + self.denied + self.skipped == 0
    }
}

/// Result of `tools.fanout`: every node's outcome sorted by node id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FanoutResult {
    /// This fan-out's job (`jobs.get` reads its outcome later).
    pub job: String,
    pub results: Vec<NodeOutcome>,
    pub summary: FanoutSummary,
    /// Set when the results with their tool results would not fit in one frame: the
    /// `result` bodies are left out (each was in its node's `fanout.result` event);
    /// `ok`, `status` and `error` stay.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub results_omitted: bool,
}

impl FanoutResult {
    /// The same result without the tool results' bodies ([`FanoutResult::results_omitted`]).
    pub fn without_bodies(mut self) -> FanoutResult {
        for r in &mut self.results {
            r.result = None;
        }
        self.results_omitted = true;
        self
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fanout_event_out_writes_what_the_event_reads() {
        let o = NodeOutcome {
            node: "n1".into(),
            ok: false,
            status: NodeStatus::Failed,
            result: Some(serde_json::json!({"content": [], "isError": true})),
            error: Some(ErrorShape::new(crate::ErrorCode::Timeout, "slow")),
        };
        let owned = FanoutResultEvent {
            id: "r1".into(),
            outcome: o.clone(),
        };
        let a = serde_json::to_value(&owned).unwrap();
        let b = serde_json::to_value(FanoutResultEventOut::new("r1", &o)).unwrap();
        assert_eq!(a, b);
    }

    use super::*;

    #[test]
    fn batch_sizes() {
        assert_eq!(Batch::Count(0).size(5), None);
        assert_eq!(Batch::Count(2).size(5), Some(2));
        assert_eq!(Batch::Percent(0).size(5), None);
        assert_eq!(Batch::Percent(101).size(5), None);
        assert_eq!(Batch::Percent(10).size(5), Some(1));
        assert_eq!(Batch::Percent(50).size(5), Some(3));
        assert_eq!(Batch::Percent(100).size(5), Some(5));
        assert_eq!(Batch::Percent(10).size(0), Some(1));
    }

    #[test]
    fn params_wire_shape() {
        let p: ToolsFanoutParams = serde_json::from_str(
            r#"{"tool":"Bash","select":"env=prod","args":{"command":"true"},"batch":{"percent":10},"failFast":true}"#,
        )
        .unwrap();
        assert_eq!(p.batch, Some(Batch::Percent(10)));
        assert!(p.fail_fast);
        let p: ToolsFanoutParams =
            serde_json::from_str(r#"{"tool":"Echo","select":"id~*","batch":{"count":1}}"#).unwrap();
        assert_eq!(p.args.get(), "{}");
        assert_eq!(p.batch, Some(Batch::Count(1)));
    }

    #[test]
    fn event_is_flat() {
        let e = FanoutResultEvent {
            id: "r1".into(),
            outcome: NodeOutcome {
                node: "a".into(),
                ok: true,
                status: NodeStatus::Ok,
                result: Some(serde_json::json!({"content": []})),
                error: None,
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["id"], "r1");
        assert_eq!(v["node"], "a");
        assert_eq!(v["status"], "ok");
        let back: FanoutResultEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }
}
