//! Bearer-token authentication of HTTP callers: a token becomes a [`Principal`] (the
//! admin or an agent with its policy), and failures ([`AuthError`], or any other
//! [`WireError`]) become [`ApiError`] responses.
//!
//! Shared by the admin API (`http`) and the MCP endpoint (`mcp`); it lives apart from
//! both so `mcp` does not import `http`, which mounts `mcp` (no import circle).

mod error;

pub use error::AuthError;

use crate::error::WireError;
use crate::operator::{Authority, OperatorRole};
use crate::policy::{Policy, PolicySpec};
use crate::state::Shared;
use crate::token::TokenKind;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::net::SocketAddr;

/// A refused API request: the error as JSON, with the status its error maps to.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub error: ErrorShape,
}

impl<E: WireError> From<E> for ApiError {
    fn from(e: E) -> Self {
        ApiError {
            status: e.status(),
            error: e.to_shape(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let mut res = (
            status,
            Json(gsv_protocol::error::ErrorBody { error: self.error }),
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
    /// An operator token: reads the fleet, decides approvals if an approver, runs no
    /// tool.
    Operator {
        role: OperatorRole,
        name: String,
        token_id: String,
    },
}

impl Principal {
    pub(crate) fn policy(&self) -> Policy {
        match self {
            Principal::Admin { .. } => Policy::full_access(),
            Principal::Agent { policy, .. } => policy.clone(),
            Principal::Operator { .. } => Policy::view_only(),
        }
    }

    /// What the token may do beyond its policy.
    pub(crate) fn authority(&self) -> Authority {
        match self {
            Principal::Admin { .. } => Authority::Admin,
            Principal::Agent { .. } => Authority::Agent,
            Principal::Operator { role, .. } => Authority::Operator(*role),
        }
    }

    /// The token's id.
    pub(crate) fn token_id(&self) -> &str {
        match self {
            Principal::Admin { token_id }
            | Principal::Agent { token_id, .. }
            | Principal::Operator { token_id, .. } => token_id,
        }
    }

    /// The token's subject (`admin` for the admin token).
    pub(crate) fn name(&self) -> &str {
        match self {
            Principal::Admin { .. } => "admin",
            Principal::Agent { name, .. } | Principal::Operator { name, .. } => name,
        }
    }
}

/// Checks the request's `Authorization: Bearer` token (rate-limited per address; a
/// missing or bad token counts as a failed authentication).
pub(crate) async fn authorize(
    shared: &Shared,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<Principal, AuthError> {
    let result = check_token(shared, headers).await;
    match &result {
        Ok(_) => shared.admission.authenticated(peer),
        Err(e) if e.code() == ErrorCode::Unauthorized => {
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
                .record(peer, "http", code.as_str(), &e.to_string())
            {
                tracing::warn!(%peer, limited, "HTTP API request with a missing or invalid token");
            } else {
                tracing::debug!(%peer, limited, "HTTP API request with a missing or invalid token");
            }
            if limited {
                return Err(AuthError::RateLimited);
            }
        }
        Err(_) => {}
    }
    result
}

async fn check_token(shared: &Shared, headers: &HeaderMap) -> Result<Principal, AuthError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_owned())
        .ok_or(AuthError::MissingBearer)?;
    let record = shared
        .store
        .blocking(move |store| store.verify(&token))
        .await??
        .ok_or(AuthError::InvalidToken)?;
    match record.kind {
        TokenKind::Admin => Ok(Principal::Admin {
            token_id: record.id,
        }),
        TokenKind::Agent => {
            let spec = record.policy.unwrap_or_else(PolicySpec::default);
            let policy = Policy::compile(&spec)?;
            Ok(Principal::Agent {
                policy,
                name: record.subject,
                token_id: record.id,
            })
        }
        TokenKind::Operator => Ok(Principal::Operator {
            role: record.role.ok_or(AuthError::InvalidToken)?,
            name: record.subject,
            token_id: record.id,
        }),
        TokenKind::Node | TokenKind::Join => Err(AuthError::NodeToken),
    }
}
