//! Why `POST /v1/nodes/{id}/probe` failed: the node is not there, cannot take the
//! request, went away, did not answer, answered nonsense, or answered with its own
//! error (passed on as it came). An HTTP-only path: each variant has its status
//! through its code.

use crate::error::{shape, WireError};
use crate::registry::Disconnected;
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape};
use thiserror::Error;

/// A probe that did not produce the node's answer.
#[derive(Debug, Error)]
pub enum ProbeError {
    #[error("no node named {node} is connected")]
    NoNode { node: String },
    #[error("node cannot take requests now")]
    Busy,
    #[error(transparent)]
    Disconnected(#[from] Disconnected),
    #[error("node did not answer the probe")]
    Timeout,
    #[error("node sent a malformed probe result: {0}")]
    Malformed(serde_json::Error),
    /// The node's own error answer.
    #[error("{}", .0.message)]
    Node(ErrorShape),
}

impl WireError for ProbeError {
    fn code(&self) -> ErrorCode {
        match self {
            ProbeError::NoNode { .. } => ErrorCode::NotFound,
            ProbeError::Busy => ErrorCode::Overloaded,
            ProbeError::Disconnected(e) => e.code(),
            ProbeError::Timeout => ErrorCode::Timeout,
            ProbeError::Malformed(_) => ErrorCode::Internal,
            ProbeError::Node(e) => e.code,
        }
    }

    fn details(&self) -> Option<ErrorDetails> {
        match self {
            ProbeError::Disconnected(e) => e.details(),
            _ => None,
        }
    }

    /// The node's own answer goes on exactly as it came.
    fn to_shape(&self) -> ErrorShape {
        match self {
            ProbeError::Node(e) => e.clone(),
            other => shape(other.code(), other.to_string(), other.details()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::NodeId;

    #[test]
    fn each_variant_has_its_code_status_and_message() {
        let malformed = serde_json::from_str::<u8>("x").expect_err("not a number");
        let why = malformed.to_string();
        let node = ErrorShape::new(ErrorCode::Denied, "refused by the node")
            .with(ErrorDetails::Rule { rule: "r".into() });
        let cases = [
            (
                ProbeError::NoNode { node: "lab".into() },
                ErrorCode::NotFound,
                404,
                "no node named lab is connected".to_owned(),
            ),
            (
                ProbeError::Busy,
                ErrorCode::Overloaded,
                429,
                "node cannot take requests now".to_owned(),
            ),
            (
                ProbeError::Disconnected(Disconnected {
                    node: NodeId::parse("lab").expect("id"),
                }),
                ErrorCode::NodeDisconnected,
                502,
                "node lab disconnected while the call was running; it may have run".to_owned(),
            ),
            (
                ProbeError::Timeout,
                ErrorCode::Timeout,
                504,
                "node did not answer the probe".to_owned(),
            ),
            (
                ProbeError::Malformed(malformed),
                ErrorCode::Internal,
                500,
                format!("node sent a malformed probe result: {why}"),
            ),
            (
                ProbeError::Node(node.clone()),
                ErrorCode::Denied,
                403,
                "refused by the node".to_owned(),
            ),
        ];
        for (e, code, status, message) in cases {
            let shape = e.to_shape();
            assert_eq!(
                (shape.code, shape.message.as_str()),
                (code, message.as_str())
            );
            assert_eq!(e.status().as_u16(), status, "{e}");
        }
        assert_eq!(ProbeError::Node(node.clone()).to_shape(), node);
    }
}
