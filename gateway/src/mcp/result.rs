//! Mapping between gsv's wire shapes and MCP's: tool entries to MCP tools, node results
//! and routing errors to `CallToolResult`s, and `tools/list` pages.
//!
//! Pure functions without I/O, shared by the gateway's `/mcp` endpoint and the
//! `gsv mcp` stdio bridge, so both present the fleet to MCP clients the same way.
//! gsv tool results are already shaped like MCP's (`content`, `structuredContent`,
//! `isError`), so a result maps one to one; the only addition is the JSON text block
//! the MCP spec asks for next to `structuredContent`.

use gsv_protocol::method::ToolEntry;
use gsv_protocol::{ErrorCode, ErrorShape};
use rmcp::model::{CallToolResult, ContentBlock, ResultType, Tool, ToolAnnotations};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::Arc;
use thiserror::Error;

/// How many tools one `tools/list` page holds.
pub const PAGE_SIZE: usize = 100;

/// The prefix of every cursor this server hands out (an opaque string to clients).
const CURSOR_PREFIX: &str = "after:";

/// A cursor a client sent that this server never made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid cursor {0:?}: pass back the nextCursor of the previous page")]
pub struct BadCursor(pub String);

/// The MCP form of one namespaced tool: its schema as declared, its description
/// prefixed with the node (`[laptop] ...`) and its annotations.
pub fn tool_from_entry(entry: &ToolEntry) -> Tool {
    tool_on(entry, None)
}

/// [`tool_from_entry`] with the node's OS in the prefix when known
/// (`[web1 · linux] ...`), so an agent picks the right shell and paths.
pub fn tool_on(entry: &ToolEntry, os: Option<&str>) -> Tool {
    let schema = match &entry.input_schema {
        Value::Object(map) => map.clone(),
        // The gateway refuses declarations whose schema is not an object; a stub keeps
        // a listing from failing if one ever slips through.
        _ => {
            let mut m = Map::new();
            m.insert("type".into(), Value::String("object".into()));
            m
        }
    };
    let prefix = match os.filter(|o| !o.is_empty()) {
        Some(os) => format!("[{} \u{b7} {os}]", entry.node),
        None => format!("[{}]", entry.node),
    };
    let description = if entry.description.is_empty() {
        format!("{prefix} {} on node {}", entry.tool, entry.node)
    } else {
        format!("{prefix} {}", entry.description)
    };
    let a = &entry.annotations;
    // The title travels once, as the tool's own (with its node); the annotations keep
    // the hints. MCP gives destructiveHint and idempotentHint meaning only when a tool
    // is not read-only, so a read-only tool's listing leaves them out.
    let read_only = a.read_only_hint == Some(true);
    let hints = gsv_protocol::ToolAnnotations {
        title: None,
        destructive_hint: a.destructive_hint.filter(|_| !read_only),
        idempotent_hint: a.idempotent_hint.filter(|_| !read_only),
        ..a.clone()
    };
    let annotations = if hints == gsv_protocol::ToolAnnotations::default() {
        None
    } else {
        // rmcp's struct is non-exhaustive: build it through its serde form, which is
        // the same camelCase JSON gsv uses.
        serde_json::to_value(&hints)
            .ok()
            .and_then(|v| serde_json::from_value::<ToolAnnotations>(v).ok())
    };
    let mut tool = Tool::new(
        Cow::Owned(entry.name.clone()),
        Cow::Owned(description),
        Arc::new(schema),
    );
    tool.title = a.title.as_ref().map(|t| format!("{t} ({})", entry.node));
    tool.annotations = annotations;
    tool
}

/// One page of `entries` (sorted by name) after `cursor`; returns it and the cursor of
/// the next page, if there is one. Cursors name the last tool of the page, so a page
/// stays correct when tools come and go between requests.
pub fn page<'a>(
    entries: &'a [ToolEntry],
    cursor: Option<&str>,
    size: usize,
) -> Result<(&'a [ToolEntry], Option<String>), BadCursor> {
    let start = match cursor {
        None => 0,
        Some(c) => {
            let after = c
                .strip_prefix(CURSOR_PREFIX)
                .ok_or_else(|| BadCursor(c.to_owned()))?;
            entries.partition_point(|e| e.name.as_str() <= after)
        }
    };
    let size = size.max(1);
    let end = (start + size).min(entries.len());
    let slice = &entries[start..end];
    let next = (end < entries.len())
        .then(|| slice.last().map(|e| format!("{CURSOR_PREFIX}{}", e.name)))
        .flatten();
    Ok((slice, next))
}

/// The `tools/list` answer for one page of `entries`; `os_of` gives a node's OS for
/// the description prefix.
pub fn list_page<'a>(
    entries: &[ToolEntry],
    cursor: Option<&str>,
    os_of: impl Fn(&str) -> Option<&'a str>,
) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
    let (page, next) = page(entries, cursor, PAGE_SIZE)
        .map_err(|e| rmcp::ErrorData::invalid_params(e.to_string(), None))?;
    let mut out = rmcp::model::ListToolsResult::with_all_items(
        page.iter().map(|e| tool_on(e, os_of(&e.node))).collect(),
    );
    out.next_cursor = next;
    Ok(out)
}

/// Why a node's result could not be turned into an MCP result.
#[derive(Debug, Error)]
pub enum ResultError {
    #[error("the node's result is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the node's result is not an object")]
    NotObject,
}

/// A node's raw tool result as an MCP `CallToolResult`. Content blocks, `isError` and
/// `structuredContent` carry over unchanged; when `structuredContent` is present and no
/// text block already holds it, its JSON is appended as a text block (MCP: "a tool that
/// returns structured content SHOULD also return the serialized JSON in a TextContent
/// block"), for clients that only read text.
pub fn call_result(raw: &str) -> Result<CallToolResult, ResultError> {
    let mut value: Value = serde_json::from_str(raw)?;
    let obj = value.as_object_mut().ok_or(ResultError::NotObject)?;
    if !obj.get("content").is_some_and(Value::is_array) {
        obj.insert("content".into(), Value::Array(Vec::new()));
    }
    let structured_text = match obj.get("structuredContent") {
        Some(s) if !s.is_null() => {
            let already = obj
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| blocks.iter().any(|b| text_holds(b, s)));
            (!already).then(|| serde_json::to_string(s).unwrap_or_default())
        }
        _ => None,
    };
    let mut result: CallToolResult = serde_json::from_value(value)?;
    if let Some(text) = structured_text {
        result.content.push(ContentBlock::text(text));
    }
    result.result_type = Some(ResultType::COMPLETE);
    if result.is_error.is_none() {
        result.is_error = Some(false);
    }
    Ok(result)
}

/// Whether a content block is a text block whose text is the JSON of `structured`.
fn text_holds(block: &Value, structured: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("text")
        && block
            .get("text")
            .and_then(Value::as_str)
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .is_some_and(|v| &v == structured)
}

/// How a routing error reaches an MCP client.
pub enum Mapped {
    /// An execution problem the model should read: `isError: true` with
    /// `"<code>: <message>"`.
    ToolError(CallToolResult),
    /// A protocol problem (unknown tool): a JSON-RPC error.
    Protocol(rmcp::ErrorData),
}

/// Maps a routing error of the call of `name`. Unknown tools (`not_found`) and tools
/// outside the token's policy (`forbidden`, listed nowhere for this token) are one
/// and the same JSON-RPC invalid-params error ([`not_found`]), so a refusal tells
/// nothing of what exists beyond the token's reach; everything else (offline,
/// disconnected, timeout, denied, too large, invalid arguments...) is a tool error the
/// model can read and act on.
pub fn map_error(e: &ErrorShape, name: &str) -> Mapped {
    match e.code {
        ErrorCode::NotFound | ErrorCode::Forbidden => Mapped::Protocol(not_found(name)),
        _ => Mapped::ToolError(error_result(e)),
    }
}

/// The one answer to a call of a tool the session does not see, whether it does not
/// exist, its token may not call it or its node is outside the session's `?select=`,
/// in the flat and the fleet view alike.
pub fn not_found(name: &str) -> rmcp::ErrorData {
    rmcp::ErrorData::invalid_params(
        format!("unknown tool: {name} (not_found: no such tool for this token)"),
        None,
    )
}

/// `isError: true` with `"<code>: <message>"` as its text.
pub fn error_result(e: &ErrorShape) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {}",
        e.code, e.message
    ))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(name: &str) -> ToolEntry {
        let (node, tool) = name.split_once("__").unwrap();
        serde_json::from_value(json!({
            "name": name, "node": node, "tool": tool, "description": "Reads a file.",
            "inputSchema": {"type": "object"}, "capability": "filesystem.read",
            "annotations": {"readOnlyHint": true, "title": "Read file"}, "online": true
        }))
        .unwrap()
    }

    #[test]
    fn tools_carry_node_prefix_schema_and_annotations() {
        let t = tool_from_entry(&entry("laptop__Read"));
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["name"], "laptop__Read");
        assert_eq!(v["description"], "[laptop] Reads a file.");
        let w = serde_json::to_value(tool_on(&entry("web1__Read"), Some("linux"))).unwrap();
        assert_eq!(w["description"], "[web1 \u{b7} linux] Reads a file.");
        assert_eq!(v["inputSchema"], json!({"type": "object"}));
        assert_eq!(v["annotations"]["readOnlyHint"], true);
        assert_eq!(v["title"], "Read file (laptop)");
    }

    #[test]
    fn read_only_tools_leave_out_the_hints_mcp_ignores_for_them() {
        let mut e = entry("laptop__Read");
        e.annotations = gsv_protocol::ToolAnnotations::hints("Read file", true, false, true, false);
        let v = serde_json::to_value(tool_from_entry(&e)).unwrap();
        assert_eq!(
            v["annotations"],
            json!({"readOnlyHint": true, "openWorldHint": false})
        );
        e.annotations = gsv_protocol::ToolAnnotations::hints("Run", false, true, false, true);
        let v = serde_json::to_value(tool_from_entry(&e)).unwrap();
        assert_eq!(
            v["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
        );
    }

    #[test]
    fn pages_follow_cursors_and_refuse_foreign_ones() {
        let entries: Vec<ToolEntry> = (0..5).map(|i| entry(&format!("n{i}__T"))).collect();
        let (p1, c1) = page(&entries, None, 2).unwrap();
        assert_eq!(p1.len(), 2);
        let (p2, c2) = page(&entries, c1.as_deref(), 2).unwrap();
        assert_eq!(p2[0].name, "n2__T");
        let (p3, c3) = page(&entries, c2.as_deref(), 2).unwrap();
        assert_eq!((p3.len(), c3), (1, None));
        assert!(page(&entries, Some("garbage"), 2).is_err());
        // A cursor past a tool that has gone away still resumes in order.
        let (p, _) = page(&entries, Some("after:n1__Z"), 2).unwrap();
        assert_eq!(p[0].name, "n2__T");
    }

    #[test]
    fn results_map_one_to_one_plus_structured_json_text() {
        let r = call_result(
            r#"{"content":[{"type":"text","text":"1\thi"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"structuredContent":{"lines":1},"isError":false}"#,
        )
        .unwrap();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"].as_array().unwrap().len(), 3);
        assert_eq!(v["content"][1]["type"], "image");
        assert_eq!(
            v["content"][2],
            json!({"type": "text", "text": r#"{"lines":1}"#})
        );
        assert_eq!(v["structuredContent"], json!({"lines": 1}));
        assert_eq!(v["isError"], false);

        // Already present as text: not repeated.
        let r = call_result(
            r#"{"content":[{"type":"text","text":"{\n  \"a\": 1\n}"}],"structuredContent":{"a":1}}"#,
        )
        .unwrap();
        assert_eq!(r.content.len(), 1);

        let r =
            call_result(r#"{"content":[{"type":"text","text":"nope"}],"isError":true}"#).unwrap();
        assert_eq!(r.is_error, Some(true));
        assert!(call_result("[1]").is_err());
    }

    #[test]
    fn errors_map_by_kind() {
        let offline = ErrorShape::new(ErrorCode::NodeOffline, "node x is offline since t");
        match map_error(&offline, "x__Read") {
            Mapped::ToolError(r) => {
                assert_eq!(r.is_error, Some(true));
                let v = serde_json::to_value(&r).unwrap();
                assert_eq!(
                    v["content"][0]["text"],
                    "node_offline: node x is offline since t"
                );
            }
            Mapped::Protocol(_) => panic!("offline is a tool error"),
        }
        let unknown = ErrorShape::new(ErrorCode::NotFound, "no node named y is connected");
        let forbidden = ErrorShape::new(ErrorCode::Forbidden, "this token may not call y__Read");
        let (Mapped::Protocol(a), Mapped::Protocol(b)) = (
            map_error(&unknown, "y__Read"),
            map_error(&forbidden, "y__Read"),
        ) else {
            panic!("unknown and forbidden tools are protocol errors")
        };
        assert_eq!(a.message, b.message, "a refusal must not tell which it was");
    }
}
