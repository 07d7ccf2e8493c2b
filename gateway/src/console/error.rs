//! Why the console refused a request: each variant's wire code (and so its HTTP
//! status) is fixed here, like every other gateway error ([`crate::error::WireError`]).
//! A request refused for where it came from also names the rule it broke in
//! `details.rule` (`bad_csrf`, `cross_site`, `two_cookies`): stable, for the page and
//! for tests to tell them apart under the one code `forbidden`.

use crate::error::WireError;
use gsv_protocol::{ErrorCode, ErrorDetails};
use thiserror::Error;

/// A refused console request.
#[derive(Debug, Error)]
pub enum ConsoleError {
    #[error("not signed in to the console: run `gsv ui` for a login link")]
    NoSession,
    #[error("the request lacks the session's CSRF token")]
    BadCsrf,
    #[error("request from another site or port refused ({why})")]
    CrossSite { why: String },
    #[error("the request carries more than one gsv console cookie (another page on this host planted one); it was refused and the extra cookies cleared: reload the page")]
    TwoCookies,
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
            | ConsoleError::TwoCookies
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

    fn details(&self) -> Option<ErrorDetails> {
        let rule = match self {
            ConsoleError::BadCsrf => "bad_csrf",
            ConsoleError::CrossSite { .. } => "cross_site",
            ConsoleError::TwoCookies => "two_cookies",
            _ => return None,
        };
        Some(ErrorDetails::Rule { rule: rule.into() })
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
            (ConsoleError::CrossSite { why: "x".into() }, 403),
            (ConsoleError::TwoCookies, 403),
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
        for (e, rule) in [
            (ConsoleError::BadCsrf, "bad_csrf"),
            (ConsoleError::CrossSite { why: "x".into() }, "cross_site"),
            (ConsoleError::TwoCookies, "two_cookies"),
        ] {
            assert_eq!(
                e.to_shape().details,
                Some(serde_json::json!({ "rule": rule }))
            );
        }
        assert!(ConsoleError::NoSession.to_shape().details.is_none());
    }
}
