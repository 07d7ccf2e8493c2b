//! Error codes and the error object carried by a failed `res` frame.
//!
//! Callers branch on `code`, never on `message`, so the set is small, closed and stable.
//! `retryable` tells a client whether the same request may succeed later unchanged.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// The closed set of error codes. Serialised in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// No credential, or one that is not valid.
    Unauthorized,
    /// A valid credential that does not permit this (policy, other node id).
    Forbidden,
    /// Unknown node, tool, method or session.
    NotFound,
    /// Arguments or connect parameters that fail validation.
    InvalidArgs,
    /// A frame that is not valid JSON, has an unknown type, or comes out of sequence.
    InvalidFrame,
    /// No protocol version in common.
    UnsupportedProtocol,
    /// The node is known but not connected.
    NodeOffline,
    /// The node's connection closed while the call was pending.
    NodeDisconnected,
    /// The call's deadline passed.
    Timeout,
    /// The caller cancelled the call.
    Cancelled,
    /// The call needs an operator's approval first.
    ApprovalRequired,
    /// An operator (or a node-side guard) refused the call.
    Denied,
    /// A frame, argument or result over a negotiated limit.
    TooLarge,
    /// Too many attempts from one source; wait and retry.
    RateLimited,
    /// A bounded queue is full; retry later.
    Overloaded,
    /// A bug or an unexpected failure inside gsv.
    Internal,
    /// A code this build does not know (sent by a newer peer).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::InvalidArgs => "invalid_args",
            ErrorCode::InvalidFrame => "invalid_frame",
            ErrorCode::UnsupportedProtocol => "unsupported_protocol",
            ErrorCode::NodeOffline => "node_offline",
            ErrorCode::NodeDisconnected => "node_disconnected",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::ApprovalRequired => "approval_required",
            ErrorCode::Denied => "denied",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Internal => "internal",
            ErrorCode::Unknown => "unknown",
        }
    }

    /// Whether the same request may succeed if sent again later.
    pub fn default_retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::NodeOffline
                | ErrorCode::NodeDisconnected
                | ErrorCode::Timeout
                | ErrorCode::RateLimited
                | ErrorCode::Overloaded
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` object of a failed `res`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorShape {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default)]
    pub retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorShape {
    /// An error with the code's default `retryable` and no details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorShape {
            code,
            message: message.into(),
            retryable: code.default_retryable(),
            details: None,
        }
    }

    /// Attaches structured details (e.g. `{"path": "/command"}` for `invalid_args`).
    /// Prefer [`ErrorShape::with`]: the shapes gsv sends are [`ErrorDetails`].
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// Attaches one of the documented `details` shapes (docs/protocol.md §4.2).
    pub fn with(self, details: ErrorDetails) -> Self {
        let value = serde_json::to_value(details).expect("error details are plain data");
        self.with_details(value)
    }
}

/// The body of a refused HTTP API request: `{"error": ErrorShape}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorShape,
}

/// The `details` of an error, one variant per shape of docs/protocol.md §4.2. Each
/// serialises as a plain object of its fields (no tag); readers look fields up by name,
/// so this type is only written. Fields are in name order, as the JSON maps they replace
/// wrote them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ErrorDetails {
    /// `invalid_args` (argument validation): the JSON pointer of the first failing
    /// value, `"/"` for the root.
    Path { path: String },
    /// `invalid_args` (node declaration): the tool and the capability it declares.
    ToolCapability { capability: String, tool: String },
    /// `invalid_args` (node declaration): the tool at fault.
    Tool { tool: String },
    /// `invalid_args` (node declaration): an unknown capability id.
    Capability { capability: String },
    /// `invalid_args` (node declaration): how many tools were declared.
    Count { count: usize },
    /// `node_disconnected`: whether the call was sent (`true`: it may have run) and
    /// to which node; `restarted` when the node process restarted under the call.
    NodeDisconnected {
        dispatched: bool,
        node: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        restarted: Option<bool>,
    },
    /// `node_offline` (and other errors about one node): the node, and since when it
    /// is known offline (ms), when it is.
    Node {
        node: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        since: Option<u64>,
    },
    /// `denied`, `timeout` (approval): the approval request's id.
    Approval { approval: String },
    /// `denied` by the one asked: who decided (`caller`).
    Via { via: String },
    /// `denied` (shell blocklist): the rule's name, e.g. `rm-root`.
    Rule { rule: String },
    /// `approval_required` (node): why, the text shown to the operator, and what the
    /// call would do (the tool's dry-run plan), when the tool can say.
    ApprovalRequired {
        reason: String,
        summary: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        plan: Option<String>,
    },
    /// `unsupported_protocol`: the gateway's version range.
    Protocol { max: u32, min: u32 },
    /// `too_large` (from the node): the size and the limit, in bytes.
    TooLarge { bytes: usize, limit: usize },
    /// `overloaded`: which share or bound is full, and its value.
    Limit { limit: String, max: usize },
    /// `overloaded` while the gateway drains.
    Shutdown { shutdown: bool },
}

impl ErrorDetails {
    /// `node_disconnected` details: `{"dispatched", "node"}`.
    pub fn disconnected(dispatched: bool, node: impl Into<String>) -> Self {
        ErrorDetails::NodeDisconnected {
            dispatched,
            node: node.into(),
            restarted: None,
        }
    }

    /// `overloaded` details: `{"limit", "max"}`.
    pub fn limit(limit: impl Into<String>, max: usize) -> Self {
        ErrorDetails::Limit {
            limit: limit.into(),
            max,
        }
    }
}

impl fmt::Display for ErrorShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorShape {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialise_as_their_wire_names() {
        for code in [
            ErrorCode::Unauthorized,
            ErrorCode::NotFound,
            ErrorCode::NodeDisconnected,
            ErrorCode::UnsupportedProtocol,
            ErrorCode::TooLarge,
        ] {
            assert_eq!(
                serde_json::to_string(&code).unwrap(),
                format!("\"{}\"", code.as_str())
            );
        }
    }

    #[test]
    fn details_serialise_as_plain_objects() {
        let e = ErrorShape::new(ErrorCode::NodeDisconnected, "gone").with(
            ErrorDetails::NodeDisconnected {
                dispatched: true,
                node: "laptop".into(),
                restarted: None,
            },
        );
        assert_eq!(
            serde_json::to_string(&e.details).unwrap(),
            r#"{"dispatched":true,"node":"laptop"}"#
        );
        let d = ErrorDetails::Limit {
            limit: "pending_calls_per_token".into(),
            max: 3,
        };
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#"{"limit":"pending_calls_per_token","max":3}"#
        );
    }

    #[test]
    fn unknown_codes_from_newer_peers_decode() {
        let e: ErrorShape =
            serde_json::from_str(r#"{"code":"quota_exceeded","message":"m"}"#).unwrap();
        assert_eq!(e.code, ErrorCode::Unknown);
        assert!(!e.retryable);
    }
}
