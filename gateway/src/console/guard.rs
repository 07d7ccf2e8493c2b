//! Who is asking, and whether the request really comes from the console's own page.
//!
//! Every `/ui/api` request — reads included: some reads make `Process` calls on nodes —
//! must prove it comes from the console's page before anything is done for it:
//!
//! - **origin**: `Sec-Fetch-Site`, when the browser sends it, is `same-origin` (a page
//!   on another port of the same host is `same-site`, and refused); `Origin`, when
//!   sent, is the gateway's own origin, scheme and port included ([`proof_of_origin`]);
//! - **one session cookie**: the per-gateway cookie ([`super::Console::cookie_name`]),
//!   and no other cookie whose name starts with `gsv_console` — two are refused, never
//!   resolved to either, so a cookie planted with a more specific path cannot shadow
//!   the operator's ([`cookie`]);
//! - **the session's CSRF token**, in `x-csrf-token` (the event stream, which cannot
//!   send headers, in its `csrf` query parameter), compared in constant time. The page
//!   gets it inside the app's HTML, which only the gateway's own origin can read.
//!
//! A refused request gets 403 `forbidden` with `details.rule` and does no work. Every
//! `/ui` response gets the console's Content-Security-Policy and the other headers that
//! keep a page from being framed, sniffed or cached ([`security_headers`]), and clears
//! foreign console cookies the request carried ([`clear_planted`]).

use super::sessions::Session;
use super::{Console, ConsoleError, Role, Ui};
use crate::fleet::Fleet;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

/// The console's Content-Security-Policy: scripts and styles from the gateway only,
/// nothing inline, no frames, no foreign connections.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What every console cookie's name starts with; the session cookie's own name is
/// this, `_`, and 128 random bits made when the gateway starts.
pub const COOKIE_PREFIX: &str = "gsv_console";

/// Console cookies cleared from one response at most (names × paths).
const MAX_CLEARED: usize = 64;

/// Adds the security headers to every `/ui` response, and clears the foreign console
/// cookies the request carried.
pub async fn security_headers(
    State(Ui { console, .. }): State<Ui>,
    req: Request,
    next: Next,
) -> Response {
    let clear = clear_planted(req.headers(), console.cookie_name(), req.uri().path());
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
    // A page may ask for `same-origin` instead (the login page: with `no-referrer`
    // its form's POST would carry `Origin: null`, which proves nothing).
    h.entry(header::REFERRER_POLICY)
        .or_insert(HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    for c in clear {
        if let Ok(v) = HeaderValue::from_str(&c) {
            h.append(header::SET_COOKIE, v);
        }
    }
    res
}

/// Every cookie of the request whose name starts with [`COOKIE_PREFIX`], as
/// `(name, value)`.
fn console_cookies(headers: &HeaderMap) -> Vec<(&str, &str)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, _)| k.starts_with(COOKIE_PREFIX))
        .collect()
}

/// The value of the session cookie `name`: `None` without one, refused when the
/// request carries any other console cookie beside it (or it twice).
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ConsoleError> {
    let found = console_cookies(headers);
    if found.len() > 1 {
        tracing::warn!(
            cookies = found.len(),
            "console request with more than one console cookie refused"
        );
        return Err(ConsoleError::TwoCookies);
    }
    Ok(found.first().filter(|(k, _)| *k == name).map(|(_, v)| *v))
}

/// `Set-Cookie` values that delete the console cookies a request carried beside the
/// session's own: each foreign name on every prefix of `path` (a cookie sent with this
/// request has one of them as its path). The session cookie's own name is deleted only
/// on paths other than its own `/ui`, so a copy planted under it on a more specific
/// path goes and the operator's stays.
pub fn clear_planted(headers: &HeaderMap, own: &str, path: &str) -> Vec<String> {
    let found = console_cookies(headers);
    if found.len() < 2 && found.iter().all(|(k, _)| *k == own) {
        return Vec::new();
    }
    let mut names: Vec<&str> = found.iter().map(|(k, _)| *k).collect();
    names.sort_unstable();
    names.dedup();
    let mut prefixes = vec!["/".to_owned()];
    for (i, c) in path.char_indices().skip(1) {
        if c == '/' {
            prefixes.push(path[..i].to_owned());
            prefixes.push(path[..=i].to_owned());
        }
    }
    prefixes.push(path.to_owned());
    prefixes.dedup();
    let mut out = Vec::new();
    for name in names {
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        {
            continue;
        }
        for p in &prefixes {
            if name == own && p == "/ui" {
                continue;
            }
            out.push(format!("{name}=; Path={p}; Max-Age=0"));
        }
    }
    out.truncate(MAX_CLEARED);
    out
}

/// The request's live session, by its cookie only: for the app's page itself (a
/// navigation, which proves nothing about origin). Everything under `/ui/api` goes
/// through [`reader`] or [`writer`] instead.
pub async fn session(
    fleet: &Fleet,
    console: &Console,
    headers: &HeaderMap,
) -> Result<Session, ConsoleError> {
    let value = cookie(headers, console.cookie_name())?.ok_or(ConsoleError::NoSession)?;
    let session = console
        .sessions
        .touch(value)
        .ok_or(ConsoleError::NoSession)?;
    if !token_live(fleet, &session.token_id).await? {
        console.sessions.drop_token(&session.token_id);
        return Err(ConsoleError::NoSession);
    }
    Ok(session)
}

/// Whether the token `id` exists and is not revoked.
pub async fn token_live(fleet: &Fleet, id: &str) -> Result<bool, ConsoleError> {
    Ok(fleet.token_live(id).await??)
}

/// The session of a console API read: from the console's own page (origin, one
/// cookie, the CSRF token in `x-csrf-token`). Checked before any work is done.
pub async fn reader(
    fleet: &Fleet,
    console: &Console,
    headers: &HeaderMap,
) -> Result<Session, ConsoleError> {
    let sent = headers
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    proven(fleet, console, headers, sent).await
}

/// The session of a request that carries its CSRF token as `sent` (the event stream's
/// query parameter), after the same checks as [`reader`].
pub async fn proven(
    fleet: &Fleet,
    console: &Console,
    headers: &HeaderMap,
    sent: &str,
) -> Result<Session, ConsoleError> {
    proof_of_origin(headers, console.secure)?;
    let session = session(fleet, console, headers).await?;
    if !bool::from(sent.as_bytes().ct_eq(session.csrf.as_bytes())) {
        tracing::debug!("console request without its CSRF token refused");
        return Err(ConsoleError::BadCsrf);
    }
    Ok(session)
}

/// The session of a state-changing request: a [`reader`]'s, and of a role `allowed`
/// admits (`what` names the action).
pub async fn writer(
    fleet: &Fleet,
    console: &Console,
    headers: &HeaderMap,
    allowed: fn(Role) -> bool,
    what: &'static str,
) -> Result<Session, ConsoleError> {
    let session = reader(fleet, console, headers).await?;
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

/// Refuses a request the browser says came from another site or port: a
/// `Sec-Fetch-Site` other than `same-origin`, or an `Origin` other than the gateway's
/// own (`http(s)://` + the `Host` it was sent to; `https` when `secure`). A request
/// without either (not a browser's, or an old one) must still carry the CSRF token.
pub fn proof_of_origin(headers: &HeaderMap, secure: bool) -> Result<(), ConsoleError> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("");
        if site != "same-origin" {
            tracing::debug!(sec_fetch_site = ?site, "console request from another site or port refused");
            return Err(ConsoleError::CrossSite {
                why: format!("Sec-Fetch-Site {:?}", shown(site)),
            });
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let own = format!("{}://{host}", if secure { "https" } else { "http" });
    if host.is_empty() || !origin.eq_ignore_ascii_case(&own) {
        tracing::debug!(origin = ?origin, host = ?host, "console request from another origin refused");
        return Err(ConsoleError::CrossSite {
            why: format!("Origin {:?}", shown(origin)),
        });
    }
    Ok(())
}

/// A header value as an error message may quote it.
fn shown(v: &str) -> String {
    gsv_protocol::display::shown(v, 200).into_owned()
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
    fn the_cookie_is_found_among_others_and_never_beside_another_console_cookie() {
        let h = headers(&[("cookie", "a=1; gsv_console_k=abc ; b=2")]);
        assert_eq!(cookie(&h, "gsv_console_k").ok().flatten(), Some("abc"));
        let other = headers(&[("cookie", "gsv_consolex=1")]);
        assert_eq!(cookie(&other, "gsv_console_k").ok().flatten(), None);
        for two in [
            "gsv_console_k=abc; gsv_console=planted",
            "gsv_console=planted; gsv_console_k=abc",
            "gsv_console_k=planted; gsv_console_k=abc",
        ] {
            assert!(
                matches!(
                    cookie(&headers(&[("cookie", two)]), "gsv_console_k"),
                    Err(ConsoleError::TwoCookies)
                ),
                "{two}"
            );
        }
        let split = headers(&[
            ("cookie", "gsv_console_k=abc"),
            ("cookie", "gsv_console_z=1"),
        ]);
        assert!(cookie(&split, "gsv_console_k").is_err());
    }

    #[test]
    fn planted_cookies_are_cleared_on_every_prefix_but_the_sessions_own() {
        let h = headers(&[("cookie", "gsv_console_k=abc; gsv_console=planted")]);
        let c = clear_planted(&h, "gsv_console_k", "/ui/api/me");
        for want in [
            "gsv_console=; Path=/; Max-Age=0",
            "gsv_console=; Path=/ui; Max-Age=0",
            "gsv_console=; Path=/ui/api; Max-Age=0",
            "gsv_console=; Path=/ui/api/; Max-Age=0",
            "gsv_console=; Path=/ui/api/me; Max-Age=0",
            "gsv_console_k=; Path=/ui/api; Max-Age=0",
        ] {
            assert!(c.iter().any(|x| x == want), "{want}: {c:?}");
        }
        assert!(!c.iter().any(|x| x == "gsv_console_k=; Path=/ui; Max-Age=0"));
        let alone = headers(&[("cookie", "gsv_console_k=abc; other=1")]);
        assert!(clear_planted(&alone, "gsv_console_k", "/ui/api/me").is_empty());
    }

    #[test]
    fn only_the_gateways_own_origin_passes() {
        let host = ("host", "127.0.0.1:8787");
        assert!(proof_of_origin(&headers(&[host]), false).is_ok());
        assert!(proof_of_origin(
            &headers(&[
                host,
                ("origin", "http://127.0.0.1:8787"),
                ("sec-fetch-site", "same-origin")
            ]),
            false
        )
        .is_ok());
        for bad in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:8788",
            "https://127.0.0.1:8787",
        ] {
            assert!(
                proof_of_origin(&headers(&[host, ("origin", bad)]), false).is_err(),
                "{bad}"
            );
        }
        assert!(
            proof_of_origin(&headers(&[host, ("origin", "http://127.0.0.1:8787")]), true).is_err(),
            "the scheme counts"
        );
        for site in ["same-site", "cross-site", "none", ""] {
            assert!(
                proof_of_origin(&headers(&[host, ("sec-fetch-site", site)]), false).is_err(),
                "{site}"
            );
        }
    }
}
