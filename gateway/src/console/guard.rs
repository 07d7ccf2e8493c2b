//! Who is asking, and whether a state change really comes from the console's page.
//!
//! A request's session is its `gsv_console` cookie, checked against the live sessions
//! and against the token that minted it (revoked: the session is gone). A `POST`
//! must also carry the session's CSRF token in `x-csrf-token` and, when the browser
//! sends an `Origin`, come from the gateway's own origin. Every `/ui` response gets
//! the console's Content-Security-Policy and the other headers that keep a page from
//! being framed, sniffed or cached.

use super::sessions::Session;
use super::{ConsoleError, Role, COOKIE};
use crate::state::Shared;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

/// The console's Content-Security-Policy: scripts and styles from the gateway only,
/// nothing inline, no frames, no foreign connections.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Adds the security headers to every `/ui` response.
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// The value of the session cookie, if the request has one.
pub fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim())
}

/// The request's live session.
pub async fn session(shared: &Shared, headers: &HeaderMap) -> Result<Session, ConsoleError> {
    let value = cookie(headers).ok_or(ConsoleError::NoSession)?;
    let session = shared
        .console
        .sessions
        .touch(value)
        .ok_or(ConsoleError::NoSession)?;
    if !token_live(shared, &session.token_id).await? {
        shared.console.sessions.drop_token(&session.token_id);
        return Err(ConsoleError::NoSession);
    }
    Ok(session)
}

/// Whether the token `id` exists and is not revoked.
pub async fn token_live(shared: &Shared, id: &str) -> Result<bool, ConsoleError> {
    let id = id.to_owned();
    Ok(shared.store.blocking(move |s| s.token_live(&id)).await??)
}

/// The session of a state-changing request: live, with its CSRF token, from the
/// gateway's own origin, and of a role `allowed` admits (`what` names the action).
pub async fn writer(
    shared: &Shared,
    headers: &HeaderMap,
    allowed: fn(Role) -> bool,
    what: &'static str,
) -> Result<Session, ConsoleError> {
    let session = session(shared, headers).await?;
    same_origin(headers)?;
    let sent = headers
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !bool::from(sent.as_bytes().ct_eq(session.csrf.as_bytes())) {
        tracing::warn!(what, "console request without its CSRF token refused");
        return Err(ConsoleError::BadCsrf);
    }
    if !allowed(session.role) {
        return Err(ConsoleError::Role {
            what,
            needs: if allowed(Role::Approver) {
                "approver"
            } else {
                "admin"
            },
        });
    }
    Ok(session)
}

/// Refuses a request whose `Origin` (when sent) is not the host it was sent to.
pub fn same_origin(headers: &HeaderMap) -> Result<(), ConsoleError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    if host.is_empty() || !origin_host.eq_ignore_ascii_case(host) {
        tracing::warn!(origin = ?origin, host = ?host, "cross-site console request refused");
        return Err(ConsoleError::CrossSite {
            origin: origin.chars().take(200).collect(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; gsv_console=abc ; b=2")]);
        assert_eq!(cookie(&h), Some("abc"));
        assert_eq!(cookie(&headers(&[("cookie", "gsv_consolex=1")])), None);
    }

    #[test]
    fn only_the_gateways_own_origin_may_post() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8787")])).is_ok());
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8787"),
            ("origin", "http://127.0.0.1:8787")
        ]))
        .is_ok());
        for bad in ["http://evil.example", "null", "http://127.0.0.1:8788"] {
            assert!(
                same_origin(&headers(&[("host", "127.0.0.1:8787"), ("origin", bad)])).is_err(),
                "{bad}"
            );
        }
    }
}
