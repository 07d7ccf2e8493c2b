//! The node's configuration, as the CLI (or a test) hands it to [`crate::run`].
//!
//! Kept as plain data with defaults in one place, so the CLI only maps flags and
//! environment variables onto fields and never repeats a default.

use gsv_protocol::limits::DEFAULT_HEARTBEAT_MS;
use gsv_protocol::{HostRole, NodeId};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// How long dialling the gateway (TCP, TLS and the WebSocket upgrade) may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Interval between WebSocket pings; two silent intervals mean the gateway is gone.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_millis(DEFAULT_HEARTBEAT_MS);

/// Where a node's tools do their work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Backend {
    /// On the machine the node runs on.
    #[default]
    Local,
    /// On another host, over SSH (`--ssh USER@HOST[:PORT]`, `--ssh-option K=V`); see
    /// [`crate::remote`].
    Ssh {
        target: String,
        options: Vec<String>,
    },
    /// Inside a running container, through its engine's `exec` (`--container NAME`,
    /// `--engine docker|podman`; the engine found on `PATH` when not given).
    Container {
        name: String,
        engine: Option<String>,
    },
}

/// Everything a node needs to run.
#[derive(Clone)]
pub struct NodeConfig {
    /// Where the tools do their work (this machine unless `--ssh`).
    pub backend: Backend,
    /// `--tmux SESSION` with `--ssh` or `--container`: waiting Bash commands run in
    /// that tmux session's pane on the host, where an operator can watch them.
    pub remote_tmux: Option<String>,
    /// Gateway address in any spelling [`gsv_protocol::endpoint::Gateway::parse`]
    /// accepts; the node dials its `/v1/node` WebSocket.
    pub gateway: String,
    /// This node's id (the namespace of its tools).
    pub id: NodeId,
    /// The token given on the command line: a one-time join token (exchanged at the
    /// first connect for a node credential) or a node credential.
    pub token: String,
    /// Where the node keeps the credential it enrolled with (`node-<id>.credential`,
    /// 0600). `None` keeps it in memory only (tests, embedding).
    pub data_dir: Option<PathBuf>,
    /// Directory that relative tool paths resolve against.
    pub workspace: PathBuf,
    /// Register the `Echo` diagnostics tool (tests and benchmarks).
    pub echo_tool: bool,
    /// Declare Echo with `requiresApproval` (a test hook for the approval posture,
    /// `gsv node --echo-needs-approval`, hidden); see [`crate::guards::posture`].
    pub echo_needs_approval: bool,
    /// Offer only the tools whose names match one of these globs (`gsv node --tools`;
    /// empty: every tool). See [`crate::selection`].
    pub tools: Vec<String>,
    /// Leave out the tools whose names match one of these globs (`gsv node --without`).
    pub without: Vec<String>,
    /// Tools whose approval posture the node's owner waived (`gsv node --no-approval
    /// TOOL`, repeatable): their calls run without an operator. See
    /// [`crate::guards::posture`].
    pub no_approval: Vec<String>,
    /// Confine the file tools (Read, Write, Edit, Glob, Grep) to `workspace`: paths
    /// are canonicalised and anything outside it, through `..` or a symlink, is
    /// refused, and files are opened beneath a descriptor of the workspace
    /// (`openat2(RESOLVE_BENEATH)` on Linux), so a directory swapped for a symlink
    /// during a call cannot lead out (`gsv node --confine`). Off by default.
    pub confine: bool,
    /// Files and directories the file tools never read, write or list, whatever
    /// `confine` says (`gsv node --protect`, repeatable; `gsv up` adds the gateway's
    /// data directory and TLS key). `data_dir` is always protected as well; see
    /// [`crate::protected`].
    pub protect: Vec<PathBuf>,
    /// Offer only the tools that declare `readOnlyHint: true` (Read, Glob, Grep,
    /// fs_list, fs_stat, time, the network tools, Echo): no Bash, Process, Write or
    /// Edit (`gsv node --read-only`).
    pub read_only: bool,
    /// Auto-approve regexes for Bash (`gsv node --approve-shell`, repeatable). When not
    /// empty the node runs in approve-shell mode: a command some simple command of
    /// which matches none of them needs an operator's approval; see
    /// [`crate::guards::approve`].
    pub approve_shell: Vec<String>,
    /// Argv allowlist entries for exec (`gsv node --approve-exec`, repeatable):
    /// `PROGRAM ARGGLOB...`; see [`crate::guards::approve_exec`]. With any, exec calls
    /// that match none wait for an operator, and so does every Bash command no
    /// `--approve-shell` pattern approves.
    pub approve_exec: Vec<String>,
    /// Public hosts `fetch_url` may fetch (`gsv node --fetch-allow GLOB`, repeatable);
    /// see [`crate::tools::fetch::policy`]. Empty: none (private hosts only).
    pub fetch_allow: Vec<String>,
    /// How the node wants to be used.
    pub host_role: HostRole,
    /// WebSocket ping interval.
    pub heartbeat: Duration,
    /// Timeout of one dial (TCP + TLS + upgrade).
    pub connect_timeout: Duration,
    /// PEM file whose certificates are the only trusted roots for a `wss://` gateway
    /// (instead of the system's). `gsv node --ca`.
    pub ca: Option<PathBuf>,
    /// SHA-256 fingerprint of the gateway's leaf certificate: when set, only the pin is
    /// checked (not the chain, name or dates). `gsv node --pin`.
    pub pin: Option<String>,
    /// Allow plain `ws://` / `http://` to a non-loopback gateway (the token then
    /// travels unencrypted). `gsv node --insecure`.
    pub insecure: bool,
    /// Leave background sessions running when the node stops, instead of ending their
    /// process groups. `gsv node --keep-sessions-on-exit`.
    pub keep_sessions_on_exit: bool,
    /// Sessions one caller's token may have running at once on this node, its share
    /// of the node's session slots (`gsv node --sessions-per-token`; default half of
    /// them, so another agent always has room).
    pub sessions_per_token: usize,
    /// Where the login-profile baseline is kept. `None`: `node-<id>.login-profile` in
    /// `data_dir`, or, without one, in memory only (the state at this start). See
    /// [`crate::login_profile`].
    pub login_profile_baseline: Option<PathBuf>,
    /// Record the login profile as it is now as the new baseline, instead of comparing
    /// with the stored one (`gsv node --accept-login-profile`).
    pub accept_login_profile: bool,
}

impl NodeConfig {
    /// A configuration with the defaults for everything not given.
    pub fn new(gateway: String, id: NodeId, token: String, workspace: PathBuf) -> Self {
        NodeConfig {
            backend: Backend::Local,
            remote_tmux: None,
            gateway,
            id,
            token,
            data_dir: None,
            workspace,
            echo_tool: false,
            echo_needs_approval: false,
            tools: Vec::new(),
            without: Vec::new(),
            no_approval: Vec::new(),
            confine: false,
            protect: Vec::new(),
            read_only: false,
            approve_shell: Vec::new(),
            approve_exec: Vec::new(),
            fetch_allow: Vec::new(),
            host_role: HostRole::default(),
            heartbeat: DEFAULT_HEARTBEAT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            ca: None,
            pin: None,
            insecure: false,
            keep_sessions_on_exit: false,
            sessions_per_token: crate::sessions::Limits::default().max_running_per_owner,
            login_profile_baseline: None,
            accept_login_profile: false,
        }
    }

    /// The file the login-profile baseline is kept in, if any.
    pub fn login_profile_file(&self) -> Option<PathBuf> {
        self.login_profile_baseline.clone().or_else(|| {
            self.data_dir
                .as_ref()
                .map(|d| d.join(format!("node-{}.login-profile", self.id)))
        })
    }
}

/// Written by hand so the token never reaches a log.
impl fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeConfig")
            .field("gateway", &self.gateway)
            .field("id", &self.id)
            .field("token", &"<redacted>")
            .field("workspace", &self.workspace)
            .field("echo_tool", &self.echo_tool)
            .field("echo_needs_approval", &self.echo_needs_approval)
            .field("tools", &self.tools)
            .field("without", &self.without)
            .field("no_approval", &self.no_approval)
            .field("confine", &self.confine)
            .field("protect", &self.protect)
            .field("read_only", &self.read_only)
            .field("approve_shell", &self.approve_shell)
            .field("approve_exec", &self.approve_exec)
            .field("fetch_allow", &self.fetch_allow)
            .field("host_role", &self.host_role)
            .field("heartbeat", &self.heartbeat)
            .field("connect_timeout", &self.connect_timeout)
            .field("ca", &self.ca)
            .field("pin", &self.pin)
            .field("insecure", &self.insecure)
            .field("keep_sessions_on_exit", &self.keep_sessions_on_exit)
            .field("sessions_per_token", &self.sessions_per_token)
            .field("login_profile_baseline", &self.login_profile_baseline)
            .field("accept_login_profile", &self.accept_login_profile)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_redaction() {
        let id = NodeId::parse("box-1").unwrap();
        let c = NodeConfig::new(
            "http://127.0.0.1:8787".into(),
            id,
            "s3cret".into(),
            ".".into(),
        );
        assert!(!c.echo_tool);
        assert!(!c.confine);
        assert!(!c.read_only);
        assert!(c.approve_shell.is_empty());
        assert!(!c.keep_sessions_on_exit);
        assert_eq!(c.heartbeat, Duration::from_secs(15));
        assert_eq!(c.connect_timeout, Duration::from_secs(10));
        assert_eq!(c.host_role, HostRole::Execution);
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
