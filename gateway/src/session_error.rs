//! Errors answered on an established connection: a frame an agent or a node may not
//! send, a request the session refuses, a result over its limit.
//!
//! The connection stays open (unlike a handshake refusal); only the one request is
//! answered with the error, so these are ordinary `res` errors, mapped here once.

use crate::error::{into_shape, WireError};
use gsv_protocol::limits::MAX_RESULT_BYTES;
use gsv_protocol::ErrorCode;
use thiserror::Error;

/// A request (or frame) refused by an agent's or a node's session.
#[derive(Debug, Error)]
pub enum SessionError {
    /// A second `connect` on an agent connection.
    #[error("already connected")]
    AlreadyConnected,
    #[error("unknown method {method}")]
    UnknownMethod { method: String },
    #[error("agents do not send res frames")]
    ResFromAgent,
    #[error("agents do not send event frames")]
    EventFromAgent,
    /// A binary WebSocket frame that is not a transfer chunk.
    #[error("a binary frame that is not a transfer chunk: binary frames carry only file-transfer chunks; send JSON text frames")]
    BinaryFrame,
    #[error("tools.call params: {0}")]
    BadCallParams(serde_json::Error),
    #[error("too many calls in flight on this connection")]
    TooManyInFlight,
    #[error("a call with this id is already in flight")]
    DuplicateCallId,
    /// `approvals.*` from an agent that is not an operator.
    #[error("approvals need the admin token or an operator token")]
    NotOperator,
    /// `approvals.decide` from a viewer operator token.
    #[error(
        "a viewer cannot decide approvals: only the admin token and approver operator tokens can"
    )]
    ViewerDecision,
    /// Another operator-only request from an agent that is not an operator.
    #[error("{what} needs the admin token")]
    OperatorOnly { what: &'static str },
    /// `approvals.*` params that do not decode.
    #[error("{0}")]
    BadParams(serde_json::Error),
    /// A request from a node: after connect a node only answers.
    #[error("nodes cannot call {method}: after connect a node only answers requests")]
    NodeRequest { method: String },
    /// A node's result over [`MAX_RESULT_BYTES`]: the call fails with this instead.
    #[error("result of {bytes} bytes exceeds the {MAX_RESULT_BYTES}-byte limit")]
    ResultTooLarge { bytes: usize },
}

impl WireError for SessionError {
    fn code(&self) -> ErrorCode {
        use SessionError::*;
        match self {
            AlreadyConnected | ResFromAgent | EventFromAgent | BinaryFrame | DuplicateCallId => {
                ErrorCode::InvalidFrame
            }
            UnknownMethod { .. } | NodeRequest { .. } => ErrorCode::NotFound,
            BadCallParams(_) | BadParams(_) => ErrorCode::InvalidArgs,
            TooManyInFlight => ErrorCode::Overloaded,
            NotOperator | ViewerDecision | OperatorOnly { .. } => ErrorCode::Forbidden,
            ResultTooLarge { .. } => ErrorCode::TooLarge,
        }
    }
}

into_shape!(SessionError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_code_and_message() {
        use SessionError::*;
        let bad_json = || serde_json::from_str::<u8>("{").expect_err("not JSON");
        let why = bad_json().to_string();
        let cases: Vec<(SessionError, ErrorCode, String)> = vec![
            (
                AlreadyConnected,
                ErrorCode::InvalidFrame,
                "already connected".into(),
            ),
            (
                UnknownMethod {
                    method: "x.y".into(),
                },
                ErrorCode::NotFound,
                "unknown method x.y".into(),
            ),
            (
                ResFromAgent,
                ErrorCode::InvalidFrame,
                "agents do not send res frames".into(),
            ),
            (
                EventFromAgent,
                ErrorCode::InvalidFrame,
                "agents do not send event frames".into(),
            ),
            (
                BinaryFrame,
                ErrorCode::InvalidFrame,
                "a binary frame that is not a transfer chunk: binary frames carry only file-transfer chunks; send JSON text frames".into(),
            ),
            (
                BadCallParams(bad_json()),
                ErrorCode::InvalidArgs,
                format!("tools.call params: {why}"),
            ),
            (
                TooManyInFlight,
                ErrorCode::Overloaded,
                "too many calls in flight on this connection".into(),
            ),
            (
                DuplicateCallId,
                ErrorCode::InvalidFrame,
                "a call with this id is already in flight".into(),
            ),
            (
                NotOperator,
                ErrorCode::Forbidden,
                "approvals need the admin token or an operator token".into(),
            ),
            (
                ViewerDecision,
                ErrorCode::Forbidden,
                "a viewer cannot decide approvals: only the admin token and approver operator tokens can".into(),
            ),
            (
                OperatorOnly {
                    what: "accepting a node's tools",
                },
                ErrorCode::Forbidden,
                "accepting a node's tools needs the admin token".into(),
            ),
            (BadParams(bad_json()), ErrorCode::InvalidArgs, why.clone()),
            (
                NodeRequest {
                    method: "tools.list".into(),
                },
                ErrorCode::NotFound,
                "nodes cannot call tools.list: after connect a node only answers requests".into(),
            ),
            (
                ResultTooLarge { bytes: 99 },
                ErrorCode::TooLarge,
                format!("result of 99 bytes exceeds the {MAX_RESULT_BYTES}-byte limit"),
            ),
        ];
        for (e, code, message) in cases {
            let shape = e.to_shape();
            assert_eq!(
                (shape.code, shape.message.as_str()),
                (code, message.as_str())
            );
            assert_eq!(shape.retryable, code == ErrorCode::Overloaded);
            assert_eq!(shape.details, None);
        }
    }
}
