//! Why a transfer failed on the node, each with the stable code the caller sees.

use crate::tools::paths::AccessError;
use std::io;

/// A transfer the node could not go on with.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The path is refused (outside the workspace, protected) or cannot be opened.
    #[error("{0}")]
    Access(#[from] AccessError),
    /// The target exists and is not a regular file.
    #[error(
        "{path} is not a regular file (directories, devices, sockets and pipes are not copied)"
    )]
    NotAFile { path: String },
    /// A chunk that does not continue the file where it stands.
    #[error("chunk at offset {got} does not continue the file at {expected}")]
    OutOfOrder { expected: u64, got: u64 },
    /// More bytes than the announced size.
    #[error("{got} bytes is more than the {size} announced")]
    TooLong { size: u64, got: u64 },
    /// `finish` before every byte came.
    #[error("only {got} of {size} bytes arrived")]
    Short { size: u64, got: u64 },
    /// The bytes that arrived are not the ones sent: nothing was put in place.
    #[error("SHA-256 mismatch: the sender's file is {expected}, the bytes that arrived are {got}; nothing was written")]
    Corrupt { expected: String, got: String },
    /// Another copy to the same path holds its partial file (one ending on a lost
    /// connection lets go of it within moments): worth trying again.
    #[error("{path}: another copy of this file to this path is in progress")]
    InUse { path: String },
    /// The kernel's answer.
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

impl TransferError {
    /// The wire error code of this failure.
    pub fn code(&self) -> gsv_protocol::ErrorCode {
        use gsv_protocol::ErrorCode;
        match self {
            TransferError::Access(e) if e.code().is_some() => ErrorCode::Forbidden,
            TransferError::Access(AccessError::Io { source, .. })
                if source.kind() == io::ErrorKind::NotFound =>
            {
                ErrorCode::NotFound
            }
            TransferError::NotAFile { .. }
            | TransferError::OutOfOrder { .. }
            | TransferError::TooLong { .. }
            | TransferError::Short { .. }
            | TransferError::Corrupt { .. } => ErrorCode::InvalidArgs,
            TransferError::InUse { .. } => ErrorCode::Overloaded,
            TransferError::Access(_) | TransferError::Io { .. } => ErrorCode::Internal,
        }
    }

    pub(crate) fn io(path: &std::path::Path, source: io::Error) -> Self {
        TransferError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
