//! Why a node's tool declaration, or a call's arguments, fail validation.
//!
//! Both are `invalid_args` on the wire, with a `details` object naming what is at
//! fault (the tool, the capability, the count, or the JSON pointer of the bad value),
//! so a node author or an agent can find it without parsing the message. The enum
//! lives with the tool sets that produce it; the handshake (declarations) and the
//! router (arguments) wrap it.

use crate::error::{into_shape, WireError};
use gsv_protocol::limits::MAX_TOOLS_PER_NODE;
use gsv_protocol::names::{NameError, MAX_NAMESPACED_LEN};
use gsv_protocol::{CapabilityError, ErrorCode, ErrorDetails};
use thiserror::Error;

/// A node declaration the gateway refuses (at connect).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeclarationError {
    #[error("a node may register at most {MAX_TOOLS_PER_NODE} tools")]
    TooManyTools { count: usize },
    #[error("unknown capability id {capability:?}")]
    UnknownCapability { capability: String },
    /// Under the third-party prefix `x.` but not of the form `x.<vendor>.<name>`.
    #[error("{reason}")]
    MalformedCapability { reason: CapabilityError },
    #[error("{reason}")]
    BadToolName { tool: String, reason: NameError },
    #[error("namespaced name {full} is longer than {MAX_NAMESPACED_LEN} characters")]
    NameTooLong { full: String, tool: String },
    #[error("tool {tool} is declared twice")]
    Duplicate { tool: String },
    #[error("tool {tool} declares unknown capability id {capability:?}")]
    ToolUnknownCapability { tool: String, capability: String },
    #[error("tool {tool}: {reason}")]
    ToolMalformedCapability {
        tool: String,
        reason: CapabilityError,
    },
    #[error(
        "tool {tool} uses capability {capability} which the node does not list in capabilities"
    )]
    CapabilityNotListed { tool: String, capability: String },
    #[error("tool {tool}: inputSchema must be a JSON object")]
    SchemaNotObject { tool: String },
    #[error("tool {tool}: inputSchema is not a valid JSON Schema: {reason}")]
    BadSchema { tool: String, reason: String },
}

impl WireError for DeclarationError {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidArgs
    }

    fn details(&self) -> Option<ErrorDetails> {
        use DeclarationError::*;
        Some(match self {
            TooManyTools { count } => ErrorDetails::Count { count: *count },
            UnknownCapability { capability } => ErrorDetails::Capability {
                capability: capability.clone(),
            },
            MalformedCapability { reason } => ErrorDetails::Capability {
                capability: reason.id().to_owned(),
            },
            ToolMalformedCapability { tool, reason } => ErrorDetails::ToolCapability {
                capability: reason.id().to_owned(),
                tool: tool.clone(),
            },
            BadToolName { tool, .. }
            | NameTooLong { tool, .. }
            | Duplicate { tool }
            | SchemaNotObject { tool }
            | BadSchema { tool, .. } => ErrorDetails::Tool { tool: tool.clone() },
            ToolUnknownCapability { tool, capability }
            | CapabilityNotListed { tool, capability } => ErrorDetails::ToolCapability {
                capability: capability.clone(),
                tool: tool.clone(),
            },
        })
    }
}

/// Call arguments that fail the tool's JSON Schema: the first failing value's JSON
/// pointer (`/` for the root) and the validator's reason.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("arguments of {tool} are invalid at {path}: {reason}")]
pub struct ArgsError {
    pub tool: String,
    pub path: String,
    pub reason: String,
}

impl WireError for ArgsError {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidArgs
    }

    fn details(&self) -> Option<ErrorDetails> {
        Some(ErrorDetails::Path {
            path: self.path.clone(),
        })
    }
}

into_shape!(DeclarationError, ArgsError);

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(e: &dyn WireError) -> String {
        serde_json::to_string(&e.to_shape()).expect("shape")
    }

    #[test]
    fn declaration_errors_name_what_is_at_fault() {
        assert_eq!(
            wire(&DeclarationError::TooManyTools { count: 300 }),
            format!(
                r#"{{"code":"invalid_args","message":"a node may register at most {MAX_TOOLS_PER_NODE} tools","retryable":false,"details":{{"count":300}}}}"#
            )
        );
        assert_eq!(
            wire(&DeclarationError::UnknownCapability {
                capability: "made.up".into()
            }),
            r#"{"code":"invalid_args","message":"unknown capability id \"made.up\"","retryable":false,"details":{"capability":"made.up"}}"#
        );
        assert_eq!(
            wire(&DeclarationError::CapabilityNotListed {
                tool: "Read".into(),
                capability: "filesystem.read".into()
            }),
            r#"{"code":"invalid_args","message":"tool Read uses capability filesystem.read which the node does not list in capabilities","retryable":false,"details":{"capability":"filesystem.read","tool":"Read"}}"#
        );
        assert_eq!(
            wire(&DeclarationError::Duplicate {
                tool: "Read".into()
            }),
            r#"{"code":"invalid_args","message":"tool Read is declared twice","retryable":false,"details":{"tool":"Read"}}"#
        );
        let e = DeclarationError::BadToolName {
            tool: "a__b".into(),
            reason: NameError::ToolName("a__b".into()),
        };
        assert_eq!(
            e.to_shape().message,
            NameError::ToolName("a__b".into()).to_string()
        );
        assert_eq!(e.status().as_u16(), 400);
    }

    #[test]
    fn argument_errors_carry_their_path() {
        let e = ArgsError {
            tool: "Read".into(),
            path: "/path".into(),
            reason: "5 is not of type \"string\"".into(),
        };
        assert_eq!(
            wire(&e),
            r#"{"code":"invalid_args","message":"arguments of Read are invalid at /path: 5 is not of type \"string\"","retryable":false,"details":{"path":"/path"}}"#
        );
    }
}
