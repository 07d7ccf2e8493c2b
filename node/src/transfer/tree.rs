//! The node's side of directory copies (`gsv cp -r`): `transfer.list` reads a tree
//! into a manifest, `transfer.place` makes a tree's directories and symlinks and
//! settles its directories' modes and mtimes. The files themselves come and go as
//! ordinary transfers.
//!
//! The top directory is opened by the file tools' path rules ([`PathPolicy`]: the
//! workspace, `--confine` with its race-free open beneath the workspace, protected
//! directories). Everything below it is reached from that descriptor one name at a
//! time with `O_NOFOLLOW`, so no symlink, whether in the tree before the copy or made
//! by it, is ever followed, and nothing outside the top can be reached; protected
//! directories are left out of a listing and refused as a place to write. A
//! client's manifest is checked before anything is done
//! ([`gsv_protocol::transfer::tree::check_step`]): no absolute, `..` or repeated
//! entry.

mod list;
mod place;

use crate::state::NodeState;
use crate::tools::paths::{AccessError, PathPolicy};
use gsv_protocol::frame::{encode_err, encode_ok};
use gsv_protocol::transfer::tree::{ListParams, PlaceParams};
use gsv_protocol::{ErrorCode, ErrorShape};
use std::sync::Arc;
use tokio::sync::mpsc;

pub use gsv_protocol::transfer::tree::MAX_TREE_DEPTH;

/// Why a tree request failed on the node, each with its wire code.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The top is refused by the path rules or cannot be opened.
    #[error("{0}")]
    Access(#[from] AccessError),
    /// The manifest is refused (a bad path, a duplicate, over the bounds).
    #[error("{0}")]
    Manifest(#[from] gsv_protocol::transfer::tree::TreeError),
    /// Deeper than [`MAX_TREE_DEPTH`].
    #[error("{path} is more than {MAX_TREE_DEPTH} directories deep")]
    TooDeep { path: String },
    /// The listing does not fit in one answer.
    #[error("the listing of {path} is {bytes} bytes, over the {limit}-byte answer limit")]
    ListingTooLarge {
        path: String,
        bytes: usize,
        limit: usize,
    },
    /// A name that is not UTF-8 cannot travel in a manifest.
    #[error("{path}: a name that is not UTF-8 cannot be copied")]
    NotUtf8 { path: String },
    /// Something other than what the tree needs is in the way (a file or symlink
    /// where a directory goes, a directory where a file or symlink goes).
    #[error("{path} is in the way: it is a {found}, and the copy needs a {wanted} there")]
    InTheWay {
        path: String,
        found: &'static str,
        wanted: &'static str,
    },
    /// A protected directory (the node's or the gateway's data).
    #[error("Refused: {path} is protected: the node's and the gateway's data directories are never written by copies")]
    Protected { path: String },
    /// The kernel's answer.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl TreeError {
    /// The wire error code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            TreeError::Access(e) if e.code().is_some() => ErrorCode::Forbidden,
            TreeError::Access(AccessError::Io { source, .. }) | TreeError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                ErrorCode::NotFound
            }
            TreeError::Access(AccessError::Io { source, .. }) | TreeError::Io { source, .. }
                if source.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
            {
                ErrorCode::InvalidArgs
            }
            TreeError::Protected { .. } => ErrorCode::Forbidden,
            TreeError::Manifest(e) => e.code(),
            TreeError::TooDeep { .. } | TreeError::ListingTooLarge { .. } => ErrorCode::TooLarge,
            TreeError::NotUtf8 { .. } | TreeError::InTheWay { .. } => ErrorCode::InvalidArgs,
            TreeError::Access(_) | TreeError::Io { .. } => ErrorCode::Internal,
        }
    }

    fn shape(&self) -> ErrorShape {
        ErrorShape::new(self.code(), self.to_string())
    }

    pub(crate) fn io(path: &std::path::Path, source: impl Into<std::io::Error>) -> Self {
        TreeError::Io {
            path: path.display().to_string(),
            source: source.into(),
        }
    }
}

/// What a file-type is called in messages.
fn kind_name(ft: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType;
    match ft {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        _ => "special file",
    }
}

/// The node's path rules for a transfer, if it offers `tool` (`Read` to list, `Write`
/// to place), as it does for file transfers.
fn policy_for(node: &NodeState, tool: &str) -> Result<PathPolicy, ErrorShape> {
    if node.registry.get(tool).is_none() {
        return Err(ErrorShape::new(
            ErrorCode::Forbidden,
            format!(
                "node {} does not offer {tool}, so it does not copy directories {}",
                node.config.id,
                if tool == "Read" { "out" } else { "in" }
            ),
        ));
    }
    Ok(
        PathPolicy::new(node.config.workspace.clone(), node.config.confine)
            .with_protected(Arc::clone(&node.protected)),
    )
}

/// `transfer.list`: answers request `req` with the tree's [`Listing`].
///
/// [`Listing`]: gsv_protocol::transfer::tree::Listing
pub(crate) fn list(node: &Arc<NodeState>, text: &mpsc::Sender<String>, req: String, p: ListParams) {
    let node = Arc::clone(node);
    let text = text.clone();
    tokio::spawn(async move {
        let frame = match policy_for(&node, "Read") {
            Err(e) => encode_err(&req, &e),
            Ok(policy) => {
                let done = tokio::task::spawn_blocking(move || list::list(&policy, &p.path)).await;
                match done {
                    Ok(Ok(listing)) => encode_ok(&req, &listing),
                    Ok(Err(e)) => {
                        tracing::info!(error = %e, "transfer.list refused");
                        encode_err(&req, &e.shape())
                    }
                    Err(e) => encode_err(&req, &internal(&e)),
                }
            }
        };
        let _ = text.send(frame).await;
    });
}

/// `transfer.place`: answers request `req` with [`Placed`].
///
/// [`Placed`]: gsv_protocol::transfer::tree::Placed
pub(crate) fn place(
    node: &Arc<NodeState>,
    text: &mpsc::Sender<String>,
    req: String,
    p: PlaceParams,
) {
    let node = Arc::clone(node);
    let text = text.clone();
    tokio::spawn(async move {
        let frame = match policy_for(&node, "Write") {
            Err(e) => encode_err(&req, &e),
            Ok(policy) => {
                let done = tokio::task::spawn_blocking(move || place::place(&policy, p)).await;
                match done {
                    Ok(Ok(placed)) => encode_ok(&req, &placed),
                    Ok(Err(e)) => {
                        tracing::info!(error = %e, "transfer.place refused");
                        encode_err(&req, &e.shape())
                    }
                    Err(e) => encode_err(&req, &internal(&e)),
                }
            }
        };
        let _ = text.send(frame).await;
    });
}

fn internal(e: &tokio::task::JoinError) -> ErrorShape {
    ErrorShape::new(ErrorCode::Internal, format!("tree task failed: {e}"))
}

#[cfg(test)]
mod tests;
