//! Why the console refused a request: each variant's wire code (and so its HTTP
//! status) is fixed here, like every other gateway error ([`crate::error::WireError`]).

use crate::error::WireError;
use gsv_protocol::ErrorCode;
use thiserror::Error;

/// A refused console request.
#[derive(Debug, Error)]
pub enum ConsoleError {
    #[error("not signed in to the console: run `gsv ui` for a login link")]
    NoSession,
    #[error("the request lacks the session's x-csrf-token")]
    BadCsrf,
    #[error("cross-site request refused (Origin {origin:?})")]
    CrossSite { origin: String },
    #[error("{what} needs the {needs} console role")]
    Role {
        what: &'static str,
        needs: &'static str,
    },
    #[error("agent tokens cannot open the console")]
    AgentToken,
    #[error("too many console login codes outstanding; wait for some to expire")]
    TooManyCodes,
    #[error("too many live-update streams open")]
    TooManyStreams,
    #[error("request body is not the expected JSON: {0}")]
    BadBody(serde_json::Error),
    #[error("bad query string: {0}")]
    BadQuery(String),
    #[error("invalid {what}: {why}")]
    Invalid { what: &'static str, why: String },
    #[error("no {what} {id}")]
    NotFound { what: &'static str, id: String },
    #[error("the store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl WireError for ConsoleError {
    fn code(&self) -> ErrorCode {
        match self {
            ConsoleError::NoSession => ErrorCode::Unauthorized,
            ConsoleError::BadCsrf
            | ConsoleError::CrossSite { .. }
            | ConsoleError::Role { .. }
            | ConsoleError::AgentToken => ErrorCode::Forbidden,
            ConsoleError::TooManyCodes | ConsoleError::TooManyStreams => ErrorCode::Overloaded,
            ConsoleError::BadBody(_) | ConsoleError::BadQuery(_) | ConsoleError::Invalid { .. } => {
                ErrorCode::InvalidArgs
            }
            ConsoleError::NotFound { .. } => ErrorCode::NotFound,
            ConsoleError::Task(_) | ConsoleError::Store(_) => ErrorCode::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_code_and_status() {
        let cases = [
            (ConsoleError::NoSession, 401),
            (ConsoleError::BadCsrf, 403),
            (ConsoleError::CrossSite { origin: "x".into() }, 403),
            (
                ConsoleError::Role {
                    what: "x",
                    needs: "admin",
                },
                403,
            ),
            (ConsoleError::AgentToken, 403),
            (ConsoleError::TooManyCodes, 429),
            (ConsoleError::TooManyStreams, 429),
            (ConsoleError::BadQuery("q".into()), 400),
            (
                ConsoleError::NotFound {
                    what: "token",
                    id: "t".into(),
                },
                404,
            ),
            (
                ConsoleError::Invalid {
                    what: "policy",
                    why: "x".into(),
                },
                400,
            ),
        ];
        for (e, status) in cases {
            assert_eq!(e.status().as_u16(), status, "{e}");
        }
        assert_eq!(ConsoleError::BadCsrf.to_shape().code, ErrorCode::Forbidden);
    }
}
