//! Gateway configuration, as the CLI (or a test) builds it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Default of [`GatewayConfig::grace`].
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// Default of [`GatewayConfig::drain`].
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);

/// How a gateway runs.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Where nodes, agents and the HTTP API connect. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// Data directory (SQLite store, admin token, address file).
    pub data_dir: PathBuf,
    /// Serve `/metrics` on this address instead of the main one.
    pub metrics_listen: Option<SocketAddr>,
    /// WebSocket ping interval; a peer silent for two intervals is dropped.
    pub heartbeat: Duration,
    /// Deadline for a connection to complete its handshake.
    pub handshake_timeout: Duration,
    /// How long a caller is held after its node drops mid-call, waiting for the same
    /// node process to reconnect with the result (never past the call's deadline).
    pub grace: Duration,
    /// On graceful shutdown, how long calls in flight may take to finish.
    pub drain: Duration,
    /// Write the address file (`gateway.addr`) in the data directory.
    pub write_addr_file: bool,
    /// Store argument values in the audit log (only their hash by default).
    pub audit_args: bool,
    /// How long an approval request stays open.
    pub approval_ttl: Duration,
    /// Failed authentications allowed per source address per minute.
    pub auth_failures_per_minute: u32,
    /// Serve the port over TLS with this certificate (`None`: plain TCP).
    pub tls: Option<crate::tls::TlsSetup>,
    /// `Host` names `/mcp` accepts besides loopback ones (DNS-rebinding protection);
    /// empty: loopback names when listening on loopback, any host otherwise.
    pub mcp_allowed_hosts: Vec<String>,
}

impl GatewayConfig {
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> Self {
        GatewayConfig {
            listen,
            data_dir,
            metrics_listen: None,
            heartbeat: Duration::from_millis(gsv_protocol::limits::DEFAULT_HEARTBEAT_MS),
            handshake_timeout: Duration::from_millis(gsv_protocol::limits::HANDSHAKE_TIMEOUT_MS),
            grace: DEFAULT_GRACE,
            drain: DEFAULT_DRAIN,
            write_addr_file: true,
            audit_args: false,
            approval_ttl: crate::approvals::DEFAULT_TTL,
            auth_failures_per_minute: 20,
            tls: None,
            mcp_allowed_hosts: Vec::new(),
        }
    }
}
