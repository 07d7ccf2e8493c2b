//! `net_diagnose`: the composite "why can't I reach X?" probe.
//!
//! One call runs, against one target:
//!
//! 1. **DNS**: the name's addresses and how long resolving took (skipped for an
//!    address literal). Everything after probes the address [`super::target`] picked
//!    from them, never the name again.
//! 2. **ping**: `ping -n -c 3 -W 2 -- IP` (iputils), parsed into sent / received /
//!    loss / round-trip times.
//! 3. **traceroute**: `traceroute -n -w 2 -q 1 -m 20 -- IP`, or `tracepath -n -m 20 --
//!    IP` where traceroute is missing: the hops, the last one, whether the target was
//!    reached.
//! 4. **port check** (when `port` is given): a native TCP connect; for 80 and 443 the
//!    HTTP status (TLS for 443), see [`super::portcheck`].
//!
//! Steps 2-4 run concurrently after DNS, each with its own timeout, all inside a total
//! budget of [`TOTAL_BUDGET`] (and the call's deadline). A sub-check that fails —
//! no reply, no route, a missing binary, a timeout — fills its own field with
//! `status` and `failure` instead of failing the call: the model needs the partial
//! picture to reason. Only a refused target (see below) or bad arguments make the
//! call an error.
//!
//! Guardrails: private targets run at once. A public target (any resolved address
//! public) is refused unless `external: true`, and then [`Tool::check`] answers
//! `approval_required` until an operator approves the call.
//!
//! The result's types: [`super::diagnose_output`].

use super::diagnose_output::{
    CheckStatus, DiagnoseOutput, DnsStep, NotRun, PingCheck, Step, TraceCheck,
};
use super::parse::{ping, traceroute};
use super::portcheck::check_port;
use super::run::{Command, RunError};
use super::target::{self, decide, Decision, Host, PublicTargets, Resolved};
use super::{annotations, approval_required, millis, unapproved, NetEnv, RESOLVE_TIMEOUT};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ErrorShape, ToolDef, ToolResult};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::time::{Duration, Instant};

const NAME: &str = "net_diagnose";
/// The whole call's budget: DNS plus the concurrent checks.
pub const TOTAL_BUDGET: Duration = Duration::from_secs(28);
/// ping's own timeout (3 probes, 2 s wait each).
pub const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// traceroute's (or tracepath's) own timeout; a partial path is still returned.
pub const TRACE_TIMEOUT: Duration = Duration::from_secs(20);
/// The port check's own timeout (connect, TLS, HTTP).
pub const PORT_TIMEOUT: Duration = Duration::from_secs(12);

/// The `net_diagnose` tool.
pub struct NetDiagnose {
    env: NetEnv,
}

impl NetDiagnose {
    pub fn new(env: NetEnv) -> Self {
        NetDiagnose { env }
    }
}

struct Request {
    target: String,
    port: Option<u16>,
    external: bool,
}

impl Request {
    fn parse(args: &Value) -> Result<Request, String> {
        let args = Args::new(args, &["target", "port", "external"])?;
        Ok(Request {
            target: args.required_str("target")?.to_owned(),
            port: args.u64_in("port", 1, 65535)?.map(|p| p as u16),
            external: args.bool("external")?.unwrap_or(false),
        })
    }
}

fn summary(target: &Resolved, port: Option<u16>) -> String {
    let port = port
        .map(|p| format!(", TCP port {p} check"))
        .unwrap_or_default();
    format!(
        "net_diagnose {}: DNS, ping, traceroute{port}",
        target::describe(target)
    )
}

#[async_trait::async_trait]
impl Tool for NetDiagnose {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "Why this node can or cannot reach a host: DNS, ping, traceroute, \
                          and a TCP connect to `port`; each check reports its own failure. A \
                          public target needs `external` and an operator's approval."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "target": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 255,
                        "description": "Host name or IP."
                    },
                    "port": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 65535,
                        "description": "TCP port (HTTP status for 80, 443)."
                    },
                    "external": {
                        "type": "boolean",
                        "description": "Allow a public target."
                    }
                },
                "required": ["target"],
                "additionalProperties": false
            }),
            capability: Capability::NetworkDiagnose.as_str().to_owned(),
            annotations: annotations("Diagnose connectivity to a host", true),
            default_timeout_ms: Some(45_000),
            requires_bins: vec!["ping".to_owned(), "traceroute".to_owned()],
            requires_approval: false,
        }
    }

    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), ErrorShape> {
        let Ok(req) = Request::parse(args) else {
            return Ok(());
        };
        let Ok(resolved) =
            target::resolve_target(&req.target, self.env.resolver.as_ref(), RESOLVE_TIMEOUT).await
        else {
            return Ok(());
        };
        match decide(NAME, &resolved, req.external, PublicTargets::WithExternal) {
            Decision::NeedsApproval { reason } if ctx.approval.is_none() => {
                Err(approval_required(&reason, &summary(&resolved, req.port)))
            }
            _ => Ok(()),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let req = match Request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("{NAME}: {message}")),
        };
        let start = Instant::now();
        let budget = TOTAL_BUDGET.min(ctx.remaining());
        let host = match target::parse_host(&req.target) {
            Ok(h) => h,
            Err(e) => return ToolResult::error(format!("{NAME}: refused: {e}")),
        };

        // 1. DNS.
        let (dns, raw) = match &host {
            Host::Ip(ip) => (
                DnsStep::Skipped {
                    reason: "the target is an IP address",
                },
                Ok(vec![*ip]),
            ),
            Host::Name(name) => {
                let t = Instant::now();
                let found = tokio::time::timeout(
                    RESOLVE_TIMEOUT.min(budget),
                    self.env.resolver.resolve(name),
                )
                .await
                .unwrap_or_else(|_| Err("timed out".to_owned()));
                let ms = millis(t.elapsed());
                match found {
                    Ok(addrs) if !addrs.is_empty() => {
                        let canon: Vec<IpAddr> =
                            addrs.iter().copied().map(target::canonical).collect();
                        (
                            DnsStep::Ok {
                                time_ms: ms,
                                addresses: dedup(&canon),
                            },
                            Ok(addrs),
                        )
                    }
                    Ok(_) => (
                        DnsStep::Failed {
                            time_ms: ms,
                            failure: "no address".to_owned(),
                        },
                        Err("DNS returned no address".to_owned()),
                    ),
                    Err(e) => (
                        DnsStep::Failed {
                            time_ms: ms,
                            failure: e.clone(),
                        },
                        Err(format!("DNS failed: {e}")),
                    ),
                }
            }
        };
        let resolved = raw.and_then(|raw| {
            target::from_addresses(host.clone(), raw, None).map_err(|e| e.to_string())
        });
        let resolved = match resolved {
            Ok(r) => r,
            Err(why) if matches!(host, Host::Ip(_)) => {
                return ToolResult::error(format!("{NAME}: refused: {why}"));
            }
            Err(why) => {
                // Nothing to probe: the DNS answer is the diagnosis.
                return output::structured(&DiagnoseOutput {
                    target: &req.target,
                    resolved_to: None,
                    scope: None,
                    dns,
                    ping: Step::skipped(&why),
                    traceroute: Step::skipped(&why),
                    port_check: req.port.map(|_| Step::skipped(&why)),
                    elapsed_ms: millis(start.elapsed()),
                });
            }
        };

        // The guardrail, on the resolved address, before any probe.
        match decide(NAME, &resolved, req.external, PublicTargets::WithExternal) {
            Decision::Run => {}
            Decision::Refuse(why) => return ToolResult::error(format!("{NAME}: refused: {why}")),
            Decision::NeedsApproval { reason } => {
                if ctx.approval.is_none() {
                    return unapproved(NAME, &reason);
                }
            }
        }

        // 2-4, concurrently, inside what is left of the budget.
        let left = budget.saturating_sub(start.elapsed());
        let ip = resolved.address;
        let server_name = match &resolved.host {
            Host::Name(n) => Some(n.as_str()),
            Host::Ip(_) => None,
        };
        let (ping, trace, port) = tokio::join!(
            self.ping(ip, PING_TIMEOUT.min(left), &ctx),
            self.traceroute(ip, TRACE_TIMEOUT.min(left), &ctx),
            async {
                match req.port {
                    Some(p) => Some(
                        check_port(
                            self.env.connector.as_ref(),
                            ip,
                            p,
                            server_name,
                            PORT_TIMEOUT.min(left),
                        )
                        .await,
                    ),
                    None => None,
                }
            }
        );
        output::structured(&DiagnoseOutput {
            target: &req.target,
            resolved_to: Some(ip.to_string()),
            scope: Some(resolved.class.label()),
            dns,
            ping,
            traceroute: trace,
            port_check: port.map(Step::Ran),
            elapsed_ms: millis(start.elapsed()),
        })
    }
}

impl NetDiagnose {
    async fn ping(&self, ip: IpAddr, timeout: Duration, ctx: &ToolContext) -> Step<PingCheck> {
        let cmd = Command::new(
            "ping",
            ["-n", "-c", "3", "-W", "2", "--", &ip.to_string()],
            timeout,
        );
        let out = match self.env.runner.run(&cmd, &ctx.cancel).await {
            Ok(out) => out,
            Err(e) => return run_failure(&e),
        };
        let stats = ping::parse(&out.stdout);
        let status = match (&stats, out.timed_out) {
            (_, true) => CheckStatus::TimedOut,
            (Some(s), _) if s.received > 0 => CheckStatus::Ok,
            (Some(_), _) => CheckStatus::NoReply,
            (None, _) => CheckStatus::Failed,
        };
        let failure = match status {
            CheckStatus::Ok => None,
            CheckStatus::NoReply => Some("no echo reply (host down, or ICMP filtered)".to_owned()),
            _ => Some(out.failure()),
        };
        Step::Ran(PingCheck {
            status,
            stats,
            failure,
        })
    }

    async fn traceroute(
        &self,
        ip: IpAddr,
        timeout: Duration,
        ctx: &ToolContext,
    ) -> Step<TraceCheck> {
        let ip_s = ip.to_string();
        let (program, out) = if self.env.runner.available("traceroute").await
            || !self.env.runner.available("tracepath").await
        {
            let cmd = Command::new(
                "traceroute",
                ["-n", "-w", "2", "-q", "1", "-m", "20", "--", &ip_s],
                timeout,
            );
            ("traceroute", self.env.runner.run(&cmd, &ctx.cancel).await)
        } else {
            let cmd = Command::new("tracepath", ["-n", "-m", "20", "--", &ip_s], timeout);
            ("tracepath", self.env.runner.run(&cmd, &ctx.cancel).await)
        };
        let out = match out {
            Ok(out) => out,
            Err(e) => return run_failure(&e),
        };
        let hops = if program == "traceroute" {
            traceroute::parse_traceroute(&out.stdout)
        } else {
            traceroute::parse_tracepath(&out.stdout)
        };
        let reached = hops.iter().any(|h| h.address.as_deref() == Some(&ip_s));
        let last_hop = hops.iter().rev().find_map(|h| h.address.clone());
        let status = if reached {
            CheckStatus::Ok
        } else if out.timed_out {
            CheckStatus::TimedOut
        } else if hops.is_empty() {
            CheckStatus::Failed
        } else {
            CheckStatus::NotReached
        };
        let failure = match status {
            CheckStatus::Ok => None,
            CheckStatus::NotReached => Some("the target did not answer within 20 hops".to_owned()),
            _ => Some(out.failure()),
        };
        Step::Ran(TraceCheck {
            status,
            program,
            hops: hops.len(),
            last_hop,
            reached,
            path: hops,
            failure,
        })
    }
}

/// A sub-check that could not run at all.
fn run_failure<T>(e: &RunError) -> Step<T> {
    let failure = e.to_string();
    Step::NotRun(match e {
        RunError::NotInstalled { .. } => NotRun::NotInstalled { failure },
        RunError::Cancelled { .. } => NotRun::Cancelled { failure },
        RunError::Spawn { .. } | RunError::NoNmapData { .. } => NotRun::Failed { failure },
    })
}

fn dedup(addrs: &[IpAddr]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in addrs {
        let s = a.to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}
