//! Why a selector, a label change or an inventory listing was refused, mapped once to
//! wire codes: bad selectors and labels are `invalid_args` (HTTP 400) with the
//! parser's message, which names the term or label at fault.

use crate::error::{into_shape, WireError};
use crate::store::StoreError;
use gsv_protocol::{ErrorCode, LabelError, SelectorError};
use thiserror::Error;

/// A refused inventory request.
#[derive(Debug, Error)]
pub enum InventoryError {
    /// A selector that does not parse (`nodes.list {select}`, `?select=`).
    #[error("bad selector: {0}")]
    Selector(SelectorError),
    /// A label key or value that breaks the rules, or too many labels.
    #[error("bad label: {0}")]
    Label(LabelError),
    /// Relabelling a node id the gateway does not know (never registered since it
    /// started, no active node or join token, never labelled).
    #[error("no node named {node} is known (enroll it first: gsv token create node {node})")]
    UnknownNode { node: String },
    #[error("store of node labels: {0}")]
    Store(#[from] StoreError),
    /// The store's blocking task failed.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

impl From<rusqlite::Error> for InventoryError {
    fn from(e: rusqlite::Error) -> Self {
        InventoryError::Store(e.into())
    }
}

impl WireError for InventoryError {
    fn code(&self) -> ErrorCode {
        match self {
            InventoryError::Selector(_) | InventoryError::Label(_) => ErrorCode::InvalidArgs,
            InventoryError::UnknownNode { .. } => ErrorCode::NotFound,
            InventoryError::Store(_) | InventoryError::Task(_) => ErrorCode::Internal,
        }
    }
}

into_shape!(InventoryError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_code_status_and_message() {
        let sel = gsv_protocol::Selector::parse("env=prod,fact.colour=red").expect_err("bad");
        let e = InventoryError::Selector(sel);
        let shape = e.to_shape();
        assert_eq!(shape.code, ErrorCode::InvalidArgs);
        assert!(
            shape
                .message
                .starts_with("bad selector: term 2 `fact.colour=red`"),
            "{}",
            shape.message
        );
        assert_eq!(e.status().as_u16(), 400);
        let e = InventoryError::Label(LabelError::Key("Env".into()));
        assert_eq!(e.code(), ErrorCode::InvalidArgs);
        assert!(e.to_string().starts_with("bad label: label key \"Env\""));
        let e = InventoryError::UnknownNode { node: "db9".into() };
        assert_eq!((e.code(), e.status().as_u16()), (ErrorCode::NotFound, 404));
        assert_eq!(
            InventoryError::Store(StoreError::TooNew(9)).code(),
            ErrorCode::Internal
        );
    }
}
