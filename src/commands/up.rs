//! `gsv up`: a gateway and a local node in one process, the zero-setup default.
//!
//! It keeps its credentials in the data directory (`node.token` for the local node,
//! `agent.token` for the local user, both 0600) and reuses them on the next start, so
//! `gsv call` on the same machine needs no flags. The local node's login-profile
//! baseline (`node-<ID>.login-profile`) is kept there too.

use crate::exit;
use gsv_gateway::datadir::{AGENT_TOKEN_FILE, NODE_TOKEN_FILE};
use gsv_gateway::{GatewayConfig, PolicySpec, Store, TokenKind};
use gsv_node::NodeConfig;
use gsv_protocol::NodeId;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// What `gsv up` needs.
pub struct UpOptions {
    pub gateway: GatewayConfig,
    pub node_id: Option<String>,
    pub workspace: Option<PathBuf>,
    pub echo_tool: bool,
    /// Confine the local node's file tools to its workspace.
    pub confine: bool,
    /// The local node offers only read-only tools (`--read-only`).
    pub read_only: bool,
    /// The local node's Bash auto-approve patterns (`--approve-shell`).
    pub approve_shell: Vec<String>,
    /// The local node's exec allowlist (`--approve-exec`).
    pub approve_exec: Vec<String>,
    /// Public hosts the local node's fetch_url may fetch (`--fetch-allow`).
    pub fetch_allow: Vec<String>,
    /// The tools the local node offers (`--tools`, `--without`).
    pub tools: Vec<String>,
    pub without: Vec<String>,
    /// Tools whose approval posture the local node waives (`--no-approval`).
    pub no_approval: Vec<String>,
    /// The local node's per-token share of its session slots (`--sessions-per-token`).
    pub sessions_per_token: usize,
    /// Record the local node's login profile as its new baseline
    /// (`--accept-login-profile`).
    pub accept_login_profile: bool,
}

/// The default node id: the host name, lower-cased, other characters mapped to `-`.
pub fn default_node_id() -> NodeId {
    NodeId::from_hostname(&gethostname::gethostname().to_string_lossy())
}

/// Reuses the token in `file` if it is still valid for `kind`/`subject`; else issues
/// one (recorded in the audit log with actor `up`) and writes it there.
fn ensure_token(
    store: &Store,
    dir: &Path,
    file: &str,
    kind: TokenKind,
    subject: &str,
    policy: Option<&PolicySpec>,
) -> Result<String, String> {
    gsv_gateway::tokens::reuse_or_issue(
        store,
        &dir.join(file),
        gsv_gateway::tokens::Issuer::Up,
        kind,
        subject,
        policy,
    )
    .map_err(|e| e.to_string())
}

pub async fn run(opts: UpOptions) -> u8 {
    let node_id = match opts.node_id.as_deref() {
        Some(id) => match NodeId::parse(id) {
            Ok(id) => id,
            Err(e) => {
                eprintln!("error: invalid_args: {e}");
                return exit::USAGE;
            }
        },
        None => default_node_id(),
    };
    let workspace = match opts
        .workspace
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_dir)
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: workspace: {e}");
            return exit::USAGE;
        }
    };
    let data = opts.gateway.data_dir.clone();
    let tls = opts.gateway.tls.clone();
    let gw = match gsv_gateway::start(opts.gateway).await {
        Ok(gw) => gw,
        Err(e @ gsv_gateway::GatewayError::Tls(_)) => {
            eprintln!("error: gateway: {e}");
            return exit::USAGE;
        }
        Err(e) => {
            eprintln!("error: gateway: {e}");
            return exit::UNREACHABLE;
        }
    };
    let tokens = Store::open(&data)
        .map_err(|e| e.to_string())
        .and_then(|store| {
            let node = ensure_token(
                &store,
                &data,
                NODE_TOKEN_FILE,
                TokenKind::Node,
                node_id.as_str(),
                None,
            )?;
            let everything = PolicySpec {
                allow: vec!["*".into()],
                ..PolicySpec::default()
            };
            ensure_token(
                &store,
                &data,
                AGENT_TOKEN_FILE,
                TokenKind::Agent,
                "local",
                Some(&everything),
            )?;
            Ok(node)
        });
    let node_token = match tokens {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: tokens: {e}");
            gw.stop().await;
            return exit::TOOL_ERROR;
        }
    };
    let url = gw.url();
    let mut node = NodeConfig::new(url.clone(), node_id.clone(), node_token, workspace.clone());
    // The local node trusts exactly the certificate of the gateway it just started.
    node.pin = gw.tls_fingerprint.clone();
    node.echo_tool = opts.echo_tool;
    node.confine = opts.confine;
    node.read_only = opts.read_only;
    node.approve_shell = opts.approve_shell;
    node.approve_exec = opts.approve_exec;
    node.fetch_allow = opts.fetch_allow;
    node.tools = opts.tools;
    node.without = opts.without;
    node.no_approval = opts.no_approval;
    node.sessions_per_token = opts.sessions_per_token;
    // The local node keeps no data directory of its own (its credential is
    // `node.token`); its login-profile baseline lives beside it, protected like it.
    node.login_profile_baseline = Some(data.join(format!("node-{node_id}.login-profile")));
    node.accept_login_profile = opts.accept_login_profile;
    // The local node's file tools never touch this gateway's data (its tokens, its
    // database, its TLS key) nor the user's default gateway data directory.
    node.protect = crate::resolve::protected_paths(vec![data.clone()]);
    if let Some(gsv_gateway::TlsSetup::Files { key, .. }) = &tls {
        node.protect.push(key.clone());
    }
    let stop = CancellationToken::new();
    let node_task = tokio::spawn(gsv_node::run(node, stop.clone()));

    println!("gsv is up");
    println!("  gateway      {url}   (data: {})", data.display());
    if let Some(fp) = &gw.tls_fingerprint {
        println!("  tls pin      {fp}   (SHA-256 of the gateway's certificate)");
    }
    println!(
        "  local node   {node_id}   (workspace: {})",
        workspace.display()
    );
    println!("  agent token  {}", data.join(AGENT_TOKEN_FILE).display());
    print!(
        "{}",
        super::mcp::setup_lines(&url, &data.join(AGENT_TOKEN_FILE), &data)
    );
    match gw.console_login() {
        Ok(link) => println!(
            "  console      {}   (one-time login link, 5 min; later: gsv ui --open)",
            link.url
        ),
        Err(e) => eprintln!("warning: no console login link: {e}"),
    }
    println!("  try          gsv call {node_id}__Read '{{\"path\":\"README.md\"}}'");
    println!("  add a machine:");
    println!("    here:      (umask 077; gsv token create node <id> > <id>.token)   then copy <id>.token there");
    match &gw.tls_fingerprint {
        Some(fp) => {
            println!("    there:     gsv node --gateway {url} --pin {fp} --id <id> --token-file <id>.token")
        }
        None => {
            println!("    there:     gsv node --gateway {url} --id <id> --token-file <id>.token")
        }
    }
    println!("    or:        gsv token create node <id> --install   prints one line to run there (installs gsv, enrolls, starts a service)");

    let code = tokio::select! {
        _ = super::shutdown_signal() => exit::OK,
        r = node_task => match r {
            Ok(Err(e)) => {
                eprintln!("error: local node: {e}");
                e.exit_code()
            }
            _ => exit::OK,
        },
    };
    // The gateway drains first (calls in flight on the local node finish), then the
    // node stops and ends its sessions.
    gw.stop().await;
    stop.cancel();
    code
}
