//! The console's state changes (`POST /ui/api/...`): deciding approvals, killing a
//! process session, creating and revoking agent tokens. Each needs the session's CSRF
//! token, the gateway's own origin ([`guard::writer`]) and a role that allows it, and
//! goes through the same path as the CLI's command for it (audited there).

use super::{guard, ConsoleError, Role, Topic, Ui};
use crate::auth::ApiError;
use crate::policy::{Policy, PolicySpec};
use crate::token::TokenKind;
use crate::tokens::Issuer;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

/// Longest agent name a token may be made for here.
const MAX_NAME: usize = 64;
/// Most globs in one list of a policy.
const MAX_GLOBS: usize = 64;

fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ConsoleError> {
    serde_json::from_slice(bytes).map_err(ConsoleError::BadBody)
}

/// `POST /ui/api/approvals/{id}` `{decision: approve|deny}` (approver or admin).
pub async fn decide(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let session = guard::writer(
        &fleet,
        &console,
        &headers,
        Role::can_decide,
        "deciding approvals",
    )
    .await?;
    let d: gsv_protocol::method::ApprovalDecision = body(&bytes)?;
    let req = fleet
        .decide_approval(&id, d.decision, &session.actor)
        .await?;
    Ok(Json(req).into_response())
}

/// `POST /ui/api/sessions/{node}/{id}/kill` (admin): `Process {action: kill}`, an
/// ordinary audited call.
pub async fn kill(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    Path((node, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let session = guard::writer(
        &fleet,
        &console,
        &headers,
        Role::can_manage,
        "killing a process session",
    )
    .await?;
    let policy = Policy::full_access();
    let caller = super::reads::caller(&session, &policy);
    let args = serde_json::json!({"action": "kill", "sessionId": id});
    let result = fleet
        .process(&caller, &node, &args)
        .await
        .map_err(super::reads::refused)?;
    fleet.changed(Topic::Sessions);
    Ok(Json(result).into_response())
}

/// The body of `POST /ui/api/tokens`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewToken {
    name: String,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    confirm: Vec<String>,
}

/// `POST /ui/api/tokens` (admin): a new agent token, `{token, id}`, shown once.
pub async fn create_token(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    bytes: axum::body::Bytes,
) -> Result<Response, ApiError> {
    guard::writer(
        &fleet,
        &console,
        &headers,
        Role::can_manage,
        "creating tokens",
    )
    .await?;
    let new: NewToken = body(&bytes)?;
    let name = new.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(ConsoleError::Invalid {
            what: "agent name",
            why: format!("1 to {MAX_NAME} characters, no control characters"),
        }
        .into());
    }
    let clean = |v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .map(|g| g.trim().to_owned())
            .filter(|g| !g.is_empty())
            .collect()
    };
    let spec = PolicySpec {
        allow: clean(new.allow),
        deny: clean(new.deny),
        confirm: clean(new.confirm),
        ..PolicySpec::default()
    };
    if [&spec.allow, &spec.deny, &spec.confirm]
        .iter()
        .any(|l| l.len() > MAX_GLOBS)
    {
        return Err(ConsoleError::Invalid {
            what: "policy",
            why: format!("at most {MAX_GLOBS} globs per list"),
        }
        .into());
    }
    Policy::compile(&spec).map_err(|e| ConsoleError::Invalid {
        what: "policy",
        why: e.to_string(),
    })?;
    let issued = fleet
        .issue_token(Issuer::Console, TokenKind::Agent, name.clone(), Some(spec))
        .await
        .map_err(ConsoleError::from)?
        .map_err(ConsoleError::from)?;
    tracing::info!(token_id = %issued.id, agent = ?name, "console: agent token created");
    fleet.changed(Topic::Tokens);
    Ok(Json(serde_json::json!({"token": issued.token, "id": issued.id})).into_response())
}

/// `POST /ui/api/tokens/{id}/revoke` (admin): revokes the token as `gsv token revoke`
/// does (the gateway's revocation watch then closes its connections, ends its jobs
/// and process sessions); console sessions it minted end at once.
pub async fn revoke_token(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    guard::writer(
        &fleet,
        &console,
        &headers,
        Role::can_manage,
        "revoking tokens",
    )
    .await?;
    let revoked = fleet
        .revoke_token(Issuer::Console, &id)
        .await
        .map_err(ConsoleError::from)?
        .map_err(ConsoleError::from)?;
    if !revoked {
        return Err(ConsoleError::NotFound {
            what: "active token",
            id,
        }
        .into());
    }
    tracing::info!(token_id = %id, "console: token revoked");
    console.drop_token(&id);
    fleet.changed(Topic::Tokens);
    Ok(Json(serde_json::json!({"id": id, "revoked": true})).into_response())
}
