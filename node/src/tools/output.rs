//! Typed structured content: how a tool's output type becomes its [`ToolResult`].
//!
//! What a tool returns in `structuredContent` is part of the wire contract (agents,
//! the MCP bridge and the end-to-end tests read it), so each shape is a
//! `#[derive(Serialize)]` type beside the tool that produces it, with its fields
//! documented there, never an object assembled with `json!`. The helpers here encode
//! such a value into the JSON a [`ToolResult`] carries.
//!
//! Encoding goes through [`serde_json::Value`], as `structuredContent` is one; the
//! derived types of this crate always encode. If one ever did not (a map keyed by
//! something other than strings, a hand-written `Serialize` that fails), the call
//! answers with a tool error that says so: nothing panics.

use gsv_protocol::{ContentBlock, ToolResult};
use serde::Serialize;

/// A successful result whose structured content is `output`, with the same JSON as
/// its text block (see [`ToolResult::structured`]).
pub fn structured(output: &impl Serialize) -> ToolResult {
    match serde_json::to_value(output) {
        Ok(value) => ToolResult::structured(value),
        Err(e) => unencodable(&e),
    }
}

/// A successful result: `text` for the model to read, `output` as structured content.
pub fn with_text(text: String, output: &impl Serialize) -> ToolResult {
    result(text, output, false)
}

/// A tool error (`isError: true`) that also carries `output` as structured content,
/// for failures a client should tell apart by more than their message.
pub fn error_with(text: String, output: &impl Serialize) -> ToolResult {
    result(text, output, true)
}

fn result(text: String, output: &impl Serialize, is_error: bool) -> ToolResult {
    match serde_json::to_value(output) {
        Ok(value) => ToolResult {
            content: vec![ContentBlock::Text { text }],
            structured_content: Some(value),
            is_error,
        },
        Err(e) => unencodable(&e),
    }
}

fn unencodable(e: &serde_json::Error) -> ToolResult {
    tracing::error!(error = %e, "a tool's structured output could not be encoded");
    ToolResult::error(format!(
        "the tool's result could not be encoded as JSON: {e}"
    ))
}

/// For `#[serde(skip_serializing_if = "...")]`: flags that appear only when true.
pub(crate) fn is_false(flag: &bool) -> bool {
    !*flag
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::ser::Error as _;
    use serde_json::json;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Out {
        some_field: u32,
        #[serde(skip_serializing_if = "is_false")]
        flag: bool,
    }

    struct Broken;

    impl Serialize for Broken {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(S::Error::custom("no"))
        }
    }

    #[test]
    fn results_carry_the_encoded_output() {
        let r = structured(&Out {
            some_field: 1,
            flag: false,
        });
        assert!(!r.is_error);
        assert_eq!(r.structured_content, Some(json!({"someField": 1})));
        assert_eq!(r.joined_text(), "{\n  \"someField\": 1\n}");
        let r = with_text(
            "one".to_owned(),
            &Out {
                some_field: 1,
                flag: true,
            },
        );
        assert!(!r.is_error);
        assert_eq!(r.joined_text(), "one");
        assert_eq!(
            r.structured_content,
            Some(json!({"someField": 1, "flag": true}))
        );
        let r = error_with("refused".to_owned(), &json!({"code": "denied"}));
        assert!(r.is_error);
        assert_eq!(r.structured_content, Some(json!({"code": "denied"})));
    }

    #[test]
    fn an_output_that_cannot_be_encoded_is_a_tool_error() {
        for r in [
            structured(&Broken),
            with_text("x".to_owned(), &Broken),
            error_with("x".to_owned(), &Broken),
        ] {
            assert!(r.is_error);
            assert_eq!(r.structured_content, None);
            assert!(r.joined_text().contains("could not be encoded"), "{r:?}");
        }
    }
}
