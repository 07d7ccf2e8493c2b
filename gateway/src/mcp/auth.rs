//! Who may use `/mcp`: the Bearer-token middleware, the `Origin` check, the 401
//! challenge and the OAuth protected-resource metadata document (RFC 9728).
//!
//! Every HTTP request to `/mcp` is authenticated on its own (a session id is not a
//! credential): the middleware checks `Authorization: Bearer <agent token>` against
//! the store, exactly like the HTTP admin API, and puts the [`McpPrincipal`] into the
//! request's extensions, where the MCP handler finds it. A missing or bad token gets
//! `401` with a `WWW-Authenticate` challenge naming the metadata document, so MCP
//! clients that probe for OAuth show a message instead of failing obscurely. gsv has
//! no authorization server: the document says so and tells the user how to get a token.
//! The client's token stops here; nodes never see it.

mod error;

pub use error::McpRefusal;

use super::owners::SessionOwners;
use crate::auth::{AuthError, Principal};
use crate::error::WireError;
use crate::fleet::Fleet;
use crate::policy::Policy;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The path of the metadata document (RFC 9728 §3: the well-known prefix, then the
/// resource's path). The bare prefix is served too, for clients that only try it.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// What a client without a valid token is told.
const TOKEN_HINT: &str = "send Authorization: Bearer <agent token>; create one with \
    `gsv token create agent NAME --allow GLOB` (or use agent.token from `gsv up`)";

/// The authenticated caller of one `/mcp` request.
#[derive(Clone)]
pub struct McpPrincipal {
    /// Agent name (the token's subject), or `admin`.
    pub name: String,
    pub token_id: String,
    pub policy: Arc<Policy>,
    /// The admin token: an operator, who reads every token's jobs (`fleet_jobs`).
    pub admin: bool,
}

impl McpPrincipal {
    fn from_principal(p: &Principal) -> Result<McpPrincipal, AuthError> {
        Ok(match p {
            Principal::Admin { token_id } => McpPrincipal {
                name: "admin".to_owned(),
                token_id: token_id.clone(),
                policy: Arc::new(Policy::full_access()),
                admin: true,
            },
            Principal::Agent {
                policy,
                name,
                token_id,
            } => McpPrincipal {
                name: name.clone(),
                token_id: token_id.clone(),
                policy: Arc::new(policy.clone()),
                admin: false,
            },
            // Operators decide and watch; they do not run tools.
            Principal::Operator { .. } => return Err(AuthError::OperatorToken),
        })
    }
}

/// The scheme and authority clients use to reach this gateway, from the `Host` header
/// (falling back to the listen address) and whether the port speaks TLS.
pub fn public_base(fleet: &Fleet, headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.parse::<axum::http::uri::Authority>().is_ok())
        .map(str::to_owned)
        .unwrap_or_else(|| fleet.config().listen.to_string());
    let forwarded_tls = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let scheme = if fleet.config().tls.is_some() || forwarded_tls {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{host}")
}

/// The RFC 9728 protected-resource metadata document (an OAuth format, not a gsv
/// protocol type), plus gsv's hint on where tokens come from. Fields in name order.
#[derive(serde::Serialize)]
struct ResourceMetadata {
    authorization_servers: [&'static str; 0],
    bearer_methods_supported: [&'static str; 1],
    gsv_token_hint: &'static str,
    resource: String,
    resource_name: &'static str,
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`: RFC 9728 metadata. No
/// authorization server is listed: tokens come from `gsv token create agent NAME`.
pub async fn metadata(State(fleet): State<Fleet>, headers: HeaderMap) -> Response {
    let base = public_base(&fleet, &headers);
    let doc = ResourceMetadata {
        authorization_servers: [],
        bearer_methods_supported: ["header"],
        gsv_token_hint: TOKEN_HINT,
        resource: format!("{base}{}", super::PATH),
        resource_name: "gsv gateway",
    };
    (
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Json(doc),
    )
        .into_response()
}

/// How long a verified token is taken as valid without asking the store again: as
/// long as the revocation watcher takes to close the connections of a revoked token
/// (`crate::revocation`), so `/mcp` and the WebSocket APIs honour a revocation within
/// the same second. MCP clients send one HTTP request per message; verifying each
/// (a SQLite lookup on a blocking thread) would dominate the cost of a call.
const VERIFIED_FOR: Duration = Duration::from_secs(1);
/// Most tokens remembered at once.
const MAX_VERIFIED: usize = 1024;

/// Tokens verified in the last [`VERIFIED_FOR`], by the SHA-256 of the presented
/// token (the token itself is not kept).
#[derive(Default)]
pub struct Verified {
    map: Mutex<HashMap<[u8; 32], (Instant, McpPrincipal)>>,
}

impl Verified {
    fn key(headers: &HeaderMap) -> Option<[u8; 32]> {
        let value = headers.get(header::AUTHORIZATION)?.as_bytes();
        Some(Sha256::digest(value).into())
    }

    fn get(&self, key: &[u8; 32]) -> Option<McpPrincipal> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key)
            .filter(|(at, _)| at.elapsed() < VERIFIED_FOR)
            .map(|(_, p)| p.clone())
    }

    fn put(&self, key: [u8; 32], principal: McpPrincipal) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_VERIFIED {
            map.retain(|_, (at, _)| at.elapsed() < VERIFIED_FOR);
            if map.len() >= MAX_VERIFIED {
                map.clear();
            }
        }
        map.insert(key, (Instant::now(), principal));
    }
}

/// What the `/mcp` middleware needs.
#[derive(Clone)]
pub struct Gate {
    pub fleet: Fleet,
    pub verified: Arc<Verified>,
    /// Which token opened each session.
    pub owners: Arc<SessionOwners>,
    /// How long rmcp keeps an idle session.
    pub session_idle: Duration,
    /// rmcp's sessions, to close one opened past a limit.
    pub sessions: Arc<LocalSessionManager>,
    /// Sessions one token may hold (`--mcp-sessions-per-token`).
    pub per_token: usize,
    /// Sessions in all (`--mcp-sessions-max`).
    pub max_sessions: usize,
}

/// When a request reached `/mcp` (before rmcp answered anything of it).
#[derive(Debug, Clone, Copy)]
pub struct Arrived(pub Instant);

/// The middleware in front of `/mcp`: `Origin` check, then Bearer authentication.
pub async fn require_bearer(
    State(gate): State<Gate>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    req.extensions_mut().insert(Arrived(Instant::now()));
    let fleet = &gate.fleet;
    if let Err(why) = check_origin(req.headers()) {
        tracing::warn!(%peer, why, "MCP request from a foreign Origin refused");
        return refusal(McpRefusal::Origin(why));
    }
    let key = Verified::key(req.headers());
    let known = key.as_ref().and_then(|k| gate.verified.get(k));
    let cached = known.is_some();
    let checked = match known {
        Some(p) => Ok(p),
        None => fleet
            .authorize(req.headers(), peer)
            .await
            .and_then(|p| McpPrincipal::from_principal(&p)),
    };
    match checked {
        Ok(principal) => {
            fleet.authenticated(peer);
            if let (Some(k), false) = (key, cached) {
                gate.verified.put(k, principal.clone());
            }
            let session = req
                .headers()
                .get(HEADER_SESSION_ID)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let Some(s) = &session {
                if !gate.owners.may_use(s, &principal.token_id) {
                    tracing::warn!(%peer, agent = %principal.name, "MCP request on another token's session refused");
                    return refusal(McpRefusal::ForeignSession);
                }
            }
            let token_id = principal.token_id.clone();
            req.extensions_mut().insert(principal);
            let delete = req.method() == axum::http::Method::DELETE;
            let mut res = next.run(req).await;
            match (&session, res.headers().get(HEADER_SESSION_ID)) {
                (None, Some(new)) => {
                    let new = new.to_str().unwrap_or_default().to_owned();
                    // Recorded first and then counted (itself included), so a burst of
                    // concurrent `initialize`s cannot all pass the check together.
                    gate.owners.opened(&new, &token_id, gate.session_idle);
                    let (mine, all) = gate.owners.counts(&token_id, gate.session_idle);
                    if mine > gate.per_token || all > gate.max_sessions {
                        gate.owners.closed(&new);
                        // Over a share: the session rmcp just opened is closed again
                        // and the client told why, so one token cannot hold them all.
                        let _ = gate.sessions.close_session(&Arc::from(new.as_str())).await;
                        let (limit, max) = if mine > gate.per_token {
                            ("mcp_sessions_per_token", gate.per_token)
                        } else {
                            ("mcp_sessions_max", gate.max_sessions)
                        };
                        tracing::warn!(%peer, limit, max, "MCP session refused: over its limit");
                        return refusal(McpRefusal::TooManySessions { limit, max });
                    }
                }
                (Some(s), _) if delete && res.status().is_success() => gate.owners.closed(s),
                _ => {}
            }
            // A closed session has nothing to say: `204`, which every client takes as
            // success (rmcp answers `202`, which some SDKs log as a failure).
            if delete && res.status() == StatusCode::ACCEPTED {
                *res.status_mut() = StatusCode::NO_CONTENT;
                *res.body_mut() = axum::body::Body::empty();
            }
            res
        }
        Err(e) => match McpRefusal::from(e) {
            McpRefusal::Unauthenticated(e) => challenge(fleet, req.headers(), e),
            other => refusal(other),
        },
    }
}

/// A refused request, with the status its error maps to. Its body was not read, so
/// the connection cannot carry another request: `Connection: close` tells the client
/// not to reuse it.
fn refusal(e: McpRefusal) -> Response {
    (
        e.status(),
        [(header::CONNECTION, HeaderValue::from_static("close"))],
        Json(gsv_protocol::error::ErrorBody {
            error: e.to_shape(),
        }),
    )
        .into_response()
}

/// `401` with `WWW-Authenticate: Bearer realm="gsv", resource_metadata="…"` (RFC 6750,
/// RFC 9728 §5.1), plus `error="invalid_token"` when a token was presented.
fn challenge(fleet: &Fleet, headers: &HeaderMap, e: AuthError) -> Response {
    let metadata = format!(
        "{}{METADATA_PATH}{}",
        public_base(fleet, headers),
        super::PATH
    );
    let presented = headers.contains_key(header::AUTHORIZATION);
    let mut value = format!("Bearer realm=\"gsv\", resource_metadata=\"{metadata}\"");
    if presented {
        value.push_str(", error=\"invalid_token\", error_description=\"invalid or revoked token\"");
    }
    let mut res = refusal(McpRefusal::Unauthenticated(e));
    if let Ok(v) = HeaderValue::from_str(&value) {
        res.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    res
}

/// Browsers send `Origin`; a page on another site must not drive the gateway with a
/// token the browser holds. Allowed: no `Origin` (non-browser clients), an origin on a
/// loopback host, or the gateway's own origin (same host and port as `Host`).
pub fn check_origin(headers: &HeaderMap) -> Result<(), &'static str> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().map_err(|_| "Origin is not valid text")?;
    let uri: axum::http::Uri = origin.parse().map_err(|_| "Origin is malformed")?;
    let authority = uri
        .authority()
        .ok_or("Origin has no host (e.g. Origin: null)")?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return Ok(());
    }
    let same = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| h.eq_ignore_ascii_case(authority.as_str()));
    if same {
        Ok(())
    } else {
        Err("Origin is neither loopback nor this gateway")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn origins() {
        assert!(check_origin(&headers(&[])).is_ok());
        assert!(check_origin(&headers(&[("origin", "http://localhost:3000")])).is_ok());
        assert!(check_origin(&headers(&[("origin", "http://127.0.0.1")])).is_ok());
        assert!(check_origin(&headers(&[("origin", "http://[::1]:9")])).is_ok());
        assert!(check_origin(&headers(&[
            ("origin", "https://gw.example:8787"),
            ("host", "gw.example:8787")
        ]))
        .is_ok());
        assert!(check_origin(&headers(&[
            ("origin", "https://evil.example"),
            ("host", "gw.example:8787")
        ]))
        .is_err());
        assert!(check_origin(&headers(&[("origin", "null")])).is_err());
    }
}
