//! Why the approval queue refused to open or decide a request.
//!
//! Deciding is an operator's action over the WebSocket method, the HTTP API and the
//! CLI: each shows these errors as they are, so their codes (`not_found`,
//! `invalid_args` for a request decided already, `timeout` for an expired one,
//! `overloaded` past a token's share) and messages are part of what operators see.

use crate::error::{into_shape, WireError};
use crate::store::StoreError;
use gsv_protocol::{ErrorCode, ErrorDetails};
use thiserror::Error;

/// An approval request that cannot be opened or decided.
#[derive(Debug, Error)]
pub enum ApprovalError {
    #[error("approval store: {0}")]
    Store(#[from] StoreError),
    #[error("approval store: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The token already has its share of requests waiting.
    #[error("this token already has {per_token} approval requests waiting for an operator, its share; retry when some are decided")]
    TooManyPending { per_token: usize },
    #[error("no approval request {id}")]
    NotFound { id: String },
    #[error("approval request {id} was already decided")]
    AlreadyDecided { id: String },
    /// Expired, or its call stopped waiting.
    #[error("approval request {id} expired or its call is no longer waiting")]
    Expired { id: String },
}

impl WireError for ApprovalError {
    fn code(&self) -> ErrorCode {
        match self {
            ApprovalError::Store(_) | ApprovalError::Task(_) => ErrorCode::Internal,
            ApprovalError::TooManyPending { .. } => ErrorCode::Overloaded,
            ApprovalError::NotFound { .. } => ErrorCode::NotFound,
            ApprovalError::AlreadyDecided { .. } => ErrorCode::InvalidArgs,
            ApprovalError::Expired { .. } => ErrorCode::Timeout,
        }
    }

    fn details(&self) -> Option<ErrorDetails> {
        match self {
            ApprovalError::TooManyPending { per_token } => {
                Some(ErrorDetails::limit("approvals_per_token", *per_token))
            }
            _ => None,
        }
    }
}

into_shape!(ApprovalError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_code_status_and_message() {
        let id = || "ab12".to_owned();
        let cases: [(ApprovalError, ErrorCode, u16, &str); 5] = [
            (
                ApprovalError::Store(StoreError::TooNew(3)),
                ErrorCode::Internal,
                500,
                "approval store: database schema version 3 is newer than this gsv understands",
            ),
            (
                ApprovalError::TooManyPending { per_token: 2 },
                ErrorCode::Overloaded,
                429,
                "this token already has 2 approval requests waiting for an operator, its share; retry when some are decided",
            ),
            (
                ApprovalError::NotFound { id: id() },
                ErrorCode::NotFound,
                404,
                "no approval request ab12",
            ),
            (
                ApprovalError::AlreadyDecided { id: id() },
                ErrorCode::InvalidArgs,
                400,
                "approval request ab12 was already decided",
            ),
            (
                ApprovalError::Expired { id: id() },
                ErrorCode::Timeout,
                504,
                "approval request ab12 expired or its call is no longer waiting",
            ),
        ];
        for (e, code, status, message) in cases {
            let shape = e.to_shape();
            assert_eq!((shape.code, shape.message.as_str()), (code, message));
            assert_eq!(e.status().as_u16(), status, "{e}");
        }
        let shape = ApprovalError::TooManyPending { per_token: 2 }.to_shape();
        assert_eq!(
            serde_json::to_string(&shape.details).expect("details"),
            r#"{"limit":"approvals_per_token","max":2}"#
        );
        assert!(shape.retryable);
    }
}
