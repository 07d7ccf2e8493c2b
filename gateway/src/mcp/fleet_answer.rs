//! What every fleet tool's answer is made of: its arguments read against its own
//! shape, the error it gives (a tool error the model can correct, or the protocol
//! error an unknown name gets), and a result holding structured content.

use super::result::{self, BadCursor};
use gsv_protocol::names::NameError;
use gsv_protocol::selector::SelectorError;
use gsv_protocol::{ErrorCode, ErrorShape};
use rmcp::model::CallToolResult;
use rmcp::ErrorData;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use thiserror::Error;

/// Why a fleet tool could not answer.
#[derive(Debug, Error)]
pub enum FleetError {
    #[error("invalid_args: {0}")]
    Args(serde_json::Error),
    #[error("invalid_args: select: {0}")]
    Select(#[from] SelectorError),
    #[error("invalid_args: {0}")]
    Cursor(#[from] BadCursor),
    #[error("invalid_args: {what} {value:?}: {reason}")]
    Name {
        what: &'static str,
        value: String,
        reason: NameError,
    },
    /// A node the session does not see: unknown, outside its token's policy or its
    /// `?select=` alike.
    #[error("unknown node: {0}")]
    NoNode(String),
    /// A tool the session does not see, whichever the reason.
    #[error("unknown tool: {0}")]
    NoTool(String),
}

impl From<FleetError> for ErrorData {
    fn from(e: FleetError) -> Self {
        match e {
            FleetError::NoTool(name) => result::not_found(&name),
            FleetError::NoNode(_) => ErrorData::invalid_params(e.to_string(), None),
            other => ErrorData::invalid_params(other.to_string(), None),
        }
    }
}

impl FleetError {
    /// How the model hears of it: bad arguments as a tool error it can correct (as
    /// for any tool whose arguments fail its schema), unknown names as the protocol
    /// error a flat call of an unknown tool gets.
    pub fn into_result(self) -> Result<CallToolResult, ErrorData> {
        match self {
            FleetError::Args(_)
            | FleetError::Select(_)
            | FleetError::Cursor(_)
            | FleetError::Name { .. } => {
                let message = self.to_string();
                let message = message.trim_start_matches("invalid_args: ").to_owned();
                Ok(result::error_result(&ErrorShape::new(
                    ErrorCode::InvalidArgs,
                    message,
                )))
            }
            other => Err(other.into()),
        }
    }
}

pub fn parse<T: for<'de> Deserialize<'de>>(
    args: Option<Map<String, Value>>,
) -> Result<T, FleetError> {
    serde_json::from_value(Value::Object(args.unwrap_or_default())).map_err(FleetError::Args)
}

/// A tool result holding `value` as structured content (and its JSON as text).
pub fn structured<T: Serialize>(value: &T) -> CallToolResult {
    let raw = json!({"content": [], "structuredContent": value}).to_string();
    result::call_result(&raw).unwrap_or_else(|e| {
        result::error_result(&ErrorShape::new(ErrorCode::Internal, e.to_string()))
    })
}
