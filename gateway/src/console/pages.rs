//! The console's pages: the embedded app (HTML, script, stylesheet, compiled into the
//! binary: no build step, no CDN), the login-code exchange, and the Bearer endpoint
//! that mints login codes for `gsv ui`.
//!
//! No GET changes anything: a login link (`GET /ui/login?code=`) shows a page that
//! names the session it would open and has a "Sign in" button; only its form's `POST`
//! (from the gateway's own origin) uses the code and sets the cookie. What the page
//! needs from the gateway is put into the served text, never as inline script (the
//! CSP forbids it): the session's CSRF token as a `<meta>` of the app's HTML (only the
//! gateway's own origin can read it), and the display rule's table
//! ([`gsv_protocol::display::HIDDEN`]) into `app.js`.

use super::codes::Refused;
use super::{guard, ConsoleError, Role, Ui};
use crate::auth::ApiError;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Json;
use std::net::SocketAddr;
use std::sync::LazyLock;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");
const LOGIN: &str = include_str!("assets/login.html");

/// Where `app.js` takes the display rule's table.
const HIDDEN_SLOT: &str = "/*GSV_HIDDEN*/[]";
/// Where the app's HTML takes the session's CSRF token.
const CSRF_SLOT: &str = "{{CSRF}}";

/// `app.js` with [`gsv_protocol::display::HIDDEN`] in it: one list, in Rust.
static SCRIPT_SERVED: LazyLock<String> = LazyLock::new(|| {
    let ranges: Vec<[u32; 2]> = gsv_protocol::display::HIDDEN
        .iter()
        .map(|&(lo, hi)| [lo, hi])
        .collect();
    let table = serde_json::to_string(&ranges).unwrap_or_else(|_| "[]".into());
    SCRIPT.replacen(HIDDEN_SLOT, &table, 1)
});

/// What an unauthenticated visitor of `/ui/` sees.
const SIGNED_OUT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gsv console</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/ui/app.css\"></head><body><main class=\"signed-out\"><h1>gsv console</h1><p>You are not signed in. On the gateway's machine, run</p><pre>gsv ui --open</pre><p>for a one-time login link (valid 5 minutes, usable once).</p></main></body></html>";

/// `GET /ui`: to `/ui/`.
pub async fn to_index() -> Redirect {
    Redirect::permanent("/ui/")
}

/// `GET /ui/`: the app with the session's CSRF token, or how to sign in.
pub async fn index(State(Ui { fleet, console }): State<Ui>, headers: HeaderMap) -> Response {
    match guard::session(&fleet, &console, &headers).await {
        // The token is URL-safe base64: nothing in it needs escaping in an attribute.
        Ok(s)
            if s.csrf
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) =>
        {
            Html(INDEX.replacen(CSRF_SLOT, &s.csrf, 1)).into_response()
        }
        Ok(_) => (StatusCode::INTERNAL_SERVER_ERROR, Html(SIGNED_OUT)).into_response(),
        Err(e @ ConsoleError::TwoCookies) => {
            refused(StatusCode::FORBIDDEN, "Refused", &e.to_string())
        }
        Err(_) => (StatusCode::UNAUTHORIZED, Html(SIGNED_OUT)).into_response(),
    }
}

pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT_SERVED.as_str(),
    )
        .into_response()
}

pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// Text for an HTML page: escaped for HTML, hidden characters shown (the display
/// rule), at most `max` characters.
fn html_text(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in gsv_protocol::display::shown(text, max).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A plain page for a refused request (`why` is the gateway's own text).
fn refused(status: StatusCode, title: &str, why: &str) -> Response {
    let (title, why) = (html_text(title, 100), html_text(why, 500));
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gsv console</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/ui/app.css\"></head><body><main class=\"signed-out\"><h1>{title}</h1><p>{why}</p><p>Run <code>gsv ui --open</code> for a new login link.</p></main></body></html>"
    );
    (status, Html(page)).into_response()
}

/// A refused login link.
fn refused_link(status: StatusCode, why: &str) -> Response {
    refused(status, "Login link refused", why)
}

/// The page for a code that cannot be used.
fn refused_code(why: Refused) -> Response {
    match why {
        Refused::Expired => refused_link(StatusCode::GONE, "This login link has expired."),
        Refused::Unknown => refused_link(
            StatusCode::UNAUTHORIZED,
            "This login link is unknown or was already used (each works once).",
        ),
    }
}

/// A login code as it may appear in a page: the URL-safe base64 that
/// [`super::codes`] mints, at most 64 characters; anything else is unknown.
fn plain_code(code: &str) -> Option<&str> {
    let code = code.trim();
    (!code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)))
    .then_some(code)
}

#[derive(serde::Deserialize)]
pub struct LoginQuery {
    #[serde(default)]
    code: String,
}

/// `GET /ui/login?code=...`: a page naming the session the code would open, with a
/// "Sign in" button that posts it. Uses nothing, counts nothing, sets no cookie.
pub async fn login_page(
    State(Ui { console, .. }): State<Ui>,
    query: Result<Query<LoginQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let code = query.map(|Query(q)| q.code).unwrap_or_default();
    let Some(code) = plain_code(&code) else {
        return refused_code(Refused::Unknown);
    };
    match console.codes.peek(code) {
        Ok(grant) => {
            let who = html_text(&format!("{} {}", role_name(grant.role), grant.name), 100);
            // Its form's POST must carry the page's own Origin (see guard's headers).
            (
                [(header::REFERRER_POLICY, "same-origin")],
                // The code first: it is plain, so it cannot hold the other slot.
                Html(
                    LOGIN
                        .replacen("{{CODE}}", code, 1)
                        .replacen("{{WHO}}", &who, 1),
                ),
            )
                .into_response()
        }
        Err(why) => refused_code(why),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Admin => "admin",
        Role::Approver => "approver",
        Role::Viewer => "viewer",
    }
}

#[derive(serde::Deserialize)]
struct LoginForm {
    #[serde(default)]
    code: String,
}

/// `POST /ui/login` (form `code=...`, from the login page's button): from the gateway's
/// own origin only, a valid code becomes a session cookie, once.
pub async fn login(
    State(Ui { fleet, console }): State<Ui>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    bytes: axum::body::Bytes,
) -> Response {
    if let Err(e) = guard::proof_of_origin(&headers, console.secure) {
        tracing::warn!(%peer, "console login from another site or port refused");
        return refused(
            StatusCode::FORBIDDEN,
            "Sign-in refused",
            &format!("{e}: only the console's own login page may sign in."),
        );
    }
    let code = serde_urlencoded::from_bytes::<LoginForm>(&bytes)
        .map(|f| f.code)
        .unwrap_or_default();
    let grant = match console.codes.redeem(code.trim()) {
        Ok(g) => g,
        Err(why) => {
            // Counted like a bad token (a valid code always passes, as tokens do).
            let limited = fleet.count_refused_login(peer.ip());
            tracing::warn!(%peer, ?why, limited, "console login code refused");
            if limited {
                return refused_link(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too many refused logins from this address; wait a minute.",
                );
            }
            return refused_code(why);
        }
    };
    match guard::token_live(&fleet, &grant.token_id).await {
        Ok(true) => {}
        _ => {
            return refused_link(
                StatusCode::UNAUTHORIZED,
                "The token that made this link was revoked.",
            )
        }
    }
    tracing::info!(%peer, role = ?grant.role, token_id = %grant.token_id, "console session opened");
    let cookie = console.sessions.open(grant);
    let set = session_cookie(console.cookie_name(), &cookie, console.secure);
    let mut res = Redirect::to("/ui/").into_response();
    if let Ok(v) = HeaderValue::from_str(&set) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

/// The `Set-Cookie` value of a new session: not readable by scripts, sent only with
/// the gateway's own requests under `/ui`, and only over TLS when the gateway has it.
fn session_cookie(name: &str, value: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/ui{secure}")
}

/// `POST /ui/logout`: ends the session (with its CSRF token, like any change).
pub async fn logout(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    guard::writer(&fleet, &console, &headers, |_| true, "signing out").await?;
    let name = console.cookie_name();
    if let Ok(Some(c)) = guard::cookie(&headers, name) {
        console.sessions.close(c);
    }
    let mut res = StatusCode::NO_CONTENT.into_response();
    let clear = format!("{name}=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&clear) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(res)
}

/// `POST /v1/ui/login-codes` (Bearer): `{url, expiresAt}`, a login link on the
/// address the caller reached the gateway at.
pub async fn login_codes(
    State(Ui { fleet, console }): State<Ui>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = fleet.authorize(&headers, peer).await?;
    let role = Role::from_principal(&principal)?;
    let (token_id, name) = (principal.token_id(), principal.name());
    let base = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| plain_host(h))
        .map(|h| {
            let scheme = if console.secure { "https" } else { "http" };
            format!("{scheme}://{h}")
        })
        .unwrap_or_else(|| console.base().to_owned());
    let link = console.mint_at(&base, role, token_id, name)?;
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
            super::session_cookie("gsv_console_k", "v", false),
            "gsv_console_k=v; HttpOnly; SameSite=Strict; Path=/ui"
        );
        assert_eq!(
            super::session_cookie("gsv_console_k", "v", true),
            "gsv_console_k=v; HttpOnly; SameSite=Strict; Path=/ui; Secure"
        );
    }

    #[test]
    fn the_login_page_takes_only_plain_codes_and_escapes_names() {
        assert_eq!(super::plain_code(" Ab-_9 "), Some("Ab-_9"));
        let long = "a".repeat(65);
        for bad in ["", "a\"b", "<script>", "a b", long.as_str()] {
            assert_eq!(super::plain_code(bad), None, "{bad}");
        }
        assert_eq!(
            super::html_text("<b>\u{202e}&'\"", 100),
            "&lt;b&gt;\\u{202e}&amp;&#39;&quot;"
        );
    }

    #[test]
    fn the_script_carries_the_display_rules_table() {
        assert!(super::SCRIPT.contains(super::HIDDEN_SLOT));
        assert!(!super::SCRIPT_SERVED.contains(super::HIDDEN_SLOT));
        assert!(super::SCRIPT_SERVED.contains("[[0,31],[127,159],"));
        assert!(super::INDEX.contains(super::CSRF_SLOT));
    }

    #[test]
    fn only_plain_hosts_go_into_links() {
        assert!(super::plain_host("127.0.0.1:8787"));
        assert!(super::plain_host("[::1]:8787"));
        assert!(!super::plain_host("evil.example/x?"));
        assert!(!super::plain_host(""));
    }
}
