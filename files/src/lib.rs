//! The disk side of gsv's file transfers, shared by the two ends that read and write
//! a transferred file: the node (a `get` read, a `put` written) and `gsv cp` (the
//! other way round).
//!
//! - [`direct`]: direct I/O on transferred files where the filesystem does it well;
//! - [`received`]: a received file written as its chunks land, large aligned writes
//!   straight to the disk;
//! - [`sending`]: a file read for a transfer, uncached bytes straight from the disk;
//! - [`writeback`]: a received file's write-out started while it still arrives.
//!
//! It knows nothing of the wire: the transport (`gsv-transport`) carries the chunks,
//! this crate moves them between a socket's buffers and the disk.

pub mod direct;
pub mod received;
pub mod sending;
pub mod writeback;

pub use received::Received;
pub use sending::Sending;
pub use writeback::Writeback;
