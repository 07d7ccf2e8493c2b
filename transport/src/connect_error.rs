//! Why opening a connection to the gateway failed, for nodes and agent clients alike.

use gsv_protocol::ErrorShape;
use std::time::Duration;
use thiserror::Error;
use tokio_tungstenite::tungstenite;

/// Why one attempt to dial and authenticate failed. A node retries all of these,
/// except a refusal or a rejected certificate before its first successful session.
#[derive(Debug, Error)]
pub enum ConnectError {
    #[error("no connection within {0:?}")]
    DialTimeout(Duration),
    #[error("{0}")]
    WebSocket(#[from] tungstenite::Error),
    /// The gateway answered with an error (HTTP 401/403 on the upgrade, or an error
    /// in place of `hello-ok`).
    #[error("the gateway refused the connection: {0}")]
    Refused(ErrorShape),
    #[error("handshake: {0}")]
    Handshake(String),
    #[error("handshake did not finish within {0:?}")]
    HandshakeTimeout(Duration),
    /// The gateway's TLS certificate was rejected (pin mismatch, untrusted issuer...).
    #[error("{0}")]
    Certificate(String),
}
