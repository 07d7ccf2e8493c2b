//! `network_status`: a snapshot of this node's own network state. It sends nothing on
//! the network (hence `openWorldHint: false`).
//!
//! Five sections, gathered concurrently, each independent of the others — a missing
//! program or a failure fills only its own section with `error`:
//!
//! - `interfaces`: `ip -br addr`.
//! - `routes`: `ip route` and `ip -6 route`.
//! - `networkManager`: `nmcli -t -f NAME,TYPE,DEVICE,STATE connection show --active`,
//!   when nmcli is installed (`available: false` otherwise: not an error).
//! - `listening`: `ss -tulpn`, or `netstat -tulpn` where ss is missing.
//! - `dns`: `resolvectl status`, or `/etc/resolv.conf` where resolvectl is missing or
//!   fails (systemd-resolved not running).
//!
//! The sections' types: [`super::status_output`].

use super::parse::{ip_addr, ip_route, nmcli, resolv_conf, resolvectl, sockets};
use super::run::{install_hint, Command, Output};
use super::status_output::{
    Dns, Interfaces, Listening, NetworkManager, RouteTable, Routes, StatusOutput,
};
use super::{annotations, millis, NetEnv};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolDef, ToolResult};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const NAME: &str = "network_status";
/// Each program's timeout.
pub const SECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// The `network_status` tool.
pub struct NetworkStatus {
    env: NetEnv,
}

impl NetworkStatus {
    pub fn new(env: NetEnv) -> Self {
        NetworkStatus { env }
    }
}

#[async_trait::async_trait]
impl Tool for NetworkStatus {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "This node's network state: interfaces and addresses, routes, \
                          NetworkManager connections, listening sockets and their \
                          processes, DNS configuration. Sends no traffic."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
            capability: Capability::NetworkStatus.as_str().to_owned(),
            annotations: annotations("Network state of this node", false),
            default_timeout_ms: Some(30_000),
            requires_bins: ["ip", "ss", "nmcli", "resolvectl"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        if let Err(message) = Args::new(&args, &[]) {
            return ToolResult::error(format!("{NAME}: {message}"));
        }
        let start = Instant::now();
        let (interfaces, routes, network_manager, listening, dns) = tokio::join!(
            self.interfaces(&ctx),
            self.routes(&ctx),
            self.network_manager(&ctx),
            self.listening(&ctx),
            self.dns(&ctx),
        );
        output::structured(&StatusOutput {
            interfaces,
            routes,
            network_manager,
            listening,
            dns,
            elapsed_ms: millis(start.elapsed()),
        })
    }
}

impl NetworkStatus {
    /// Runs one program; `Err` is the section's error message.
    async fn run(
        &self,
        program: &'static str,
        args: &[&str],
        ctx: &ToolContext,
    ) -> Result<Output, String> {
        let cmd = Command::new(
            program,
            args.iter().copied(),
            SECTION_TIMEOUT.min(ctx.remaining()),
        );
        let out = self
            .env
            .runner
            .run(&cmd, &ctx.cancel)
            .await
            .map_err(|e| e.to_string())?;
        if !out.success() {
            return Err(format!("{program} {}: {}", args.join(" "), out.failure()));
        }
        Ok(out)
    }

    async fn interfaces(&self, ctx: &ToolContext) -> Interfaces {
        const SOURCE: &str = "ip -br addr";
        match self.run("ip", &["-br", "addr"], ctx).await {
            Ok(out) => Interfaces::Found {
                source: SOURCE,
                entries: ip_addr::parse_brief_addr(&out.stdout),
            },
            Err(error) => Interfaces::Failed {
                source: SOURCE,
                error,
            },
        }
    }

    async fn routes(&self, ctx: &ToolContext) -> Routes {
        let (v4, v6) = tokio::join!(
            self.run("ip", &["route"], ctx),
            self.run("ip", &["-6", "route"], ctx)
        );
        let table = |r: Result<Output, String>| match r {
            Ok(out) => RouteTable::Routes(ip_route::parse_routes(&out.stdout)),
            Err(error) => RouteTable::Failed { error },
        };
        let error = match (&v4, &v6) {
            (Err(e), Err(_)) => Some(e.clone()),
            _ => None,
        };
        Routes {
            source: "ip route; ip -6 route",
            ipv4: table(v4),
            ipv6: table(v6),
            error,
        }
    }

    async fn network_manager(&self, ctx: &ToolContext) -> NetworkManager {
        const SOURCE: &str = "nmcli -t -f NAME,TYPE,DEVICE,STATE connection show --active";
        if !self.env.runner.available("nmcli").await {
            return NetworkManager::NotInstalled {
                source: SOURCE,
                available: false,
                note: "nmcli is not installed: NetworkManager does not manage this host's network",
            };
        }
        let args = [
            "-t",
            "-f",
            "NAME,TYPE,DEVICE,STATE",
            "connection",
            "show",
            "--active",
        ];
        match self.run("nmcli", &args, ctx).await {
            Ok(out) => NetworkManager::Active {
                source: SOURCE,
                available: true,
                active: nmcli::parse_active(&out.stdout),
            },
            Err(error) => NetworkManager::Failed {
                source: SOURCE,
                available: true,
                error,
            },
        }
    }

    async fn listening(&self, ctx: &ToolContext) -> Listening {
        if self.env.runner.available("ss").await {
            const SOURCE: &str = "ss -tulpn";
            return match self.run("ss", &["-tulpn"], ctx).await {
                Ok(out) => Listening::Found {
                    source: SOURCE,
                    sockets: sockets::parse_ss(&out.stdout),
                },
                Err(error) => Listening::Failed {
                    source: SOURCE,
                    error,
                },
            };
        }
        if self.env.runner.available("netstat").await {
            const SOURCE: &str = "netstat -tulpn";
            return match self.run("netstat", &["-tulpn"], ctx).await {
                Ok(out) => Listening::Found {
                    source: SOURCE,
                    sockets: sockets::parse_netstat(&out.stdout),
                },
                Err(error) => Listening::Failed {
                    source: SOURCE,
                    error,
                },
            };
        }
        Listening::Failed {
            source: "ss -tulpn",
            error: format!(
                "neither ss nor netstat is installed; {}",
                install_hint("ss")
            ),
        }
    }

    async fn dns(&self, ctx: &ToolContext) -> Dns {
        let mut note = None;
        if self.env.runner.available("resolvectl").await {
            match self.run("resolvectl", &["status", "--no-pager"], ctx).await {
                Ok(out) => {
                    return Dns::Resolvectl {
                        source: "resolvectl status",
                        scopes: resolvectl::parse_status(&out.stdout),
                    }
                }
                Err(e) => note = Some(e),
            }
        }
        let path = self.env.resolv_conf.display().to_string();
        match tokio::fs::read_to_string(&self.env.resolv_conf).await {
            Ok(text) => Dns::ResolvConf {
                source: path,
                resolv_conf: resolv_conf::parse(&text),
                resolvectl_error: note,
            },
            Err(e) => Dns::Failed {
                error: format!("cannot read {path}: {e}"),
                source: path,
            },
        }
    }
}
