//! The HTTP → WebSocket upgrade, done by hand on top of axum.
//!
//! axum's own WebSocket wrapper hides the tokio-tungstenite stream, and the gateway
//! needs it: the pre-auth phase runs with a 64 KiB frame cap and the session after
//! `hello-ok` with the negotiated one, which means rebuilding the stream with a new
//! config between the two. So the upgrade answers the handshake itself and hands the
//! raw upgraded connection to tokio-tungstenite.

use crate::conn::Ws;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use gsv_transport::config::server_pre_auth as pre_auth_config;
use hyper_util::rt::TokioIo;
use std::future::Future;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role as WsRole;
use tokio_tungstenite::WebSocketStream;

fn header_has(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case(token))
}

fn bad_request(message: &'static str) -> Response {
    (StatusCode::BAD_REQUEST, message).into_response()
}

/// Answers a WebSocket upgrade request and runs `session` on the stream once the
/// connection has switched protocols.
pub fn upgrade<F, Fut>(mut req: Request, session: F) -> Response
where
    F: FnOnce(Ws) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let headers = req.headers();
    if req.method() != axum::http::Method::GET {
        return bad_request("WebSocket upgrade needs GET");
    }
    if !header_has(headers, header::CONNECTION, "upgrade")
        || !header_has(headers, header::UPGRADE, "websocket")
    {
        return (
            StatusCode::UPGRADE_REQUIRED,
            "this endpoint speaks WebSocket only",
        )
            .into_response();
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .map(|v| v.as_bytes())
        != Some(b"13")
    {
        return bad_request("unsupported Sec-WebSocket-Version (need 13)");
    }
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
        return bad_request("missing Sec-WebSocket-Key");
    };
    let accept = derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let ws = WebSocketStream::from_raw_socket(
                    // No reading ahead before the peer is known (see `into_session`).
                    gsv_transport::ReadAhead::disabled(TokioIo::new(upgraded)),
                    WsRole::Server,
                    Some(pre_auth_config()),
                )
                .await;
                session(ws).await;
            }
            Err(e) => tracing::debug!(error = %e, "WebSocket upgrade failed"),
        }
    });
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = res.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    res
}

/// Rebuilds a stream with the post-handshake config. Only called after the peer's
/// `connect` was read and before `hello-ok` is sent, when the protocol guarantees the
/// peer has nothing else in flight.
///
/// `read_ahead`: read the socket ahead in large reads while the peer streams (nodes:
/// a node's file chunks come in 1 MiB frames). Off for agents: an agent that floods
/// requests would get them parsed and dispatched faster than the gateway sheds them
/// (`e2e_bounds::an_agent_that_never_reads_is_cut_off_as_a_slow_consumer` measured
/// twice the memory with it); an agent's connection reads ahead only while it has an
/// upload open ([`crate::transfer::Uploads`]).
pub async fn into_session(ws: Ws, read_ahead: bool) -> Ws {
    let mut io = ws.into_inner();
    io.set_enabled(read_ahead);
    WebSocketStream::from_raw_socket(
        io,
        WsRole::Server,
        Some(gsv_transport::config::server_session()),
    )
    .await
}
