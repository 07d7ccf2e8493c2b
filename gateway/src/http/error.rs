//! The admin API's own refusals, besides authentication ([`crate::auth::AuthError`])
//! and the errors of what it calls (approvals, probes): an agent token on an
//! operator's route, and a request body that is not the expected JSON.

use crate::error::WireError;
use gsv_protocol::ErrorCode;
use thiserror::Error;

/// A refused admin API request.
#[derive(Debug, Error)]
pub enum HttpError {
    /// The route is for operators (`what`: "probing a node", "listing approvals"...).
    #[error("{what} needs the admin token")]
    AdminOnly { what: &'static str },
    /// The route is for the admin and operators, not agents.
    #[error("{what} needs the admin token or an operator token")]
    OperatorOnly { what: &'static str },
    /// A decision from a token that may not decide (an agent's, a viewer's).
    #[error("{}", cannot_decide(*.authority))]
    CannotDecide {
        authority: crate::operator::Authority,
    },
    #[error("request body is not the expected JSON: {0}")]
    BadBody(serde_json::Error),
    /// A query string that does not decode (`GET /v1/nodes?select=…`).
    #[error("bad query string: {0}")]
    BadQuery(String),
    #[error("expected {{\"decision\": \"approve\" | \"deny\"}}: {0}")]
    BadDecision(serde_json::Error),
    /// `GET /v1/cluster` on a gateway that runs on its own.
    #[error("this gateway is not in cluster mode (gsv gateway --cluster)")]
    NotClustered,
}

impl WireError for HttpError {
    fn code(&self) -> ErrorCode {
        match self {
            HttpError::AdminOnly { .. }
            | HttpError::OperatorOnly { .. }
            | HttpError::CannotDecide { .. } => ErrorCode::Forbidden,
            HttpError::BadBody(_) | HttpError::BadDecision(_) | HttpError::BadQuery(_) => {
                ErrorCode::InvalidArgs
            }
            HttpError::NotClustered => ErrorCode::NotFound,
        }
    }
}

/// Why a token may not decide approvals.
fn cannot_decide(authority: crate::operator::Authority) -> &'static str {
    match authority {
        crate::operator::Authority::Operator(_) => {
            "a viewer cannot decide approvals: only the admin token and approver operator tokens can"
        }
        _ => "deciding approvals needs the admin token or an approver operator token",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_error() -> serde_json::Error {
        serde_json::from_str::<u8>("{").expect_err("not JSON")
    }

    #[test]
    fn each_variant_has_its_code_status_and_message() {
        let why = json_error().to_string();
        let cases = [
            (
                HttpError::AdminOnly {
                    what: "probing a node",
                },
                ErrorCode::Forbidden,
                403,
                "probing a node needs the admin token".to_owned(),
            ),
            (
                HttpError::OperatorOnly {
                    what: "listing approvals",
                },
                ErrorCode::Forbidden,
                403,
                "listing approvals needs the admin token or an operator token".to_owned(),
            ),
            (
                HttpError::CannotDecide {
                    authority: crate::operator::Authority::Operator(
                        crate::operator::OperatorRole::Viewer,
                    ),
                },
                ErrorCode::Forbidden,
                403,
                "a viewer cannot decide approvals: only the admin token and approver operator tokens can".to_owned(),
            ),
            (
                HttpError::BadBody(json_error()),
                ErrorCode::InvalidArgs,
                400,
                format!("request body is not the expected JSON: {why}"),
            ),
            (
                HttpError::BadDecision(json_error()),
                ErrorCode::InvalidArgs,
                400,
                format!("expected {{\"decision\": \"approve\" | \"deny\"}}: {why}"),
            ),
            (
                HttpError::BadQuery("x".into()),
                ErrorCode::InvalidArgs,
                400,
                "bad query string: x".to_owned(),
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
    }
}
