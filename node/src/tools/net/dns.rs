//! `dns_lookup`: a typed DNS query, answered natively by `hickory-resolver` (no `dig`
//! needed on the node).
//!
//! - `name` is normalised like a target ([`super::target::normalize_dns_name`]: IDN,
//!   case, whitespace, one trailing dot, no leading `-`) and queried as an absolute
//!   name, as `dig` does: the search list is never applied. For `PTR`, an IP address
//!   is accepted and turned into its `in-addr.arpa` / `ip6.arpa` name (`dig -x`).
//! - `type`: A (default), AAAA, MX, NS, TXT, SRV, CAA, CNAME, PTR, SOA.
//! - `server`: by default the system's resolver configuration (`/etc/resolv.conf`;
//!   `localhost` and other RFC 6761 loopback names are answered locally, never sent).
//!   Otherwise one server, queried alone: a loopback, private (RFC 1918, link-local,
//!   CGNAT, ULA) address, or exactly 1.1.1.1, 8.8.8.8 or 9.9.9.9 — so the tool cannot
//!   be pointed at arbitrary hosts. `IP:PORT` (`[IPv6]:PORT`) picks a port other than
//!   53, for loopback servers only (a local test resolver, a stub on 127.0.0.1:5353).
//!
//! Result: `status` (`NOERROR`, `NXDOMAIN`, …) and the answer's records, each with its
//! owner name, type and TTL, plus typed fields: `address` (A/AAAA), `preference` and
//! `exchange` (MX), `priority`/`weight`/`port`/`target` (SRV), `segments` and `text`
//! (TXT: the character-strings, as `dig` shows them quoted), `flags`/`tag`/`value`
//! (CAA), the SOA fields, `target` (CNAME/NS/PTR). CNAMEs met on the way are kept. An
//! empty answer or NXDOMAIN is a result, not an error; a server that cannot be reached
//! is an error. No DNSSEC validation. The result's types: [`super::dns_output`].

use super::dns_output::{DnsRecord, LookupOutput};
use super::target::{self, classify, AddrClass};
use super::{annotations, millis};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolDef, ToolResult};
use hickory_resolver::config::{NameServerConfigGroup, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::proto::ProtoErrorKind;
use hickory_resolver::{Name, ResolveErrorKind, Resolver};
use serde_json::{json, Value};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

const NAME: &str = "dns_lookup";
/// The record types the tool queries.
pub const TYPES: &[&str] = &[
    "A", "AAAA", "MX", "NS", "TXT", "SRV", "CAA", "CNAME", "PTR", "SOA",
];
/// Public resolvers a query may be sent to explicitly.
pub const PUBLIC_SERVERS: &[Ipv4Addr] = &[
    Ipv4Addr::new(1, 1, 1, 1),
    Ipv4Addr::new(8, 8, 8, 8),
    Ipv4Addr::new(9, 9, 9, 9),
];
/// How long one query to one server may take; the resolver tries twice.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(4);
/// The whole lookup's budget.
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(15);
/// Most records returned.
pub const MAX_RECORDS: usize = 500;

/// The `dns_lookup` tool.
#[derive(Default)]
pub struct DnsLookup;

/// Parses and checks a `server` argument (see the module docs).
pub fn parse_server(input: &str) -> Result<SocketAddr, String> {
    let s = input.trim();
    if s.starts_with('-') {
        return Err(format!(
            "{s:?} looks like a command-line option; give an IP address"
        ));
    }
    let addr: SocketAddr = match s.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, 53),
        Err(_) => s.parse::<SocketAddr>().map_err(|_| {
            format!(
                "{s:?} is not an IP address (give \"IP\" or, for a loopback server, \"IP:PORT\")"
            )
        })?,
    };
    let ip = target::canonical(addr.ip());
    let addr = SocketAddr::new(ip, addr.port());
    let class = classify(ip);
    let allowed_public = matches!(ip, IpAddr::V4(v4) if PUBLIC_SERVERS.contains(&v4));
    if !(class.is_private() || allowed_public) {
        return Err(format!(
            "server {ip} is not allowed: use a loopback or private-network resolver, or one of \
             1.1.1.1, 8.8.8.8, 9.9.9.9 (or omit \"server\" for the system's resolver)"
        ));
    }
    if addr.port() == 0 || (addr.port() != 53 && class != AddrClass::Loopback) {
        return Err(format!(
            "server port {} is not allowed: only a loopback server may use a port other than 53",
            addr.port()
        ));
    }
    Ok(addr)
}

/// Parses a `type` argument (case-insensitive).
pub fn parse_type(input: &str) -> Result<RecordType, String> {
    let upper = input.trim().to_ascii_uppercase();
    if !TYPES.contains(&upper.as_str()) {
        return Err(format!(
            "unsupported record type {input:?}; use one of {}",
            TYPES.join(", ")
        ));
    }
    upper
        .parse::<RecordType>()
        .map_err(|_| format!("unsupported record type {input:?}"))
}

/// The absolute name to query: `name` normalised, or the reverse name of an address
/// for PTR.
pub fn query_name(input: &str, record_type: RecordType) -> Result<Name, String> {
    if record_type == RecordType::PTR {
        let trimmed = input.trim();
        let bare = trimmed
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(trimmed);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Name::from(target::canonical(ip)));
        }
    }
    let ascii = target::normalize_dns_name(input).map_err(|e| e.to_string())?;
    let mut name = Name::from_ascii(&ascii).map_err(|e| format!("{input:?}: {e}"))?;
    name.set_fqdn(true);
    Ok(name)
}

struct Request {
    name: Name,
    record_type: RecordType,
    server: Option<SocketAddr>,
}

impl Request {
    fn parse(args: &Value) -> Result<Request, String> {
        let args = Args::new(args, &["name", "type", "server"])?;
        let record_type = match args.str("type")? {
            Some(t) => parse_type(t)?,
            None => RecordType::A,
        };
        let name = query_name(args.required_str("name")?, record_type)?;
        let server = args.str("server")?.map(parse_server).transpose()?;
        Ok(Request {
            name,
            record_type,
            server,
        })
    }
}

#[async_trait::async_trait]
impl Tool for DnsLookup {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "Query DNS from this node: one name's records of one type, with \
                          TTLs. The name is asked as given (no search domains)."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 255,
                        "description": "An IP for PTR."
                    },
                    "type": {
                        "type": "string",
                        "enum": TYPES,
                        "description": "Default A."
                    },
                    "server": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 64,
                        "description": "Resolver instead of the system's: a loopback or private IP (IP:PORT on loopback), 1.1.1.1, 8.8.8.8 or 9.9.9.9."
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            capability: Capability::DnsQuery.as_str().to_owned(),
            annotations: annotations("DNS lookup", true),
            default_timeout_ms: Some(30_000),
            requires_bins: Vec::new(),
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let req = match Request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("{NAME}: {message}")),
        };
        let resolver = match build_resolver(req.server) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("{NAME}: {message}")),
        };
        let start = Instant::now();
        let server = req
            .server
            .map(|s| s.to_string())
            .unwrap_or_else(|| "system".to_owned());
        let lookup = tokio::select! {
            r = tokio::time::timeout(TOTAL_TIMEOUT.min(ctx.remaining()), resolver.lookup(req.name.clone(), req.record_type)) => r,
            _ = ctx.cancel.cancelled() => return ToolResult::error(format!("{NAME}: cancelled")),
        };
        let base = |status: &str, records: Vec<DnsRecord>| {
            output::structured(&LookupOutput {
                name: req.name.to_ascii(),
                record_type: req.record_type.to_string(),
                server: server.clone(),
                status: status.to_owned(),
                count: records.len(),
                records,
                time_ms: millis(start.elapsed()),
            })
        };
        match lookup {
            Err(_) => ToolResult::error(format!(
                "{NAME}: no answer for {} {} from {server} within {} s",
                req.name,
                req.record_type,
                TOTAL_TIMEOUT.min(ctx.remaining()).as_secs().max(1)
            )),
            Ok(Ok(found)) => {
                let records = found
                    .records()
                    .iter()
                    .take(MAX_RECORDS)
                    .map(DnsRecord::from)
                    .collect();
                base("NOERROR", records)
            }
            Ok(Err(e)) => match e.kind() {
                ResolveErrorKind::Proto(p) => match p.kind() {
                    ProtoErrorKind::NoRecordsFound { response_code, .. } => {
                        let status = match *response_code {
                            ResponseCode::NoError => "NOERROR".to_owned(),
                            ResponseCode::NXDomain => "NXDOMAIN".to_owned(),
                            other => other.to_str().to_ascii_uppercase(),
                        };
                        if matches!(
                            *response_code,
                            ResponseCode::NoError | ResponseCode::NXDomain
                        ) {
                            base(&status, Vec::new())
                        } else {
                            ToolResult::error(format!(
                                "{NAME}: {server} answered {status} for {} {}",
                                req.name, req.record_type
                            ))
                        }
                    }
                    _ => ToolResult::error(format!("{NAME}: query failed: {e}")),
                },
                _ => ToolResult::error(format!("{NAME}: query failed: {e}")),
            },
        }
    }
}

/// A resolver for the system's configuration, or for `server` alone.
fn build_resolver(server: Option<SocketAddr>) -> Result<Resolver<TokioConnectionProvider>, String> {
    let mut opts = ResolverOpts::default();
    opts.timeout = QUERY_TIMEOUT;
    opts.attempts = 2;
    opts.cache_size = 0;
    opts.preserve_intermediates = true;
    opts.edns0 = true;
    opts.validate = false;
    let builder = match server {
        None => {
            opts.use_hosts_file = ResolveHosts::Always;
            Resolver::builder_tokio()
                .map_err(|e| format!("cannot read the system's resolver configuration: {e}"))?
        }
        Some(addr) => {
            opts.use_hosts_file = ResolveHosts::Never;
            let servers = NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
            Resolver::builder_with_config(
                ResolverConfig::from_parts(None, Vec::new(), servers),
                TokioConnectionProvider::default(),
            )
        }
    };
    Ok(builder.with_options(opts).build())
}
