//! Why an HTTP caller's Bearer token was not accepted (the admin API and `/mcp`).
//!
//! `unauthorized` ones count as failed authentications (rate-limited per address and
//! gathered into audit rows by `crate::refusals`); each variant's status follows
//! from its code ([`crate::error::http_status`]).

use crate::error::WireError;
use crate::policy::PolicyError;
use crate::store::StoreError;
use gsv_protocol::ErrorCode;
use thiserror::Error;

/// A request whose credential does not let it in.
#[derive(Debug, Error)]
pub enum AuthError {
    #[error("missing Authorization: Bearer <token>")]
    MissingBearer,
    #[error("invalid or revoked token")]
    InvalidToken,
    /// Too many failed authentications from the caller's address.
    #[error("too many failed authentications from this address; wait a minute")]
    RateLimited,
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The agent token's stored policy does not compile.
    #[error(transparent)]
    StoredPolicy(#[from] PolicyError),
    #[error("node tokens cannot use the admin API")]
    NodeToken,
    /// An operator token where tools are called (`/mcp`).
    #[error("operator tokens cannot call tools: use an agent token")]
    OperatorToken,
}

impl WireError for AuthError {
    fn code(&self) -> ErrorCode {
        match self {
            AuthError::MissingBearer | AuthError::InvalidToken => ErrorCode::Unauthorized,
            AuthError::RateLimited => ErrorCode::RateLimited,
            AuthError::Task(_) | AuthError::Store(_) | AuthError::StoredPolicy(_) => {
                ErrorCode::Internal
            }
            AuthError::NodeToken | AuthError::OperatorToken => ErrorCode::Forbidden,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_code_status_and_message() {
        let cases = [
            (
                AuthError::MissingBearer,
                ErrorCode::Unauthorized,
                401,
                "missing Authorization: Bearer <token>",
            ),
            (
                AuthError::InvalidToken,
                ErrorCode::Unauthorized,
                401,
                "invalid or revoked token",
            ),
            (
                AuthError::RateLimited,
                ErrorCode::RateLimited,
                429,
                "too many failed authentications from this address; wait a minute",
            ),
            (
                AuthError::Store(StoreError::Policy("bad".into())),
                ErrorCode::Internal,
                500,
                "stored policy is corrupt: bad",
            ),
            (
                AuthError::StoredPolicy(PolicyError {
                    glob: "[".into(),
                    reason: "unclosed".into(),
                }),
                ErrorCode::Internal,
                500,
                "invalid glob \"[\": unclosed",
            ),
            (
                AuthError::NodeToken,
                ErrorCode::Forbidden,
                403,
                "node tokens cannot use the admin API",
            ),
        ];
        for (e, code, status, message) in cases {
            let shape = e.to_shape();
            assert_eq!((shape.code, shape.message.as_str()), (code, message));
            assert_eq!(shape.details, None);
            assert_eq!(e.status().as_u16(), status, "{e}");
        }
    }
}
