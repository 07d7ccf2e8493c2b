//! Why a request to `/mcp` was refused before it reached the MCP server: a foreign
//! `Origin`, a session id of another token, a token over its share of sessions, or
//! its credential ([`AuthError`]). Each becomes a JSON error body with the status its
//! code maps to; a missing or bad token also gets the hint on where tokens come from.

use super::TOKEN_HINT;
use crate::auth::AuthError;
use crate::error::WireError;
use gsv_protocol::{ErrorCode, ErrorDetails};
use thiserror::Error;

/// A refused `/mcp` request.
#[derive(Debug, Error)]
pub enum McpRefusal {
    /// A browser page of another site (`why`: what is wrong with its `Origin`).
    #[error("{0}")]
    Origin(&'static str),
    #[error("no such MCP session for this token")]
    ForeignSession,
    /// Opening the session would pass a share (`limit`: its name).
    #[error("too many MCP sessions open ({limit} = {max}); close one (DELETE /mcp) or let one idle out, then retry")]
    TooManySessions { limit: &'static str, max: usize },
    /// No valid token (`unauthorized`): the message says how to get one.
    #[error("{0}; {TOKEN_HINT}")]
    Unauthenticated(AuthError),
    /// Any other refusal of the credential (rate-limited, a node token, the store).
    #[error(transparent)]
    Auth(AuthError),
}

impl From<AuthError> for McpRefusal {
    fn from(e: AuthError) -> Self {
        match e.code() {
            ErrorCode::Unauthorized => McpRefusal::Unauthenticated(e),
            _ => McpRefusal::Auth(e),
        }
    }
}

impl WireError for McpRefusal {
    fn code(&self) -> ErrorCode {
        match self {
            McpRefusal::Origin(_) => ErrorCode::Forbidden,
            McpRefusal::ForeignSession => ErrorCode::NotFound,
            McpRefusal::TooManySessions { .. } => ErrorCode::Overloaded,
            McpRefusal::Unauthenticated(_) => ErrorCode::Unauthorized,
            McpRefusal::Auth(e) => e.code(),
        }
    }

    fn details(&self) -> Option<ErrorDetails> {
        match self {
            McpRefusal::TooManySessions { limit, max } => Some(ErrorDetails::limit(*limit, *max)),
            _ => None,
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
                McpRefusal::Origin("Origin is malformed"),
                ErrorCode::Forbidden,
                403,
                "Origin is malformed".to_owned(),
            ),
            (
                McpRefusal::ForeignSession,
                ErrorCode::NotFound,
                404,
                "no such MCP session for this token".to_owned(),
            ),
            (
                McpRefusal::TooManySessions {
                    limit: "mcp_sessions_per_token",
                    max: 4,
                },
                ErrorCode::Overloaded,
                429,
                "too many MCP sessions open (mcp_sessions_per_token = 4); close one (DELETE /mcp) or let one idle out, then retry".to_owned(),
            ),
            (
                AuthError::InvalidToken.into(),
                ErrorCode::Unauthorized,
                401,
                format!("invalid or revoked token; {TOKEN_HINT}"),
            ),
            (
                AuthError::RateLimited.into(),
                ErrorCode::RateLimited,
                429,
                "too many failed authentications from this address; wait a minute".to_owned(),
            ),
            (
                AuthError::NodeToken.into(),
                ErrorCode::Forbidden,
                403,
                "node tokens cannot use the admin API".to_owned(),
            ),
        ];
        for (e, code, status, message) in cases {
            let shape = e.to_shape();
            assert_eq!(
                (shape.code, shape.message.as_str()),
                (code, message.as_str())
            );
            assert_eq!(e.status().as_u16(), status, "{e}");
        }
        let shape = McpRefusal::TooManySessions {
            limit: "mcp_sessions_max",
            max: 9,
        }
        .to_shape();
        assert_eq!(
            serde_json::to_string(&shape.details).expect("details"),
            r#"{"limit":"mcp_sessions_max","max":9}"#
        );
    }
}
