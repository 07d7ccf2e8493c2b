//! Limits: the fixed ones of the handshake and the ones negotiated in `hello-ok`.
//!
//! Every queue and every frame on the path is bounded; these numbers are the bounds.
//! The gateway announces its limits in `hello-ok` and enforces them; a client must not
//! exceed them.

use serde::{Deserialize, Serialize};

/// Largest frame accepted before `hello-ok` (the unauthenticated phase).
pub const PRE_AUTH_MAX_FRAME_BYTES: usize = 64 * 1024;
/// The whole handshake must finish within this many milliseconds.
pub const HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// Largest frame after `hello-ok`: room for a 10 MB image as base64 plus framing.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Largest tool result a node may return (the `result` of a `res`).
pub const MAX_RESULT_BYTES: usize = MAX_FRAME_BYTES - 64 * 1024;
/// Default WebSocket ping interval; a peer silent for two intervals is dead.
pub const DEFAULT_HEARTBEAT_MS: u64 = 15_000;
/// Deadline of a call whose caller and tool give none.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 300_000;
/// Longest deadline a caller may ask for (24 h).
pub const MAX_CALL_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;
/// Calls one agent connection may have in flight at once.
pub const MAX_IN_FLIGHT_PER_AGENT: usize = 1024;
/// Calls one node connection may have pending at once.
pub const MAX_PENDING_PER_NODE: usize = 4096;
/// Stray results (answers to call ids a node connection was never sent, or whose
/// abandonment the gateway no longer remembers) one node connection may send within a
/// 10 s window; one more closes it (code 1008). Twice the pending bound, so a legitimate
/// burst stays well under it: every pending call of a connection abandoned at once and
/// answered late, plus the duplicate answers a resume after a reconnect can bring.
pub const MAX_STRAY_RESULTS: usize = 2 * MAX_PENDING_PER_NODE;
/// Frames the gateway queues for sending to one peer before it counts as a slow
/// consumer. Room for every legitimate burst: a node's whole pending window sent at
/// once and then cancelled (2 × `MAX_PENDING_PER_NODE`), with as much again for events.
/// A reading peer drains the queue as fast as its link allows; only one that stops
/// reading fills it.
pub const SEND_QUEUE_FRAMES: usize = 4 * MAX_PENDING_PER_NODE;
/// Bytes the gateway queues for sending to one peer before it counts as a slow
/// consumer: two frames of the largest size (a third sits in the socket's write
/// buffer), so a few big results in parallel (images, file reads) never cut off a peer
/// that reads. This, not the frame count, bounds the memory a peer that stops reading
/// can hold.
pub const SEND_QUEUE_BYTES: usize = 2 * MAX_FRAME_BYTES;
/// Longest request id.
pub const MAX_ID_LEN: usize = 128;
/// Most tools one node may register.
pub const MAX_TOOLS_PER_NODE: usize = 256;
/// Longest dry-run plan a node sends with `approval_required`, and the gateway keeps
/// with the approval request (bytes; see [`cut_plan`]).
pub const MAX_APPROVAL_PLAN_BYTES: usize = 8 * 1024;

/// `plan` cut to [`MAX_APPROVAL_PLAN_BYTES`] on a character boundary, saying so at
/// its end when it was cut.
pub fn cut_plan(plan: &str) -> String {
    const MARK: &str = "\n[plan cut]";
    if plan.len() <= MAX_APPROVAL_PLAN_BYTES {
        return plan.to_owned();
    }
    let mut end = MAX_APPROVAL_PLAN_BYTES - MARK.len();
    while !plan.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &plan[..end])
}

/// Most bytes of a path an audit row keeps (a transfer's, a directory copy's): a
/// longer one, which no file system takes anyway, is cut (see [`cut_audit_path`]).
pub const MAX_AUDIT_PATH_BYTES: usize = 4096;

/// `path` cut to [`MAX_AUDIT_PATH_BYTES`] on a character boundary, saying at its end
/// how many bytes were left out.
pub fn cut_audit_path(path: &str) -> std::borrow::Cow<'_, str> {
    if path.len() <= MAX_AUDIT_PATH_BYTES {
        return std::borrow::Cow::Borrowed(path);
    }
    let mut end = MAX_AUDIT_PATH_BYTES;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!(
        "{}… [{} more bytes]",
        &path[..end],
        path.len() - end
    ))
}

/// Close reason the gateway gives a node connection replaced by a newer connection
/// with the same node id. A node that receives it on its live connection knows another
/// process took its id, and stops instead of fighting for it.
pub const CLOSE_REPLACED: &str = "replaced by a newer connection of this node";
/// Close reason for a connection whose token was revoked.
pub const CLOSE_REVOKED: &str = "token revoked";

/// Limits announced in `hello-ok`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub max_frame_bytes: usize,
    pub max_result_bytes: usize,
    pub max_in_flight: usize,
    pub send_queue_frames: usize,
    /// Absent from gateways older than this field: read as 0 (unknown).
    #[serde(default)]
    pub send_queue_bytes: usize,
    pub heartbeat_ms: u64,
    pub default_call_timeout_ms: u64,
    pub max_call_timeout_ms: u64,
}

impl Limits {
    /// The limits for a connection of the given role with the given heartbeat.
    pub fn standard(max_in_flight: usize, heartbeat_ms: u64) -> Self {
        Limits {
            max_frame_bytes: MAX_FRAME_BYTES,
            max_result_bytes: MAX_RESULT_BYTES,
            max_in_flight,
            send_queue_frames: SEND_QUEUE_FRAMES,
            send_queue_bytes: SEND_QUEUE_BYTES,
            heartbeat_ms,
            default_call_timeout_ms: DEFAULT_CALL_TIMEOUT_MS,
            max_call_timeout_ms: MAX_CALL_TIMEOUT_MS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_cut_on_a_character_boundary_and_say_so() {
        assert_eq!(cut_plan("install: hello 2.10"), "install: hello 2.10");
        let long = "é".repeat(MAX_APPROVAL_PLAN_BYTES);
        let cut = cut_plan(&long);
        assert!(cut.len() <= MAX_APPROVAL_PLAN_BYTES, "{}", cut.len());
        assert!(cut.ends_with("\n[plan cut]"));
        assert!(cut.starts_with("éé"));
    }
}
