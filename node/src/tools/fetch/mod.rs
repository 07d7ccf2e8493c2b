//! The `fetch_url` tool: an HTTP(S) GET or HEAD from the node, with the network
//! tools' address guardrails.
//!
//! Agents check a service from where it runs (a health endpoint on the node's
//! loopback, an internal dashboard on its LAN) or read a page as the node sees it.
//! Through Bash that is `curl`, which connects wherever a name resolves and follows
//! redirects anywhere; here every hop is checked ([`policy`]): the host's *resolved*
//! addresses decide, link-local and cloud-metadata addresses are never reached, public
//! ones only as the node's owner allows (`--fetch-allow`), and the connection goes to
//! the address that was checked ([`client`]). Redirects (at most
//! [`MAX_REDIRECTS`]) are followed one by one through the same check; credentials the
//! caller sent (`Authorization`, `Cookie`) are not carried to another origin.
//!
//! Result (`structuredContent`): [`FetchOutput`]. A refused target or a failed
//! exchange is a tool error; an HTTP error status is a result (the status says it).

pub mod client;
pub mod policy;
pub mod request;

use crate::tool::{Tool, ToolContext};
use crate::tools::net::target::{HostResolver, SystemResolver};
use crate::tools::output;
use base64::Engine;
use client::{Answer, Exchange};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use hyper::header::{HeaderName, AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use hyper::Method;
use policy::FetchPolicy;
use request::{Encoding, FetchRequest};
use serde::Serialize;
use serde_json::{json, Value};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use url::{Host, Url};

/// Most redirects followed in one call.
pub const MAX_REDIRECTS: usize = 5;
/// How long resolving a host may take.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The fetch_url tool.
pub struct FetchUrl {
    policy: FetchPolicy,
    resolver: Arc<dyn HostResolver>,
}

impl FetchUrl {
    /// The tool with the owner's policy and the system resolver.
    pub fn new(policy: FetchPolicy) -> Self {
        FetchUrl {
            policy,
            resolver: Arc::new(SystemResolver),
        }
    }

    /// The same with another resolver (tests).
    pub fn with_resolver(policy: FetchPolicy, resolver: Arc<dyn HostResolver>) -> Self {
        FetchUrl { policy, resolver }
    }
}

/// One response header.
#[derive(Debug, Serialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// fetch_url's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchOutput {
    /// The URL that answered (after redirects).
    pub url: String,
    /// The HTTP status code.
    pub status: u16,
    /// The status's standard reason phrase, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_text: Option<String>,
    /// The response headers, in order (a repeated header appears once per value).
    pub headers: Vec<Header>,
    /// The body (its first `maxBytes` bytes), as text or base64 per `encoding`.
    pub body: String,
    /// `text` or `base64`: how `body` is written.
    pub encoding: &'static str,
    /// Body bytes returned.
    pub bytes: usize,
    /// The body went on past `maxBytes`.
    #[serde(skip_serializing_if = "output::is_false")]
    pub truncated: bool,
    /// The address the answer came from (`ip:port`), as checked.
    pub address: String,
    /// The URLs redirected through, in order (empty without redirects).
    pub redirects: Vec<String>,
    /// Milliseconds from the first lookup to the end of the body.
    pub elapsed_ms: u64,
}

/// Why a call ended without an answer to return.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("{0}")]
    Refused(#[from] policy::Refusal),
    #[error("could not resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("{0}")]
    Exchange(#[from] client::ExchangeError),
    #[error("more than {MAX_REDIRECTS} redirects (last to {0})")]
    TooManyRedirects(String),
    #[error("a redirect to {target:?} was not followed: {reason}")]
    BadRedirect { target: String, reason: String },
}

#[async_trait::async_trait]
impl Tool for FetchUrl {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "fetch_url".to_owned(),
            description: "HTTP(S) GET or HEAD from this node: status, headers, body. \
                          Public hosts only as the node's owner allows; link-local and \
                          cloud-metadata addresses never."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "http(s), no credentials."},
                    "method": {"type": "string", "enum": ["GET", "HEAD"], "description": "Default GET."},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Not Host, Content-Length, Transfer-Encoding, Connection."},
                    "maxBytes": {"type": "integer", "minimum": 0, "maximum": request::MAX_BYTES, "description": "Default 1 MiB."},
                    "followRedirects": {"type": "boolean", "description": "Up to 5 (default true)."},
                    "encoding": {"type": "string", "enum": ["auto", "text", "base64"], "description": "Body as: auto (text if UTF-8, default), text or base64."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
            capability: Capability::HttpFetch.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Fetch a URL", true, false, true, true),
            default_timeout_ms: Some(60_000),
            requires_bins: Vec::new(),
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let request = match request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("fetch_url: {message}")),
        };
        let started = Instant::now();
        match self.fetch(&request).await {
            Ok((url, addr, answer, redirects)) => {
                let out = shape(url, addr, answer, redirects, &request, started);
                let text = summary(&out);
                output::with_text(text, &out)
            }
            Err(e) => {
                tracing::info!(error = ?e.to_string(), "fetch_url refused or failed");
                ToolResult::error(format!("fetch_url: {e}"))
            }
        }
    }
}

impl FetchUrl {
    /// Follows the request through its redirects; every hop resolved and checked.
    async fn fetch(
        &self,
        request: &FetchRequest,
    ) -> Result<(Url, SocketAddr, Answer, Vec<String>), FetchError> {
        let mut url = request.url.clone();
        let mut method = request.method.clone();
        let mut headers = request.headers.clone();
        let mut redirects = Vec::new();
        loop {
            let addr = self.checked_address(&url).await?;
            let answer = Exchange {
                url: &url,
                addr,
                method: &method,
                headers: &headers,
                max_bytes: request.max_bytes,
            }
            .run()
            .await?;
            let location = answer
                .headers
                .iter()
                .find(|(name, _)| name == "location")
                .map(|(_, value)| value.clone());
            let redirect = matches!(answer.status, 301 | 302 | 303 | 307 | 308);
            let (true, true, Some(location)) = (request.follow_redirects, redirect, location)
            else {
                return Ok((url, addr, answer, redirects));
            };
            if redirects.len() == MAX_REDIRECTS {
                return Err(FetchError::TooManyRedirects(location));
            }
            let next = url
                .join(&location)
                .map_err(|e| e.to_string())
                .and_then(|u| request::url(u.as_str()))
                .map_err(|reason| FetchError::BadRedirect {
                    target: location.clone(),
                    reason,
                })?;
            if answer.status == 303 && method != Method::HEAD {
                method = Method::GET;
            }
            if next.origin() != url.origin() {
                headers.retain(|(name, _)| !is_credential(name));
            }
            redirects.push(next.to_string());
            url = next;
        }
    }

    /// Resolves the URL's host and checks every address; the one to connect to.
    async fn checked_address(&self, url: &Url) -> Result<SocketAddr, FetchError> {
        let port = url.port_or_known_default().unwrap_or(80);
        let (name, addresses): (String, Vec<IpAddr>) = match url.host() {
            Some(Host::Ipv4(ip)) => (ip.to_string(), vec![IpAddr::V4(ip)]),
            Some(Host::Ipv6(ip)) => (ip.to_string(), vec![IpAddr::V6(ip)]),
            Some(Host::Domain(name)) => {
                let found = tokio::time::timeout(RESOLVE_TIMEOUT, self.resolver.resolve(name))
                    .await
                    .map_err(|_| FetchError::Resolve {
                        host: name.to_owned(),
                        reason: format!("no answer within {} s", RESOLVE_TIMEOUT.as_secs()),
                    })?
                    .map_err(|reason| FetchError::Resolve {
                        host: name.to_owned(),
                        reason,
                    })?;
                (name.to_owned(), found)
            }
            None => {
                return Err(FetchError::Resolve {
                    host: String::new(),
                    reason: "the URL has no host".into(),
                })
            }
        };
        let ip = self.policy.check(&name, &addresses)?;
        Ok(SocketAddr::new(ip, port))
    }
}

fn is_credential(name: &HeaderName) -> bool {
    name == AUTHORIZATION || name == COOKIE || name == PROXY_AUTHORIZATION
}

fn shape(
    url: Url,
    addr: SocketAddr,
    answer: Answer,
    redirects: Vec<String>,
    request: &FetchRequest,
    started: Instant,
) -> FetchOutput {
    let bytes = answer.body.len();
    let (body, encoding) = match (request.encoding, String::from_utf8(answer.body)) {
        (Encoding::Auto | Encoding::Text, Ok(text)) => (text, "text"),
        (Encoding::Text, Err(e)) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), "text"),
        (Encoding::Base64, Ok(text)) => (
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes()),
            "base64",
        ),
        (Encoding::Auto | Encoding::Base64, Err(e)) => (
            base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
            "base64",
        ),
    };
    FetchOutput {
        url: url.to_string(),
        status: answer.status,
        status_text: answer.reason,
        headers: answer
            .headers
            .into_iter()
            .map(|(name, value)| Header { name, value })
            .collect(),
        body,
        encoding,
        bytes,
        truncated: answer.truncated,
        address: addr.to_string(),
        redirects,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}

/// The text block: the status line, then the body when it is text.
fn summary(out: &FetchOutput) -> String {
    let mut text = format!(
        "HTTP {}{} from {} ({}): {} bytes{}",
        out.status,
        out.status_text
            .as_deref()
            .map(|r| format!(" {r}"))
            .unwrap_or_default(),
        out.url,
        out.address,
        out.bytes,
        if out.truncated { ", truncated" } else { "" }
    );
    if out.encoding == "text" {
        if !out.body.is_empty() {
            text.push_str("\n\n");
            text.push_str(&out.body);
        }
    } else {
        text.push_str(" (binary: base64 in structuredContent.body)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Names the tests make up, resolving to what they say.
    struct Fake;

    #[async_trait]
    impl HostResolver for Fake {
        async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
            let ips: &[&str] = match name {
                "metadata.test" => &["169.254.169.254"],
                "mixed.test" => &["127.0.0.1", "93.184.216.34"],
                "local.test" => &["::1", "127.0.0.1"],
                _ => return Err("no such name".into()),
            };
            Ok(ips.iter().map(|s| s.parse().unwrap()).collect())
        }
    }

    async fn call(tool: &FetchUrl, url: &str) -> ToolResult {
        tool.execute(json!({ "url": url }), ToolContext::new("/", "1"))
            .await
    }

    #[tokio::test]
    async fn names_are_judged_by_every_address_they_resolve_to() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 2048];
            let n = sock.read(&mut buf).await.unwrap();
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let body = "ok";
            let _ = sock
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
            head
        });
        let tool = FetchUrl::with_resolver(FetchPolicy::default(), Arc::new(Fake));
        let r = call(&tool, "http://metadata.test/latest/").await;
        assert!(
            r.is_error && r.joined_text().contains("link-local"),
            "{}",
            r.joined_text()
        );
        let r = call(&tool, &format!("http://mixed.test:{port}/")).await;
        assert!(
            r.is_error && r.joined_text().contains("public"),
            "{}",
            r.joined_text()
        );
        let r = call(&tool, "http://unknown.test/").await;
        assert!(
            r.is_error && r.joined_text().contains("could not resolve"),
            "{}",
            r.joined_text()
        );
        // The one name that passes connects to its checked IPv4 address, and the Host
        // header keeps the name.
        let r = call(&tool, &format!("http://local.test:{port}/x")).await;
        assert!(!r.is_error, "{}", r.joined_text());
        let out = r.structured_content.unwrap();
        assert_eq!(out["address"], format!("127.0.0.1:{port}"));
        assert_eq!(out["body"], "ok");
        let head = server.await.unwrap();
        assert!(head.starts_with("GET /x HTTP/1.1\r\n"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("host: local.test:{port}")),
            "{head}"
        );
    }
}
