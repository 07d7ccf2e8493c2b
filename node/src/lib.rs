//! gsv-node: the program that runs on every machine of the fleet.
//!
//! A node dials *out* to the gateway over WebSocket (so it works from behind NAT),
//! proves who it is, declares its tools and host facts, and then serves `tool.invoke`
//! calls until it is told to stop. It reconnects forever with jittered backoff, so a
//! gateway restart or a network blip only costs a short gap.
//!
//! The pieces, each in its own module:
//! - [`config`]: what the CLI hands in ([`NodeConfig`]).
//! - [`runner`]: the reconnect loop ([`run`], [`run_with_registry`]).
//! - [`enroll`]: one connect that exchanges a join token for the credential, without
//!   serving (`gsv node install`).
//! - `connection` / `session` / `dispatch`: one dial + handshake, one live connection,
//!   and the handling of each request on it.
//! - [`tool`], [`registry`], [`tools`]: the tool trait, the set a node offers, and the
//!   tools themselves.
//! - [`probe`]: which binaries the host has, reported as runtime facts.
//! - [`facts`]: what the node reports about its host (self-reported: OS, kernel,
//!   memory, ...), in `connect` and on every `node.probe`.
//! - [`login_profile`]: whether the files the login shell reads changed since the
//!   node recorded them (reported as `runtime.loginProfile`).
//! - [`events`]: node → gateway events from tools (queued while disconnected).
//! - [`sessions`]: the process session manager behind the Bash and Process tools.
//! - [`journal`]: what a restarted node process needs to answer for the calls and
//!   sessions of the one before it (a node crash loses nothing silently).
//! - [`guards`]: node-side guards no gateway can switch off (the shell blocklist,
//!   `--approve-shell`, the tools' approval posture; `--read-only` is applied by the
//!   registry).
//! - [`selection`]: which tools the node offers (`--tools`, `--without`,
//!   `--read-only`), applied by the registry.

pub mod backoff;
pub mod config;
mod credential;
mod dispatch;
pub mod enroll;
pub mod error;
pub mod events;
pub mod facts;
pub mod guards;
pub mod journal;
pub mod ledger;
pub mod login_profile;
mod private_file;
pub mod probe;
mod recover;
mod registered;
pub mod registry;
pub mod remote;
pub mod runner;
pub mod selection;
pub mod sessions;
mod state;
pub mod tool;
pub mod tools;
pub mod transfer;

pub use config::NodeConfig;
pub use error::NodeError;
pub use events::{EventError, EventSender};
pub use registry::{Registry, RegistryError};
pub use runner::{run, run_with_registry};
pub use tool::{Tool, ToolContext};

/// Re-exported so tool implementations outside this crate use the same macro version.
pub use async_trait::async_trait;
