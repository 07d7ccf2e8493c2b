//! The arguments of a `fetch_url` call, checked: the URL, the method, the caller's
//! headers and the limits.
//!
//! Everything here comes from the agent. The URL must be `http` or `https` with a
//! host and no credentials (they would be sent to whatever the URL names, and end up
//! in logs and approval requests: use an `Authorization` header). Header names and
//! values are parsed by the `http` crate (no CR, LF or NUL can reach the wire); the
//! headers that decide the request's framing or its connection (`Host`,
//! `Content-Length`, `Transfer-Encoding`, `Connection`, ...) are the node's, never the
//! caller's.

use crate::tools::args::Args;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;
use serde_json::Value;
use url::Url;

/// Body bytes returned when the call does not say (`maxBytes`).
pub const DEFAULT_MAX_BYTES: u64 = 1024 * 1024;
/// Most body bytes one call may ask for (the result carries them as text or base64).
pub const MAX_BYTES: u64 = 4 * 1024 * 1024;
/// Longest URL accepted, in bytes.
pub const MAX_URL_LEN: usize = 8 * 1024;
/// Most headers a call may send.
pub const MAX_HEADERS: usize = 32;
/// Longest header value a call may send, in bytes.
pub const MAX_HEADER_LEN: usize = 8 * 1024;

/// Headers the node sets or that would change how the request is framed or carried.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
    "expect",
];

/// How the body is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Text when the body is UTF-8, else base64.
    Auto,
    Text,
    Base64,
}

/// A checked call.
#[derive(Debug)]
pub struct FetchRequest {
    pub url: Url,
    pub method: Method,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub max_bytes: usize,
    pub follow_redirects: bool,
    pub encoding: Encoding,
}

/// Parses and checks the call's arguments.
pub fn parse(args: &Value) -> Result<FetchRequest, String> {
    let args = Args::new(
        args,
        &[
            "url",
            "method",
            "headers",
            "maxBytes",
            "followRedirects",
            "encoding",
        ],
    )?;
    let url = url(args.required_str("url")?)?;
    let method = match args.str("method")?.unwrap_or("GET") {
        "GET" | "get" => Method::GET,
        "HEAD" | "head" => Method::HEAD,
        other => {
            return Err(format!(
                "\"method\" must be GET or HEAD (fetch_url only reads), got {other:?}"
            ))
        }
    };
    let headers = match args.value("headers") {
        None => Vec::new(),
        Some(value) => headers(value)?,
    };
    let max_bytes = args
        .u64_in("maxBytes", 0, MAX_BYTES)?
        .unwrap_or(DEFAULT_MAX_BYTES) as usize;
    let follow_redirects = args.bool("followRedirects")?.unwrap_or(true);
    let encoding = match args.str("encoding")?.unwrap_or("auto") {
        "auto" => Encoding::Auto,
        "text" => Encoding::Text,
        "base64" => Encoding::Base64,
        other => {
            return Err(format!(
                "\"encoding\" must be \"auto\", \"text\" or \"base64\", got {other:?}"
            ))
        }
    };
    Ok(FetchRequest {
        url,
        method,
        headers,
        max_bytes,
        follow_redirects,
        encoding,
    })
}

/// A URL `fetch_url` may request (also every redirect's target).
pub fn url(text: &str) -> Result<Url, String> {
    if text.len() > MAX_URL_LEN {
        return Err(format!("the URL is longer than {MAX_URL_LEN} bytes"));
    }
    let mut url = Url::parse(text).map_err(|e| format!("{text:?} is not a valid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs can be fetched, not {}:",
            url.scheme()
        ));
    }
    if url.host().is_none() {
        return Err(format!("{text:?} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "credentials in the URL are refused (they would be logged and shown to \
             operators); send them in an \"Authorization\" header"
                .to_owned(),
        );
    }
    url.set_fragment(None);
    Ok(url)
}

fn headers(value: &Value) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let Value::Object(map) = value else {
        return Err("\"headers\" must be an object of header names to string values".into());
    };
    if map.len() > MAX_HEADERS {
        return Err(format!("at most {MAX_HEADERS} headers may be sent"));
    }
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        let Value::String(text) = value else {
            return Err(format!("header {name:?} must be a string"));
        };
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{name:?} is not a valid header name"))?;
        if RESERVED.contains(&name.as_str()) {
            return Err(format!(
                "header {:?} is set by the node and cannot be given",
                name.as_str()
            ));
        }
        if text.len() > MAX_HEADER_LEN {
            return Err(format!(
                "header {:?} is longer than {MAX_HEADER_LEN} bytes",
                name.as_str()
            ));
        }
        let value = HeaderValue::from_str(text).map_err(|_| {
            format!(
                "header {:?} has characters a header cannot carry (control characters, \
                 line breaks)",
                name.as_str()
            )
        })?;
        out.push((name, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plain_get_is_accepted_with_defaults() {
        let r = parse(&json!({"url": "http://127.0.0.1:8080/a?b=1#frag"})).unwrap();
        assert_eq!(r.url.as_str(), "http://127.0.0.1:8080/a?b=1");
        assert_eq!(r.method, Method::GET);
        assert_eq!(r.max_bytes as u64, DEFAULT_MAX_BYTES);
        assert!(r.follow_redirects);
        assert_eq!(r.encoding, Encoding::Auto);
        let r = parse(&json!({"url": "https://x.test/", "method": "HEAD",
            "headers": {"Accept": "text/plain", "Authorization": "Bearer t"},
            "maxBytes": 0, "followRedirects": false, "encoding": "base64"}))
        .unwrap();
        assert_eq!(r.headers.len(), 2);
        assert_eq!(r.max_bytes, 0);
    }

    #[test]
    fn bad_calls_are_refused_with_the_reason() {
        for (args, needle) in [
            (json!({}), "missing"),
            (json!({"url": "file:///etc/passwd"}), "only http and https"),
            (json!({"url": "gopher://x/"}), "only http and https"),
            (json!({"url": "http://user:pw@x.test/"}), "credentials"),
            (json!({"url": "not a url"}), "not a valid URL"),
            (json!({"url": "http://x/", "method": "POST"}), "GET or HEAD"),
            (
                json!({"url": "http://x/", "headers": {"Host": "evil"}}),
                "set by the node",
            ),
            (
                json!({"url": "http://x/", "headers": {"Transfer-Encoding": "chunked"}}),
                "set by the node",
            ),
            (
                json!({"url": "http://x/", "headers": {"X-A": "a\r\nX-B: b"}}),
                "line breaks",
            ),
            (
                json!({"url": "http://x/", "headers": {"bad name": "v"}}),
                "not a valid header name",
            ),
            (
                json!({"url": "http://x/", "headers": {"X": 1}}),
                "must be a string",
            ),
            (
                json!({"url": "http://x/", "headers": "X: y"}),
                "must be an object",
            ),
            (
                json!({"url": "http://x/", "maxBytes": MAX_BYTES + 1}),
                "maxBytes",
            ),
            (json!({"url": "http://x/", "encoding": "hex"}), "encoding"),
            (json!({"url": "http://x/", "other": 1}), "unknown argument"),
        ] {
            let e = parse(&args).unwrap_err();
            assert!(e.contains(needle), "{args}: {e}");
        }
        let long = format!("http://x/{}", "a".repeat(MAX_URL_LEN));
        assert!(parse(&json!({ "url": long })).is_err());
    }
}
