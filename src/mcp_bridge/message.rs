//! What the bridge reads in a client's message: its kind, and the headers it is
//! routed by on `/mcp`.

use hyper::header::{HeaderName, HeaderValue};
use serde_json::Value;

/// The first protocol revision without sessions, and with `Mcp-Method` / `Mcp-Name`.
pub(super) const MODERN: &str = "2026-07-28";

pub(super) const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub(super) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub(super) const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub(super) const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// The session the gateway gave on `initialize` (2025 revisions).
#[derive(Debug, Clone, Default)]
pub(super) struct Session {
    pub(super) id: Option<String>,
    /// The negotiated protocol version.
    pub(super) version: Option<String>,
}

/// What a line from the client is.
#[derive(Debug, PartialEq)]
pub(super) enum Kind {
    Request {
        id: Value,
        method: String,
    },
    Notification {
        method: String,
    },
    /// A response or error: the client's answer to the gateway's request.
    Response,
    /// A JSON array (a JSON-RPC batch): forwarded, for the gateway to judge.
    Batch,
}

/// Classifies a parsed message; `Err` holds the id to answer an invalid one with.
pub(super) fn classify(msg: &Value) -> Result<Kind, Value> {
    let o = match msg {
        Value::Array(a) if !a.is_empty() => return Ok(Kind::Batch),
        Value::Object(o) => o,
        _ => return Err(Value::Null),
    };
    let id = o.get("id").filter(|v| !v.is_null()).cloned();
    match o.get("method") {
        Some(Value::String(m)) => Ok(match id {
            Some(id) => Kind::Request {
                id,
                method: m.clone(),
            },
            None => Kind::Notification { method: m.clone() },
        }),
        Some(_) => Err(id.unwrap_or(Value::Null)),
        None if o.contains_key("result") || o.contains_key("error") => Ok(Kind::Response),
        None => Err(id.unwrap_or(Value::Null)),
    }
}

/// The protocol version a request carries in its `_meta` (2026-07-28 revision).
pub(super) fn own_version(msg: &Value) -> Option<&str> {
    msg.get("params")?
        .get("_meta")?
        .get("io.modelcontextprotocol/protocolVersion")?
        .as_str()
}

pub(super) fn is_modern(version: &str) -> bool {
    version >= MODERN
}

/// The `Mcp-Name` of a request: the tool, prompt, resource or task it is about.
pub(super) fn mcp_name<'a>(method: &str, msg: &'a Value) -> Option<&'a str> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    msg.get("params")?.get(key)?.as_str()
}

/// A header value that survives HTTP: as it is, or `=?base64?…?=` when it has
/// surrounding blanks, control or non-ASCII characters, or looks wrapped already.
pub(super) fn header_text(v: &str) -> String {
    use base64::Engine;
    let wrap = v.starts_with([' ', '\t'])
        || v.ends_with([' ', '\t'])
        || v.chars().any(|c| !(' '..='~').contains(&c))
        || (v.starts_with("=?base64?") && v.ends_with("?="));
    if wrap {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(v)
        )
    } else {
        v.to_owned()
    }
}

/// The routing headers of a message: session, protocol version and, from 2026-07-28
/// on, `Mcp-Method` and `Mcp-Name`. `fallback` is the version of the client's last
/// session-less request (for its notifications, which carry none).
pub(super) fn route_headers(
    msg: &Value,
    session: &Session,
    fallback: Option<&str>,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut h = Vec::new();
    let mut push = |name: HeaderName, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.push((name, v));
        }
    };
    if let Some(id) = &session.id {
        push(SESSION_ID, id);
    }
    let version = own_version(msg).or(session.version.as_deref()).or(fallback);
    if let Some(v) = version {
        push(PROTOCOL_VERSION, v);
        if let (true, Some(method)) = (is_modern(v), msg.get("method").and_then(Value::as_str)) {
            push(MCP_METHOD, method);
            if let Some(name) = mcp_name(method, msg) {
                push(MCP_NAME, &header_text(name));
            }
        }
    }
    h
}

/// A message is JSON-RPC if it says so (or is a batch of such).
pub(super) fn is_jsonrpc(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.contains_key("jsonrpc"),
        Value::Array(a) => !a.is_empty() && a.iter().all(is_jsonrpc),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_messages() {
        let c = |s: &str| classify(&serde_json::from_str(s).unwrap());
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Kind::Request {
                id: json!(1),
                method: "ping".into()
            })
        );
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Kind::Notification {
                method: "notifications/initialized".into()
            })
        );
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Kind::Response)
        );
        assert_eq!(c(r#"[{"jsonrpc":"2.0","method":"x"}]"#), Ok(Kind::Batch));
        assert_eq!(c("42"), Err(Value::Null));
        assert_eq!(c("[]"), Err(Value::Null));
        assert_eq!(c(r#"{"id":7,"method":5}"#), Err(json!(7)));
        assert_eq!(c(r#"{"id":7}"#), Err(json!(7)));
    }

    #[test]
    fn routing_headers_follow_the_revision() {
        let session = Session {
            id: Some("s1".into()),
            version: Some("2025-11-25".into()),
        };
        let call =
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__Echo"}});
        let names = |h: &[(HeaderName, HeaderValue)]| {
            h.iter()
                .map(|(k, v)| format!("{k}={}", v.to_str().unwrap()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&route_headers(&call, &session, None)),
            ["mcp-session-id=s1", "mcp-protocol-version=2025-11-25"]
        );
        let modern = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
            "name":"a__Echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}});
        assert_eq!(
            names(&route_headers(&modern, &Session::default(), None)),
            [
                "mcp-protocol-version=2026-07-28",
                "mcp-method=tools/call",
                "mcp-name=a__Echo"
            ]
        );
        let note = json!({"jsonrpc":"2.0","method":"notifications/progress"});
        assert_eq!(
            names(&route_headers(
                &note,
                &Session::default(),
                Some("2026-07-28")
            )),
            [
                "mcp-protocol-version=2026-07-28",
                "mcp-method=notifications/progress"
            ]
        );
        assert!(route_headers(&note, &Session::default(), None).is_empty());
    }

    #[test]
    fn header_values_are_wrapped_when_they_must_be() {
        assert_eq!(header_text("laptop__Bash"), "laptop__Bash");
        assert_eq!(header_text("a b"), "a b");
        assert_eq!(header_text("café"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(header_text(" x"), "=?base64?IHg=?=");
        assert_eq!(header_text("a\r\nb"), "=?base64?YQ0KYg==?=");
    }
}
