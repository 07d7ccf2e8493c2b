//! gsv's WebSocket transport, shared by the gateway, the node and agent clients.
//!
//! Every gsv connection is the same thing underneath: a WebSocket carrying JSON text
//! frames, written from a bounded queue and read by one task, with heartbeat pings
//! and a peer declared dead after two silent intervals. This crate holds that once:
//!
//! - [`driver`]: the connection driver, one task reading and writing a socket;
//! - [`outbound`]: the queues a driver writes from (the gateway's close-on-full
//!   queue, and a back-pressure queue for nodes and clients);
//! - [`config`]: buffer and frame-size settings per side;
//! - [`read_ahead`]: larger socket reads while a peer streams (transfer chunks);
//! - [`mod@dial`] and [`mod@handshake`]: how a node or an agent opens a connection
//!   (`challenge` → `connect` → `hello-ok`), failing with a [`ConnectError`];
//! - [`tls`]: which gateway certificates a client trusts (system roots, `--ca`,
//!   `--pin`);
//!
//! It does no routing, knows no tools and touches no disk: the gateway, the node and
//! `gsv-client` build their sessions on top, and a transfer's files are read and written
//! by `gsv-files`.

pub mod config;
pub mod connect_error;
pub mod dial;
pub mod driver;
pub mod handshake;
pub mod outbound;
pub mod priority;
pub mod read_ahead;
pub mod tls;

pub use connect_error::ConnectError;
pub use dial::{dial, ClientWs};
pub use driver::{Driver, Event};
pub use handshake::{handshake, CONNECT_ID};
pub use outbound::{queue, Outbound, Outbox, Paired, Queue, SendError};
pub use read_ahead::{ReadAhead, Switch as ReadAheadSwitch};
pub use tokio_tungstenite::tungstenite;
