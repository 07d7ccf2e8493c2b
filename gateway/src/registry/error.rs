//! The one error the registry itself produces: a pending call's node connection
//! closed under it.
//!
//! Pending calls receive the node's own answers as wire shapes (`CallOutcome`); this
//! is the error the gateway puts there instead when the connection is gone, and the
//! error a router or probe gives up with when the node does not come back. It says
//! the call was dispatched (it may have run), so a caller knows not to assume it did
//! not.

use crate::error::{into_shape, WireError};
use gsv_protocol::{ErrorCode, ErrorDetails, NodeId};
use thiserror::Error;

/// A call's node disconnected while the call was running.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("node {node} disconnected while the call was running; it may have run")]
pub struct Disconnected {
    pub node: NodeId,
}

impl WireError for Disconnected {
    fn code(&self) -> ErrorCode {
        ErrorCode::NodeDisconnected
    }

    fn details(&self) -> Option<ErrorDetails> {
        Some(ErrorDetails::disconnected(true, self.node.as_str()))
    }
}

into_shape!(Disconnected);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_the_call_may_have_run() {
        let node = NodeId::parse("laptop").expect("id");
        let e = Disconnected { node };
        assert_eq!(
            serde_json::to_string(&e.to_shape()).expect("shape"),
            r#"{"code":"node_disconnected","message":"node laptop disconnected while the call was running; it may have run","retryable":true,"details":{"dispatched":true,"node":"laptop"}}"#
        );
        assert_eq!(e.status().as_u16(), 502);
    }
}
