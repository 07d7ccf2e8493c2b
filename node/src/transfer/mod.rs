//! The node's side of file transfers (`gsv cp`): a file read out in chunks
//! ([`Outgoing`]) or written in from chunks ([`Incoming`]), with the same path rules as
//! the file tools (the workspace, `--confine`, protected directories).
//!
//! Both are plain blocking file work with no knowledge of connections: the session
//! that relays chunks and credits drives them. An incoming file is written beside its
//! target as `.NAME.gsv-part-KEY`, hashed as it grows, and renamed into place only
//! when every byte is there and its SHA-256 matches the sender's; a partial file is
//! kept for a resumed copy of the same file (same target, size and mtime), whose
//! bytes are read and hashed again before any more are taken.

mod error;
mod incoming;
mod lane;
mod outgoing;
mod session;
pub(crate) mod tree;

pub use error::TransferError;
pub use incoming::Incoming;
pub(crate) use lane::LaneDial;
pub use outgoing::Outgoing;
pub(crate) use session::Transfers;
pub use session::MAX_TRANSFERS;

use sha2::{Digest, Sha256};

/// Lower-case hex of a finished SHA-256.
pub(crate) fn hex(hasher: Sha256) -> String {
    ::hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests;
