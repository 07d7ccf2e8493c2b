//! `gsv node`: one node, dialling the gateway, until Ctrl-C or SIGTERM; and how its
//! flags become a [`NodeConfig`].

use crate::cli::NodeArgs;
use crate::exit;
use crate::resolve;
use gsv_node::NodeConfig;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl NodeArgs {
    /// The node's configuration, or a usage error (`error: CODE: message`) for flags
    /// that parse but cannot be used.
    pub fn config(self) -> Result<NodeConfig, String> {
        let (Some(gateway), Some(id)) = (self.gateway, self.id) else {
            return Err("error: invalid_args: give --gateway URL and --id ID".into());
        };
        let id =
            gsv_protocol::NodeId::parse(&id).map_err(|e| format!("error: invalid_args: {e}"))?;
        // With --ssh the workspace is a path on that host; none given: its home,
        // found when the node reaches it.
        let remote = self.ssh.is_some() || self.container.is_some();
        let workspace = match (remote, self.workspace) {
            (true, w) => w.unwrap_or_default(),
            (false, w) => w
                .map(Ok)
                .unwrap_or_else(std::env::current_dir)
                .map_err(|e| format!("error: workspace: {e}"))?,
        };
        self.guards
            .validate()
            .map_err(|e| format!("error: invalid_args: {e}"))?;
        let token = match (self.token, self.token_file) {
            (Some(t), _) => t,
            (None, Some(f)) => gsv_gateway::datadir::read_line(&f).ok_or_else(|| {
                format!(
                    "error: invalid_args: --token-file {}: missing, unreadable or empty",
                    f.display()
                )
            })?,
            (None, None) => {
                return Err(
                    "error: invalid_args: give --token-file FILE, $GSV_TOKEN or --token".into(),
                )
            }
        };
        let mut config = NodeConfig::new(gateway, id, token, workspace);
        if let Some(target) = self.ssh {
            gsv_node::remote::SshTarget::parse(&target, &self.ssh_option)
                .map_err(|e| format!("error: invalid_args: {e}"))?;
            config.backend = gsv_node::config::Backend::Ssh {
                target,
                options: self.ssh_option,
            };
        }
        if let Some(session) = self.tmux {
            if !remote {
                return Err(
                    "error: invalid_args: --tmux SESSION works with --ssh or --container (a local node's commands run on its own machine; use term_capture/term_send for local panes)".into(),
                );
            }
            gsv_node::tools::term::on_host::check_session(&session)
                .map_err(|e| format!("error: invalid_args: {e}"))?;
            config.remote_tmux = Some(session);
        }
        if let Some(name) = self.container {
            gsv_node::remote::container::check_name(&name)
                .map_err(|e| format!("error: invalid_args: {e}"))?;
            config.backend = gsv_node::config::Backend::Container {
                name,
                engine: self.engine,
            };
        }
        config.echo_tool = self.echo_tool;
        config.echo_needs_approval = self.echo_needs_approval;
        config.confine = self.confine;
        config.read_only = self.guards.read_only;
        config.tools = self.guards.tools;
        config.without = self.guards.without;
        config.no_approval = self.guards.no_approval;
        config.approve_shell = self.guards.approve_shell;
        config.approve_exec = self.guards.approve_exec;
        config.fetch_allow = self.guards.fetch_allow;
        config.sessions_per_token = self.guards.sessions_per_token;
        config.accept_login_profile = self.guards.accept_login_profile;
        config.data_dir = Some(resolve::data_dir(self.node_data.as_deref()));
        config.protect = resolve::protected_paths(self.protect);
        config.host_role = self.role.into();
        config.heartbeat = Duration::from_millis(self.heartbeat_ms.max(100));
        config.ca = self.trust.ca;
        config.pin = self.trust.pin;
        config.insecure = self.insecure;
        config.keep_sessions_on_exit = self.keep_sessions_on_exit;
        Ok(config)
    }
}

/// Runs a node until a shutdown signal or a fatal refusal.
pub async fn run(config: NodeConfig) -> u8 {
    let stop = CancellationToken::new();
    let trigger = stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        trigger.cancel();
    });
    match gsv_node::run(config, stop).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: node: {e}");
            e.exit_code()
        }
    }
}
