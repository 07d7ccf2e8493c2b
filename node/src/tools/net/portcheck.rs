//! `net_diagnose`'s port check, done natively: a TCP connect with a timeout, and for
//! ports 80 and 443 the HTTP status of `GET /` (over TLS for 443).
//!
//! No `curl` or `nc` is needed: tokio connects, a minimal HTTP/1.1 request is written
//! on the connected stream and only the status line is read back (at most
//! [`MAX_STATUS_LINE`] bytes). TLS uses rustls with the system's root certificates
//! (the same configuration the node trusts a gateway with, [`gsv_transport::tls`]), the target
//! name as SNI when the target was a name; a certificate problem is reported as the
//! TLS result rather than hidden.
//!
//! Connections go through a [`Connector`], so tests can count them (a refused call
//! must make none) or point port 80 at a loopback listener.

use async_trait::async_trait;
use serde::Serialize;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;

/// Most bytes read while looking for the HTTP status line.
pub const MAX_STATUS_LINE: usize = 4096;
/// How long the TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the TLS handshake and the HTTP exchange may take, each.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens TCP connections. The system one is tokio's; tests substitute their own.
#[async_trait]
pub trait Connector: Send + Sync {
    async fn connect(&self, addr: SocketAddr) -> io::Result<TcpStream>;
}

/// [`Connector`] through tokio.
pub struct SystemConnector;

#[async_trait]
impl Connector for SystemConnector {
    async fn connect(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        TcpStream::connect(addr).await
    }
}

/// What the port check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PortCheck {
    pub port: u16,
    /// Whether the TCP connection was accepted.
    pub open: bool,
    pub connect_ms: Option<u64>,
    /// `ok`, or the handshake's failure (port 443 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<String>,
    /// The HTTP status code (ports 80 and 443 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// What went wrong, if anything (`connection refused`, `timed out`, …).
    pub failure: Option<String>,
}

/// Checks `port` on `ip`. `server_name` is the name the target was given as (for
/// SNI and the `Host` header), if it was a name.
pub async fn check_port(
    connector: &dyn Connector,
    ip: IpAddr,
    port: u16,
    server_name: Option<&str>,
    timeout: Duration,
) -> PortCheck {
    let mut result = PortCheck {
        port,
        open: false,
        connect_ms: None,
        tls: None,
        http_status: None,
        failure: None,
    };
    let start = Instant::now();
    let addr = SocketAddr::new(ip, port);
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT.min(timeout), connector.connect(addr))
        .await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            result.failure = Some(connect_failure(&e));
            return result;
        }
        Err(_) => {
            result.failure = Some("timed out (no answer: filtered, or the host is down)".into());
            return result;
        }
    };
    result.open = true;
    result.connect_ms = Some(super::millis(start.elapsed()));
    let host = match server_name {
        Some(name) => name.to_owned(),
        None => match ip {
            IpAddr::V6(v6) => format!("[{v6}]"),
            IpAddr::V4(v4) => v4.to_string(),
        },
    };
    let left = || {
        timeout
            .saturating_sub(start.elapsed())
            .min(EXCHANGE_TIMEOUT)
    };
    match port {
        80 => match http_status(stream, &host, left()).await {
            Ok(code) => result.http_status = Some(code),
            Err(e) => result.failure = Some(format!("HTTP: {e}")),
        },
        443 => {
            let tls = match tls_connect(stream, ip, server_name, left()).await {
                Ok(tls) => tls,
                Err(e) => {
                    result.tls = Some(format!("failed: {e}"));
                    result.failure = Some(format!("TLS handshake failed: {e}"));
                    return result;
                }
            };
            result.tls = Some("ok".to_owned());
            match http_status(tls, &host, left()).await {
                Ok(code) => result.http_status = Some(code),
                Err(e) => result.failure = Some(format!("HTTP: {e}")),
            }
        }
        _ => {}
    }
    result
}

fn connect_failure(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            "connection refused (nothing listens on the port)".into()
        }
        io::ErrorKind::TimedOut => "timed out (no answer: filtered, or the host is down)".into(),
        _ => e.to_string(),
    }
}

async fn tls_connect(
    stream: TcpStream,
    ip: IpAddr,
    server_name: Option<&str>,
    timeout: Duration,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let config = gsv_transport::tls::system_roots().map_err(|e| e.to_string())?;
    let name = match server_name {
        Some(n) => ServerName::try_from(n.to_owned()).map_err(|e| e.to_string())?,
        None => ServerName::IpAddress(ip.into()),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(&config));
    match tokio::time::timeout(timeout, connector.connect(name, stream)).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".to_owned()),
    }
}

/// Sends `GET /` and reads the status code of the answer.
pub async fn http_status<S>(mut stream: S, host: &str, timeout: Duration) -> Result<u16, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let exchange = async {
        let request = format!(
            "GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: gsv-net-diagnose\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::with_capacity(256);
        let mut chunk = [0u8; 512];
        while !buf.windows(2).any(|w| w == b"\r\n") && buf.len() < MAX_STATUS_LINE {
            let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        parse_status_line(&buf)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| "timed out waiting for a response".to_owned())?
}

/// The status code of an `HTTP/1.x NNN …` line.
pub fn parse_status_line(buf: &[u8]) -> Result<u16, String> {
    if buf.is_empty() {
        return Err("the server closed the connection without answering".to_owned());
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or(buf);
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some(version), Some(code)) if version.starts_with("HTTP/") => code
            .parse::<u16>()
            .ok()
            .filter(|c| (100..1000).contains(c))
            .ok_or_else(|| format!("bad status line {:?}", line.trim())),
        _ => Err("the answer is not HTTP".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status_line(b"HTTP/1.1 200 OK\r\nx"), Ok(200));
        assert_eq!(parse_status_line(b"HTTP/1.0 404 Not Found\r\n"), Ok(404));
        assert!(parse_status_line(b"SSH-2.0-OpenSSH_9.2\r\n").is_err());
        assert!(parse_status_line(b"HTTP/1.1 abc\r\n").is_err());
        assert!(parse_status_line(b"").is_err());
    }
}
