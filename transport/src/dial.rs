//! Opening a client WebSocket to the gateway: TCP with `TCP_NODELAY` under a
//! [`ReadAhead`], TLS for `wss://` with the trust [`crate::tls`] built, and the HTTP
//! upgrade, bounded in time.

use crate::connect_error::ConnectError;
use crate::read_ahead::ReadAhead;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::UrlError;
use tokio_tungstenite::tungstenite::{self};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// The stream under a client's WebSocket: TCP (read ahead while the gateway
/// streams), with TLS for `wss://`.
pub type MaybeTls = MaybeTlsStream<ReadAhead<TcpStream>>;
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
    let connect = async move {
        let (host, port) = host_port(&request)?;
        let tcp = TcpStream::connect((host.as_str(), port)).await?;
        // Nagle off: frames are small and latency-bound.
        tcp.set_nodelay(true)?;
        tokio_tungstenite::client_async_tls_with_config(
            request,
            ReadAhead::new(tcp),
            Some(crate::config::client()),
            tls.map(Connector::Rustls),
        )
        .await
    };
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

/// The host (IPv6 without brackets) and port (by default 80 for `ws://`, 443 for
/// `wss://`) a request goes to.
fn host_port(
    request: &tungstenite::handshake::client::Request,
) -> Result<(String, u16), tungstenite::Error> {
    let uri = request.uri();
    let host = uri
        .host()
        .ok_or(tungstenite::Error::Url(UrlError::NoHostName))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = uri
        .port_u16()
        .or(match uri.scheme_str() {
            Some("wss") => Some(443),
            Some("ws") => Some(80),
            _ => None,
        })
        .ok_or(tungstenite::Error::Url(UrlError::UnsupportedUrlScheme))?;
    Ok((host.to_owned(), port))
}
