//! The HTTP side of the gateway's one port: health, metrics, the admin JSON API, and
//! the two WebSocket endpoints.
//!
//! Handlers only extract, call and map errors. Every `/v1` route takes
//! `Authorization: Bearer` with the admin token or an agent token; an agent token sees
//! only what its policy allows.

use crate::policy::{Policy, PolicySpec};
use crate::state::Shared;
use crate::token::TokenKind;
use crate::{agent_session, node_session, upgrade};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use gsv_protocol::method::{
    NodeFailure, NodesListResult, ProbeParams, SessionsPage, ToolsListResult,
};
use gsv_protocol::{ErrorCode, ErrorShape};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

type AppState = Arc<Shared>;

/// The main router (everything on the gateway's port).
pub fn router(shared: AppState, with_metrics: bool) -> Router {
    let mut r = Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/node", get(node_ws))
        .route("/v1/agent", get(agent_ws))
        .route("/v1/nodes", get(nodes))
        .route("/v1/tools", get(tools))
        .route("/v1/sessions", get(sessions))
        .route("/v1/nodes/{id}/probe", post(probe))
        .route("/v1/approvals", get(approvals_list))
        .route("/v1/approvals/{id}", post(approvals_decide));
    if with_metrics {
        r = r.route("/metrics", get(metrics));
    }
    r = r.merge(crate::mcp::router(shared.clone()));
    r.with_state(shared)
}

/// A router that serves only `/metrics` (for `--metrics-listen`).
pub fn metrics_router(shared: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(shared)
}

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

async fn healthz() -> &'static str {
    "ok\n"
}

async fn metrics(State(shared): State<AppState>) -> Response {
    shared
        .metrics
        .unauthenticated_connections
        .set(shared.admission.unauthenticated() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        shared.metrics.encode(),
    )
        .into_response()
}

async fn nodes(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Json<NodesListResult>, ApiError> {
    let policy = authorize(&shared, &headers, peer).await?.policy();
    let nodes = shared.registry.summaries(|n| policy.visible(n));
    Ok(Json(NodesListResult { nodes }))
}

async fn tools(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Json<ToolsListResult>, ApiError> {
    let policy = authorize(&shared, &headers, peer).await?.policy();
    let tools = shared.registry.tool_entries(|n| policy.visible(n));
    Ok(Json(ToolsListResult { tools }))
}

/// `GET /v1/sessions`: the background process sessions of every node the caller may
/// run `Process` on, gathered with one `Process {action: list}` call per node (each
/// an ordinary, audited call). A node that does not answer is listed under `errors`.
async fn sessions(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let policy = principal.policy();
    let (name, token_id) = match &principal {
        Principal::Admin { token_id } => ("admin-api".to_owned(), token_id.clone()),
        Principal::Agent { name, token_id, .. } => (name.clone(), token_id.clone()),
    };
    let caller = crate::router::Caller {
        name: &name,
        token_id: &token_id,
        policy: &policy,
        agent: None,
        progress: None,
        asker: None,
    };
    let nodes: Vec<String> = shared
        .registry
        .all()
        .into_iter()
        .filter(|n| n.tools.get("Process").is_some())
        .map(|n| n.id.to_string())
        .filter(|id| {
            policy.decide(&gsv_protocol::names::NamespacedName::join(id, "Process"))
                == crate::policy::Decision::Allow
        })
        .collect();
    let calls = nodes.iter().map(|node| {
        let params = gsv_protocol::method::ToolsCallParams {
            name: gsv_protocol::names::NamespacedName::join(node, "Process"),
            args: serde_json::value::to_raw_value(&serde_json::json!({"action": "list"}))
                .unwrap_or_default(),
            timeout_ms: Some(10_000),
        };
        let caller = &caller;
        let shared = &shared;
        async move {
            let outcome =
                crate::router::call(shared, caller, params, CancellationToken::new()).await;
            (node.clone(), outcome)
        }
    });
    let mut sessions = Vec::new();
    let mut errors = Vec::new();
    for (node, outcome) in futures_util::future::join_all(calls).await {
        let listed = outcome.and_then(|raw| {
            serde_json::from_str::<gsv_protocol::ToolResult>(raw.get())
                .map_err(|e| ErrorShape::new(ErrorCode::Internal, e.to_string()))
        });
        match listed {
            Ok(r) if !r.is_error => {
                let list = r
                    .structured_content
                    .as_ref()
                    .and_then(|v| v.get("sessions"))
                    .and_then(|v| v.as_array())
                    .cloned()
                    .unwrap_or_default();
                for mut s in list {
                    if let Some(obj) = s.as_object_mut() {
                        obj.insert("node".into(), serde_json::Value::String(node.clone()));
                    }
                    sessions.push(s);
                }
            }
            Ok(r) => errors.push(NodeFailure {
                node,
                error: r.joined_text(),
            }),
            Err(e) => errors.push(NodeFailure {
                node,
                error: e.to_string(),
            }),
        }
    }
    Ok(Json(SessionsPage { sessions, errors }).into_response())
}

/// Requires the admin token.
async fn admin_only(
    shared: &Shared,
    headers: &HeaderMap,
    peer: SocketAddr,
    what: &str,
) -> Result<(), ApiError> {
    match authorize(shared, headers, peer).await? {
        Principal::Admin { .. } => Ok(()),
        Principal::Agent { .. } => Err(ApiError(ErrorShape::new(
            ErrorCode::Forbidden,
            format!("{what} needs the admin token"),
        ))),
    }
}

/// Parses an optional JSON body; an empty body gives the default.
fn json_body<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError(ErrorShape::new(
            ErrorCode::InvalidArgs,
            format!("request body is not the expected JSON: {e}"),
        ))
    })
}

async fn probe(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    admin_only(&shared, &headers, peer, "probing a node").await?;
    let params: ProbeParams = json_body(&body)?;
    let result = crate::probe::probe(&shared, &id, params.bins)
        .await
        .map_err(ApiError)?;
    Ok(Json(result).into_response())
}

async fn approvals_list(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<crate::approvals::ListQuery>,
) -> Result<Response, ApiError> {
    admin_only(&shared, &headers, peer, "listing approvals").await?;
    let page = shared.approvals.list(q).await.map_err(ApiError)?;
    Ok(Json(page).into_response())
}

async fn approvals_decide(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    admin_only(&shared, &headers, peer, "deciding approvals").await?;
    let body: gsv_protocol::method::ApprovalDecision =
        serde_json::from_slice(&body).map_err(|e| {
            ApiError(ErrorShape::new(
                ErrorCode::InvalidArgs,
                format!("expected {{\"decision\": \"approve\" | \"deny\"}}: {e}"),
            ))
        })?;
    let req = crate::approvals::decide_and_announce(&shared, &id, body.decision, "admin-api")
        .await
        .map_err(ApiError)?;
    Ok(Json(req).into_response())
}

async fn node_ws(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    // The connection's place under the caps on unauthenticated connections lives
    // until the session ends (or its handshake authenticates it).
    let ticket = shared.admission.ticket(peer);
    upgrade::upgrade(req, move |ws| async move {
        node_session::run(shared, ws, peer).await;
        drop(ticket);
    })
}

async fn agent_ws(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    if shared.draining.is_cancelled() {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is shutting down\n",
        )
            .into_response();
    }
    let ticket = shared.admission.ticket(peer);
    upgrade::upgrade(req, move |ws| async move {
        agent_session::run(shared, ws, peer).await;
        drop(ticket);
    })
}
