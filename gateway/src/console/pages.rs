//! The console's pages: the embedded app (HTML, script, stylesheet, compiled into the
//! binary: no build step, no CDN), the login-code exchange, and the Bearer endpoint
//! that mints login codes for `gsv ui`.

use super::codes::Refused;
use super::{guard, mint_at, Role, COOKIE};
use crate::auth::{authorize, ApiError};
use crate::state::Shared;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Json;
use std::net::SocketAddr;
use std::sync::Arc;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// What an unauthenticated visitor of `/ui/` sees.
const SIGNED_OUT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gsv console</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/ui/app.css\"></head><body><main class=\"signed-out\"><h1>gsv console</h1><p>You are not signed in. On the gateway's machine, run</p><pre>gsv ui --open</pre><p>for a one-time login link (valid 5 minutes, usable once).</p></main></body></html>";

/// `GET /ui`: to `/ui/`.
pub async fn to_index() -> Redirect {
    Redirect::permanent("/ui/")
}

/// `GET /ui/`: the app, or how to sign in.
pub async fn index(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match guard::session(&shared, &headers).await {
        Ok(_) => Html(INDEX).into_response(),
        Err(_) => (StatusCode::UNAUTHORIZED, Html(SIGNED_OUT)).into_response(),
    }
}

pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// A plain page for a refused login.
fn refused(status: StatusCode, why: &str) -> Response {
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gsv console</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/ui/app.css\"></head><body><main class=\"signed-out\"><h1>Login link refused</h1><p>{why}</p><p>Run <code>gsv ui --open</code> for a new one.</p></main></body></html>"
    );
    (status, Html(page)).into_response()
}

#[derive(serde::Deserialize)]
pub struct LoginQuery {
    #[serde(default)]
    code: String,
}

/// `GET /ui/login?code=...`: a valid code becomes a session cookie, once.
pub async fn login(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    query: Result<Query<LoginQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let code = query.map(|Query(q)| q.code).unwrap_or_default();
    let grant = match shared.console.codes.redeem(code.trim()) {
        Ok(g) => g,
        Err(why) => {
            // Counted like a bad token (a valid code always passes, as tokens do).
            let limited = shared.auth_limiter.is_limited(peer.ip());
            shared.auth_limiter.failed(peer.ip());
            tracing::warn!(%peer, ?why, limited, "console login code refused");
            if limited {
                return refused(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too many refused logins from this address; wait a minute.",
                );
            }
            return match why {
                Refused::Expired => refused(StatusCode::GONE, "This login link has expired."),
                Refused::Unknown => refused(
                    StatusCode::UNAUTHORIZED,
                    "This login link is unknown or was already used (each works once).",
                ),
            };
        }
    };
    match guard::token_live(&shared, &grant.token_id).await {
        Ok(true) => {}
        _ => {
            return refused(
                StatusCode::UNAUTHORIZED,
                "The token that made this link was revoked.",
            )
        }
    }
    tracing::info!(%peer, role = ?grant.role, token_id = %grant.token_id, "console session opened");
    let cookie = shared.console.sessions.open(grant);
    let set = session_cookie(&cookie, shared.console.secure);
    let mut res = Redirect::to("/ui/").into_response();
    if let Ok(v) = HeaderValue::from_str(&set) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

/// The `Set-Cookie` value of a new session: not readable by scripts, sent only with
/// the gateway's own requests under `/ui`, and only over TLS when the gateway has it.
fn session_cookie(value: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/ui{secure}")
}

/// `POST /ui/logout`: ends the session (with its CSRF token, like any change).
pub async fn logout(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    guard::writer(&shared, &headers, |_| true, "signing out").await?;
    if let Some(c) = guard::cookie(&headers) {
        shared.console.sessions.close(c);
    }
    let mut res = StatusCode::NO_CONTENT.into_response();
    res.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("gsv_console=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0"),
    );
    Ok(res)
}

/// `POST /v1/ui/login-codes` (Bearer): `{url, expiresAt}`, a login link on the
/// address the caller reached the gateway at.
pub async fn login_codes(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = authorize(&shared, &headers, peer).await?;
    let role = Role::from_principal(&principal)?;
    let (token_id, name) = (principal.token_id(), principal.name());
    let base = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| plain_host(h))
        .map(|h| {
            let scheme = if shared.console.secure {
                "https"
            } else {
                "http"
            };
            format!("{scheme}://{h}")
        })
        .unwrap_or_else(|| shared.console.base().to_owned());
    let link = mint_at(&shared, &base, role, token_id, name)?;
    Ok(Json(link).into_response())
}

/// A `Host` header fit to put in a link: a host name or address and a port.
fn plain_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 255
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_session_cookie_is_secure_with_tls() {
        assert_eq!(
            super::session_cookie("v", false),
            "gsv_console=v; HttpOnly; SameSite=Strict; Path=/ui"
        );
        assert_eq!(
            super::session_cookie("v", true),
            "gsv_console=v; HttpOnly; SameSite=Strict; Path=/ui; Secure"
        );
    }

    #[test]
    fn only_plain_hosts_go_into_links() {
        assert!(super::plain_host("127.0.0.1:8787"));
        assert!(super::plain_host("[::1]:8787"));
        assert!(!super::plain_host("evil.example/x?"));
        assert!(!super::plain_host(""));
    }
}
