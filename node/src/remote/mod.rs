//! The transport of nodes that work on another host: over SSH (agentless: nothing is
//! installed on the host) or inside a container through its engine's `exec`.
//!
//! The node process runs where it can reach the host and the gateway; its tools do
//! their work on the host through a few POSIX shells kept open there
//! ([`channel`], [`host`]). This module is transport only and names nothing of
//! [`crate::tools`]: each tool's far-host body is in its own `on_host.rs`
//! (`crate::tools::read::on_host`, ...), made with `X::on(host)`, and uses this from
//! above. Besides the shells: jobs left running there ([`jobs`], [`watch`]), the
//! host's facts for the probe ([`facts`], through [`crate::probe::FarHost`]), and
//! quoting for its shell ([`quote`]). Guards (blocklist, approvals, `--confine`,
//! `--read-only`, `--tools`) are the local node's own code and apply unchanged; paths
//! are checked on the host against the workspace there.

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
