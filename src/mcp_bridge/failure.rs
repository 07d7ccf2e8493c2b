//! The answers the bridge gives itself when the gateway gives none.

use super::HttpError;
use hyper::StatusCode;
use serde_json::Value;

/// The JSON-RPC error codes the bridge answers with when the gateway gave no
/// JSON-RPC answer: those of the official MCP SDKs' Streamable HTTP clients.
pub mod code {
    /// A stdin line that is not JSON, or an answer of the gateway that is not.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC message, a line over [`crate::mcp_bridge::MAX_LINE_BYTES`], a session the
    /// gateway no longer knows (`404` with a session id), or an answer of the wrong kind.
    pub const INVALID_REQUEST: i64 = -32600;
    /// `404` without a session: the gateway does not serve that.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Any other HTTP error without a JSON-RPC body (`401`, `403`, `429`, `5xx`…).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The gateway could not be reached, or its stream ended without the response.
    pub const CONNECTION_CLOSED: i64 = -32000;
}

/// A failure to relay, answered to the client as a JSON-RPC error when a request is
/// waiting for it.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) code: i64,
    pub(super) message: String,
    pub(super) http_status: Option<u16>,
}

impl Failure {
    pub(super) fn new(code: i64, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            http_status: None,
        }
    }

    pub(super) fn unreachable(e: &HttpError) -> Failure {
        let what = match e {
            HttpError::Unreachable { .. } => "unreachable",
            HttpError::Certificate { .. } => "certificate",
        };
        Failure::new(code::CONNECTION_CLOSED, format!("{what}: {e}"))
    }

    /// The gateway refused with `status` and no JSON-RPC message.
    pub(super) fn refusal(status: StatusCode, body: &[u8], with_session: bool) -> Failure {
        let (name, detail) = explain(status, body);
        let n = status.as_u16();
        let (code, message) = match status {
            StatusCode::NOT_FOUND if with_session => (
                code::INVALID_REQUEST,
                format!(
                    "Session terminated: the gateway no longer knows this MCP session \
                     ({name}: {detail}, HTTP {n}); initialize a new one"
                ),
            ),
            StatusCode::NOT_FOUND => (
                code::METHOD_NOT_FOUND,
                format!("{name}: {detail} (HTTP {n})"),
            ),
            _ => (code::INTERNAL_ERROR, format!("{name}: {detail} (HTTP {n})")),
        };
        Failure {
            code,
            message,
            http_status: Some(n),
        }
    }
}

/// A gsv error body (`{"error":{"code","message"}}`), or the text of another: the
/// error's name and what it says.
fn explain(status: StatusCode, body: &[u8]) -> (String, String) {
    let fallback = status
        .canonical_reason()
        .unwrap_or("error")
        .to_ascii_lowercase()
        .replace(' ', "_");
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let e = v.get("error").unwrap_or(&v);
        if let Some(message) = e.get("message").and_then(Value::as_str) {
            let name = e.get("code").and_then(Value::as_str).unwrap_or(&fallback);
            return (name.to_owned(), clip(message));
        }
    }
    let text = clip(&String::from_utf8_lossy(body));
    let text = if text.is_empty() {
        status.canonical_reason().unwrap_or("no details").to_owned()
    } else {
        text
    };
    (fallback, text)
}

/// `s` on one line, at most 300 characters.
fn clip(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_and_why() {
        let body =
            br#"{"error":{"code":"unauthorized","message":"invalid or revoked token; send ..."}}"#;
        let f = Failure::refusal(StatusCode::UNAUTHORIZED, body, false);
        assert_eq!(f.code, code::INTERNAL_ERROR);
        assert_eq!(
            f.message,
            "unauthorized: invalid or revoked token; send ... (HTTP 401)"
        );
        assert_eq!(f.http_status, Some(401));
        let f = Failure::refusal(StatusCode::NOT_FOUND, b"Not Found: Session not found", true);
        assert_eq!(f.code, code::INVALID_REQUEST);
        assert!(
            f.message.starts_with("Session terminated: "),
            "{}",
            f.message
        );
        assert!(f.message.contains("Session not found"), "{}", f.message);
        let f = Failure::refusal(StatusCode::NOT_FOUND, b"", false);
        assert_eq!(f.code, code::METHOD_NOT_FOUND);
        assert_eq!(f.message, "not_found: Not Found (HTTP 404)");
        let long = "x".repeat(1000);
        let f = Failure::refusal(StatusCode::BAD_GATEWAY, long.as_bytes(), false);
        assert!(f.message.chars().count() < 400, "{}", f.message);
    }
}
