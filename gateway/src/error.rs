//! How the gateway's errors reach clients: one trait, [`WireError`], that each layer's
//! error enum implements once.
//!
//! Every layer has its own `thiserror` enum whose variants carry the data their message
//! needs ([`crate::handshake::HandshakeError`], [`crate::router::RouteError`],
//! [`crate::approvals::ApprovalError`], [`crate::auth::AuthError`], ...). Its
//! `Display` is the wire `message`; its [`WireError`] impl says, in one place per
//! enum, which [`ErrorCode`] and which documented [`ErrorDetails`] go with each
//! variant. From those, [`WireError::to_shape`] builds the [`ErrorShape`] of a failed
//! `res` frame, and [`WireError::status`] the HTTP status of a refused API request,
//! so no feature module writes an error object by hand and the code-to-status table
//! exists once ([`http_status`]).

use axum::http::StatusCode;
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape};

/// An error that can be sent to a client: as a `res` error object and, where it can
/// surface over HTTP, with a status. The message is the error's `Display`.
pub trait WireError: std::error::Error {
    /// The wire code clients branch on.
    fn code(&self) -> ErrorCode;

    /// The documented `details` object for this error, if it has one.
    fn details(&self) -> Option<ErrorDetails> {
        None
    }

    /// The error object sent in a failed `res` frame or an HTTP error body.
    fn to_shape(&self) -> ErrorShape {
        shape(self.code(), self.to_string(), self.details())
    }

    /// The HTTP status of a request refused with this error.
    fn status(&self) -> StatusCode {
        http_status(self.code())
    }
}

/// The error object for a code, message and details (the code's default `retryable`).
/// [`WireError::to_shape`] builds every gateway error with it.
pub(crate) fn shape(code: ErrorCode, message: String, details: Option<ErrorDetails>) -> ErrorShape {
    let shape = ErrorShape::new(code, message);
    match details {
        Some(details) => shape.with(details),
        None => shape,
    }
}

/// The HTTP status that goes with a wire code (the admin API, `/mcp` refusals).
pub fn http_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden | ErrorCode::Denied => StatusCode::FORBIDDEN,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::InvalidArgs | ErrorCode::InvalidFrame => StatusCode::BAD_REQUEST,
        ErrorCode::NodeOffline | ErrorCode::NodeDisconnected => StatusCode::BAD_GATEWAY,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::RateLimited | ErrorCode::Overloaded => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Implements `From<$t> for ErrorShape` through [`WireError::to_shape`], for errors
/// that cross into code speaking in wire shapes (`?` into a `CallOutcome`, frames).
macro_rules! into_shape {
    ($($t:ty),+ $(,)?) => {
        $(
            impl From<$t> for gsv_protocol::ErrorShape {
                fn from(e: $t) -> Self {
                    $crate::error::WireError::to_shape(&e)
                }
            }
        )+
    };
}
pub(crate) use into_shape;

/// The store's failures are the gateway's own: `internal`, with the store's message.
impl WireError for crate::store::StoreError {
    fn code(&self) -> ErrorCode {
        ErrorCode::Internal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_statuses() {
        for (code, status) in [
            (ErrorCode::Unauthorized, 401),
            (ErrorCode::Forbidden, 403),
            (ErrorCode::Denied, 403),
            (ErrorCode::NotFound, 404),
            (ErrorCode::InvalidArgs, 400),
            (ErrorCode::InvalidFrame, 400),
            (ErrorCode::NodeOffline, 502),
            (ErrorCode::NodeDisconnected, 502),
            (ErrorCode::Timeout, 504),
            (ErrorCode::TooLarge, 413),
            (ErrorCode::RateLimited, 429),
            (ErrorCode::Overloaded, 429),
            (ErrorCode::Internal, 500),
            (ErrorCode::Cancelled, 500),
            (ErrorCode::ApprovalRequired, 500),
            (ErrorCode::UnsupportedProtocol, 500),
        ] {
            assert_eq!(http_status(code).as_u16(), status, "{code}");
        }
    }

    #[test]
    fn store_errors_are_internal_with_their_message() {
        let e = crate::store::StoreError::TooNew(9);
        let shape = e.to_shape();
        assert_eq!(shape.code, ErrorCode::Internal);
        assert_eq!(
            shape.message,
            "database schema version 9 is newer than this gsv understands"
        );
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
