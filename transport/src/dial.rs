//! Opening a client WebSocket to the gateway: TCP with `TCP_NODELAY`, TLS for
//! `wss://` with the trust [`crate::tls`] built, and the HTTP upgrade, bounded in time.

use crate::connect_error::ConnectError;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// The stream under a client's WebSocket: TCP, with TLS for `wss://`.
pub type MaybeTls = MaybeTlsStream<TcpStream>;
/// A client's WebSocket to the gateway.
pub type ClientWs = WebSocketStream<MaybeTls>;

/// Opens the WebSocket at `url` (`ws://` or `wss://`). `tls` is the trust for a
/// `wss://` URL (see [`crate::tls::client_config`]); `None` with `wss://` uses
/// tungstenite's default. HTTP 401/403 on the upgrade are refusals; a rejected
/// certificate is [`ConnectError::Certificate`].
pub async fn dial(
    url: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    timeout: Duration,
) -> Result<ClientWs, ConnectError> {
    let request = url.into_client_request()?;
    let connect = tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(crate::config::client()),
        true, // disable Nagle: frames are small and latency-bound
        tls.map(Connector::Rustls),
    );
    match tokio::time::timeout(timeout, connect).await {
        Err(_) => Err(ConnectError::DialTimeout(timeout)),
        Ok(Ok((ws, _response))) => Ok(ws),
        Ok(Err(tungstenite::Error::Http(response))) => {
            let status = response.status();
            let body = response
                .body()
                .as_deref()
                .map(|b| String::from_utf8_lossy(&b[..b.len().min(512)]).into_owned())
                .unwrap_or_default();
            let message = format!("HTTP {status} on upgrade {}", body.trim());
            match status.as_u16() {
                401 => Err(ConnectError::Refused(ErrorShape::new(
                    ErrorCode::Unauthorized,
                    message,
                ))),
                403 => Err(ConnectError::Refused(ErrorShape::new(
                    ErrorCode::Forbidden,
                    message,
                ))),
                _ => Err(ConnectError::Handshake(message)),
            }
        }
        Ok(Err(e)) => match crate::tls::certificate_failure(&e) {
            Some(reason) => Err(ConnectError::Certificate(reason)),
            None => Err(e.into()),
        },
    }
}
