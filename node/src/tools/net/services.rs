//! `net_services`: what listens on one host, and what it is (`nmap -sV`).
//!
//! The caller never passes nmap flags. The tool builds the whole argv from validated
//! values: `nmap -sV -Pn -n -oG - (--top-ports 100 | --top-ports 20 | -p LIST) [-6]
//! -- IP`, where IP is the resolved address ([`super::target`]) and LIST is the
//! caller's `ports` re-rendered from the numbers it parsed to ([`PortSpec`]). So `-A`,
//! `-O`, timing templates, NSE scripts and raw-packet modes cannot be asked for: there
//! is no way to spell them. `-Pn` skips host discovery (one host, asked for by name);
//! `-n` skips reverse DNS (the name is already known).
//!
//! Ports: the nmap top 100 by default, the top 20 with `fast: true`, or a list like
//! `"22,80,443"` / `"8000-8100"` of at most [`MAX_PORTS`] ports.
//!
//! Guardrails as for `net_diagnose`: private hosts run at once; public ones need
//! `external: true` and then an operator's approval ([`Tool::check`]).

use super::parse::nmap::{self, NmapPort};
use super::run::{install_hint, Command};
use super::target::{self, decide, Decision, PublicTargets, Resolved};
use super::{annotations, approval_required, millis, unapproved, NetEnv, RESOLVE_TIMEOUT};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ErrorShape, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use thiserror::Error;

const NAME: &str = "net_services";
/// Most ports a custom list may name.
pub const MAX_PORTS: u32 = 1024;
/// How long nmap may run.
pub const SCAN_TIMEOUT: Duration = Duration::from_secs(240);
/// Longest `ports` string accepted.
const MAX_SPEC_LEN: usize = 2048;

/// Why a port list was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PortSpecError {
    #[error("\"ports\" is empty")]
    Empty,
    #[error("\"ports\" is longer than {MAX_SPEC_LEN} characters")]
    TooLong,
    #[error("{0:?} is not a port or a range; use numbers 1-65535 and ranges like 8000-8100, separated by commas")]
    Syntax(String),
    #[error("port range {0:?} is backwards")]
    Backwards(String),
    #[error("\"ports\" names {0} ports; at most {MAX_PORTS} may be scanned")]
    TooMany(u32),
}

/// A validated port list: sorted, merged ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    ranges: Vec<(u16, u16)>,
}

impl PortSpec {
    /// Parses `22,80,443`, `1-1024`, `22, 8000-8100` (spaces around commas allowed).
    pub fn parse(spec: &str) -> Result<PortSpec, PortSpecError> {
        if spec.len() > MAX_SPEC_LEN {
            return Err(PortSpecError::TooLong);
        }
        if spec.trim().is_empty() {
            return Err(PortSpecError::Empty);
        }
        let mut ranges: Vec<(u16, u16)> = Vec::new();
        for item in spec.split(',').map(str::trim) {
            let syntax = || PortSpecError::Syntax(item.to_owned());
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (port(a).ok_or_else(syntax)?, port(b).ok_or_else(syntax)?),
                None => {
                    let p = port(item).ok_or_else(syntax)?;
                    (p, p)
                }
            };
            if lo > hi {
                return Err(PortSpecError::Backwards(item.to_owned()));
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        let count: u32 = merged
            .iter()
            .map(|(lo, hi)| u32::from(*hi) - u32::from(*lo) + 1)
            .sum();
        if count > MAX_PORTS {
            return Err(PortSpecError::TooMany(count));
        }
        Ok(PortSpec { ranges: merged })
    }

    /// How many ports it names.
    pub fn count(&self) -> u32 {
        self.ranges
            .iter()
            .map(|(lo, hi)| u32::from(*hi) - u32::from(*lo) + 1)
            .sum()
    }
}

/// `1`-`65535`, digits only.
fn port(s: &str) -> Option<u16> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u16>().ok().filter(|&p| p > 0)
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

/// Which ports to scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ports {
    /// `--top-ports N`.
    Top(u16),
    /// `-p LIST`.
    List(PortSpec),
}

impl Ports {
    fn describe(&self) -> String {
        match self {
            Ports::Top(n) => format!("the top {n} ports"),
            Ports::List(spec) => format!("ports {spec}"),
        }
    }
}

/// The nmap arguments for a service scan of `ip`.
pub fn nmap_args(ip: IpAddr, ports: &Ports) -> Vec<String> {
    let mut args: Vec<String> = ["-sV", "-Pn", "-n", "-oG", "-"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    match ports {
        Ports::Top(n) => {
            args.push("--top-ports".to_owned());
            args.push(n.to_string());
        }
        Ports::List(spec) => {
            args.push("-p".to_owned());
            args.push(spec.to_string());
        }
    }
    if ip.is_ipv6() {
        args.push("-6".to_owned());
    }
    args.push("--".to_owned());
    args.push(ip.to_string());
    args
}

/// The `net_services` tool.
pub struct NetServices {
    env: NetEnv,
}

/// `net_services`' structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicesOutput<'a> {
    /// The host as the caller gave it.
    pub host: &'a str,
    /// The address scanned (the resolved one).
    pub address: String,
    /// The address's class (`private (RFC 1918)`, `public`, ...).
    pub scope: &'static str,
    /// Which ports were scanned (`the top 100 ports`, `ports 22,80`).
    pub scanned: String,
    /// nmap's status for the host (`up`), if it gave one.
    pub status: Option<&'a str>,
    /// Ports in `ports` whose state is `open`.
    pub open: usize,
    pub ports: &'a [NmapPort],
    /// The ports nmap did not list, e.g. `closed (93)`.
    pub ignored: Option<&'a str>,
    /// nmap's closing summary, if it printed one.
    pub summary: Option<&'a str>,
    pub elapsed_ms: u64,
}

impl NetServices {
    pub fn new(env: NetEnv) -> Self {
        NetServices { env }
    }
}

struct Request {
    host: String,
    ports: Ports,
    external: bool,
}

impl Request {
    fn parse(args: &Value) -> Result<Request, String> {
        let args = Args::new(args, &["host", "ports", "fast", "external"])?;
        let host = args.required_str("host")?.to_owned();
        let fast = args.bool("fast")?.unwrap_or(false);
        let ports = match (args.str("ports")?, fast) {
            (Some(_), true) => return Err("give either \"ports\" or \"fast\", not both".to_owned()),
            (Some(spec), false) => Ports::List(PortSpec::parse(spec).map_err(|e| e.to_string())?),
            (None, true) => Ports::Top(20),
            (None, false) => Ports::Top(100),
        };
        Ok(Request {
            host,
            ports,
            external: args.bool("external")?.unwrap_or(false),
        })
    }
}

fn summary(target: &Resolved, ports: &Ports) -> String {
    format!(
        "net_services {}: nmap -sV on {}",
        target::describe(target),
        ports.describe()
    )
}

#[async_trait::async_trait]
impl Tool for NetServices {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "Identify the services listening on a host (nmap -sV): port, \
                          protocol, state, service, version. A public host needs `external` \
                          and an operator's approval."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "host": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 255,
                        "description": "Host name or IP."
                    },
                    "ports": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_SPEC_LEN,
                        "description": "e.g. \"22,80,443\" or \"1-1024\", at most 1024 (default: the top 100)."
                    },
                    "fast": {
                        "type": "boolean",
                        "description": "Only the top 20 ports."
                    },
                    "external": {
                        "type": "boolean",
                        "description": "Allow a public host."
                    }
                },
                "required": ["host"],
                "additionalProperties": false
            }),
            capability: Capability::NetworkScan.as_str().to_owned(),
            annotations: annotations("Identify services on a host", true),
            default_timeout_ms: Some(270_000),
            requires_bins: vec!["nmap".to_owned()],
            requires_approval: false,
        }
    }

    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), ErrorShape> {
        let Ok(req) = Request::parse(args) else {
            return Ok(());
        };
        // No operator is asked to approve a scan that cannot run.
        if !self.env.runner.available("nmap").await {
            return Ok(());
        }
        let Ok(resolved) =
            target::resolve_target(&req.host, self.env.resolver.as_ref(), RESOLVE_TIMEOUT).await
        else {
            return Ok(());
        };
        match decide(NAME, &resolved, req.external, PublicTargets::WithExternal) {
            Decision::NeedsApproval { reason } if ctx.approval.is_none() => {
                Err(approval_required(&reason, &summary(&resolved, &req.ports)))
            }
            _ => Ok(()),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let req = match Request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("{NAME}: {message}")),
        };
        let host = match target::parse_host(&req.host) {
            Ok(h) => h,
            Err(e) => return ToolResult::error(format!("{NAME}: refused: {e}")),
        };
        let resolved =
            match target::resolve_host(host, self.env.resolver.as_ref(), RESOLVE_TIMEOUT).await {
                Ok(r) => r,
                Err(e) => return ToolResult::error(format!("{NAME}: {e}")),
            };
        // A refused target is refused before anything else, nmap or not.
        let decision = decide(NAME, &resolved, req.external, PublicTargets::WithExternal);
        if let Decision::Refuse(why) = &decision {
            return ToolResult::error(format!("{NAME}: refused: {why}"));
        }
        if !self.env.runner.available("nmap").await {
            return ToolResult::error(format!(
                "{NAME}: nmap is not installed on this node; {}",
                install_hint("nmap")
            ));
        }
        if let Decision::NeedsApproval { reason } = decision {
            if ctx.approval.is_none() {
                return unapproved(NAME, &reason);
            }
        }

        let start = Instant::now();
        let timeout = SCAN_TIMEOUT.min(ctx.remaining());
        let cmd = Command::new("nmap", nmap_args(resolved.address, &req.ports), timeout);
        let out = match self.env.runner.run(&cmd, &ctx.cancel).await {
            Ok(out) => out,
            Err(e) => return ToolResult::error(format!("{NAME}: {e}")),
        };
        if out.timed_out {
            return ToolResult::error(format!(
                "{NAME}: nmap did not finish within {} s; scan fewer ports (\"fast\": true, or a short \"ports\" list)",
                timeout.as_secs()
            ));
        }
        let report = nmap::parse_greppable(&out.stdout);
        let address = resolved.address.to_string();
        let Some(found) = report.hosts.iter().find(|h| h.ip == address) else {
            if !out.success() {
                return ToolResult::error(format!("{NAME}: nmap failed: {}", out.failure()));
            }
            return ToolResult::error(format!(
                "{NAME}: nmap reported nothing for {address} ({})",
                report.summary.as_deref().unwrap_or("no summary")
            ));
        };
        let open = found.ports.iter().filter(|p| p.state == "open").count();
        output::structured(&ServicesOutput {
            host: &req.host,
            address,
            scope: resolved.class.label(),
            scanned: req.ports.describe(),
            status: found.status.as_deref(),
            open,
            ports: &found.ports,
            ignored: found.ignored.as_deref(),
            summary: report.summary.as_deref(),
            elapsed_ms: millis(start.elapsed()),
        })
    }
}
