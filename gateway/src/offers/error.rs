//! Why showing or accepting a node's offer failed: the node is not known (or not
//! visible to the caller, which reads the same), or the store failed.

use crate::error::{into_shape, WireError};
use crate::store::StoreError;
use gsv_protocol::ErrorCode;
use thiserror::Error;

/// A failed `nodes.show` or `nodes.acceptTools`.
#[derive(Debug, Error)]
pub enum OfferError {
    /// Never connected since the gateway started, or none of it is visible to the
    /// caller: the same answer, so an agent learns nothing of nodes it may not see.
    #[error("no node named {node} is known")]
    UnknownNode { node: String },
    #[error("store of accepted offers: {0}")]
    Store(#[from] StoreError),
    /// The store's blocking task failed.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

impl WireError for OfferError {
    fn code(&self) -> ErrorCode {
        match self {
            OfferError::UnknownNode { .. } => ErrorCode::NotFound,
            OfferError::Store(_) | OfferError::Task(_) => ErrorCode::Internal,
        }
    }
}

into_shape!(OfferError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_nodes_are_not_found() {
        let e = OfferError::UnknownNode { node: "lab".into() };
        let shape = e.to_shape();
        assert_eq!(
            (shape.code, shape.message.as_str()),
            (ErrorCode::NotFound, "no node named lab is known")
        );
        assert_eq!(e.status().as_u16(), 404);
        let e = OfferError::Store(StoreError::TooNew(9));
        assert_eq!(e.code(), ErrorCode::Internal);
    }
}
