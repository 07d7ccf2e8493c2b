//! Bearer-token authentication of HTTP callers: a token becomes a [`Principal`] (the
//! admin or an agent with its policy), and failures become [`ApiError`] responses.
//!
//! Shared by the admin API (`http`) and the MCP endpoint (`mcp`); it lives apart from
//! both so `mcp` does not import `http`, which mounts `mcp` (no import circle).

use crate::policy::{Policy, PolicySpec};
use crate::state::Shared;
use crate::token::TokenKind;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::net::SocketAddr;

/// An error as JSON with a status code derived from its code.
pub struct ApiError(pub ErrorShape);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.code {
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden | ErrorCode::Denied => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::InvalidArgs | ErrorCode::InvalidFrame => StatusCode::BAD_REQUEST,
            ErrorCode::NodeOffline | ErrorCode::NodeDisconnected => StatusCode::BAD_GATEWAY,
            ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::RateLimited | ErrorCode::Overloaded => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut res = (
            status,
            Json(gsv_protocol::error::ErrorBody { error: self.0 }),
        )
            .into_response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"gsv\""),
            );
        }
        res
    }
}

/// Who is calling the admin API (or `/mcp`).
pub(crate) enum Principal {
    Admin {
        token_id: String,
    },
    Agent {
        policy: Policy,
        name: String,
        token_id: String,
    },
}

impl Principal {
    pub(crate) fn policy(&self) -> Policy {
        match self {
            Principal::Admin { .. } => Policy::full_access(),
            Principal::Agent { policy, .. } => policy.clone(),
        }
    }
}

/// Checks the request's `Authorization: Bearer` token (rate-limited per address; a
/// missing or bad token counts as a failed authentication).
pub(crate) async fn authorize(
    shared: &Shared,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<Principal, ApiError> {
    let result = check_token(shared, headers).await;
    match &result {
        Ok(_) => shared.admission.authenticated(peer),
        Err(ApiError(e)) if e.code == ErrorCode::Unauthorized => {
            // As for WebSocket connects: valid tokens always pass; wrong ones from an
            // address over its limit get 429.
            let limited = shared.auth_limiter.is_limited(peer.ip());
            shared.auth_limiter.failed(peer.ip());
            let code = if limited {
                ErrorCode::RateLimited
            } else {
                ErrorCode::Unauthorized
            };
            shared.metrics.refused("http", code.as_str());
            // Audited and logged at `warn` once per source and reason per window; the
            // rest are counted (crate::refusals).
            if shared
                .refusals
                .record(peer, "http", code.as_str(), &e.message)
            {
                tracing::warn!(%peer, limited, "HTTP API request with a missing or invalid token");
            } else {
                tracing::debug!(%peer, limited, "HTTP API request with a missing or invalid token");
            }
            if limited {
                return Err(ApiError(ErrorShape::new(
                    ErrorCode::RateLimited,
                    "too many failed authentications from this address; wait a minute",
                )));
            }
        }
        Err(_) => {}
    }
    result
}

async fn check_token(shared: &Shared, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let unauthorized = |m: &str| ApiError(ErrorShape::new(ErrorCode::Unauthorized, m));
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_owned())
        .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
    let record = shared
        .store
        .blocking(move |store| store.verify(&token))
        .await
        .map_err(|e| ApiError(ErrorShape::new(ErrorCode::Internal, e.to_string())))?
        .map_err(|e| ApiError(ErrorShape::new(ErrorCode::Internal, e.to_string())))?
        .ok_or_else(|| unauthorized("invalid or revoked token"))?;
    match record.kind {
        TokenKind::Admin => Ok(Principal::Admin {
            token_id: record.id,
        }),
        TokenKind::Agent => {
            let spec = record.policy.unwrap_or_else(PolicySpec::default);
            let policy = Policy::compile(&spec)
                .map_err(|e| ApiError(ErrorShape::new(ErrorCode::Internal, e.to_string())))?;
            Ok(Principal::Agent {
                policy,
                name: record.subject,
                token_id: record.id,
            })
        }
        TokenKind::Node | TokenKind::Join => Err(ApiError(ErrorShape::new(
            ErrorCode::Forbidden,
            "node tokens cannot use the admin API",
        ))),
    }
}
