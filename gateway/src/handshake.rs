//! The server side of `challenge` → `connect` → `hello-ok`.
//!
//! Until it completes a connection may send one frame of at most 64 KiB, and has 10 s
//! to do so and be authenticated. The credential is checked against the store on every
//! connect (so tokens created or revoked by another process count at once).

mod error;

pub use error::HandshakeError;

use crate::conn::Ws;
use crate::error::WireError;
use crate::state::Shared;
use crate::store::TokenRecord;
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::{encode_err, encode_event, encode_ok};
use gsv_protocol::handshake::{negotiate, Challenge};
use gsv_protocol::{ConnectParams, ErrorCode, EventName, Frame, HelloOk, Limits, Method, Role};
use gsv_transport::driver::close_stream;
use std::net::SocketAddr;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// A connection whose `connect` was read and whose credential is valid.
pub struct Handshake {
    pub ws: Ws,
    pub req_id: String,
    pub params: ConnectParams,
    pub token: TokenRecord,
    pub peer: SocketAddr,
    pub role: Role,
    pub protocol: u32,
}

fn role_str(role: Role) -> &'static str {
    match role {
        Role::Node => "node",
        Role::Agent => "agent",
    }
}

fn close_code(code: ErrorCode) -> CloseCode {
    match code {
        ErrorCode::Unauthorized | ErrorCode::Forbidden | ErrorCode::Timeout => CloseCode::Policy,
        ErrorCode::TooLarge => CloseCode::Size,
        ErrorCode::Internal => CloseCode::Error,
        _ => CloseCode::Protocol,
    }
}

/// Sends the error, closes the connection and counts the refusal.
pub async fn refuse(
    ws: &mut Ws,
    shared: &Shared,
    role: Role,
    peer: SocketAddr,
    req_id: &str,
    err: HandshakeError,
) {
    let err = err.to_shape();
    shared.metrics.refused(role_str(role), err.code.as_str());
    // Audited and logged at `warn` once per source and reason per window; the rest
    // are counted (crate::refusals).
    if shared
        .refusals
        .record(peer, role_str(role), err.code.as_str(), &err.message)
    {
        tracing::warn!(%peer, role = role_str(role), code = %err.code, message = %err.message, "connect refused");
    } else {
        tracing::debug!(%peer, role = role_str(role), code = %err.code, message = %err.message, "connect refused");
    }
    let _ = ws
        .send(Message::Text(encode_err(req_id, &err).into()))
        .await;
    close_stream(ws, close_code(err.code), &err.to_string()).await;
}

/// Runs the handshake up to authentication. On any failure the peer has been told
/// why and the connection is closed; `None` is returned.
pub async fn accept(
    mut ws: Ws,
    shared: &Shared,
    role: Role,
    peer: SocketAddr,
) -> Option<Handshake> {
    let deadline = shared.config.handshake_timeout;
    match tokio::time::timeout(deadline, read_connect(&mut ws, shared, role, peer)).await {
        Ok(Ok((req_id, params, token, protocol))) => {
            // A valid token: the connection no longer counts against the caps on
            // unauthenticated ones (crate::admission).
            shared.admission.authenticated(peer);
            Some(Handshake {
                ws,
                req_id,
                params,
                token,
                peer,
                role,
                protocol,
            })
        }
        Ok(Err((req_id, err))) => {
            refuse(&mut ws, shared, role, peer, &req_id, err).await;
            None
        }
        Err(_) => {
            let err = HandshakeError::Timeout {
                ms: deadline.as_millis(),
            };
            refuse(&mut ws, shared, role, peer, "", err).await;
            None
        }
    }
}

/// Why a handshake failed: the id of the request to answer (empty when there is none)
/// and the error.
pub type Refusal = (String, HandshakeError);

async fn read_connect(
    ws: &mut Ws,
    shared: &Shared,
    role: Role,
    peer: SocketAddr,
) -> Result<(String, ConnectParams, TokenRecord, u32), Refusal> {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let challenge = encode_event(
        EventName::Challenge,
        &Challenge {
            nonce: nonce.clone(),
        },
        0,
    );
    ws.send(Message::Text(challenge.into()))
        .await
        .map_err(|e| (String::new(), HandshakeError::ChallengeNotSent(e)))?;
    let text = loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => break t,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Binary(_))) => return Err(unanswerable(HandshakeError::BinaryFrame)),
            Some(Ok(Message::Close(_) | Message::Frame(_))) | None => {
                return Err(unanswerable(HandshakeError::Closed))
            }
            Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                return Err(unanswerable(HandshakeError::FrameTooLarge {
                    size,
                    max_size,
                }))
            }
            Some(Err(e)) => return Err(unanswerable(HandshakeError::WebSocket(e))),
        }
    };
    let (id, params, protocol) = parse_connect(text.as_str(), role, &nonce)?;
    let presented = params.auth.token.clone();
    let verified = shared
        .store
        .blocking(move |store| store.verify(&presented))
        .await
        .map_err(|e| (id.clone(), HandshakeError::Task(e)))?;
    let token = match verified {
        Ok(Some(t)) => t,
        Ok(None) => {
            // A limited address still gets in with a valid token (so clients behind one
            // NAT cannot lock each other out); its wrong guesses are answered with
            // `rate_limited` until the window ends.
            let limited = shared.auth_limiter.is_limited(peer.ip());
            shared.auth_limiter.failed(peer.ip());
            let err = if limited {
                HandshakeError::RateLimited
            } else {
                HandshakeError::InvalidToken
            };
            return Err((id, err));
        }
        Err(e) => {
            tracing::error!(error = %e, "token store failed");
            return Err((id, HandshakeError::TokenStore(e)));
        }
    };
    Ok((id, params, token, protocol))
}

/// Decodes a connection's first text frame and checks everything about it that needs
/// no store: a `connect` request with params, a protocol version in common, the role of
/// the endpoint dialled (`role`) and the echo of this connection's challenge (`nonce`).
/// Pure (no I/O), so it can be fuzzed; the credential is checked by the caller.
pub fn parse_connect(
    text: &str,
    role: Role,
    nonce: &str,
) -> Result<(String, ConnectParams, u32), Refusal> {
    let frame = Frame::decode(text).map_err(|e| unanswerable(e.into()))?;
    let Frame::Req {
        id,
        method,
        method_name,
        params,
    } = frame
    else {
        return Err(unanswerable(HandshakeError::NotARequest));
    };
    if method != Method::Connect {
        return Err((
            id,
            HandshakeError::NotConnect {
                method: method_name,
            },
        ));
    }
    let params: ConnectParams = match params {
        Some(p) => {
            serde_json::from_str(p.get()).map_err(|e| (id.clone(), HandshakeError::BadParams(e)))?
        }
        None => return Err((id, HandshakeError::NoParams)),
    };
    let Some(protocol) = negotiate(params.min_protocol, params.max_protocol) else {
        return Err((
            id,
            HandshakeError::NoCommonProtocol {
                min: params.min_protocol,
                max: params.max_protocol,
            },
        ));
    };
    if params.role != role {
        return Err((
            id,
            HandshakeError::WrongRole {
                offered: params.role,
                endpoint: role,
            },
        ));
    }
    if params.auth.nonce != nonce {
        return Err((id, HandshakeError::NonceMismatch));
    }
    Ok((id, params, protocol))
}

/// A refusal before any request id is known: answered with id `""`.
fn unanswerable(err: HandshakeError) -> Refusal {
    (String::new(), err)
}

impl Handshake {
    /// Refuses after authentication (bad node declaration, wrong token kind...).
    pub async fn refuse(mut self, shared: &Shared, err: HandshakeError) {
        refuse(
            &mut self.ws,
            shared,
            self.role,
            self.peer,
            &self.req_id,
            err,
        )
        .await;
    }

    /// Switches to the session limits and sends `hello-ok`.
    pub async fn hello(
        self,
        conn_id: &str,
        limits: Limits,
        credential: Option<String>,
    ) -> Option<Ws> {
        let read_ahead = self.role == Role::Node;
        let mut ws = crate::upgrade::into_session(self.ws, read_ahead).await;
        let mut hello = HelloOk::new(self.protocol, conn_id.to_owned(), limits);
        hello.credential = credential;
        hello.gateway_version = crate::VERSION.to_owned();
        ws.send(Message::Text(encode_ok(&self.req_id, &hello).into()))
            .await
            .ok()?;
        Some(ws)
    }
}
