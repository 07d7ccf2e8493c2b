//! Approval notifications for an operator who is not watching: each new approval
//! request is POSTed to `gsv gateway --approval-webhook URL`.
//!
//! The body is JSON (the request's id, agent, node, the nodes of a fan-out, tool,
//! summary, reason, creation and expiry times, and `console`: the request's page in
//! the operator console); the `X-Gsv-Signature` header is `sha256=` and the hex
//! HMAC-SHA256 of the body under the key in the data directory's [`KEY_FILE`] (made
//! on first use, 0600), so the receiver can tell the gateway sent it. Delivery never
//! blocks a call: requests go through a bounded queue that is fair between tokens
//! ([`fair_queue`]: [`QUEUE_PER_TOKEN`] per token, [`QUEUE`] in all; a token over its
//! share loses its own newest, a full queue drops the busiest token's oldest, logged)
//! to one task that POSTs them one token at a time in turn, retrying a failed delivery (no answer, 5xx, 408, 429)
//! with backoff up to [`ATTEMPTS`] times; another 4xx is final. http and https
//! (system roots) URLs.

mod fair_queue;

use crate::approvals::ApprovalRequest;
use fair_queue::{Dropped, FairQueue};
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Uri;
use hyper_util::rt::TokioIo;
use sha2::Sha256;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// The webhook's key, in the data directory.
pub const KEY_FILE: &str = "webhook.key";
/// Notifications waiting to be delivered, at most.
pub const QUEUE: usize = 256;
/// Notifications of one token waiting to be delivered, at most.
pub const QUEUE_PER_TOKEN: usize = 32;
/// Deliveries tried per notification.
pub const ATTEMPTS: u32 = 5;
/// How long one delivery may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first wait before a retry (doubled each time).
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// Why the webhook cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("--approval-webhook {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("the webhook key {path:?}: {source}")]
    Key {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// Why one delivery failed.
#[derive(Debug, thiserror::Error)]
enum Delivery {
    #[error("{0}")]
    Retry(String),
    #[error("{0}")]
    Final(String),
}

/// The sending end: where new approval requests are handed over.
pub struct Webhook {
    queue: Arc<FairQueue<ApprovalRequest>>,
}

impl Webhook {
    /// Checks `url`, reads or makes the key in `data_dir`, and starts the delivery
    /// task (until `stop`); `console` is where the console shows approval requests
    /// (`BASE/ui/#/approvals/`), which a request's id completes to its page's link.
    pub fn start(
        url: &str,
        data_dir: &Path,
        console: &str,
        stop: CancellationToken,
    ) -> Result<Self, WebhookError> {
        let target = Target::parse(url)?;
        let key = key(data_dir)?;
        let queue = Arc::new(FairQueue::new(QUEUE_PER_TOKEN, QUEUE));
        tokio::spawn(deliver_all(
            target,
            key,
            console.to_owned(),
            queue.clone(),
            stop,
        ));
        Ok(Webhook { queue })
    }

    /// Queues `request` for delivery; never waits (what a full queue drops is logged).
    pub fn notify(&self, request: &ApprovalRequest) {
        match self.queue.push(&request.token_id, request.clone()) {
            None => {}
            Some(Dropped::New(r)) => {
                tracing::warn!(approval = %r.id, token_id = %r.token_id, "approval webhook: this token's queue is full; notification dropped");
            }
            Some(Dropped::Oldest { token, item }) => {
                tracing::warn!(approval = %item.id, token_id = %token, "approval webhook queue full; the busiest token's oldest notification dropped");
            }
        }
    }
}

/// Reads the key, or makes one (32 random bytes, hex) on first use.
fn key(data_dir: &Path) -> Result<Vec<u8>, WebhookError> {
    let path = data_dir.join(KEY_FILE);
    if let Some(k) = crate::datadir::read_line(&path) {
        return Ok(k.into_bytes());
    }
    let k = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    crate::datadir::write_secret(&path, &k).map_err(|source| WebhookError::Key {
        path: path.clone(),
        source,
    })?;
    Ok(k.into_bytes())
}

/// Where notifications go.
#[derive(Clone)]
struct Target {
    uri: Uri,
    host: String,
    port: u16,
    tls: bool,
}

impl Target {
    fn parse(url: &str) -> Result<Target, WebhookError> {
        let bad = |reason: &str| WebhookError::BadUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let host = uri
            .host()
            .ok_or_else(|| bad("no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Target {
            uri,
            host,
            port,
            tls,
        })
    }
}

/// The body of a notification.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    event: &'static str,
    id: &'a str,
    agent: &'a str,
    node: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    nodes: &'a [String],
    tool: &'a str,
    summary: &'a str,
    reason: &'a str,
    created_at: u64,
    expires_at: u64,
    /// How an operator decides it from a terminal.
    decide: String,
    /// The request's page in the operator console (`BASE/ui/#/approvals/ID`).
    console: String,
}

/// Agent- or node-given text of the body (a chat bridge shows it to a person as it
/// is): through the one display rule, hidden and bidi characters escaped.
fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    gsv_protocol::display::safe(text)
}

/// The hex HMAC-SHA256 of `body` under `key`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(m) => m,
        // HMAC takes a key of any length.
        Err(_) => return String::new(),
    };
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

async fn deliver_all(
    target: Target,
    key: Vec<u8>,
    console: String,
    queue: Arc<FairQueue<ApprovalRequest>>,
    stop: CancellationToken,
) {
    let tls = target.tls.then(tls_connector);
    loop {
        let request = tokio::select! {
            r = queue.pop() => r,
            _ = stop.cancelled() => return,
        };
        let body = Body {
            event: "approval.requested",
            id: &request.id,
            agent: &shown(&request.agent),
            node: &request.node,
            nodes: &request.nodes,
            tool: &request.tool,
            summary: &shown(&request.summary),
            reason: &shown(&request.reason),
            created_at: request.created_at,
            expires_at: request.expires_at,
            decide: format!(
                "gsv approvals approve {0} | gsv approvals deny {0}",
                request.id
            ),
            console: format!("{console}{}", request.id),
        };
        let Ok(body) = serde_json::to_vec(&body) else {
            continue;
        };
        let signed = signature(&key, &body);
        let mut wait = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            let sent =
                tokio::time::timeout(ATTEMPT_TIMEOUT, post(&target, tls.as_ref(), &body, &signed))
                    .await
                    .unwrap_or_else(|_| Err(Delivery::Retry("no answer in time".into())));
            match sent {
                Ok(()) => {
                    tracing::info!(approval = %request.id, attempt, "approval webhook delivered");
                    break;
                }
                Err(Delivery::Final(why)) => {
                    tracing::warn!(approval = %request.id, why = ?why, "approval webhook refused; not retried");
                    break;
                }
                Err(Delivery::Retry(why)) if attempt < ATTEMPTS => {
                    tracing::info!(approval = %request.id, attempt, why = ?why, "approval webhook failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stop.cancelled() => return,
                    }
                    wait *= 2;
                }
                Err(Delivery::Retry(why)) => {
                    tracing::warn!(approval = %request.id, why = ?why, "approval webhook failed; giving up");
                }
            }
        }
    }
}

/// A TLS connector trusting the system's roots.
fn tls_connector() -> tokio_rustls::TlsConnector {
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|b| b.with_root_certificates(roots).with_no_client_auth());
    match config {
        Ok(c) => tokio_rustls::TlsConnector::from(Arc::new(c)),
        // The ring provider supports the default versions: not reached.
        Err(_) => tokio_rustls::TlsConnector::from(Arc::new(
            tokio_rustls::rustls::ClientConfig::builder()
                .with_root_certificates(tokio_rustls::rustls::RootCertStore::empty())
                .with_no_client_auth(),
        )),
    }
}

/// One POST of `body`.
async fn post(
    target: &Target,
    tls: Option<&tokio_rustls::TlsConnector>,
    body: &[u8],
    signature: &str,
) -> Result<(), Delivery> {
    let retry = |e: &dyn std::fmt::Display| Delivery::Retry(e.to_string());
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| retry(&e))?;
    let authority = target
        .uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_else(|| target.host.clone());
    let path = target
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".to_owned());
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(
            hyper::header::USER_AGENT,
            concat!("gsv/", env!("CARGO_PKG_VERSION")),
        )
        .header("x-gsv-event", "approval.requested")
        .header("x-gsv-signature", format!("sha256={signature}"))
        .body(Full::new(Bytes::copy_from_slice(body)))
        .map_err(|e| Delivery::Final(e.to_string()))?;
    let status = match tls {
        Some(connector) => {
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|e| Delivery::Final(e.to_string()))?;
            let stream = connector.connect(name, tcp).await.map_err(|e| retry(&e))?;
            send(TokioIo::new(stream), request).await?
        }
        None => send(TokioIo::new(tcp), request).await?,
    };
    match status.as_u16() {
        200..=299 => Ok(()),
        408 | 429 | 500..=599 => Err(Delivery::Retry(format!("HTTP {status}"))),
        _ => Err(Delivery::Final(format!("HTTP {status}"))),
    }
}

async fn send<T>(
    io: TokioIo<T>,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::StatusCode, Delivery>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let retry = |e: &dyn std::fmt::Display| Delivery::Retry(e.to_string());
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| retry(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let response = sender.send_request(request).await.map_err(|e| retry(&e))?;
    let status = response.status();
    // Read (and drop) the answer, bounded by the attempt's timeout.
    let _ = response.into_body().collect().await;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn webhook_urls_are_http_or_https_with_a_host() {
        assert!(Target::parse("http://127.0.0.1:9/hook").is_ok());
        let t = Target::parse("https://hooks.example/x?y=1").expect("https");
        assert!(t.tls && t.port == 443 && t.host == "hooks.example");
        for bad in ["ftp://x/", "nonsense", "/relative", "http://"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
