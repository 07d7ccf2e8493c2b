//! Event names and their payloads.
//!
//! Events are one-way notices (`event` frames) with a per-sender sequence number. The
//! names form a closed enum; an unknown name from a newer peer decodes as `Unknown` and
//! is dropped, never dispatched by string.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every event name this build knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventName {
    /// Server → client, first frame of every connection.
    #[serde(rename = "challenge")]
    Challenge,
    /// Gateway → agents: the set of callable tools changed.
    #[serde(rename = "tools.changed")]
    ToolsChanged,
    /// Node → gateway → agents: a background process session ended.
    #[serde(rename = "process.exited")]
    ProcessExited,
    /// Node → gateway: progress of a running call (relayed to its caller).
    #[serde(rename = "call.progress")]
    CallProgress,
    /// Gateway → agent: one node of a `tools.fanout` finished.
    #[serde(rename = "fanout.result")]
    FanoutResult,
    /// Gateway → agents and operators: a call waits for an operator's approval.
    #[serde(rename = "approval.requested")]
    ApprovalRequested,
    /// Gateway → agents and operators: an approval request was decided or expired.
    #[serde(rename = "approval.resolved")]
    ApprovalResolved,
    /// Gateway → all: the gateway is shutting down.
    #[serde(rename = "shutdown")]
    Shutdown,
    /// Gateway → node: every event of this node process up to `seq` was received
    /// (cumulative), so the node may forget them.
    #[serde(rename = "events.ack")]
    EventsAck,
    /// A transfer's receiver wrote more bytes: the sender may send that many more.
    #[serde(rename = "transfer.credit")]
    TransferCredit,
    /// Node → gateway → agent: a `get` sent its last byte (`{id, path, bytes, sha256}`).
    #[serde(rename = "transfer.end")]
    TransferEnd,
    /// Node or gateway → agent: a transfer ended on an error (`{id, error}`).
    #[serde(rename = "transfer.failed")]
    TransferFailed,
    /// Gateway → agent: how far a `transfer.copy` of this connection has come.
    #[serde(rename = "transfer.progress")]
    TransferProgress,
    #[serde(other)]
    Unknown,
}

impl EventName {
    pub fn as_str(self) -> &'static str {
        match self {
            EventName::Challenge => "challenge",
            EventName::EventsAck => "events.ack",
            EventName::ToolsChanged => "tools.changed",
            EventName::ProcessExited => "process.exited",
            EventName::CallProgress => "call.progress",
            EventName::FanoutResult => "fanout.result",
            EventName::ApprovalRequested => "approval.requested",
            EventName::ApprovalResolved => "approval.resolved",
            EventName::Shutdown => "shutdown",
            EventName::TransferCredit => "transfer.credit",
            EventName::TransferEnd => "transfer.end",
            EventName::TransferFailed => "transfer.failed",
            EventName::TransferProgress => "transfer.progress",
            EventName::Unknown => "unknown",
        }
    }
}

/// Payload of `tools.changed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsChanged {
    pub node: String,
    /// `connected`, `disconnected` or `replaced`.
    pub change: String,
}

/// Payload of `events.ack`: the highest event `seq` of this node process the gateway
/// has received; every event up to it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsAck {
    pub seq: u64,
}

/// Payload of `call.progress` as the node sends it (the call id is the gateway's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallProgress {
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
}

/// Payload of `shutdown` (gateway → agents and nodes; fields in name order, like every
/// payload built as a JSON map before): the gateway is draining and
/// lets calls in flight finish for at most `drain_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shutdown {
    /// How long calls in flight may still run, in ms.
    pub drain_ms: u64,
    /// Why, for people (`"gateway shutting down"`).
    pub reason: String,
}

/// Payload of `approval.resolved`: an approval request was decided or expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResolved {
    /// Who decided (`operator`, `admin-api`); absent when the request expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The approval request's id.
    pub id: String,
    /// `approved`, `denied` or `expired`.
    pub state: String,
}

/// Payload of `process.exited` as the node sends it: a background process session
/// ended. The gateway relays it inside [`NodeEvent`]. Fields in name order, as the
/// node has always sent them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessExited {
    /// The command line, cut to 1 000 characters (then `…`).
    pub command: String,
    /// Run time in ms.
    pub duration_ms: u64,
    /// End, in ms since the epoch.
    pub ended_at: Option<u64>,
    /// The exit code; `null` when a signal killed it.
    pub exit_code: Option<i32>,
    /// The token id of the caller that started the session, or `null`.
    pub owner: Option<String>,
    /// The session, as returned by Bash and used by the Process tool.
    pub session_id: String,
    /// The signal's name (e.g. `SIGTERM`) when one killed it.
    pub signal: Option<String>,
    /// Start, in ms since the epoch.
    pub started_at: u64,
    /// `completed` or `failed`.
    pub status: String,
    /// The last characters of output.
    pub tail: String,
    /// Whether the session's own `timeout` killed it.
    pub timed_out: bool,
    /// Whether older output was dropped.
    pub truncated: bool,
}

/// Payload of a node event relayed to agents: the node's payload plus its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeEvent {
    pub node: String,
    pub data: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_keep_their_wire_form() {
        let bye = Shutdown {
            drain_ms: 10_000,
            reason: "gateway shutting down".into(),
        };
        assert_eq!(
            serde_json::to_string(&bye).unwrap(),
            r#"{"drainMs":10000,"reason":"gateway shutting down"}"#
        );
        let expired = ApprovalResolved {
            decided_by: None,
            id: "341ac5522fa5".into(),
            state: "expired".into(),
        };
        assert_eq!(
            serde_json::to_string(&expired).unwrap(),
            r#"{"id":"341ac5522fa5","state":"expired"}"#
        );
        let decided = ApprovalResolved {
            decided_by: Some("operator".into()),
            ..expired
        };
        assert_eq!(
            serde_json::to_string(&decided).unwrap(),
            r#"{"decidedBy":"operator","id":"341ac5522fa5","state":"expired"}"#
        );
    }
}
