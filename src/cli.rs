//! The `gsv` command line's flags and subcommands (clap), kept out of `main` so that
//! `main` only parses and dispatches. Shared flag groups (data directory, TLS trust,
//! node guards, gateway settings, agent and operator targets) are defined once here
//! and flattened into the commands that take them.

use crate::commands::{self, client::Target};
use crate::resolve;
use clap::{Args, Parser, Subcommand, ValueEnum};
use gsv_gateway::GatewayConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "gsv",
    version,
    about = "Let AI agents act on many machines, safely"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Clone)]
pub struct DataArg {
    /// Data directory [default: $GSV_DATA or $XDG_DATA_HOME/gsv or ~/.local/share/gsv]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
}

/// How a TLS gateway's certificate is trusted [default: the system's root certificates]
#[derive(Args, Clone)]
pub struct TrustArgs {
    /// PEM file with the CA certificate(s) to trust instead of the system roots (a
    /// self-signed gateway's tls-cert.pem works too)
    #[arg(long, env = "GSV_CA", value_name = "FILE", conflicts_with = "pin")]
    pub ca: Option<PathBuf>,
    /// SHA-256 fingerprint of the gateway's certificate, as `gsv gateway` prints it
    /// (colons and case optional): only that certificate is trusted
    #[arg(long, env = "GSV_PIN", value_name = "SHA256")]
    pub pin: Option<String>,
}

/// Node-side guards, set on the node's own command line (no gateway can lift them)
#[derive(Args, Clone)]
pub struct NodeGuardArgs {
    /// Offer only read-only tools (Read, Glob, Grep, fs_list, fs_stat, time and the
    /// network tools; no Bash, exec, Process, Write, Edit)
    #[arg(long)]
    pub read_only: bool,
    /// Offer only the tools whose names match one of these globs (comma-separated
    /// or repeated, e.g. 'Read,Grep,Glob,fs_*,time'); a tool not offered cannot be
    /// called whatever a token allows [default: every tool]
    #[arg(long, value_name = "GLOB", value_delimiter = ',')]
    pub tools: Vec<String>,
    /// Leave out the tools whose names match one of these globs (comma-separated or
    /// repeated)
    #[arg(long, value_name = "GLOB", value_delimiter = ',')]
    pub without: Vec<String>,
    /// Let calls of TOOL run without an operator's approval although the tool asks
    /// for one by default (its description starts with "[needs approval]")
    /// (repeatable)
    #[arg(long, value_name = "TOOL")]
    pub no_approval: Vec<String>,
    /// Auto-approve regex for Bash commands (repeatable). With any, every simple
    /// command of a Bash call must fully match one of them, or the call waits for an
    /// operator's approval
    #[arg(long, value_name = "REGEX")]
    pub approve_shell: Vec<String>,
    /// Argv allowlist entry for exec, 'PROGRAM ARGGLOB...' (repeatable), e.g.
    /// '/usr/bin/systemctl status *': `*` matches one argument, a trailing `**` any
    /// rest. With any, exec calls whose resolved program and argv match none wait
    /// for an operator, and so do Bash commands no --approve-shell pattern approves
    #[arg(long, value_name = "ENTRY")]
    pub approve_exec: Vec<String>,
    /// Public host fetch_url may fetch, as a glob over the URL's host (repeatable,
    /// e.g. '*.example.com', '203.0.113.7', '*' for all). Loopback and private hosts
    /// need none; link-local and cloud-metadata addresses are never fetched
    #[arg(long, value_name = "GLOB")]
    pub fetch_allow: Vec<String>,
    /// Sessions (Bash runs and background jobs) one agent token may have running at
    /// once on this node: its share of the node's 64 slots, so another agent always
    /// has room
    #[arg(long, value_name = "N", default_value_t = gsv_node::sessions::Limits::default().max_running_per_owner, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=gsv_node::sessions::Limits::default().max_running as u64))]
    pub sessions_per_token: usize,
    /// Record the login profile files (~/.profile, ~/.bashrc, /etc/profile, the
    /// BASH_ENV and ENV files, ...) as they are now as the node's new baseline. Without
    /// it, a node warns (log, `gsv nodes`) when they differ from the baseline it
    /// recorded at its first start. Review the files first
    #[arg(long)]
    pub accept_login_profile: bool,
}

impl NodeGuardArgs {
    /// Checks the patterns and names now, so a typo is a usage error before anything
    /// starts (a glob that matches no tool is caught when the node builds its tools).
    pub fn validate(&self) -> Result<(), String> {
        gsv_node::guards::ApproveShell::new(&self.approve_shell).map_err(|e| e.to_string())?;
        let allow =
            gsv_node::guards::ApproveExec::new(&self.approve_exec).map_err(|e| e.to_string())?;
        for entry in allow.entries() {
            eprintln!(
                "gsv node: --approve-exec program {}",
                entry.program.display()
            );
        }
        gsv_node::selection::Selection::new(&self.tools, &self.without, self.read_only)
            .map_err(|e| e.to_string())?;
        gsv_node::tools::fetch::policy::FetchPolicy::new(&self.fetch_allow)
            .map_err(|e| e.to_string())?;
        for name in &self.no_approval {
            gsv_protocol::ToolName::parse(name).map_err(|e| format!("--no-approval: {e}"))?;
        }
        Ok(())
    }
}

#[derive(Args, Clone)]
pub struct GatewayArgs {
    #[command(flatten)]
    pub data: DataArg,
    /// Address to listen on (nodes, agents, HTTP API)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// Serve /metrics on this address instead of the main one
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// WebSocket heartbeat interval in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_protocol::limits::DEFAULT_HEARTBEAT_MS, hide = true)]
    pub heartbeat_ms: u64,
    /// Deadline for a connection to finish its handshake, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_protocol::limits::HANDSHAKE_TIMEOUT_MS, hide = true)]
    pub handshake_timeout_ms: u64,
    /// Deadline for a TLS handshake and for each HTTP request's headers (also the
    /// wait for the next request on a kept-alive connection), in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::config::DEFAULT_HEADER_TIMEOUT.as_millis() as u64)]
    pub header_timeout_ms: u64,
    /// An HTTP connection that has presented no valid token this long after it was
    /// accepted is closed, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::config::DEFAULT_UNAUTH_TIMEOUT.as_millis() as u64, hide = true)]
    pub unauth_timeout_ms: u64,
    /// Most connections open at once that have not presented a valid token yet; new
    /// ones over it are closed at once
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::admission::DEFAULT_MAX_UNAUTH, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_unauth_conns: usize,
    /// Most such unauthenticated connections from one IP address
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::admission::DEFAULT_MAX_UNAUTH_PER_SOURCE, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_unauth_conns_per_source: usize,
    /// How long refused authentications are gathered into one audit row per source
    /// and reason, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::refusals::DEFAULT_INTERVAL.as_millis() as u64, hide = true)]
    pub audit_refusal_interval_ms: u64,
    /// How long a caller waits, after a node drops mid-call, for the node to come back
    /// with the result before getting `node_disconnected` (never past the call's
    /// deadline; 0 answers at once), in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::config::DEFAULT_GRACE.as_millis() as u64)]
    pub grace_ms: u64,
    /// On SIGTERM, how long calls in flight may take to finish before the gateway
    /// stops, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::config::DEFAULT_DRAIN.as_millis() as u64)]
    pub drain_ms: u64,
    /// Store call arguments in the audit log (by default only their SHA-256)
    #[arg(long)]
    pub audit_args: bool,
    /// How long an approval request stays open, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::approvals::DEFAULT_TTL.as_millis() as u64, hide = true)]
    pub approval_ttl_ms: u64,
    /// How long a console login code (`gsv ui`) may be used, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::config::DEFAULT_CONSOLE_CODE_TTL.as_millis() as u64, hide = true)]
    pub console_code_ttl_ms: u64,
    /// How long a file transfer may see nothing move before it is ended, in
    /// milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_gateway::config::DEFAULT_TRANSFER_IDLE.as_millis() as u64, hide = true)]
    pub transfer_idle_ms: u64,
    /// How long jobs (`gsv call --async`, fan-outs) are kept, in hours (1 to 8760)
    #[arg(long, value_name = "H", default_value_t = gsv_gateway::config::DEFAULT_JOB_RETENTION.as_secs() / 3600, value_parser = clap::value_parser!(u64).range(1..=8760))]
    pub job_retention_hours: u64,
    /// POST each new approval request to this http(s) URL, signed with the key in the
    /// data directory's webhook.key (HMAC-SHA256, header X-Gsv-Signature)
    #[arg(long, value_name = "URL")]
    pub approval_webhook: Option<String>,
    /// Serve TLS with this certificate chain (PEM, leaf first; needs --tls-key)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve TLS with a self-signed certificate kept in the data dir; prints its
    /// fingerprint for `gsv node --pin`
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    pub tls_self_signed: bool,
    /// A Host name (or host:port) MCP clients reach /mcp by, besides loopback names
    /// (repeatable; DNS-rebinding protection). Default: loopback names when listening
    /// on loopback, any host otherwise
    #[arg(long, value_name = "HOST")]
    pub mcp_allowed_host: Vec<String>,
    /// MCP sessions one token may hold open at once (2025 protocol revisions); the
    /// same number again for its 2026-07-28 subscriptions/listen streams
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::config::DEFAULT_MCP_SESSIONS_PER_TOKEN, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub mcp_sessions_per_token: usize,
    /// MCP sessions open at once in all (and listen streams, counted apart)
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::config::DEFAULT_MCP_SESSIONS_MAX, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub mcp_sessions_max: usize,
    /// An MCP session with no traffic this long is closed, in seconds
    #[arg(long, value_name = "SECS", default_value_t = gsv_gateway::config::DEFAULT_MCP_SESSION_IDLE.as_secs(), value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..))]
    pub mcp_session_idle_secs: u64,
    /// Calls one agent token may have pending on one node at once: its share of the
    /// node's 4096, so another agent always has room
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::registry::MAX_PENDING_PER_TOKEN, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=gsv_protocol::limits::MAX_PENDING_PER_NODE as u64))]
    pub pending_calls_per_token: usize,
    /// Approval requests one agent token may have waiting at once
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::approvals::DEFAULT_PENDING_PER_TOKEN, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub approvals_per_token: usize,
    /// Agent WebSocket connections one token may hold open at once
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::config::DEFAULT_AGENT_CONNS_PER_TOKEN, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub agent_conns_per_token: usize,
    /// Agent WebSocket connections open at once in all
    #[arg(long, value_name = "N", default_value_t = gsv_gateway::config::DEFAULT_AGENT_CONNS_MAX, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub agent_conns_max: usize,
    /// MiB of node results one agent token's running fan-outs may keep until they end
    #[arg(long, value_name = "MIB", default_value_t = (gsv_gateway::config::DEFAULT_FANOUT_RESULT_BYTES_PER_TOKEN >> 20) as u64, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=1 << 20))]
    pub fanout_result_mib_per_token: u64,
    /// MiB of node results running fan-outs may keep in all
    #[arg(long, value_name = "MIB", default_value_t = (gsv_gateway::config::DEFAULT_FANOUT_RESULT_BYTES_MAX >> 20) as u64, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=1 << 20))]
    pub fanout_result_mib: u64,
    /// MiB of call arguments one agent token may have in flight at once (waiting for
    /// approval or for a node), over every node
    #[arg(long, value_name = "MIB", default_value_t = (gsv_gateway::config::DEFAULT_PENDING_BYTES_PER_TOKEN >> 20) as u64, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=1 << 20))]
    pub pending_mib_per_token: u64,
    /// MiB of call arguments in flight at once in all
    #[arg(long, value_name = "MIB", default_value_t = (gsv_gateway::config::DEFAULT_PENDING_BYTES_MAX >> 20) as u64, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=1 << 20))]
    pub pending_mib: u64,
    /// Hide the tools a node offers beyond what was accepted for its id (at its first
    /// registration, or with `gsv nodes accept-tools ID`) from every agent until an
    /// operator accepts them. Without it they are callable at once, only flagged
    #[arg(long)]
    pub pin_tools: bool,
    /// Cluster mode: join the gateway replicas that share this NATS server
    /// (nats://HOST:PORT, repeatable; JetStream must be on). Without it the gateway
    /// runs on its own
    #[arg(long, value_name = "URL")]
    pub cluster: Vec<String>,
    /// NATS credentials file (JWT and NKey seed) for --cluster
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_creds: Option<PathBuf>,
    /// PEM CA certificates NATS's TLS certificate must chain to (turns TLS on)
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_ca: Option<PathBuf>,
    /// NATS user nkey seed file (one line, `SU...`) for --cluster, for a NATS server
    /// that names its users by nkey
    #[arg(
        long,
        value_name = "FILE",
        requires = "cluster",
        conflicts_with = "cluster_creds"
    )]
    pub cluster_nkey: Option<PathBuf>,
    /// The cluster key every replica holds (32 random bytes or more, mode 0600):
    /// every message on NATS is encrypted and authenticated with it. Required with
    /// --cluster
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_key_file: Option<PathBuf>,
    /// This replica's name (default: made at the first start and kept in the data dir)
    #[arg(long, value_name = "NAME", requires = "cluster")]
    pub replica: Option<String>,
    /// Where the other replicas reach this one for the calls they forward
    /// (ws://HOST:PORT, or wss:// with TLS) [default: the listen address, unless it is
    /// a wildcard such as 0.0.0.0: then calls between replicas go over NATS]
    #[arg(long, value_name = "URL", requires = "cluster")]
    pub cluster_advertise: Option<String>,
}

impl GatewayArgs {
    pub fn config(&self) -> GatewayConfig {
        let mut c = GatewayConfig::new(self.listen, resolve::data_dir(self.data.data.as_deref()));
        c.metrics_listen = self.metrics_listen;
        c.heartbeat = Duration::from_millis(self.heartbeat_ms.max(100));
        c.handshake_timeout = Duration::from_millis(self.handshake_timeout_ms.max(100));
        c.header_timeout = Duration::from_millis(self.header_timeout_ms.max(100));
        c.unauth_timeout = Duration::from_millis(self.unauth_timeout_ms.max(100));
        c.caps = gsv_gateway::admission::Caps {
            max_unauth: self.max_unauth_conns,
            max_unauth_per_source: self.max_unauth_conns_per_source,
        };
        c.refusal_interval = Duration::from_millis(self.audit_refusal_interval_ms.max(100));
        c.grace = Duration::from_millis(self.grace_ms);
        c.drain = Duration::from_millis(self.drain_ms);
        c.audit_args = self.audit_args;
        c.mcp_sessions_per_token = self.mcp_sessions_per_token;
        c.mcp_sessions_max = self.mcp_sessions_max;
        c.mcp_session_idle = Duration::from_secs(self.mcp_session_idle_secs);
        c.pending_calls_per_token = self.pending_calls_per_token;
        c.approvals_per_token = self.approvals_per_token;
        c.agent_conns_per_token = self.agent_conns_per_token;
        c.agent_conns_max = self.agent_conns_max;
        c.fanout_result_bytes_per_token = (self.fanout_result_mib_per_token as usize) << 20;
        c.fanout_result_bytes_max = (self.fanout_result_mib as usize) << 20;
        c.pending_bytes_per_token = (self.pending_mib_per_token as usize) << 20;
        c.pending_bytes_max = (self.pending_mib as usize) << 20;
        c.approval_ttl = Duration::from_millis(self.approval_ttl_ms.max(100));
        c.job_retention = Duration::from_secs(self.job_retention_hours * 3600);
        c.approval_webhook = self.approval_webhook.clone();
        c.console_code_ttl = Duration::from_millis(self.console_code_ttl_ms.max(100));
        c.transfer_idle = Duration::from_millis(self.transfer_idle_ms.max(100));
        c.tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(gsv_gateway::TlsSetup::Files {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ if self.tls_self_signed => Some(gsv_gateway::TlsSetup::SelfSigned),
            _ => None,
        };
        c.mcp_allowed_hosts = self.mcp_allowed_host.clone();
        c.pin_tools = self.pin_tools;
        if !self.cluster.is_empty() {
            c.cluster = Some(gsv_gateway::cluster::ClusterConfig {
                urls: self
                    .cluster
                    .iter()
                    .flat_map(|u| u.split(','))
                    .map(|u| u.trim().to_owned())
                    .filter(|u| !u.is_empty())
                    .collect(),
                creds: self.cluster_creds.clone(),
                nkey: self.cluster_nkey.clone(),
                key: self.cluster_key_file.clone(),
                ca: self.cluster_ca.clone(),
                replica: self.replica.clone(),
                advertise: self.cluster_advertise.clone(),
            });
        }
        c
    }
}

#[derive(Args, Clone)]
pub struct TargetArgs {
    /// Gateway URL (http(s):// or ws(s)://) [default: $GSV_GATEWAY, else the address in
    /// the data dir's gateway.addr, else http://127.0.0.1:8787]
    #[arg(long, value_name = "URL")]
    pub gateway: Option<String>,
    /// Agent token [default: $GSV_AGENT_TOKEN, else agent.token, else admin.token in the
    /// data dir]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    #[command(flatten)]
    pub data: DataArg,
    #[command(flatten)]
    pub trust: TrustArgs,
}

impl TargetArgs {
    pub fn target(self) -> Target {
        Target {
            gateway: self.gateway,
            token: self.token,
            data: self.data.data,
            ca: self.trust.ca,
            pin: self.trust.pin,
        }
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// Gateway + a local node in one process: the embedded default
    Up {
        #[command(flatten)]
        gateway: GatewayArgs,
        /// Id of the local node [default: the host name]
        #[arg(long, value_name = "ID")]
        node_id: Option<String>,
        /// Workspace of the local node [default: the current directory]
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Also register the Echo tool (tests, benchmarks)
        #[arg(long)]
        echo_tool: bool,
        /// Confine the local node's file tools to the workspace
        #[arg(long)]
        confine: bool,
        #[command(flatten)]
        guards: NodeGuardArgs,
    },
    /// Run the gateway alone
    Gateway {
        #[command(flatten)]
        gateway: GatewayArgs,
    },
    /// Run a node that dials the gateway (or `install` / `uninstall` it as a service)
    Node(NodeCommand),
    /// Manage tokens
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Call a namespaced tool: gsv call laptop__Read '{"path":"README.md"}'
    Call {
        #[command(flatten)]
        target: TargetArgs,
        /// Print the whole result object as JSON
        #[arg(long)]
        json: bool,
        /// Call deadline in milliseconds [default: the tool's]
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Start the call as a job and print its id at once; `gsv jobs show ID` reads
        /// its outcome later (the call runs on whatever this process does)
        #[arg(long = "async")]
        is_async: bool,
        /// Run the (bare) tool on every node this selector picks, e.g. 'env=prod'
        /// ('id~*' for every node): one block per node, then a summary
        #[arg(long, value_name = "SEL")]
        select: Option<String>,
        /// With --select: at most N nodes at once, or N% of them (the next starts
        /// when one finishes) [default: all at once]
        #[arg(long, value_name = "N|N%", requires = "select")]
        batch: Option<String>,
        /// With --select: after a node fails, start no more
        #[arg(long, requires = "select")]
        fail_fast: bool,
        /// With --select: wait up to DUR (e.g. 30s, 5m, 1h; at most 1h) for offline
        /// nodes to come back instead of reporting them offline at once
        #[arg(long, value_name = "DUR", requires = "select")]
        wait_offline: Option<String>,
        /// Namespaced tool name, {node}__{tool} (a bare tool name with --select)
        name: String,
        /// Arguments as a JSON object; `-` reads them from stdin, `@FILE` from a file
        /// (for arguments larger than a command line may hold)
        #[arg(default_value = "{}")]
        args: String,
    },
    /// Copy a file between this machine and a node, or between nodes: gsv cp
    /// report.pdf laptop:docs/, gsv cp laptop:logs/app.log ., gsv cp web-1:app.log
    /// nas:logs/ (streamed, SHA-256 checked, put in place atomically; run it again to
    /// resume an interrupted copy)
    Cp {
        #[command(flatten)]
        target: TargetArgs,
        /// Print {"path","bytes","sha256","direction"} on success (with -r:
        /// {"path","files","dirs","symlinks","bytes","direction"})
        #[arg(long)]
        json: bool,
        /// Copy a directory tree like cp -r (modes, mtimes, symlinks as links)
        #[arg(short = 'r', long)]
        recursive: bool,
        /// After a dropped link, a restarting gateway or a node that went away, keep
        /// trying (resuming where the copy stands) until this many seconds pass
        /// without progress; 0: never retry
        #[arg(long, value_name = "SECS", default_value_t = crate::commands::cp::DEFAULT_RETRY_FOR_SECS)]
        retry_for: u64,
        /// A local path or NODE:PATH (a local path with a colon: ./a:b)
        src: String,
        /// A local path or NODE:PATH; a directory (or a path ending in /) takes the
        /// source's name
        dst: String,
    },
    /// Calls whose outcome the gateway keeps (`gsv call --async`): `list`, `show ID`
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// List nodes (with their version, labels, and what they offer that was not
    /// accepted); `show ID` for one node, `label ID K=V...` to set its labels,
    /// `accept-tools ID` to accept what it offers
    Nodes {
        #[command(subcommand)]
        command: Option<NodesCommand>,
        #[command(flatten)]
        target: TargetArgs,
        #[arg(long)]
        json: bool,
        /// Only the nodes this selector picks: comma = AND of `key=value`,
        /// `key!=value`, `key` (has the label), `id~GLOB`, `fact.KEY=VALUE`
        /// (e.g. 'env=prod,fact.os=linux')
        #[arg(long, value_name = "SEL")]
        select: Option<String>,
    },
    /// List the tools this token may call
    Tools {
        #[command(flatten)]
        target: TargetArgs,
        #[arg(long)]
        json: bool,
    },
    /// MCP on stdin/stdout, bridged to the gateway's /mcp: for MCP clients that only
    /// launch stdio servers (same tools and behaviour as /mcp, elicitation included)
    Mcp {
        #[command(flatten)]
        target: TargetArgs,
        /// The MCP view: `flat` (every NODE__TOOL), `fleet` (fleet_nodes, fleet_tools,
        /// fleet_call) or `auto` [default: the token's --mcp-view, else auto]
        #[arg(long, value_enum, value_name = "VIEW")]
        view: Option<McpViewArg>,
        /// Only the nodes this selector picks (e.g. `role=web,fact.os=linux`)
        #[arg(long, value_name = "SEL")]
        select: Option<String>,
    },
    /// Operator decisions on calls waiting for approval
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Print a one-time login link for the operator console (/ui/)
    Ui {
        #[command(flatten)]
        target: OperatorArgs,
        /// Open the link in the browser too (xdg-open / open)
        #[arg(long)]
        open: bool,
    },
    /// Check or show the hash-chained audit log (reads the database directly)
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Run a loopback-only benchmark scenario and print figure, baseline and ratio
    Bench(gsv_bench::cli::BenchArgs),
}

#[derive(Args, Clone)]
pub struct OperatorArgs {
    /// Gateway URL [default: $GSV_GATEWAY, else gateway.addr in the data dir]
    #[arg(long, value_name = "URL")]
    pub gateway: Option<String>,
    /// Admin token [default: admin.token in the data dir]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    #[command(flatten)]
    pub data: DataArg,
    #[command(flatten)]
    pub trust: TrustArgs,
}

impl OperatorArgs {
    pub fn target(self) -> commands::approvals::OperatorTarget {
        commands::approvals::OperatorTarget {
            gateway: self.gateway,
            token: self.token,
            data: self.data.data,
            ca: self.trust.ca,
            pin: self.trust.pin,
        }
    }
}

#[derive(Subcommand)]
pub enum ApprovalsCommand {
    /// Pending approval requests (all recent ones with --all)
    List {
        #[command(flatten)]
        target: OperatorArgs,
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
        /// Requests per page (1-500)
        #[arg(long, value_name = "N", default_value_t = gsv_gateway::approvals::DEFAULT_PAGE, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: u32,
        /// Skip this many requests (newest first): the next page
        #[arg(long, value_name = "N", default_value_t = 0)]
        offset: u32,
    },
    /// Approve a request: the waiting call runs
    Approve {
        id: String,
        #[command(flatten)]
        target: OperatorArgs,
    },
    /// Deny a request: the waiting call fails with `denied`
    Deny {
        id: String,
        #[command(flatten)]
        target: OperatorArgs,
    },
}

#[derive(Subcommand)]
pub enum JobsCommand {
    /// Your jobs (every token's with the admin token), newest first
    List {
        #[command(flatten)]
        target: TargetArgs,
        #[arg(long)]
        json: bool,
        /// Page size (1-500)
        #[arg(long, default_value_t = gsv_protocol::job::DEFAULT_JOBS_PAGE)]
        limit: u32,
        /// Jobs skipped, newest first
        #[arg(long, default_value_t = 0)]
        offset: u32,
        /// Only the jobs that ran on a node this selector picks (e.g. 'env=prod')
        #[arg(long, value_name = "SEL")]
        select: Option<String>,
    },
    /// One job's outcome, printed as `gsv call` prints a result
    Show {
        id: String,
        #[command(flatten)]
        target: TargetArgs,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a running job (the call ends `cancelled`)
    Cancel {
        id: String,
        #[command(flatten)]
        target: TargetArgs,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum NodesCommand {
    /// One node: state, version, capabilities, and each tool with its capability, its
    /// description and whether it is accepted
    Show {
        id: String,
        #[command(flatten)]
        target: TargetArgs,
        #[arg(long)]
        json: bool,
    },
    /// Set or remove a node's labels (admin token): `gsv nodes label web1 env=prod
    /// role=web`, `gsv nodes label web1 --remove env`. Labels come from operators
    /// only, never from the node
    Label {
        id: String,
        /// Labels to set, KEY=VALUE (each replaces the key's value)
        #[arg(value_name = "K=V")]
        labels: Vec<String>,
        /// Label key to remove (repeatable)
        #[arg(long, value_name = "KEY")]
        remove: Vec<String>,
        #[command(flatten)]
        target: OperatorArgs,
        #[arg(long)]
        json: bool,
    },
    /// Accept what a node offers now: its new tools and capabilities are no longer
    /// flagged and, with `gsv gateway --pin-tools`, become visible and callable
    /// (admin token)
    AcceptTools {
        id: String,
        #[command(flatten)]
        target: OperatorArgs,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Verify the hash chain; exit 0 if intact, 1 if a row was edited or deleted
    Verify {
        #[command(flatten)]
        data: DataArg,
        #[arg(long)]
        json: bool,
    },
    /// Show the last rows, and with --follow every new one
    Tail {
        #[command(flatten)]
        data: DataArg,
        /// How many past rows to show
        #[arg(long, short = 'n', default_value_t = 20)]
        lines: u32,
        #[arg(long, short = 'f')]
        follow: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create a token: `node ID` or `agent NAME`; prints the token alone on stdout
    Create(Box<TokenCreateArgs>),
    /// List tokens (ids, kinds, subjects; never secrets)
    List {
        #[command(flatten)]
        data: DataArg,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by id
    Revoke {
        id: String,
        #[command(flatten)]
        data: DataArg,
    },
}

/// `gsv token create`'s flags. Which apply depends on the kind: [`TokenCreateArgs::request`]
/// checks them.
#[derive(Args)]
pub struct TokenCreateArgs {
    /// What the token is for
    #[arg(value_enum)]
    pub kind: TokenKindArg,
    /// Node id or agent name
    pub name: String,
    #[command(flatten)]
    pub data: DataArg,
    /// Glob of namespaced tools the agent may call (repeatable)
    #[arg(long, value_name = "GLOB")]
    pub allow: Vec<String>,
    /// Glob of namespaced tools the agent may never call (repeatable)
    #[arg(long, value_name = "GLOB")]
    pub deny: Vec<String>,
    /// Glob of namespaced tools whose calls need approval (repeatable)
    #[arg(long, value_name = "GLOB")]
    pub confirm: Vec<String>,
    /// Let the caller's own user answer `--confirm` questions (MCP elicitation)
    /// instead of an operator. Off by default; never covers a node guard's approval
    #[arg(long)]
    pub self_confirm: bool,
    /// For `node ID`: a label the operator gives the node, KEY=VALUE (repeatable);
    /// replaces the labels the node id had. Never set by the node itself
    #[arg(long, value_name = "K=V")]
    pub label: Vec<String>,
    /// The MCP view this agent's sessions get unless the URL says (`?view=`):
    /// `flat`, `fleet`, or `auto` (flat up to 48 KB of definitions, else fleet)
    #[arg(long, value_enum, value_name = "VIEW", default_value_t = McpViewArg::Auto)]
    pub mcp_view: McpViewArg,
    /// The node tools this agent's flat MCP listings name unless the URL says
    /// (`?tools=`): `all`, `reference` (Bash, Process, Read, Write, Edit, Glob,
    /// Grep: the default) or comma-separated tool-name globs (`Bash,git_*`).
    /// Listing is not permission: the policy decides what runs
    #[arg(long, value_name = "TOOLS")]
    pub mcp_tools: Option<String>,
    /// For `node ID`: print the one line that installs and enrolls the node on a
    /// new machine (curl ... | sh -s -- --token ...) instead of the token alone
    #[arg(long)]
    pub install: bool,
    /// With --install: the gateway URL the new machine reaches [default:
    /// $GSV_GATEWAY, else the data dir's gateway.addr]
    #[arg(long, value_name = "URL", requires = "install")]
    pub gateway: Option<String>,
    /// For `operator NAME`: `approver` (reads everything, decides approvals) or
    /// `viewer` (reads everything, changes nothing)
    #[arg(long, value_enum, value_name = "ROLE")]
    pub role: Option<OperatorRoleArg>,
}

/// The token `gsv token create` makes, its flags checked against its kind.
pub enum TokenRequest {
    Operator {
        name: String,
        role: gsv_gateway::operator::OperatorRole,
    },
    Node {
        name: String,
        labels: Vec<String>,
        /// `--install`, with the gateway URL if one was given.
        install: Option<Option<String>>,
    },
    Agent {
        name: String,
        spec: gsv_gateway::PolicySpec,
    },
}

impl TokenCreateArgs {
    /// The token asked for, or why the flags do not fit its kind (a usage error:
    /// `invalid_args`).
    pub fn request(self) -> Result<TokenRequest, String> {
        let agent_flags = !(self.allow.is_empty()
            && self.deny.is_empty()
            && self.confirm.is_empty()
            && !self.self_confirm
            && self.mcp_view == McpViewArg::Auto
            && self.mcp_tools.is_none());
        match self.kind {
            TokenKindArg::Operator => match self.role {
                _ if agent_flags || self.install || !self.label.is_empty() => Err(
                    "operator tokens take --role only (no policy, labels or --install)".into(),
                ),
                None => Err("operator tokens need --role approver|viewer".into()),
                Some(role) => Ok(TokenRequest::Operator {
                    name: self.name,
                    role: role.role(),
                }),
            },
            _ if self.role.is_some() => Err("--role applies to operator tokens only".into()),
            TokenKindArg::Node if agent_flags => Err(
                "--allow/--deny/--confirm/--self-confirm/--mcp-view/--mcp-tools apply to agent tokens only"
                    .into(),
            ),
            TokenKindArg::Node => Ok(TokenRequest::Node {
                name: self.name,
                labels: self.label,
                install: self.install.then_some(self.gateway),
            }),
            TokenKindArg::Agent if self.install => {
                Err("--install applies to node tokens only".into())
            }
            TokenKindArg::Agent if !self.label.is_empty() => {
                Err("--label applies to node tokens only".into())
            }
            TokenKindArg::Agent => {
                let listed = self
                    .mcp_tools
                    .as_deref()
                    .map(gsv_gateway::mcp::listed::Listed::parse)
                    .transpose()
                    .map_err(|e| format!("--mcp-tools: {e}"))?;
                Ok(TokenRequest::Agent {
                    name: self.name,
                    spec: gsv_gateway::PolicySpec {
                        allow: self.allow,
                        deny: self.deny,
                        confirm: self.confirm,
                        self_confirm: self.self_confirm,
                        mcp_view: self.mcp_view.view(),
                        mcp_tools: listed.map(|l| l.key().to_owned()),
                    },
                })
            }
        }
    }
}

impl Command {
    /// Whether this command prints and exits. Those die quietly on a closed pipe
    /// (`gsv audit tail | head`) like other Unix tools. Long-running commands keep
    /// Rust's default of ignoring `SIGPIPE`: there a write into a closed pipe — a
    /// Process `write` to a session whose reader exited, a client that went away — is an
    /// `EPIPE` error handled where it happens, never the end of the gateway or node.
    pub fn prints_and_exits(&self) -> bool {
        !matches!(
            self,
            Command::Up { .. }
                | Command::Gateway { .. }
                | Command::Node(_)
                | Command::Mcp { .. }
                | Command::Bench { .. }
        )
    }
}

/// An MCP view (`--mcp-view`, `gsv mcp --view`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum McpViewArg {
    /// Every NODE__TOOL the token may call, one MCP tool each
    Flat,
    /// The seven fleet_* tools, whatever the fleet's size
    Fleet,
    /// Each node's reference tools flat up to 48 KB of definitions, else fleet
    Auto,
}

impl McpViewArg {
    /// The gateway's name of the view.
    pub fn view(self) -> gsv_gateway::mcp::view::McpView {
        use gsv_gateway::mcp::view::McpView;
        match self {
            McpViewArg::Flat => McpView::Flat,
            McpViewArg::Fleet => McpView::Fleet,
            McpViewArg::Auto => McpView::Auto,
        }
    }
}

/// `gsv node --role`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    /// A general-purpose host offering the standard tool set
    Execution,
    /// A host kept for specific tools; never the primary execution host
    Specialized,
}

impl From<RoleArg> for gsv_protocol::HostRole {
    fn from(r: RoleArg) -> Self {
        match r {
            RoleArg::Execution => gsv_protocol::HostRole::Execution,
            RoleArg::Specialized => gsv_protocol::HostRole::Specialized,
        }
    }
}

/// `gsv token create KIND`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TokenKindArg {
    /// A one-time join token for a node (`node ID`)
    Node,
    /// An agent token with a policy (`agent NAME`)
    Agent,
    /// An operator token with a role (`operator NAME --role approver|viewer`)
    Operator,
}

/// `gsv token create operator --role`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperatorRoleArg {
    /// Reads everything an operator reads and decides approvals
    Approver,
    /// Reads everything an operator reads; changes nothing
    Viewer,
}

impl OperatorRoleArg {
    pub fn role(self) -> gsv_gateway::operator::OperatorRole {
        match self {
            OperatorRoleArg::Approver => gsv_gateway::operator::OperatorRole::Approver,
            OperatorRoleArg::Viewer => gsv_gateway::operator::OperatorRole::Viewer,
        }
    }
}

/// `gsv node`'s flags.
#[derive(Args, Clone)]
pub struct NodeArgs {
    /// Gateway URL (http(s):// or ws(s)://); replicas of one cluster as URL1,URL2:
    /// the node moves to the next one when its connection fails
    #[arg(long, env = "GSV_GATEWAY", value_name = "URL", required = true)]
    pub gateway: Option<String>,
    /// This node's id
    #[arg(long, env = "GSV_NODE_ID", value_name = "ID", required = true)]
    pub id: Option<String>,
    /// This node's join token (from `gsv token create node ID`; exchanged for a
    /// stored credential at the first connect) or its credential. On a shared host
    /// prefer --token-file or $GSV_TOKEN: other local users can read a process's
    /// command line
    #[arg(
        long,
        env = "GSV_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true,
        required_unless_present = "token_file",
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// Read the token from this file (its first line), keeping it out of the
    /// process list
    #[arg(long, env = "GSV_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Directory relative tool paths resolve against [default: the current directory;
    /// with --ssh, the home directory on that host]
    #[arg(long, env = "GSV_WORKSPACE", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Work on another host over SSH instead of this machine (agentless: nothing is
    /// installed there): USER@HOST[:PORT], through the system ssh with your config,
    /// keys, agent and known_hosts; an unknown or changed host key is refused
    #[arg(long, value_name = "USER@HOST[:PORT]")]
    pub ssh: Option<String>,
    /// An extra ssh option for --ssh, as Key=Value (repeatable), e.g.
    /// UserKnownHostsFile=FILE, IdentityFile=FILE, ProxyJump=BASTION
    #[arg(long = "ssh-option", value_name = "KEY=VALUE", requires = "ssh")]
    pub ssh_option: Vec<String>,
    /// Work inside a running container instead of this machine, through its
    /// engine's exec (the workspace is a path in the container) [default engine:
    /// docker, else podman, whichever is on PATH]
    #[arg(long, value_name = "NAME", conflicts_with = "ssh")]
    pub container: Option<String>,
    /// With --ssh or --container: run each waiting Bash command in the pane of this
    /// tmux session on that host (made if missing), where an operator can attach
    /// (`tmux attach -t SESSION`) and watch; one command at a time
    #[arg(long, value_name = "SESSION")]
    pub tmux: Option<String>,
    /// The container engine for --container
    #[arg(long, value_name = "ENGINE", requires = "container", value_parser = ["docker", "podman"])]
    pub engine: Option<String>,
    /// Register the Echo tool (tests, benchmarks)
    #[arg(long)]
    pub echo_tool: bool,
    /// Echo declares that its calls need an operator's approval (a test hook for the
    /// approval posture)
    #[arg(long, requires = "echo_tool", hide = true)]
    pub echo_needs_approval: bool,
    /// Where the node keeps the credential it enrolls with [default: the data dir]
    #[arg(long = "data", env = "GSV_NODE_DATA", value_name = "DIR")]
    pub node_data: Option<PathBuf>,
    /// Confine the file tools (Read, Write, Edit, Glob, Grep) to the workspace: paths
    /// are canonicalised, and anything outside it (`..`, absolute paths, symlinks
    /// pointing out) is refused [default: off]
    #[arg(long)]
    pub confine: bool,
    /// A file or directory the file tools never read, write or list, confined or
    /// not (repeatable). Always protected as well: this node's --data directory
    /// and the default gateway data directory ($GSV_DATA, else
    /// $XDG_DATA_HOME/gsv, else ~/.local/share/gsv) when it exists
    #[arg(long, value_name = "PATH")]
    pub protect: Vec<PathBuf>,
    #[command(flatten)]
    pub guards: NodeGuardArgs,
    /// Host role
    #[arg(long, value_name = "ROLE", value_enum, default_value_t = RoleArg::Execution)]
    pub role: RoleArg,
    /// WebSocket heartbeat interval in milliseconds
    #[arg(long, value_name = "MS", default_value_t = gsv_protocol::limits::DEFAULT_HEARTBEAT_MS, hide = true)]
    pub heartbeat_ms: u64,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Allow a plain ws:// or http:// gateway that is not on loopback (the token
    /// then travels unencrypted); refused without this flag
    #[arg(long)]
    pub insecure: bool,
    /// Leave background sessions running when the node stops [default: their
    /// process groups are ended, SIGTERM then SIGKILL]
    #[arg(long)]
    pub keep_sessions_on_exit: bool,
}

/// `gsv node`: runs a node with its flags, or manages it as a service with a
/// subcommand (`gsv node install ...`, `gsv node uninstall`).
#[derive(Args, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct NodeCommand {
    #[command(subcommand)]
    pub service: Option<NodeServiceCommand>,
    #[command(flatten)]
    pub run: NodeArgs,
}

/// `gsv node install | uninstall`.
#[derive(Subcommand, Clone)]
pub enum NodeServiceCommand {
    /// Enroll this machine, then run the node as a service
    ///
    /// The service is a systemd unit, a launchd job, or a background process where
    /// neither runs. Takes every flag of `gsv node`; the token goes into a 0600 file,
    /// never on the unit's command line. Run again, it changes nothing, or restarts
    /// the node after an upgrade.
    Install(Box<NodeInstallArgs>),
    /// Stop and remove the service `gsv node install` made
    ///
    /// Keeps the gsv executable and the enrolled credential.
    Uninstall(NodeUninstallArgs),
}

/// Where a node service lives: the whole system (as root) or one user.
#[derive(Args, Clone, Default)]
#[group(multiple = false)]
pub struct ScopeArgs {
    /// A system service (systemd system unit, launchd daemon), running as root
    /// [default as root]
    #[arg(long)]
    pub system: bool,
    /// A service of the current user (systemd user unit with lingering, launchd
    /// agent) [default for other users]
    #[arg(long)]
    pub user: bool,
}

/// `gsv node install --service`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ServiceArg {
    /// launchd on macOS; systemd where it runs; else in the background
    Auto,
    Systemd,
    Launchd,
    /// A detached process with a pid file: no restart on failure or at boot
    Background,
}

#[derive(Args, Clone)]
pub struct NodeInstallArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Copy this gsv executable into DIR (as DIR/gsv, replaced only when it differs)
    /// and run the service from there [default: run this executable where it is]
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// What runs the node
    #[arg(long, value_enum, env = "GSV_SERVICE", default_value_t = ServiceArg::Auto)]
    pub service: ServiceArg,
    /// Print the unit (or plist, or command) and what would be done; change nothing
    #[arg(long, alias = "dry-run")]
    pub print: bool,
}

#[derive(Args, Clone)]
pub struct NodeUninstallArgs {
    /// The node id [default: the one node installed here]
    #[arg(long, env = "GSV_NODE_ID", value_name = "ID")]
    pub id: Option<String>,
    /// The node's data directory [default: /var/lib/gsv for --system, else the data dir]
    #[arg(long = "data", env = "GSV_NODE_DATA", value_name = "DIR")]
    pub node_data: Option<PathBuf>,
    #[command(flatten)]
    pub scope: ScopeArgs,
}
