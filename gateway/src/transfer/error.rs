//! Why the gateway refused or ended a file transfer, each with its wire code.

use crate::error::WireError;
use gsv_protocol::{ErrorCode, ErrorShape};
use thiserror::Error;

/// A transfer request the gateway did not carry out.
#[derive(Debug, Error)]
pub enum TransferError {
    #[error("transfer params: {0}")]
    BadParams(serde_json::Error),
    #[error("{0:?} is not a node id")]
    BadNode(String),
    /// The token may not use the file tool the transfer stands for.
    #[error("{name} is not allowed for this token")]
    Denied { name: String },
    /// The approval queue refused the request (too many waiting for this token).
    #[error(transparent)]
    Approval(#[from] crate::approvals::ApprovalError),
    #[error("an operator denied approval request {approval} for this transfer")]
    ApprovalDenied { approval: String },
    #[error("approval request {approval} for this transfer was not decided in time")]
    ApprovalExpired { approval: String },
    #[error("the copy was cancelled: its caller went away")]
    Cancelled,
    #[error("{path} on node {node} changed while the copy began; copy it again")]
    Changed { node: String, path: String },
    #[error("{0}")]
    BadPlace(String),
    /// A directory copy's request under a `confirm` rule that is not part of an
    /// approved copy (the approval is asked for with the tree's directories).
    #[error("{name} needs an operator's approval for this token: a directory copy asks for it once, with its directories (transfer.place step dirs), and this request is not part of an approved copy")]
    TreeNeedsApproval { name: String },
    #[error("node {node} is not connected")]
    NodeOffline { node: String },
    #[error("node {node} does not offer {tool}")]
    NoTool { node: String, tool: &'static str },
    #[error("this token has {per_token} transfers running; wait for one to end")]
    TooMany { per_token: usize },
    #[error("node {node} takes part in {per_node} transfers already; wait for one to end")]
    NodeBusy { node: String, per_node: usize },
    #[error("this token has {per_token} transfers on node {node}, its share; wait for one to end")]
    TokenBusyOnNode { node: String, per_token: usize },
    #[error("no transfer {id} of this connection")]
    Unknown { id: uuid::Uuid },
    #[error("{what} is for a put; this transfer is a get")]
    NotAPut { what: &'static str },
    #[error("{what} is for a get; this transfer is a put")]
    NotAGet { what: &'static str },
    #[error("node {node} went away during the transfer")]
    Disconnected { node: String },
    #[error("node {node} did not answer in time")]
    Timeout { node: String },
    #[error("node {node} has too many calls waiting")]
    Busy { node: String },
    /// The node's own answer.
    #[error("{}", .0.message)]
    Node(ErrorShape),
}

impl WireError for TransferError {
    fn code(&self) -> ErrorCode {
        match self {
            TransferError::BadParams(_)
            | TransferError::BadNode(_)
            | TransferError::NotAPut { .. }
            | TransferError::NotAGet { .. } => ErrorCode::InvalidArgs,
            TransferError::Denied { .. } | TransferError::TreeNeedsApproval { .. } => {
                ErrorCode::Forbidden
            }
            TransferError::Approval(e) => e.code(),
            TransferError::ApprovalDenied { .. } => ErrorCode::Denied,
            TransferError::ApprovalExpired { .. } => ErrorCode::Timeout,
            TransferError::Cancelled => ErrorCode::Cancelled,
            TransferError::Changed { .. } => ErrorCode::InvalidArgs,
            TransferError::BadPlace(_) => ErrorCode::InvalidArgs,
            TransferError::NodeOffline { .. } => ErrorCode::NodeOffline,
            TransferError::NoTool { .. } | TransferError::Unknown { .. } => ErrorCode::NotFound,
            TransferError::TooMany { .. }
            | TransferError::NodeBusy { .. }
            | TransferError::TokenBusyOnNode { .. }
            | TransferError::Busy { .. } => ErrorCode::Overloaded,
            TransferError::Disconnected { .. } => ErrorCode::NodeDisconnected,
            TransferError::Timeout { .. } => ErrorCode::Timeout,
            TransferError::Node(shape) => shape.code,
        }
    }

    fn details(&self) -> Option<gsv_protocol::ErrorDetails> {
        match self {
            TransferError::Approval(e) => e.details(),
            TransferError::ApprovalDenied { approval }
            | TransferError::ApprovalExpired { approval } => {
                Some(gsv_protocol::ErrorDetails::Approval {
                    approval: approval.clone(),
                })
            }
            _ => None,
        }
    }

    fn to_shape(&self) -> ErrorShape {
        match self {
            TransferError::Node(shape) => shape.clone(),
            _ => crate::error::shape(self.code(), self.to_string(), self.details()),
        }
    }
}
