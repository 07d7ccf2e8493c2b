//! WebSocket settings for each side of a connection.
//!
//! tungstenite's defaults (128 KiB read buffer, unbounded frames) suit neither side:
//! a gateway holds thousands of mostly idle connections, and every side must refuse
//! frames over the protocol's limits. tungstenite zero-fills its read buffer up to its
//! size before every read, so each connection keeps that much resident.

use gsv_protocol::limits::{MAX_FRAME_BYTES, PRE_AUTH_MAX_FRAME_BYTES};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The gateway's read buffer: 2 KiB holds any call or result frame of usual size in
/// one read, and a large frame is read 2 KiB per system call (about 2 KiB less per
/// connected node than 4 KiB, BENCHMARKS.md).
const SERVER_READ_BUFFER: usize = 2 * 1024;
const SERVER_WRITE_BUFFER: usize = 4 * 1024;
/// A node or agent client: one connection per process, so its read buffer costs
/// nothing that adds up, and a transfer's chunk arriving at a node (a `put`) or at
/// `gsv cp` (a `get`) is read 128 KiB per system call straight into the frame,
/// without the extra copy of a read-ahead buffer (BENCHMARKS.md).
const CLIENT_READ_BUFFER: usize = 128 * 1024;

fn server(max: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(SERVER_READ_BUFFER)
        .write_buffer_size(SERVER_WRITE_BUFFER)
        .max_write_buffer_size(SERVER_WRITE_BUFFER + max)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// The gateway before `hello-ok`: frames capped at 64 KiB.
pub fn server_pre_auth() -> WebSocketConfig {
    server(PRE_AUTH_MAX_FRAME_BYTES)
}

/// The gateway after `hello-ok`: frames up to the protocol's maximum.
pub fn server_session() -> WebSocketConfig {
    server(MAX_FRAME_BYTES)
}

/// A node or an agent client: small read buffer, no write buffering (the driver
/// flushes batches itself), frames up to the protocol's maximum, and bounded write
/// buffering.
pub fn client() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(CLIENT_READ_BUFFER)
        .write_buffer_size(0)
        .max_write_buffer_size(MAX_FRAME_BYTES + 64 * 1024)
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
}
