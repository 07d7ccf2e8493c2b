//! `net_discover`: which hosts are up on a private subnet (`nmap -sn`).
//!
//! The argv is fixed except for the subnet, which the tool renders itself from the
//! validated value: `nmap -sn --host-timeout 30s --max-retries 1 -oG - -- NET/LEN`.
//! Subnets must be private (RFC 1918, loopback, link-local, CGNAT) and no wider than
//! /22; a public subnet is refused, never approved.
//!
//! Without `subnet`, the LAN is derived as nmap's designers would: `ip route get
//! 1.1.1.1` (a routing-table lookup over netlink: no packet is sent) gives the source
//! address of the default route, and its /24 is scanned — if that /24 is private.
//!
//! Results are `(ip, mac, hostname, state)` entries. nmap's greppable output carries
//! no MAC addresses, so they are read afterwards from the kernel's neighbour table
//! (`/proc/net/arp`), which the scan fills when nmap runs unprivileged (TCP connects
//! make the kernel resolve each address); when it is not there, `mac` is `null`.

use super::parse::{arp, ip_route, nmap};
use super::run::{install_hint, Command};
use super::target::{self, Subnet};
use super::{annotations, millis, NetEnv};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const NAME: &str = "net_discover";
/// How long nmap may run (it bounds each host to 30 s itself).
pub const SCAN_TIMEOUT: Duration = Duration::from_secs(150);
/// How long `ip route get` may take.
pub const ROUTE_TIMEOUT: Duration = Duration::from_secs(5);
/// The address whose route names the LAN (looked up, never contacted).
pub const ROUTE_PROBE: &str = "1.1.1.1";
/// Prefix of the default subnet around the route's source address.
pub const DEFAULT_PREFIX: u8 = 24;

/// The `net_discover` tool.
pub struct NetDiscover {
    env: NetEnv,
}

/// `net_discover`'s structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverOutput<'a> {
    /// The subnet scanned (`NET/LEN`).
    pub subnet: String,
    /// Where it came from: `argument` or `default route`.
    pub subnet_source: &'static str,
    /// Hosts in `hosts`.
    pub count: usize,
    pub hosts: Vec<DiscoveredHost<'a>>,
    /// nmap's closing summary, if it printed one.
    pub summary: Option<&'a str>,
    pub elapsed_ms: u64,
}

/// One host found up.
#[derive(Debug, Serialize)]
pub struct DiscoveredHost<'a> {
    pub ip: &'a str,
    /// From the kernel's neighbour table; `null` when it is not there.
    pub mac: Option<&'a str>,
    /// The reverse-DNS name nmap printed, if any.
    pub hostname: Option<&'a str>,
    /// nmap's status for it (`up` when it gave none).
    pub state: &'a str,
}

impl NetDiscover {
    pub fn new(env: NetEnv) -> Self {
        NetDiscover { env }
    }
}

/// The nmap arguments for a host-discovery scan of `subnet`.
pub fn nmap_args(subnet: Subnet) -> Vec<String> {
    [
        "-sn",
        "--host-timeout",
        "30s",
        "--max-retries",
        "1",
        "-oG",
        "-",
        "--",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain(std::iter::once(subnet.to_string()))
    .collect()
}

/// The /24 around the source address of `ip route get` output, if it has one.
pub fn subnet_from_route(route_get_output: &str) -> Option<Subnet> {
    let route = ip_route::parse_route_get(route_get_output)?;
    let src: Ipv4Addr = route.src?.parse().ok()?;
    Some(Subnet::of(src, DEFAULT_PREFIX))
}

#[async_trait::async_trait]
impl Tool for NetDiscover {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "The hosts up on a private IPv4 subnet (nmap ping scan): IP, \
                          MAC, reverse-DNS name. Public subnets are refused."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "subnet": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 64,
                        "description": "CIDR, at most /22 (default: the default route's /24)."
                    }
                },
                "additionalProperties": false
            }),
            capability: Capability::NetworkDiscover.as_str().to_owned(),
            annotations: annotations("Discover hosts on a private subnet", true),
            default_timeout_ms: Some(180_000),
            requires_bins: vec!["nmap".to_owned(), "ip".to_owned()],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let subnet_arg = match Args::new(&args, &["subnet"]).and_then(|a| a.str("subnet")) {
            Ok(s) => s.map(str::to_owned),
            Err(message) => return ToolResult::error(format!("{NAME}: {message}")),
        };
        // An explicit subnet is checked before anything else, nmap or not.
        let explicit = match subnet_arg.as_deref().map(target::validate_subnet) {
            None => None,
            Some(Ok(subnet)) => Some(subnet),
            Some(Err(e)) => return ToolResult::error(format!("{NAME}: refused: {e}")),
        };
        if !self.env.runner.available("nmap").await {
            return ToolResult::error(format!(
                "{NAME}: nmap is not installed on this node; {}",
                install_hint("nmap")
            ));
        }
        let (subnet, source) = match explicit {
            Some(subnet) => (subnet, "argument"),
            None => match self.default_subnet(&ctx).await {
                Ok(subnet) => (subnet, "default route"),
                Err(message) => return ToolResult::error(format!("{NAME}: {message}")),
            },
        };
        // Belt and braces: whatever the source, the subnet passes the guardrail here.
        if let Err(e) = target::check_subnet(subnet) {
            return ToolResult::error(format!("{NAME}: refused: {e}"));
        }

        let start = Instant::now();
        let timeout = SCAN_TIMEOUT.min(ctx.remaining());
        let cmd = Command::new("nmap", nmap_args(subnet), timeout);
        let out = match self.env.runner.run(&cmd, &ctx.cancel).await {
            Ok(out) => out,
            Err(e) => return ToolResult::error(format!("{NAME}: {e}")),
        };
        let report = nmap::parse_greppable(&out.stdout);
        if out.timed_out {
            return ToolResult::error(format!(
                "{NAME}: nmap did not finish scanning {subnet} within {} s",
                timeout.as_secs()
            ));
        }
        if !out.success() && report.hosts.is_empty() {
            return ToolResult::error(format!("{NAME}: nmap failed: {}", out.failure()));
        }
        let neighbours = match tokio::fs::read_to_string(&self.env.arp_table).await {
            Ok(text) => arp::parse_proc_net_arp(&text),
            Err(_) => Vec::new(),
        };
        let hosts: Vec<DiscoveredHost> = report
            .hosts
            .iter()
            .map(|h| DiscoveredHost {
                ip: &h.ip,
                mac: neighbours
                    .iter()
                    .find(|n| n.ip == h.ip)
                    .map(|n| n.mac.as_str()),
                hostname: h.hostname.as_deref(),
                state: h.status.as_deref().unwrap_or("up"),
            })
            .collect();
        output::structured(&DiscoverOutput {
            subnet: subnet.to_string(),
            subnet_source: source,
            count: hosts.len(),
            hosts,
            summary: report.summary.as_deref(),
            elapsed_ms: millis(start.elapsed()),
        })
    }
}

impl NetDiscover {
    /// The /24 of the default route's source address, if it is private.
    async fn default_subnet(&self, ctx: &ToolContext) -> Result<Subnet, String> {
        let cmd = Command::new(
            "ip",
            ["route", "get", ROUTE_PROBE],
            ROUTE_TIMEOUT.min(ctx.remaining()),
        );
        let out = self
            .env
            .runner
            .run(&cmd, &ctx.cancel)
            .await
            .map_err(|e| format!("cannot find the default LAN: {e}; pass \"subnet\""))?;
        if !out.success() {
            return Err(format!(
                "cannot find the default LAN (ip route get {ROUTE_PROBE}: {}); pass \"subnet\"",
                out.failure()
            ));
        }
        let subnet = subnet_from_route(&out.stdout).ok_or_else(|| {
            "cannot find the default LAN: the default route has no IPv4 source address; pass \"subnet\""
                .to_owned()
        })?;
        target::check_subnet(subnet).map_err(|e| {
            format!(
                "refused: the default route's network is not one this tool scans ({e}); pass a private \"subnet\""
            )
        })?;
        Ok(subnet)
    }
}
