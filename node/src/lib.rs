//! gsv-node: the program that runs on every machine of the fleet.
//!
//! A node dials *out* to the gateway over WebSocket (so it works from behind NAT),
//! proves who it is, declares its tools and host facts, and then serves `tool.invoke`
//! calls until it is told to stop. It reconnects forever with jittered backoff, so a
//! gateway restart or a network blip only costs a short gap.
//!
//! # Floors
//!
//! Each module stands on one floor and names only modules on its own floor or below
//! (`tests/layers/` holds the code to it, with the list of what is still to move):
//!
//! - **connection**: [`runner`] (the reconnect loop: [`run`], [`run_with_registry`]),
//!   `registered` (one live connection after the handshake), `dispatch` (each request
//!   on it), `recover` (what a restarted process takes over from the journal),
//!   [`enroll`] (exchanging a join token for the credential, `gsv node install`) and
//!   [`error`] (why a run stops);
//! - **serving**: [`registry`] (the set of tools a node offers, with [`selection`]'s
//!   `--tools`/`--without`/`--read-only` applied), `state` (one run's shared state),
//!   `credential` and [`transfer`] (`gsv cp`'s node side);
//! - **tools**: [`tools`], the tools themselves. A tool that can work on another
//!   host (`--ssh`, `--container`) holds a [`tools::Host`]: made with `X::new(..)` it
//!   works on this machine, with `X::on(host, ..)` on the far host, and its far-host
//!   body lives in an `on_host.rs` beside the local one (`tools/read/on_host.rs`,
//!   `tools/git/on_host.rs`, ...); its declaration is the same either way;
//! - **remote**: [`remote`], the transport to another host and nothing of the tools:
//!   the shells kept open there over SSH or a container engine's `exec`, the jobs,
//!   watches and facts of that host, quoting for its shell;
//! - **guards**: [`guards`] (what no gateway can switch off: the shell blocklist,
//!   `--approve-shell`, `--approve-exec`, the approval posture), [`sessions`] (the
//!   process session manager behind Bash and Process) and [`config`] (what the CLI
//!   hands in, [`NodeConfig`]);
//! - **ground**: [`tool`] (the trait), [`probe`] (which binaries the host has),
//!   [`facts`] (what the node reports about its host, self-reported), [`events`]
//!   (node → gateway events, queued while disconnected), [`journal`] and [`ledger`]
//!   (calls and sessions a restarted process answers for), [`login_profile`],
//!   [`backoff`], `private_file`, [`beneath`] (opening beneath a directory without
//!   races) and [`protected`] (the files no tool may touch, which every tool's
//!   context carries).

pub mod backoff;
pub mod beneath;
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
pub mod protected;
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
