//! One HTTP/1.1 exchange of `fetch_url` with an address its policy already checked.
//!
//! The connection goes to that socket address, never to a new lookup of the URL's
//! name (a name that resolves differently the second time cannot slip past the
//! check). The HTTP is hyper's client connection; TLS is rustls with the system's
//! roots and the URL's host as the name to verify, as the node's own gateway
//! connection does. The body is read up to a byte limit and the connection is then
//! dropped; nothing is decompressed (the request asks for `identity`).

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue, ACCEPT_ENCODING, HOST, USER_AGENT};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use thiserror::Error;
use tokio::net::TcpStream;
use url::Url;

/// How long a TCP connection (and then a TLS handshake) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest header value kept in a result (bytes; longer ones are cut).
pub const MAX_HEADER_VALUE: usize = 8 * 1024;

/// What the server answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub reason: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body went on past the limit (what is kept is its start).
    pub truncated: bool,
}

/// Why an exchange failed.
#[derive(Debug, Error)]
pub enum ExchangeError {
    #[error("could not connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("connecting to {addr} took longer than {} s", CONNECT_TIMEOUT.as_secs())]
    ConnectTimeout { addr: SocketAddr },
    #[error("TLS with {host} failed: {reason}")]
    Tls { host: String, reason: String },
    #[error("the HTTP exchange with {host} failed: {reason}")]
    Http { host: String, reason: String },
}

/// One request: where to, how, and what to send.
pub struct Exchange<'a> {
    pub url: &'a Url,
    /// The checked address to connect to.
    pub addr: SocketAddr,
    pub method: &'a Method,
    /// The caller's headers (already validated).
    pub headers: &'a [(HeaderName, HeaderValue)],
    /// Body bytes kept at most.
    pub max_bytes: usize,
}

/// Aborts the spawned connection driver when the exchange ends or is dropped.
struct Driver(tokio::task::JoinHandle<()>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Exchange<'_> {
    /// Sends the request and reads the answer.
    pub async fn run(&self) -> Result<Answer, ExchangeError> {
        let host = self.url.host_str().unwrap_or_default().to_owned();
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(self.addr))
            .await
            .map_err(|_| ExchangeError::ConnectTimeout { addr: self.addr })?
            .map_err(|source| ExchangeError::Connect {
                addr: self.addr,
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        if self.url.scheme() == "https" {
            let tls = tokio::time::timeout(CONNECT_TIMEOUT, tls(tcp, &host))
                .await
                .map_err(|_| ExchangeError::Tls {
                    host: host.clone(),
                    reason: format!("no handshake within {} s", CONNECT_TIMEOUT.as_secs()),
                })??;
            self.over(tls, &host).await
        } else {
            self.over(tcp, &host).await
        }
    }

    async fn over<S>(&self, stream: S, host: &str) -> Result<Answer, ExchangeError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let http = |reason: String| ExchangeError::Http {
            host: host.to_owned(),
            reason,
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(e.to_string()))?;
        let _driver = Driver(tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "fetch_url connection ended");
            }
        }));
        let request = self.request().map_err(|e| http(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| http(e.to_string()))?;
        let status = response.status();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), header_text(value.as_bytes())))
            .collect();
        let mut body = Vec::new();
        let mut truncated = false;
        let mut incoming = response.into_body();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| http(format!("reading the body: {e}")))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let room = self.max_bytes - body.len();
            if data.len() > room {
                body.extend_from_slice(&data[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&data);
        }
        Ok(Answer {
            status: status.as_u16(),
            reason: status.canonical_reason().map(str::to_owned),
            headers,
            body,
            truncated,
        })
    }

    fn request(&self) -> Result<Request<Empty<Bytes>>, hyper::http::Error> {
        let target = &self.url[url::Position::BeforePath..url::Position::AfterQuery];
        let authority = match (self.url.host_str(), self.url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            (None, _) => String::new(),
        };
        let mut builder = Request::builder()
            .method(self.method.clone())
            .uri(if target.is_empty() { "/" } else { target })
            .header(HOST, authority)
            .header(
                USER_AGENT,
                concat!("gsv-node/", env!("CARGO_PKG_VERSION"), " fetch_url"),
            );
        let mut asked_encoding = false;
        for (name, value) in self.headers {
            asked_encoding |= name == ACCEPT_ENCODING;
            builder = builder.header(name, value);
        }
        if !asked_encoding {
            builder = builder.header(ACCEPT_ENCODING, "identity");
        }
        builder.body(Empty::new())
    }
}

async fn tls(
    tcp: TcpStream,
    host: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ExchangeError> {
    let fail = |reason: String| ExchangeError::Tls {
        host: host.to_owned(),
        reason,
    };
    let config = gsv_transport::tls::system_roots().map_err(|e| fail(e.to_string()))?;
    // The URL's host: a name, or an address literal (brackets dropped).
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let name = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
        Err(_) => rustls::pki_types::ServerName::try_from(bare.to_owned())
            .map_err(|e| fail(e.to_string()))?,
    };
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| fail(e.to_string()))
}

/// A header value as text: UTF-8 where it is, cut to [`MAX_HEADER_VALUE`].
fn header_text(raw: &[u8]) -> String {
    let cut = &raw[..raw.len().min(MAX_HEADER_VALUE)];
    String::from_utf8_lossy(cut).into_owned()
}
