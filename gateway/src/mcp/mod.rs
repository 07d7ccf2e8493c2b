//! `/mcp`: the whole fleet as one Model Context Protocol server, on the gateway's port.
//!
//! MCP is how Claude Code, Cursor and other agents reach gsv with no glue: every tool
//! of every node appears as one namespaced MCP tool (the flat view), or the fleet is
//! reached through a few gateway tools (the fleet view, [`view`], [`fleet_tools`]),
//! with the same inventory as resources ([`resources`]). Both views also list
//! `fleet_run` ([`fleet_run`]: one tool on many nodes) and `fleet_jobs` / `fleet_job`
//! ([`fleet_jobs`]: the outcomes the gateway keeps). The transport is Streamable HTTP
//! from the official Rust SDK (`rmcp`), mounted in the gateway's axum router behind a
//! Bearer-token middleware ([`auth`]); the handler ([`handler`]) answers `tools/list`
//! and `tools/call` from the live registry through the same router as the WebSocket
//! agent API; [`result`] maps between gsv's shapes and MCP's.
//!
//! Both lifecycles clients use today are served on the one path: the `initialize`
//! handshake with an `Mcp-Session-Id` (protocol 2025-03-26, 2025-06-18, 2025-11-25)
//! and the session-less 2026-07-28 revision (`server/discover`, per-request metadata).

pub mod auth;
pub mod fleet_answer;
pub mod fleet_copy;
pub mod fleet_jobs;
pub mod fleet_run;
pub mod fleet_tools;
pub mod fleet_use;
pub mod gathered;
pub mod handler;
pub mod listed;
pub mod listens;
pub mod nodes;
pub mod owners;
pub mod resources;
pub mod result;
pub mod slow;
pub mod used;
pub mod view;

use crate::fleet::Fleet;
use axum::routing::get;
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

pub use handler::{McpHandler, McpState, SUPPORTED_VERSIONS};

/// Where the MCP endpoint lives.
pub const PATH: &str = "/mcp";

/// SSE comment lines sent this often on open streams, so a long call is not cut by
/// an idle timeout of the client or of a proxy in between.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Which `Host` headers `/mcp` accepts (DNS-rebinding protection). A gateway bound to
/// a loopback address accepts only loopback names; one bound to another address
/// accepts any host (the Bearer token is the guard there, and the names it is reached
/// by are not known), unless `--mcp-allowed-host` lists them.
pub fn allowed_hosts(listen: IpAddr, configured: &[String]) -> Vec<String> {
    if !configured.is_empty() {
        let mut hosts = configured.to_vec();
        hosts.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
        return hosts;
    }
    if listen.is_loopback() {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        hosts.push(listen.to_string());
        hosts
    } else {
        Vec::new()
    }
}

/// The routes of `/mcp` and of its OAuth protected-resource metadata (they hold
/// `fleet` themselves, whatever state the router they join holds).
pub fn router<S: Clone + Send + Sync + 'static>(fleet: Fleet) -> Router<S> {
    let state = McpState::new(fleet.clone());
    let settings = fleet.config();
    let hosts = allowed_hosts(settings.listen.ip(), &settings.mcp_allowed_hosts);
    let mut config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
        .with_legacy_session_mode(true)
        // A session-less (2026-07-28) call whose first message is its result gets
        // it as one `application/json` response instead of a one-event SSE stream
        // (one write, no stream machinery); rmcp falls back to SSE by itself when
        // progress or a question comes first, and `slow` opens the stream itself
        // when the answer takes longer than a second. Sessions (2025) keep SSE.
        .with_json_response(true)
        .with_cancellation_token(fleet.shutdown().child_token())
        .with_max_request_body_bytes(gsv_protocol::limits::MAX_FRAME_BYTES);
    config = if hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(hosts)
    };
    let idle = settings.mcp_session_idle;
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(idle);
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(
        move || Ok(McpHandler::new(state.clone())),
        Arc::clone(&sessions),
        config,
    );
    let gate = auth::Gate {
        fleet: fleet.clone(),
        verified: Arc::default(),
        owners: Arc::default(),
        session_idle: idle,
        sessions,
        per_token: settings.mcp_sessions_per_token,
        max_sessions: settings.mcp_sessions_max,
    };
    let mcp = Router::new()
        .route_service(PATH, service)
        .route_layer(axum::middleware::from_fn(slow::stream_when_slow))
        // After authentication: a bad `?view=` / `?select=` is a 400 with a JSON-RPC
        // error, before rmcp reads the request.
        .route_layer(axum::middleware::from_fn(view::check_query))
        // route_layer: the Bearer check guards /mcp only, not the fallback (an
        // unknown path must stay a 404, not turn into a 401).
        .route_layer(axum::middleware::from_fn_with_state(
            gate,
            auth::require_bearer,
        ));
    Router::new()
        .route(auth::METADATA_PATH, get(auth::metadata))
        .route(
            &format!("{}{PATH}", auth::METADATA_PATH),
            get(auth::metadata),
        )
        .with_state(fleet)
        .merge(mcp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_follow_the_listen_address() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert!(allowed_hosts(lo, &[]).contains(&"localhost".to_owned()));
        assert!(
            allowed_hosts(any, &[]).is_empty(),
            "any host when not on loopback"
        );
        let named = allowed_hosts(any, &["gsv.example.com".to_owned()]);
        assert!(named.contains(&"gsv.example.com".to_owned()));
        assert!(named.contains(&"127.0.0.1".to_owned()));
    }
}
