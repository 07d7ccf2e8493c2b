//! gsv-gateway: the central process nodes dial into and agents call through.
//!
//! It accepts node and agent WebSockets on one port (`/v1/node`, `/v1/agent`), serves
//! the fleet as one MCP server on the same port (`/mcp`), keeps the registry of
//! connected nodes and their tools, routes each agent's namespaced call to its node and
//! the result back, and serves the HTTP admin API, health and metrics, and the
//! one-line installer for new machines ([`install`]).
//! Tokens live hashed in an embedded SQLite store in the data directory.
//!
//! # Floors
//!
//! Each module stands on one floor and names only modules on its own floor or below
//! (`tests/layers/` holds the code to it, with the list of what is still to move):
//!
//! - **doors**, the ways in: [`agent_session`] (agent WebSocket), [`node_session`]
//!   (node WebSocket), [`http`] (admin API, health, metrics), [`mcp`], [`console`],
//!   [`install`] (the installer's route) and the accept loop (`listener`). A door holds
//!   a [`fleet::Fleet`], not the core's [`state`]: what it may do is `Fleet`'s methods
//!   (`tests/layers/` refuses `state` in a door);
//! - **fleet**, operations over the whole fleet, local and on the other replicas:
//!   [`fleet`] (the node list, a node, the tool list, approval pages and decisions,
//!   job cancel, accepting a node's tools: what every door asks, each merged once) and
//!   [`fanout`];
//! - **cluster**, cluster mode's NATS backend ([`cluster`]), under the fleet floor: the
//!   core reaches it only through [`peers::Peers`], which `server` plugs it into;
//! - **core**, what the gateway is whoever asks: [`router`], [`registry`],
//!   [`toolset`], [`policy`], [`approvals`], [`audit`], [`budget`], [`jobs`],
//!   [`transfer`], [`store`], [`inventory`], [`changes`], [`peers`] (what the core
//!   asks of the other replicas: [`peers::Alone`] for a gateway on its own),
//!   [`token_holders`] (what a door holds of a token, told of revocations),
//!   [`background`] (the tasks a stop waits for), the state they share ([`state`]),
//!   the settings ([`config`]) and the small pieces under them;
//! - [`server`] and this file put the floors together: the cluster and the console are
//!   made there and handed to what uses them.
//!
//! No import circle in the crate is larger than three files (`tests/layers/`).

pub mod admission;
pub mod agent_conns;
pub mod agent_handle;
pub mod agent_session;
pub mod approvals;
pub mod audit;
pub mod auth;
pub mod background;
pub mod budget;
pub mod bulk;
pub mod changes;
pub mod cluster;
pub mod config;
pub mod conn;
pub mod console;
pub mod datadir;
pub mod error;
pub mod fanout;
pub mod fleet;
pub mod handshake;
pub mod http;
pub mod install;
pub mod inventory;
pub mod jobs;
pub mod labels;
pub mod lane;
pub(crate) mod listener;
pub mod mcp;
pub mod mcp_view;
pub mod metrics;
pub mod node_session;
pub mod offers;
pub mod operator;
pub mod peers;
pub mod policy;
pub mod probe;
pub mod process_sessions;
pub mod ratelimit;
pub mod reattach;
pub mod recent_revocations;
pub mod refusals;
pub mod registry;
pub mod replica;
pub mod revocation;
pub mod router;
pub mod server;
pub mod session_end;
pub mod session_error;
pub mod state;
pub mod store;
pub mod summary;
pub mod time;
pub mod tls;
pub mod token;
pub mod token_holders;
pub mod tokens;
pub mod toolset;
pub mod transfer;
pub mod upgrade;
pub mod webhook;

pub use config::GatewayConfig;
pub use policy::{Policy, PolicySpec};
pub use server::{start, GatewayError, RunningGateway};
pub use store::{Store, StoreError, TokenInfo};
pub use tls::TlsSetup;
pub use token::TokenKind;

/// This gateway's gsv version: sent in `hello-ok` and `nodes.list`, so clients can
/// tell nodes that run another version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
