//! The bridge's HTTP/1.1 client for the gateway's `/mcp`: hyper's connection API, over
//! TCP or TLS, with a few idle connections kept for reuse.
//!
//! TLS uses the same rustls configuration as every other gsv client
//! ([`gsv_transport::tls::client_config`]: system roots, `--ca` or `--pin`). A connection
//! serves one request at a time: a request whose answer is a long SSE stream holds its
//! own connection, so it never delays another. A connection goes back to the pool only
//! once its response body has been read to the end; dropping a [`Conn`] closes it
//! (that is how a request is abandoned: the gateway sees the stream closed).

use gsv_client::TlsOptions;
use gsv_protocol::endpoint::Gateway;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use std::sync::Mutex;
use std::time::Duration;
use thiserror::Error;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// How long dialling (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept for reuse.
const MAX_IDLE: usize = 4;

/// Why a request did not get a response.
#[derive(Debug, Error)]
pub enum HttpError {
    #[error("cannot reach the gateway at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The gateway's certificate was refused (pin mismatch, untrusted issuer...).
    #[error("{url}: {reason}")]
    Certificate { url: String, reason: String },
}

/// Why the client could not be set up (bad `--gateway`, `--ca`, `--pin`).
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("{0}")]
    Url(#[from] gsv_protocol::endpoint::EndpointError),
    #[error("gateway address {0:?} has a bad port")]
    Port(String),
    #[error("{0}")]
    Tls(#[from] gsv_transport::tls::TlsError),
    #[error("gateway host {0:?} is not a valid TLS server name")]
    ServerName(String),
    #[error("the token holds characters an HTTP header cannot carry")]
    Token,
    #[error("--view / --select cannot be put into a URL")]
    Query,
}

/// One connection to the gateway. Dropping it closes the connection.
pub struct Conn {
    send: SendRequest<Full<Bytes>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The client: where the gateway is and how to dial it.
pub struct Http {
    /// `Host` header value: the gateway's `host[:port]`.
    authority: String,
    host: String,
    port: u16,
    /// `http(s)://authority/mcp`, for messages.
    url: String,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    idle: Mutex<Vec<Conn>>,
}

/// `host` and port of an authority (`host`, `host:port`, `[v6]:port`, `user@host`).
fn host_port(g: &Gateway) -> Result<(String, String, u16), SetupError> {
    let authority = g
        .authority
        .rsplit_once('@')
        .map_or(&*g.authority, |(_, h)| h);
    let default = if g.tls { 443 } else { 80 };
    let bad = || SetupError::Port(g.authority.clone());
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(bad)?;
        match tail.strip_prefix(':') {
            Some(p) => (host, p.parse().map_err(|_| bad())?),
            None if tail.is_empty() => (host, default),
            None => return Err(bad()),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, p)) => (host, p.parse().map_err(|_| bad())?),
            None => (authority, default),
        }
    };
    Ok((authority.to_owned(), host.to_owned(), port))
}

impl Http {
    /// A client for `gateway` (any accepted spelling), trusting an `https://` /
    /// `wss://` gateway as `tls` says. Reads the `--ca` file, if any.
    pub fn new(gateway: &str, tls: &TlsOptions) -> Result<Http, SetupError> {
        let g = Gateway::parse(gateway)?;
        let (authority, host, port) = host_port(&g)?;
        let tls = match g.tls {
            false => None,
            true => {
                let config =
                    gsv_transport::tls::client_config(tls.ca.as_deref(), tls.pin.as_deref())?;
                let name = ServerName::try_from(host.clone())
                    .map_err(|_| SetupError::ServerName(host.clone()))?;
                Some((TlsConnector::from(config), name))
            }
        };
        Ok(Http {
            url: g.http_url(gsv_gateway::mcp::PATH),
            authority,
            host,
            port,
            tls,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// The `/mcp` URL, for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn unreachable(&self, reason: impl std::fmt::Display) -> HttpError {
        HttpError::Unreachable {
            url: self.url.clone(),
            reason: reason.to_string(),
        }
    }

    async fn connect(&self) -> Result<Conn, HttpError> {
        tokio::time::timeout(CONNECT_TIMEOUT, self.dial())
            .await
            .map_err(|_| self.unreachable("timed out"))?
    }

    async fn dial(&self) -> Result<Conn, HttpError> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| self.unreachable(e))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => self.handshake(tcp).await,
            Some((connector, name)) => {
                let stream = connector.connect(name.clone(), tcp).await.map_err(|e| {
                    let error = tokio_tungstenite::tungstenite::Error::Io(e);
                    match gsv_transport::tls::certificate_failure(&error) {
                        Some(reason) => HttpError::Certificate {
                            url: self.url.clone(),
                            reason,
                        },
                        None => self.unreachable(error),
                    }
                })?;
                self.handshake(stream).await
            }
        }
    }

    async fn handshake<T>(&self, io: T) -> Result<Conn, HttpError>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| self.unreachable(e))?;
        let task = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection to the gateway ended");
            }
        });
        Ok(Conn { send, task })
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(c) = idle.pop() {
            if c.send.is_ready() {
                return Some(c);
            }
        }
        None
    }

    /// Sends `req` on an idle connection, or a new one; returns the response head
    /// with the connection it came on (give it back with [`Http::release`] once the
    /// body is read). A pooled connection the gateway closed meanwhile is replaced
    /// when the request was not sent on it.
    pub async fn send(
        &self,
        mut req: Request<Full<Bytes>>,
    ) -> Result<(Response<hyper::body::Incoming>, Conn), HttpError> {
        if !req.headers().contains_key(hyper::header::HOST) {
            if let Ok(v) = hyper::header::HeaderValue::from_str(&self.authority) {
                req.headers_mut().insert(hyper::header::HOST, v);
            }
        }
        loop {
            let (mut conn, pooled) = match self.take_idle() {
                Some(c) => (c, true),
                None => (self.connect().await?, false),
            };
            if !pooled {
                conn.send.ready().await.map_err(|e| self.unreachable(e))?;
            }
            match conn.send.try_send_request(req).await {
                Ok(res) => return Ok((res, conn)),
                Err(mut e) => match e.take_message() {
                    Some(unsent) if pooled => req = unsent,
                    _ => return Err(self.unreachable(e.into_error())),
                },
            }
        }
    }

    /// Keeps `conn` for another request (its last response was read to the end).
    pub fn release(&self, conn: Conn) {
        if conn.send.is_closed() || !conn.send.is_ready() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(s: &str) -> (String, String, u16) {
        host_port(&Gateway::parse(s).unwrap()).unwrap()
    }

    #[test]
    fn hosts_and_ports_of_every_spelling() {
        assert_eq!(
            hp("http://127.0.0.1:8787"),
            ("127.0.0.1:8787".into(), "127.0.0.1".into(), 8787)
        );
        assert_eq!(
            hp("wss://gw.example"),
            ("gw.example".into(), "gw.example".into(), 443)
        );
        assert_eq!(
            hp("ws://[::1]:9000"),
            ("[::1]:9000".into(), "::1".into(), 9000)
        );
        assert_eq!(hp("http://[::1]"), ("[::1]".into(), "::1".into(), 80));
        assert!(host_port(&Gateway::parse("http://h:port").unwrap()).is_err());
        let http = Http::new("https://127.0.0.1:1/x", &TlsOptions::default()).unwrap();
        assert_eq!(http.url(), "https://127.0.0.1:1/mcp");
        assert_eq!(http.authority, "127.0.0.1:1");
    }
}
