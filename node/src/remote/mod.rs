//! Nodes that work on another host: over SSH (agentless: nothing is installed on
//! the host) or inside a container through its engine's `exec`.
//!
//! The node process runs where it can reach the host and the gateway; its tools do
//! their work on the host through a few POSIX shells kept open there
//! ([`channel`], [`host`]). Guards (blocklist, approvals, `--confine`, `--read-only`,
//! `--tools`) are the local node's own code and apply unchanged; paths are checked on
//! the host against the workspace there.

pub mod channel;
pub mod container;
pub mod error;
pub mod facts;
pub mod host;
pub mod jobs;
pub mod program;
pub mod quote;
pub mod ssh;
pub mod target;
pub mod watch;

pub use error::RemoteError;
pub use host::{Lane, Reach, RemoteHost, MAX_REPLY};
pub use target::SshTarget;
