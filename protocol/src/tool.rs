//! Tool declarations (what a node offers) and tool results (what a call returns).
//!
//! Both are shaped like their Model Context Protocol counterparts (content blocks,
//! `structuredContent`, `isError`, annotations) so the gateway can expose any node tool
//! over MCP one to one, without translating.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Behaviour hints a tool declares about itself (MCP tool annotations).
/// Hints, not guarantees: policy never relies on them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// All four hints and a title, in the order MCP lists them.
    pub fn hints(
        title: &str,
        read_only: bool,
        destructive: bool,
        idempotent: bool,
        open_world: bool,
    ) -> Self {
        ToolAnnotations {
            title: Some(title.to_owned()),
            read_only_hint: Some(read_only),
            destructive_hint: Some(destructive),
            idempotent_hint: Some(idempotent),
            open_world_hint: Some(open_world),
        }
    }

    /// A tool that only reads this host's local state: read-only, not destructive,
    /// idempotent, closed world.
    pub fn local_read_only(title: &str) -> Self {
        Self::hints(title, true, false, true, false)
    }
}

/// A tool as a node declares it in `connect`. Names and capability are plain strings on
/// the wire; the gateway validates them so it can say exactly which tool is wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema (2020-12 or draft 7) of the `args` object.
    pub input_schema: Value,
    /// One capability id: from the closed set (see `Capability`) or a third party's
    /// own under the reserved prefix, `x.<vendor>.<name>` (see `capability::check`).
    pub capability: String,
    #[serde(default)]
    pub annotations: ToolAnnotations,
    /// Deadline used when the caller gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_timeout_ms: Option<u64>,
    /// Binaries the tool needs on the node's PATH (reported in `hostBinStatus`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_bins: Vec<String>,
    /// Whether a call needs an operator's approval by default (the tool's approval
    /// posture): the node answers `approval_required` to a call that carries no
    /// operator's approval, unless its owner waived it for this tool
    /// (`gsv node --no-approval TOOL`, which also clears this flag in what the node
    /// declares). Absent means `false`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub requires_approval: bool,
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

/// One block of a tool result's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Image {
        /// Base64 of the image bytes.
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

/// The result of a tool call. A tool that ran and failed returns `isError: true` with an
/// explanation in `content`; protocol-level failures are `res` errors instead.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult {
            content: vec![ContentBlock::Text { text: text.into() }],
            structured_content: None,
            is_error: false,
        }
    }

    /// A successful result whose structured JSON is also given as text, so clients that
    /// only read text blocks see the same data.
    pub fn structured(value: Value) -> Self {
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        ToolResult {
            content: vec![ContentBlock::Text { text }],
            structured_content: Some(value),
            is_error: false,
        }
    }

    /// A tool-level failure the model should read.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult {
            content: vec![ContentBlock::Text {
                text: message.into(),
            }],
            structured_content: None,
            is_error: true,
        }
    }

    /// The text blocks joined by newlines (what `gsv call` prints).
    pub fn joined_text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_shape_matches_mcp() {
        let r = ToolResult {
            content: vec![
                ContentBlock::Text { text: "hi".into() },
                ContentBlock::Image {
                    data: "AAAA".into(),
                    mime_type: "image/png".into(),
                },
            ],
            structured_content: Some(json!({"a": 1})),
            is_error: false,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image", "data": "AAAA", "mimeType": "image/png"}
                ],
                "structuredContent": {"a": 1},
                "isError": false
            })
        );
        assert_eq!(serde_json::from_value::<ToolResult>(v).unwrap(), r);
    }

    #[test]
    fn tool_def_defaults() {
        let d: ToolDef = serde_json::from_value(json!({
            "name": "Echo", "inputSchema": {"type": "object"}, "capability": "diagnostics.echo"
        }))
        .unwrap();
        assert_eq!(d.description, "");
        assert_eq!(d.annotations, ToolAnnotations::default());
        assert!(d.requires_bins.is_empty());
        assert!(!d.requires_approval);
        // Absent when false, so existing declarations keep their bytes.
        let v = serde_json::to_value(&d).unwrap();
        assert!(v.get("requiresApproval").is_none(), "{v}");
        let mut posture = d.clone();
        posture.requires_approval = true;
        let v = serde_json::to_value(&posture).unwrap();
        assert_eq!(v["requiresApproval"], json!(true));
        assert_eq!(serde_json::from_value::<ToolDef>(v).unwrap(), posture);
    }
}
