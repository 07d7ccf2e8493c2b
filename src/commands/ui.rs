//! `gsv ui [--open]`: prints a one-time login link for the operator console
//! (`/ui/login?code=...`, valid 5 minutes, usable once), and with `--open` opens it
//! in the browser.
//!
//! The code lives in the running gateway's memory, so it is minted there: one
//! `POST /v1/ui/login-codes` with the admin token (from the data directory by
//! default, like `gsv approvals`). No long-lived token ever goes into a URL.

use crate::commands::approvals::OperatorTarget;
use crate::exit;
use crate::mcp_bridge::http::Http;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderValue, AUTHORIZATION, USER_AGENT};
use hyper::{Method, Request};
use std::time::Duration;

/// The endpoint that mints login codes.
const PATH: &str = "/v1/ui/login-codes";
/// How long the whole exchange may take.
const TIMEOUT: Duration = Duration::from_secs(20);
/// Largest answer read.
const MAX_BODY: usize = 64 * 1024;

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Link {
    url: String,
    expires_at: u64,
}

/// `gsv ui [--open]`.
pub async fn run(t: OperatorTarget, open: bool) -> u8 {
    let (gateway, token, tls) = match t.resolve() {
        Ok(r) => (r.gateway, r.token, r.tls),
        Err(code) => return code,
    };
    let http = match Http::new(&gateway, &tls) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: invalid_args: {e}");
            return exit::USAGE;
        }
    };
    let Ok(auth) = HeaderValue::from_str(&format!("Bearer {token}")) else {
        eprintln!("error: invalid_args: the token holds characters an HTTP header cannot carry");
        return exit::USAGE;
    };
    let mut req = Request::new(Full::new(Bytes::new()));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = hyper::Uri::from_static(PATH);
    req.headers_mut().insert(AUTHORIZATION, auth);
    req.headers_mut().insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("gsv-ui/", env!("CARGO_PKG_VERSION"))),
    );
    let exchange = async {
        let (res, _conn) = http.send(req).await.map_err(|e| e.to_string())?;
        let status = res.status();
        let body = http_body_util::Limited::new(res.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    let (status, body) = match tokio::time::timeout(TIMEOUT, exchange).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            eprintln!("error: unreachable: {e}");
            return exit::UNREACHABLE;
        }
        Err(_) => {
            eprintln!("error: unreachable: no answer from {gateway} in {TIMEOUT:?}");
            return exit::UNREACHABLE;
        }
    };
    if !status.is_success() {
        let error = serde_json::from_slice::<gsv_protocol::error::ErrorBody>(&body)
            .map(|b| format!("{}: {}", b.error.code.as_str(), b.error.message))
            .unwrap_or_else(|_| format!("internal: HTTP {status}"));
        eprintln!("error: {}", crate::terminal::safe(&error));
        return match status.as_u16() {
            401 | 403 => exit::AUTH,
            404 => {
                eprintln!("(is the gateway at {gateway} older than the console?)");
                exit::TOOL_ERROR
            }
            _ => exit::TOOL_ERROR,
        };
    }
    let link: Link = match serde_json::from_slice(&body) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: internal: unexpected answer from the gateway: {e}");
            return exit::TOOL_ERROR;
        }
    };
    println!("{}", link.url);
    eprintln!(
        "one-time console login link, valid until {} (usable once)",
        gsv_gateway::time::rfc3339(link.expires_at)
    );
    if open {
        open_browser(&link.url);
    }
    exit::OK
}

/// Opens `url` in the desktop's browser (`xdg-open`, `open` on macOS); a failure is a
/// warning: the link is printed anyway.
pub fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warning: could not run {opener} to open the link: {e}");
            return;
        }
    };
    // Most openers hand the URL over and exit at once: a failure shows in their status.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return,
            Ok(Some(status)) => {
                eprintln!("warning: {opener} could not open the link ({status}); open it yourself");
                return;
            }
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            // Still running (a browser it started in the foreground): leave it be.
            Ok(None) | Err(_) => return,
        }
    }
}
