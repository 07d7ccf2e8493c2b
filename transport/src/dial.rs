//! Opening a client WebSocket to the gateway: TCP with `TCP_NODELAY` under a
//! [`ReadAhead`], TLS for `wss://` with the trust [`crate::tls`] built, and the HTTP
//! upgrade, bounded in time.
//!
//! A gateway name that resolves to several addresses (cluster replicas behind one DNS
//! name) is tried address by address: one that refuses goes on to the next at once,
//! one that does not answer after [`ADDRESS_TIMEOUT`] too, so a replica whose host
//! went silent does not use up the whole dial.

use crate::connect_error::ConnectError;
use crate::read_ahead::ReadAhead;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::UrlError;
use tokio_tungstenite::tungstenite::{self};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// How long one address of several may take to accept the TCP connection before the
/// next is tried (the last one has what is left of the dial's time).
pub const ADDRESS_TIMEOUT: Duration = Duration::from_secs(3);

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
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await?
            .collect();
        let tcp = connect_any(&addrs, ADDRESS_TIMEOUT).await?;
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

/// Connects to the first of `addrs` that accepts, in order; each but the last gets at
/// most `per_address`. The last failure when none does.
async fn connect_any(addrs: &[SocketAddr], per_address: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
    for (i, addr) in addrs.iter().enumerate() {
        let attempt = TcpStream::connect(addr);
        let result = if i + 1 < addrs.len() {
            tokio::time::timeout(per_address, attempt)
                .await
                .unwrap_or_else(|_| {
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{addr} did not answer within {per_address:?}"),
                    ))
                })
        } else {
            attempt.await
        };
        match result {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = e,
        }
    }
    Err(last)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback port that takes no connection: its listener is gone.
    async fn closed_port() -> SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        l.local_addr().expect("addr")
    }

    #[tokio::test]
    async fn an_address_that_refuses_or_stays_silent_gives_way_to_the_next() {
        let good = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let good_addr = good.local_addr().expect("addr");
        // Refused: the next address at once.
        let refused = closed_port().await;
        let tcp = connect_any(&[refused, good_addr], Duration::from_secs(30))
            .await
            .expect("the second address");
        assert_eq!(tcp.peer_addr().expect("peer"), good_addr);

        // Silent: a listener whose queue is full drops new handshakes, so a connect
        // to it hangs; the next address is tried once `per_address` has passed.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind");
        let silent = socket.listen(0).expect("listen");
        let silent_addr = silent.local_addr().expect("addr");
        let mut held = Vec::new();
        let hangs = loop {
            match tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(silent_addr))
                .await
            {
                Ok(Ok(c)) => held.push(c),
                Ok(Err(e)) => panic!("the full listener refused instead of dropping: {e}"),
                Err(_) => break true,
            }
            if held.len() > 64 {
                break false;
            }
        };
        assert!(hangs, "the listener's queue never filled");
        let started = std::time::Instant::now();
        let tcp = connect_any(&[silent_addr, good_addr], Duration::from_millis(300))
            .await
            .expect("the second address");
        assert_eq!(tcp.peer_addr().expect("peer"), good_addr);
        assert!(started.elapsed() < Duration::from_secs(10));
        // None answers: the last failure.
        let err = connect_any(&[refused], Duration::from_secs(1))
            .await
            .expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        drop(held);
    }
}
