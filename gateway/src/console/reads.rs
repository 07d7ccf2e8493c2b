//! The console's read-only API (`GET /ui/api/...`): every one open to every role, each
//! a thin wrapper over the function the CLI and admin API use for the same list. Each
//! proves its origin first ([`guard::reader`]): some reads (sessions, a session's log)
//! are `Process` calls on nodes, audited as the session's operator.

use super::{guard, ConsoleError, Ui};
use crate::auth::ApiError;
use crate::policy::Policy;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

type QueryResult<T> = Result<Query<T>, axum::extract::rejection::QueryRejection>;

fn query<T>(q: QueryResult<T>) -> Result<T, ConsoleError> {
    q.map(|Query(q)| q)
        .map_err(|e| ConsoleError::BadQuery(e.body_text()))
}

/// Nodes per page at most.
pub const MAX_NODES_PAGE: usize = 1000;
/// Nodes per page when none is asked for.
const NODES_PAGE: usize = 250;
/// Audit rows per page at most.
pub const MAX_AUDIT_PAGE: u32 = 500;
/// Longest text filter.
const MAX_FILTER: usize = 200;

/// What the page needs to know about its own session.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Me {
    role: super::Role,
    /// Who the session acts as (`console:NAME`): shown in the page's header.
    actor: String,
    csrf: String,
    can_decide: bool,
    can_manage: bool,
    version: &'static str,
}

/// `GET /ui/api/me`: the session's role, who it acts as, and its CSRF token.
pub async fn me(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let s = guard::reader(&fleet, &console, &headers).await?;
    Ok(Json(Me {
        role: s.role,
        can_decide: s.role.can_decide(),
        can_manage: s.role.can_manage(),
        actor: s.actor,
        csrf: s.csrf,
        version: crate::VERSION,
    })
    .into_response())
}

#[derive(Deserialize, Default)]
pub struct NodesQuery {
    /// Only nodes whose id or a label (`key=value`) contains this text.
    #[serde(default)]
    q: Option<String>,
    /// A selector (`role=web,fact.os=linux`), the same as `gsv nodes --select`.
    #[serde(default)]
    select: Option<String>,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

/// One page of nodes.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodesPage {
    nodes: Vec<gsv_protocol::method::NodeSummary>,
    /// Nodes that match, in all.
    total: usize,
    online: usize,
    offset: usize,
}

/// `GET /ui/api/nodes[?q=&select=&offset=&limit=]`: a page of every node (online
/// first, each by id), filtered.
pub async fn nodes(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    q: QueryResult<NodesQuery>,
) -> Result<Response, ApiError> {
    guard::reader(&fleet, &console, &headers).await?;
    let q = query(q)?;
    let selector = q
        .select
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(crate::inventory::parse_selector)
        .transpose()?;
    let policy = Policy::full_access();
    let text =
        q.q.as_deref()
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty() && t.len() <= MAX_FILTER);
    let all = fleet.local_nodes(&crate::inventory::viewer(&policy), selector.as_ref());
    let matching: Vec<_> = all
        .into_iter()
        .filter(|n| match &text {
            None => true,
            Some(t) => {
                n.id.contains(t.as_str())
                    || n.labels
                        .iter()
                        .any(|(k, v)| format!("{k}={v}").to_lowercase().contains(t.as_str()))
            }
        })
        .collect();
    let total = matching.len();
    let online = matching.iter().filter(|n| n.online).count();
    let limit = q.limit.unwrap_or(NODES_PAGE).clamp(1, MAX_NODES_PAGE);
    let nodes = matching.into_iter().skip(q.offset).take(limit).collect();
    Ok(Json(NodesPage {
        nodes,
        total,
        online,
        offset: q.offset,
    })
    .into_response())
}

/// A node's tool with its input schema and default posture.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolView {
    #[serde(flatten)]
    tool: gsv_protocol::offer::NodeTool,
    input_schema: Option<serde_json::Value>,
    needs_approval: bool,
}

/// `GET /ui/api/nodes/{id}`: the node (`nodes.show`) with its tools and their input
/// schemas.
pub async fn node(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    guard::reader(&fleet, &console, &headers).await?;
    let detail = fleet.local_node_detail(&Policy::full_access(), &id)?;
    let set = fleet.local_tool_set(&id);
    let tools: Vec<ToolView> = detail
        .tools
        .into_iter()
        .map(|tool| {
            let spec = set.as_ref().and_then(|s| s.get(&tool.name).cloned());
            ToolView {
                input_schema: spec.as_ref().map(|s| s.def.input_schema.clone()),
                needs_approval: spec.as_ref().is_some_and(|s| s.def.requires_approval),
                tool,
            }
        })
        .collect();
    Ok(Json(serde_json::json!({
        "node": detail.node,
        "tools": tools,
        "gatewayVersion": detail.gateway_version,
    }))
    .into_response())
}

/// `GET /ui/api/approvals[?all=&limit=&offset=]`: the `approvals.list` page.
pub async fn approvals(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    q: QueryResult<crate::approvals::ListQuery>,
) -> Result<Response, ApiError> {
    guard::reader(&fleet, &console, &headers).await?;
    let page = fleet.approvals(query(q)?).await?;
    Ok(Json(page).into_response())
}

/// `GET /ui/api/approvals/{id}/args`: every argument of a call still waiting on this
/// gateway, as the canonical JSON its hash is taken of, whatever its size (lists carry
/// them only up to [`crate::approvals::MAX_SHOWN_ARGS_BYTES`]); the page cuts long
/// values visibly and shows them whole on request.
pub async fn approval_args(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    guard::reader(&fleet, &console, &headers).await?;
    let args = fleet
        .pending_approval_args(&id)
        .ok_or_else(|| ConsoleError::NotFound {
            what: "pending approval request on this gateway",
            id: gsv_protocol::display::shown(&id, 64).into_owned(),
        })?;
    Ok(Json(serde_json::json!({ "id": id, "args": &*args })).into_response())
}

/// The caller the console's `Process` calls are made as: the session's role as the
/// name, its minting token as the owner, `policy` full access (an operator's call).
pub(super) fn caller<'a>(
    session: &'a super::sessions::Session,
    policy: &'a Policy,
) -> crate::router::Caller<'a> {
    crate::router::Caller::of(&session.actor, &session.token_id, policy)
}

/// `GET /ui/api/sessions`: every node's background process sessions.
pub async fn sessions(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let session = guard::reader(&fleet, &console, &headers).await?;
    let policy = Policy::full_access();
    let caller = caller(&session, &policy);
    let page = fleet.sessions(&caller).await;
    Ok(Json(page).into_response())
}

#[derive(Deserialize, Default)]
pub struct LogQuery {
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
}

/// `GET /ui/api/sessions/{node}/{id}/log[?offset=&limit=]`: a page of a session's
/// output (`Process {action: log}`).
pub async fn session_log(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    Path((node, id)): Path<(String, String)>,
    q: QueryResult<LogQuery>,
) -> Result<Response, ApiError> {
    let session = guard::reader(&fleet, &console, &headers).await?;
    let q = query(q)?;
    let mut args = serde_json::json!({"action": "log", "sessionId": id});
    if let Some(o) = q.offset {
        args["offset"] = o.into();
    }
    args["limit"] = q.limit.unwrap_or(200).clamp(1, 2000).into();
    let policy = Policy::full_access();
    let caller = caller(&session, &policy);
    let result = fleet
        .process(&caller, &node, &args)
        .await
        .map_err(refused)?;
    Ok(Json(result).into_response())
}

/// A call's error as the API's answer, with the status its code maps to.
pub(super) fn refused(error: gsv_protocol::ErrorShape) -> ApiError {
    ApiError {
        status: crate::error::http_status(error.code),
        error,
    }
}

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    #[serde(default)]
    before: Option<i64>,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    q: Option<String>,
    /// Walk the whole chain too (`crate::audit::verify`).
    #[serde(default)]
    verify: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditPage {
    rows: Vec<crate::audit::AuditRow>,
    last_seq: i64,
    verify: Option<crate::audit::VerifyReport>,
}

/// `GET /ui/api/audit[?before=&limit=&q=&verify=true]`: rows newest first, filtered
/// by text, and the chain's verification when asked.
pub async fn audit(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    q: QueryResult<AuditQuery>,
) -> Result<Response, ApiError> {
    guard::reader(&fleet, &console, &headers).await?;
    let q = query(q)?;
    let text =
        q.q.map(|t| t.trim().chars().take(MAX_FILTER).collect::<String>())
            .filter(|t| !t.is_empty());
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_AUDIT_PAGE);
    let (before, verify) = (q.before, q.verify);
    let read = fleet
        .read_audit(before, limit, text, verify)
        .await
        .map_err(ConsoleError::from)?
        .map_err(ConsoleError::from)?;
    let page = AuditPage {
        rows: read.rows,
        last_seq: read.last_seq,
        verify: read.verify,
    };
    Ok(Json(page).into_response())
}

/// `GET /ui/api/tokens`: every token (ids, kinds, subjects, policies; never secrets).
pub async fn tokens(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    guard::reader(&fleet, &console, &headers).await?;
    let list = fleet
        .list_tokens()
        .await
        .map_err(ConsoleError::from)?
        .map_err(ConsoleError::from)?;
    Ok(Json(serde_json::json!({ "tokens": list })).into_response())
}

/// The console reads jobs as an operator does: every job.
fn reader<'a>(token_id: &'a str) -> crate::jobs::Reader<'a> {
    crate::jobs::Reader {
        token_id,
        admin: true,
        read_only: true,
        policy: None,
    }
}

/// `GET /ui/api/jobs[?limit=&offset=&select=]`: the `jobs.list` page.
pub async fn jobs(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    q: QueryResult<gsv_protocol::job::JobsListParams>,
) -> Result<Response, ApiError> {
    let session = guard::reader(&fleet, &console, &headers).await?;
    let page = fleet.jobs(reader(&session.token_id), query(q)?).await?;
    Ok(Json(page).into_response())
}

/// `GET /ui/api/jobs/{id}`: one job with its result.
pub async fn job(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let session = guard::reader(&fleet, &console, &headers).await?;
    let job = fleet.job(reader(&session.token_id), &id).await?;
    Ok(Json(job).into_response())
}
