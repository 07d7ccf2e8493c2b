//! The one-line installer: `GET /v1/install/{id}` serves a shell script that sets up a
//! new machine as node `id`, and `GET /v1/dist/{target}` the gsv builds it downloads.
//!
//! `gsv token create node ID --install` prints the line that runs it:
//! `curl … https://GW/v1/install/ID | sh -s -- --token gsv_join_…`. The script
//! (`script`) carries everything the new machine must trust, written in by the
//! gateway when it is served: the gateway's URL (from the request's `Host`, the name
//! the machine reached it by), curl's public-key pin and the node's certificate pin
//! for a TLS gateway, and the SHA-256 of each build (`dist`), which the script checks
//! the download against before running it.
//!
//! Both routes need no token: the script and the builds are not secrets, and the join
//! token never reaches them — it travels as an argument of `sh`, on the new machine
//! only, and is spent at enrollment over the node WebSocket like any other. So neither
//! route is audited (an unauthenticated request must not cost an audit row; the
//! enrollment that follows is audited as usual); each is logged at `info`. They are
//! served over TLS, or over plain HTTP only to a client on loopback, like the
//! node's own rule for plain `ws://`. Connections that fetch them stay
//! unauthenticated, so the gateway's caps and deadline on those apply (a download
//! must finish within `--unauth-timeout-ms`).

mod dist;
mod error;
mod script;

pub use dist::{own_target, sha256_file, valid_target, Build, Dist, DIST_DIR};
pub use error::InstallError;
pub use script::{render, ScriptValues};

use crate::auth::ApiError;
use crate::config::GatewayConfig;
use crate::tls::{ServerTls, TlsSetup};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use gsv_protocol::NodeId;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::AsyncReadExt;

/// Path of the installer script (`{id}` is the node id).
pub const INSTALL_PATH: &str = "/v1/install/{id}";
/// Path of the builds (`{target}` is e.g. `linux-x86_64`).
pub const DIST_PATH: &str = "/v1/dist/{target}";

/// How the gateway's TLS looks to a new machine.
#[derive(Debug, Clone)]
struct Trust {
    /// The self-signed certificate (`--tls-self-signed`): curl cannot check its chain
    /// and the node pins its fingerprint. With `--tls-cert` files both check the
    /// chain against the system's roots instead (a pin would break at renewal).
    self_signed: bool,
    fingerprint: String,
    public_key_pin: Option<String>,
}

/// What the two routes serve from.
pub struct Installer {
    trust: Option<Trust>,
    dist: Dist,
}

impl Installer {
    /// The installer of a gateway with `config`, serving TLS with `tls` if any.
    pub fn new(config: &GatewayConfig, tls: Option<&ServerTls>) -> Installer {
        Installer {
            trust: tls.map(|t| Trust {
                self_signed: config.tls == Some(TlsSetup::SelfSigned),
                fingerprint: t.fingerprint.clone(),
                public_key_pin: t.public_key_pin.clone(),
            }),
            dist: Dist::new(&config.data_dir),
        }
    }

    /// Plain HTTP only to loopback.
    fn allowed(&self, peer: SocketAddr) -> Result<(), InstallError> {
        if self.trust.is_none() && !peer.ip().to_canonical().is_loopback() {
            return Err(InstallError::PlainHttpOffLoopback);
        }
        Ok(())
    }

    /// `https://HOST` from the request's `Host` header.
    fn base_url(&self, headers: &HeaderMap) -> Result<String, InstallError> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| valid_authority(h))
            .ok_or(InstallError::BadHost)?;
        let scheme = if self.trust.is_some() {
            "https"
        } else {
            "http"
        };
        Ok(format!("{scheme}://{host}"))
    }
}

/// Whether `s` is `host` or `host:port` made only of characters that need no quoting:
/// a DNS name or IPv4 address (`A-Z a-z 0-9 . -`), or an IPv6 address in brackets.
pub fn valid_authority(s: &str) -> bool {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (!h.contains(':') || h.ends_with(']')) => (h, Some(p)),
        _ => (s, None),
    };
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !v6.is_empty()
            && v6
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    } else {
        !host.is_empty()
            && host.len() <= 253
            && !host.starts_with('-')
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    };
    port_ok && host_ok
}

/// The two routes, with their own state (merged into the gateway's router).
pub fn router(installer: Arc<Installer>) -> Router {
    Router::new()
        .route(INSTALL_PATH, get(install_script))
        .route(DIST_PATH, get(dist_build))
        .with_state(installer)
}

async fn install_script(
    State(installer): State<Arc<Installer>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = NodeId::parse(&id).map_err(InstallError::from)?;
    installer.allowed(peer)?;
    let url = installer.base_url(&headers)?;
    let hashing = Arc::clone(&installer);
    let builds: Vec<(String, String)> = tokio::task::spawn_blocking(move || hashing.dist.hashed())
        .await
        .map_err(InstallError::from)??
        .into_iter()
        .map(|(b, sha)| (b.target, sha))
        .collect();
    let trust = installer.trust.as_ref();
    let script = render(&ScriptValues {
        url: &url,
        node_id: id.as_str(),
        curl_pin: trust.and_then(|t| t.public_key_pin.as_deref()),
        self_signed: trust.is_some_and(|t| t.self_signed),
        node_pin: trust
            .filter(|t| t.self_signed)
            .map(|t| t.fingerprint.as_str()),
        builds: &builds,
    });
    tracing::info!(node_id = %id, %peer, %url, "served the installer script");
    Ok((
        [
            (header::CONTENT_TYPE, "text/x-shellscript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        script,
    )
        .into_response())
}

async fn dist_build(
    State(installer): State<Arc<Installer>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(target): Path<String>,
) -> Result<Response, ApiError> {
    installer.allowed(peer)?;
    let build = installer.dist.find(&target)?;
    let read_error = |source| InstallError::Read {
        path: build.path.clone(),
        source,
    };
    let file = tokio::fs::File::open(&build.path)
        .await
        .map_err(read_error)?;
    let len = file.metadata().await.map_err(read_error)?.len();
    tracing::info!(%target, %peer, bytes = len, "serving a gsv build");
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, len.to_string()),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        Body::from_stream(chunks(file)),
    )
        .into_response())
}

/// A file as a stream of 64 KiB chunks.
fn chunks(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures_util::stream::try_unfold(file, |mut file| async move {
        let mut buf = vec![0u8; 1 << 16];
        let n = file.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.truncate(n);
        Ok(Some((Bytes::from(buf), file)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installer(tls: bool) -> Installer {
        let config = GatewayConfig::new("127.0.0.1:0".parse().unwrap(), std::env::temp_dir());
        let mut i = Installer::new(&config, None);
        if tls {
            i.trust = Some(Trust {
                self_signed: true,
                fingerprint: "ab".repeat(32),
                public_key_pin: None,
            });
        }
        i
    }

    #[test]
    fn plain_http_is_for_loopback_only() {
        let plain = installer(false);
        for ok in ["127.0.0.1:5", "[::1]:5", "[::ffff:127.0.0.1]:5"] {
            assert!(plain.allowed(ok.parse().unwrap()).is_ok(), "{ok}");
        }
        assert!(matches!(
            plain.allowed("10.0.0.1:5".parse().unwrap()),
            Err(InstallError::PlainHttpOffLoopback)
        ));
        assert!(installer(true)
            .allowed("10.0.0.1:5".parse().unwrap())
            .is_ok());
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "gw.example:8787".parse().unwrap());
        assert_eq!(
            installer(true).base_url(&headers).unwrap(),
            "https://gw.example:8787"
        );
        assert_eq!(plain.base_url(&headers).unwrap(), "http://gw.example:8787");
        assert!(matches!(
            plain.base_url(&HeaderMap::new()),
            Err(InstallError::BadHost)
        ));
    }

    #[test]
    fn authorities() {
        for ok in [
            "127.0.0.1:8787",
            "gw.example",
            "gw.example:443",
            "[::1]:8787",
            "[::1]",
            "GW-1.Example.COM:1",
        ] {
            assert!(valid_authority(ok), "{ok}");
        }
        for bad in [
            "",
            ":8787",
            "gw.example:",
            "gw.example:123456",
            "gw example",
            "gw'x",
            "gw$(id)",
            "gw`id`",
            "user@gw",
            "-gw",
            "[::1",
            "::1",
            "[]:1",
            "gw:80:80",
            "gw/x",
        ] {
            assert!(!valid_authority(bad), "{bad}");
        }
    }
}
