//! The HTTP side of the gateway's one port: health, metrics, the admin JSON API, and
//! the two WebSocket endpoints.
//!
//! Handlers only extract, call and map errors. Every `/v1` route takes
//! `Authorization: Bearer` with the admin token, an operator token or an agent token;
//! an agent token sees only what its policy allows, an operator's reads everything
//! (and an approver's decides approvals), only the admin token changes the fleet.

mod error;

pub use crate::auth::ApiError;
use crate::auth::{authorize, Principal};
use crate::operator::Authority;
use crate::state::Shared;
use crate::{agent_session, node_session, upgrade};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
pub use error::HttpError;
use gsv_protocol::method::{
    LabelsChange, NodesListParams, NodesListResult, ProbeParams, ToolsListResult,
};
use std::net::SocketAddr;
use std::sync::Arc;

type AppState = Arc<Shared>;

/// The main router (everything on the gateway's port).
pub fn router(shared: AppState, with_metrics: bool) -> Router {
    let mut r = Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/node", get(node_ws))
        .route("/v1/agent", get(agent_ws))
        .route("/v1/nodes", get(nodes))
        .route("/v1/nodes/{id}", get(node_show))
        .route("/v1/tools", get(tools))
        .route("/v1/sessions", get(sessions))
        .route("/v1/nodes/{id}/probe", post(probe))
        .route("/v1/nodes/{id}/accept-tools", post(accept_tools))
        .route("/v1/nodes/{id}/labels", post(node_labels))
        .route("/v1/jobs", get(jobs_list))
        .route("/v1/jobs/{id}", get(job_show))
        .route("/v1/approvals", get(approvals_list))
        .route("/v1/approvals/{id}", post(approvals_decide))
        .route("/v1/cluster", get(cluster_status));
    if with_metrics {
        r = r.route("/metrics", get(metrics));
    }
    r = r.merge(crate::mcp::router(crate::fleet::Fleet::new(shared.clone())));
    r.with_state(shared)
}

/// A router that serves only `/metrics` (for `--metrics-listen`).
pub fn metrics_router(shared: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(shared)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn metrics(State(shared): State<AppState>) -> Response {
    shared
        .metrics
        .unauthenticated_connections
        .set(shared.admission.unauthenticated() as i64);
    crate::fleet::Fleet::new(shared.clone()).measure_peers();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        shared.metrics.encode(),
    )
        .into_response()
}

/// `GET /v1/nodes[?select=SEL]`: the `nodes.list` result.
async fn nodes(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    query: Result<axum::extract::Query<NodesListParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<NodesListResult>, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let policy = principal.policy();
    let axum::extract::Query(params) = query.map_err(|e| HttpError::BadQuery(e.body_text()))?;
    let select = params.select.as_deref();
    let nodes = crate::fleet::Fleet::new(shared.clone())
        .nodes(&policy, principal.token_id(), select)
        .await?;
    Ok(Json(NodesListResult {
        nodes,
        gateway_version: crate::VERSION.to_owned(),
    }))
}

/// `POST /v1/nodes/{id}/labels`: the `nodes.label` change, body `{set, remove}`.
async fn node_labels(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    admin_only(&shared, &headers, peer, "labelling a node").await?;
    let change: LabelsChange = json_body(&body)?;
    let result = crate::inventory::relabel(&shared, &id, change, "admin-api").await?;
    Ok(Json(result).into_response())
}

/// `GET /v1/nodes/{id}`: the `nodes.show` result.
async fn node_show(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let policy = principal.policy();
    let detail = crate::fleet::Fleet::new(shared.clone())
        .node(&policy, principal.token_id(), &id)
        .await?;
    Ok(Json(detail).into_response())
}

/// `POST /v1/nodes/{id}/accept-tools`: accepts what the node offers now.
async fn accept_tools(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    admin_only(&shared, &headers, peer, "accepting a node's tools").await?;
    let result = crate::fleet::Fleet::new(shared.clone())
        .accept_tools(&id, "admin-api")
        .await?;
    Ok(Json(result).into_response())
}

async fn tools(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Json<ToolsListResult>, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let policy = principal.policy();
    let tools = crate::fleet::Fleet::new(shared.clone())
        .tools(&policy, principal.token_id())
        .await;
    Ok(Json(ToolsListResult { tools }))
}

/// `GET /v1/sessions`: the background process sessions of every node the caller may
/// run `Process` on ([`crate::process_sessions::gather`]).
async fn sessions(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    // Operators read every node's sessions: the listing's own `Process {action: list}`
    // calls (fixed arguments) run with the admin's reach for them.
    let policy = match principal.authority() {
        Authority::Agent => principal.policy(),
        Authority::Admin | Authority::Operator(_) => crate::policy::Policy::full_access(),
    };
    let name = match &principal {
        Principal::Admin { .. } => "admin-api",
        Principal::Agent { name, .. } | Principal::Operator { name, .. } => name.as_str(),
    };
    let caller = crate::router::Caller::of(name, principal.token_id(), &policy);
    Ok(Json(crate::process_sessions::gather(&shared, &caller).await).into_response())
}

/// Requires the admin token.
/// Refuses a request that does not come with the admin token or an operator token.
async fn operators_only(
    shared: &Shared,
    headers: &HeaderMap,
    peer: SocketAddr,
    what: &'static str,
) -> Result<(), ApiError> {
    if authorize(shared, headers, peer)
        .await?
        .authority()
        .reads_all()
    {
        Ok(())
    } else {
        Err(HttpError::OperatorOnly { what }.into())
    }
}

async fn admin_only(
    shared: &Shared,
    headers: &HeaderMap,
    peer: SocketAddr,
    what: &'static str,
) -> Result<(), ApiError> {
    if authorize(shared, headers, peer)
        .await?
        .authority()
        .is_admin()
    {
        Ok(())
    } else {
        Err(HttpError::AdminOnly { what }.into())
    }
}

/// Parses an optional JSON body; an empty body gives the default.
fn json_body<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| HttpError::BadBody(e).into())
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
    let result = crate::probe::probe(&shared, &id, params.bins).await?;
    Ok(Json(result).into_response())
}

/// Who a principal is as a reader of jobs.
fn job_reader(principal: &Principal) -> crate::jobs::Reader<'_> {
    let reader = crate::jobs::Reader::new(principal.token_id(), principal.authority());
    match principal {
        Principal::Agent { policy, .. } => reader.seeing(policy),
        _ => reader,
    }
}

/// `GET /v1/jobs[?limit=&offset=]`: the `jobs.list` result.
async fn jobs_list(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    query: Result<
        axum::extract::Query<gsv_protocol::job::JobsListParams>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Response, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let axum::extract::Query(params) = query.map_err(|e| HttpError::BadQuery(e.body_text()))?;
    let page = crate::jobs::list(&shared, job_reader(&principal), params).await?;
    Ok(Json(page).into_response())
}

/// `GET /v1/jobs/{id}`: the `jobs.get` result.
async fn job_show(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let job = crate::jobs::get(&shared, job_reader(&principal), &id).await?;
    Ok(Json(job).into_response())
}

/// `GET /v1/cluster`: this replica, its state (`ok`, or `degraded` without NATS) and
/// the replicas it hears (admin and operators).
async fn cluster_status(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operators_only(&shared, &headers, peer, "the cluster's state").await?;
    let status = crate::fleet::Fleet::new(shared.clone())
        .cluster_status()
        .ok_or(HttpError::NotClustered)?;
    Ok(Json(status).into_response())
}

async fn approvals_list(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<crate::approvals::ListQuery>,
) -> Result<Response, ApiError> {
    operators_only(&shared, &headers, peer, "listing approvals").await?;
    let page = crate::fleet::Fleet::new(shared.clone())
        .approvals(q)
        .await?;
    Ok(Json(page).into_response())
}

async fn approvals_decide(
    State(shared): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let authority = principal.authority();
    if !authority.decides() {
        return Err(HttpError::CannotDecide { authority }.into());
    }
    let body: gsv_protocol::method::ApprovalDecision =
        serde_json::from_slice(&body).map_err(HttpError::BadDecision)?;
    let by = authority.decider("admin-api", principal.name());
    let req = crate::fleet::Fleet::new(shared.clone())
        .decide_approval(&id, body.decision, &by)
        .await?;
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
