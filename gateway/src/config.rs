//! Gateway configuration, as the CLI (or a test) builds it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Default of [`GatewayConfig::grace`].
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// Default of [`GatewayConfig::drain`].
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);
/// Default of [`GatewayConfig::header_timeout`].
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`GatewayConfig::unauth_timeout`].
pub const DEFAULT_UNAUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// Default of [`GatewayConfig::console_code_ttl`]: how long a console login code may
/// be used.
pub const DEFAULT_CONSOLE_CODE_TTL: Duration = Duration::from_secs(5 * 60);

/// Default of [`GatewayConfig::job_retention`]: how long a job is kept after it started
/// (`gsv gateway --job-retention-hours`).
pub const DEFAULT_JOB_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// Default of [`GatewayConfig::transfer_idle`]: how long a transfer may see nothing
/// pass before it is ended (`timeout`).
pub const DEFAULT_TRANSFER_IDLE: Duration = Duration::from_secs(120);

/// Default of [`GatewayConfig::mcp_sessions_per_token`].
pub const DEFAULT_MCP_SESSIONS_PER_TOKEN: usize = 256;
/// Default of [`GatewayConfig::mcp_sessions_max`].
pub const DEFAULT_MCP_SESSIONS_MAX: usize = 4096;
/// Default of [`GatewayConfig::mcp_session_idle`].
pub const DEFAULT_MCP_SESSION_IDLE: Duration = Duration::from_secs(10 * 60);

/// Default of [`GatewayConfig::agent_conns_per_token`].
pub const DEFAULT_AGENT_CONNS_PER_TOKEN: usize = 256;
/// Default of [`GatewayConfig::agent_conns_max`]: well under the ~20 000 descriptors
/// a process may hold, so nodes keep theirs.
pub const DEFAULT_AGENT_CONNS_MAX: usize = 8192;

/// Default of [`GatewayConfig::fanout_result_bytes_per_token`]: 64 MiB.
pub const DEFAULT_FANOUT_RESULT_BYTES_PER_TOKEN: usize = 64 * 1024 * 1024;
/// Default of [`GatewayConfig::fanout_result_bytes_max`]: 256 MiB.
pub const DEFAULT_FANOUT_RESULT_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Default of [`GatewayConfig::pending_bytes_per_token`]: 64 MiB, four maximum frames.
pub const DEFAULT_PENDING_BYTES_PER_TOKEN: usize = 64 * 1024 * 1024;
/// Default of [`GatewayConfig::pending_bytes_max`]: 256 MiB, four tokens' full shares.
pub const DEFAULT_PENDING_BYTES_MAX: usize = 256 * 1024 * 1024;

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
    /// Deadline for a TLS handshake, and for each HTTP request head (also the wait
    /// for the next request on a kept-alive connection), on every port.
    pub header_timeout: Duration,
    /// An HTTP connection still unauthenticated this long after accept is closed.
    pub unauth_timeout: Duration,
    /// Caps on concurrent unauthenticated connections (`crate::admission`).
    pub caps: crate::admission::Caps,
    /// How long refused authentications are gathered into one audit row per source
    /// and reason (`crate::refusals`).
    pub refusal_interval: Duration,
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
    /// How long a job's outcome is kept after it started ([`crate::jobs`]).
    pub job_retention: Duration,
    /// Where each new approval request is POSTed ([`crate::webhook`]).
    pub approval_webhook: Option<String>,
    /// How long a console login code may be used (the operator console's).
    pub console_code_ttl: Duration,
    /// How long a file transfer may see nothing move before it is ended
    /// ([`DEFAULT_TRANSFER_IDLE`]).
    pub transfer_idle: Duration,
    /// Failed authentications allowed per source address per minute.
    pub auth_failures_per_minute: u32,
    /// Serve the port over TLS with this certificate (`None`: plain TCP).
    pub tls: Option<crate::tls::TlsSetup>,
    /// `Host` names `/mcp` accepts besides loopback ones (DNS-rebinding protection);
    /// empty: loopback names when listening on loopback, any host otherwise.
    pub mcp_allowed_hosts: Vec<String>,
    /// MCP sessions (2025 revisions) one token may hold open at once; also its
    /// 2026-07-28 `subscriptions/listen` streams, counted apart ([`crate::mcp::listens`]).
    pub mcp_sessions_per_token: usize,
    /// MCP sessions open at once in all (and listen streams, counted apart).
    pub mcp_sessions_max: usize,
    /// An MCP session with no traffic this long is closed.
    pub mcp_session_idle: Duration,
    /// Calls one token may have pending on one node (its share of the node's
    /// [`gsv_protocol::limits::MAX_PENDING_PER_NODE`]; default half).
    pub pending_calls_per_token: usize,
    /// Approval requests one token may have waiting at once.
    pub approvals_per_token: usize,
    /// Bytes of call arguments one token may have in flight at once (waiting for an
    /// approval or for a node), over every node: see [`crate::budget`].
    pub pending_bytes_per_token: usize,
    /// Bytes of call arguments in flight at once in all.
    pub pending_bytes_max: usize,
    /// Agent WebSocket connections one token may hold open at once
    /// (`crate::agent_conns`).
    pub agent_conns_per_token: usize,
    /// Agent WebSocket connections open at once in all.
    pub agent_conns_max: usize,
    /// Bytes of node results one token's running fan-outs may keep until they end
    /// (each node's result goes out in its event whatever this says).
    pub fanout_result_bytes_per_token: usize,
    /// Bytes of node results running fan-outs may keep in all.
    pub fanout_result_bytes_max: usize,
    /// Hide the tools a node offers beyond what was accepted for its id from every
    /// agent until an operator accepts them (`crate::offers`).
    pub pin_tools: bool,
    /// Cluster mode: how this replica reaches NATS (`--cluster`); `None` for one
    /// gateway on its own.
    pub cluster: Option<ClusterConfig>,
}

impl GatewayConfig {
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> Self {
        GatewayConfig {
            listen,
            data_dir,
            metrics_listen: None,
            heartbeat: Duration::from_millis(gsv_protocol::limits::DEFAULT_HEARTBEAT_MS),
            handshake_timeout: Duration::from_millis(gsv_protocol::limits::HANDSHAKE_TIMEOUT_MS),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            unauth_timeout: DEFAULT_UNAUTH_TIMEOUT,
            caps: crate::admission::Caps::default(),
            refusal_interval: crate::refusals::DEFAULT_INTERVAL,
            grace: DEFAULT_GRACE,
            drain: DEFAULT_DRAIN,
            write_addr_file: true,
            audit_args: false,
            approval_ttl: crate::approvals::DEFAULT_TTL,
            job_retention: DEFAULT_JOB_RETENTION,
            approval_webhook: None,
            console_code_ttl: DEFAULT_CONSOLE_CODE_TTL,
            transfer_idle: DEFAULT_TRANSFER_IDLE,
            auth_failures_per_minute: 20,
            tls: None,
            mcp_allowed_hosts: Vec::new(),
            mcp_sessions_per_token: DEFAULT_MCP_SESSIONS_PER_TOKEN,
            mcp_sessions_max: DEFAULT_MCP_SESSIONS_MAX,
            mcp_session_idle: DEFAULT_MCP_SESSION_IDLE,
            pending_calls_per_token: crate::registry::MAX_PENDING_PER_TOKEN,
            approvals_per_token: crate::approvals::DEFAULT_PENDING_PER_TOKEN,
            pending_bytes_per_token: DEFAULT_PENDING_BYTES_PER_TOKEN,
            pending_bytes_max: DEFAULT_PENDING_BYTES_MAX,
            agent_conns_per_token: DEFAULT_AGENT_CONNS_PER_TOKEN,
            agent_conns_max: DEFAULT_AGENT_CONNS_MAX,
            fanout_result_bytes_per_token: DEFAULT_FANOUT_RESULT_BYTES_PER_TOKEN,
            fanout_result_bytes_max: DEFAULT_FANOUT_RESULT_BYTES_MAX,
            pin_tools: false,
            cluster: None,
        }
    }
}

/// How a replica reaches NATS.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    /// `nats://HOST:PORT` URLs (or `tls://…`); any one of them will do.
    pub urls: Vec<String>,
    /// A NATS credentials file (JWT and NKey seed).
    pub creds: Option<std::path::PathBuf>,
    /// A file holding a NATS user's NKey seed (`SU…`), for a server that names its
    /// users by nkey.
    pub nkey: Option<std::path::PathBuf>,
    /// The cluster key every replica holds (`--cluster-key-file`): what seals every
    /// message on the bus (`cluster::seal`). Required.
    pub key: Option<std::path::PathBuf>,
    /// A PEM file of CA certificates that NATS's TLS certificate must chain to.
    pub ca: Option<std::path::PathBuf>,
    /// This replica's name (default: a name made once and kept in the data dir).
    pub replica: Option<String>,
    /// Where the other replicas reach this one's link (`--cluster-advertise`:
    /// `ws://HOST:PORT` or `wss://…`); by default the listen address unless it is a
    /// wildcard (`cluster::link`).
    pub advertise: Option<String>,
}
