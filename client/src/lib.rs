//! A client for gsv's agent protocol (`/v1/agent`), for people writing agents.
//!
//! [`AgentClient`] connects to a gateway with an agent token, lists the tools and
//! nodes the token may see, and calls tools (concurrently, over one connection, with
//! cancellation), and copies files to and from nodes ([`AgentClient::put_file`],
//! [`AgentClient::get_file`]). `https://` / `wss://` gateways are trusted the same ways a node
//! trusts them ([`TlsOptions`]: system roots, `--ca`, `--pin`).
//!
//! It depends on the wire types (`gsv-protocol`) and the transport (`gsv-transport`)
//! only: no gateway, node or MCP code comes with it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), gsv_client::ClientError> {
//! let client = gsv_client::AgentClient::connect("http://127.0.0.1:8787", "gsv_agent_...").await?;
//! let result = client.call("laptop__Read", serde_json::json!({"path": "README.md"}), None).await?;
//! println!("{}", result.joined_text());
//! # Ok(()) }
//! ```

mod agent;
mod error;
mod tls_options;
mod transfer;

pub use agent::{fanout_event, AgentClient, Event};
pub use error::ClientError;
pub use tls_options::TlsOptions;
#[cfg(unix)]
pub use transfer::TreeCopied;
pub use transfer::Window;
