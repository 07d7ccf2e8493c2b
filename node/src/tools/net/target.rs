//! The network tools' shared guardrails: what a target or a subnet *is*, and whether a
//! tool may send packets to it.
//!
//! Every network tool goes through this module before it starts anything, so the rules
//! live in one place and are tested once, exhaustively:
//!
//! - **Parse** ([`parse_host`]): the input is trimmed; empty strings, control
//!   characters, inner whitespace and anything that starts with `-` (an option for the
//!   program it would reach: `-oN/tmp/x`, `--script=…`) are refused. IPv6 literals
//!   (bracketed or not) are parsed by the standard library; zone ids (`%eth0`) are
//!   refused. Names are mapped to ASCII with UTS-46 (`idna`: IDN, upper case,
//!   full-width characters), one trailing dot is dropped, and every label must be
//!   `[a-z0-9_-]`, 1-63 bytes, not starting with `-`. A name whose last label is
//!   numeric is an IPv4 address in one of `inet_aton`'s forms (`2130706433`,
//!   `0x7f000001`, `0177.0.0.1`, `127.1`), as browsers and the C library read it,
//!   and must parse as one.
//! - **Resolve** ([`resolve_target`]): names go through a [`HostResolver`] (the system
//!   resolver by default). IPv4-mapped IPv6 addresses (`::ffff:8.8.8.8`) are turned
//!   into the IPv4 address they carry.
//! - **Classify** ([`classify`]) the *resolved* addresses, never the input string:
//!   loopback, RFC 1918, link-local (169.254/16, fe80::/10), CGNAT (100.64/10) and
//!   unique-local (fc00::/7) are private; unspecified, multicast and broadcast
//!   addresses are never targets; everything else is public. A name with several
//!   addresses is public if **any** of them is (public wins).
//! - **Decide** ([`decide`]): private targets run; public ones are refused
//!   ([`PublicTargets::Refuse`], `net_discover`) or need `external: true` *and* an
//!   operator's approval ([`PublicTargets::WithExternal`]).
//! - **Use** the resolved address: tools put [`Resolved::address`] (an [`IpAddr`],
//!   printed by the standard library) in the argv of the programs they run, never the
//!   input string, so what was classified is exactly what is probed and a name cannot
//!   be re-resolved to something else by the program.
//!
//! Subnets ([`parse_subnet`], [`check_subnet`]) are IPv4 `a.b.c.d/len` in dotted-quad
//! form only, inside one private block, and no wider than `/22` (1024 addresses).

use async_trait::async_trait;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Longest host input accepted, in bytes (a DNS name is at most 253).
pub const MAX_HOST_LEN: usize = 253;
/// Narrowest prefix (widest subnet) `net_discover` accepts: /22, 1024 addresses.
pub const MIN_SUBNET_PREFIX: u8 = 22;

/// Why a target or subnet was refused. Messages are written for the model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TargetError {
    #[error("the target is empty")]
    Empty,
    #[error("{0:?} looks like a command-line option; give a host name or an IP address")]
    OptionLike(String),
    #[error("{0:?} contains whitespace or control characters")]
    BadCharacters(String),
    #[error("the target is longer than {MAX_HOST_LEN} bytes")]
    TooLong,
    #[error("{0:?} is not a valid IPv4 address")]
    BadIpv4(String),
    #[error("{0:?} is not a valid IPv6 address")]
    BadIpv6(String),
    #[error("{0:?}: scoped IPv6 addresses (with %zone) are not supported")]
    ZoneId(String),
    #[error("{input:?} is not a valid host name: {reason}")]
    BadName { input: String, reason: String },
    #[error("could not resolve {name}: {message}")]
    Resolve { name: String, message: String },
    #[error("resolving {name} took longer than {seconds} s")]
    ResolveTimeout { name: String, seconds: u64 },
    #[error("{name} resolves to no address")]
    NoAddress { name: String },
    #[error(
        "{name} resolves only to {addresses}, which is not a unicast address a probe may target"
    )]
    NotUnicast { name: String, addresses: String },
}

/// Why a subnet was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SubnetError {
    #[error("the subnet is empty")]
    Empty,
    #[error("{0:?} looks like a command-line option; give a subnet like 192.168.1.0/24")]
    OptionLike(String),
    #[error("{0:?} is not a subnet; give an IPv4 subnet in dotted-quad form, like 192.168.1.0/24")]
    Syntax(String),
    #[error("{0:?}: IPv6 subnets are not supported; give an IPv4 subnet like 192.168.1.0/24")]
    Ipv6(String),
    #[error("{subnet} is wider than /{MIN_SUBNET_PREFIX} (at most 1024 addresses may be scanned)")]
    TooWide { subnet: Subnet },
    #[error("{subnet} is not a private subnet ({why}); only RFC 1918, loopback, link-local (169.254/16) and CGNAT (100.64/10) subnets may be scanned")]
    NotPrivate { subnet: Subnet, why: String },
}

/// What an address is, as far as the guardrails care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrClass {
    /// 127/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16.
    Rfc1918,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 100.64/10 (carrier-grade NAT, also Tailscale).
    Cgnat,
    /// fc00::/7.
    UniqueLocal,
    /// Anything else that is unicast.
    Public,
    /// 0.0.0.0/8, ::, multicast, 255.255.255.255: never a target.
    NotUnicast,
}

impl AddrClass {
    /// Whether tools may target it without `external` (the default allowlist).
    pub fn is_private(self) -> bool {
        !matches!(self, AddrClass::Public | AddrClass::NotUnicast)
    }

    /// The name used in results and messages.
    pub fn label(self) -> &'static str {
        match self {
            AddrClass::Loopback => "loopback",
            AddrClass::Rfc1918 => "private (RFC 1918)",
            AddrClass::LinkLocal => "link-local",
            AddrClass::Cgnat => "CGNAT (100.64/10)",
            AddrClass::UniqueLocal => "unique-local (fc00::/7)",
            AddrClass::Public => "public",
            AddrClass::NotUnicast => "not unicast",
        }
    }
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// `ip` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) turned into its IPv4
/// address; every other address unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// The address `ip` stands for when it is judged: an IPv6 address that embeds an
/// IPv4 one reaches that IPv4 host (through a translator or a tunnel), so it is judged
/// as that IPv4 address. Covered: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`, not `::` or `::1`), SIIT's IPv4-translated (`::ffff:0:a.b.c.d`),
/// NAT64's well-known and local-use prefixes (`64:ff9b::/96`, `64:ff9b:1::/48`, the
/// IPv4 address in the last 32 bits), 6to4 (`2002:AABB:CCDD::/48`) and Teredo
/// (`2001::/32`, the client's address, inverted, in the last 32 bits). Every other
/// address is itself. Connections still go to the address as resolved
/// ([`canonical`]); only the judgement looks through it.
pub fn stands_for(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = canonical(ip) else {
        return ip;
    };
    let s = v6.segments();
    let last32 = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    let embedded = match s {
        [0, 0, 0, 0, 0, 0, _, _] if !v6.is_unspecified() && !v6.is_loopback() => Some(last32),
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(last32),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last32),
        [0x64, 0xff9b, 1, _, _, _, _, _] => Some(last32),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!u32::from(last32))),
        _ => None,
    };
    embedded.map_or(IpAddr::V6(v6), IpAddr::V4)
}

/// Classifies one address. An IPv6 address that embeds an IPv4 one
/// ([`stands_for`]) gets the stricter of the two classes: the metadata service
/// behind `64:ff9b::a9fe:a9fe` is link-local, and a 6to4 address that embeds a LAN
/// address stays public (it is routed over the internet, not to the LAN).
pub fn classify(ip: IpAddr) -> AddrClass {
    let ip = canonical(ip);
    let own = match ip {
        IpAddr::V4(v4) => return classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    };
    match stands_for(ip) {
        IpAddr::V4(v4) => stricter(own, classify_v4(v4)),
        IpAddr::V6(_) => own,
    }
}

/// The class that allows less: refused ones first, then public, then private.
fn stricter(a: AddrClass, b: AddrClass) -> AddrClass {
    let rank = |c: AddrClass| match c {
        AddrClass::NotUnicast => 3,
        AddrClass::LinkLocal => 2,
        AddrClass::Public => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let [a, b, _, _] = ip.octets();
    match (a, b) {
        (0, _) => AddrClass::NotUnicast,
        _ if ip.is_multicast() || ip.is_broadcast() => AddrClass::NotUnicast,
        (127, _) => AddrClass::Loopback,
        (10, _) => AddrClass::Rfc1918,
        (172, 16..=31) => AddrClass::Rfc1918,
        (192, 168) => AddrClass::Rfc1918,
        (169, 254) => AddrClass::LinkLocal,
        (100, 64..=127) => AddrClass::Cgnat,
        _ => AddrClass::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    let first = ip.segments()[0];
    if ip.is_unspecified() || ip.is_multicast() {
        AddrClass::NotUnicast
    } else if ip.is_loopback() {
        AddrClass::Loopback
    } else if first & 0xffc0 == 0xfe80 {
        AddrClass::LinkLocal
    } else if first & 0xfe00 == 0xfc00 {
        AddrClass::UniqueLocal
    } else {
        AddrClass::Public
    }
}

/// A parsed (not yet resolved) host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// An address literal, already [`canonical`].
    Ip(IpAddr),
    /// A DNS name: ASCII, lower case, no trailing dot, every label checked.
    Name(String),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Name(name) => f.write_str(name),
        }
    }
}

/// Parses a host argument (see the module docs for the rules).
pub fn parse_host(input: &str) -> Result<Host, TargetError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(TargetError::Empty);
    }
    if s.len() > MAX_HOST_LEN + 2 {
        return Err(TargetError::TooLong);
    }
    if s.starts_with('-') {
        return Err(TargetError::OptionLike(s.to_owned()));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(TargetError::BadCharacters(s.to_owned()));
    }
    // IPv6 literals: bracketed, or anything with a colon (a name never has one).
    let unbracketed = s.strip_prefix('[').and_then(|rest| rest.strip_suffix(']'));
    if let Some(inner) = unbracketed.or(s.contains(':').then_some(s)) {
        if inner.contains('%') {
            return Err(TargetError::ZoneId(s.to_owned()));
        }
        return inner
            .parse::<Ipv6Addr>()
            .map(|v6| Host::Ip(canonical(IpAddr::V6(v6))))
            .map_err(|_| TargetError::BadIpv6(s.to_owned()));
    }
    let ascii = to_ascii_name(s)?;
    // A name whose last label is a number is an IPv4 address (WHATWG URL "ends in a
    // number"; inet_aton reads it the same way): it must parse as one.
    if ends_in_number(&ascii) {
        return parse_ipv4_loose(&ascii)
            .map(|v4| Host::Ip(IpAddr::V4(v4)))
            .ok_or_else(|| TargetError::BadIpv4(s.to_owned()));
    }
    check_labels(&ascii).map_err(|reason| TargetError::BadName {
        input: s.to_owned(),
        reason,
    })?;
    Ok(Host::Name(ascii))
}

/// Maps a name to lower-case ASCII with UTS-46 and drops one trailing dot.
fn to_ascii_name(s: &str) -> Result<String, TargetError> {
    let bad = |reason: &str| TargetError::BadName {
        input: s.to_owned(),
        reason: reason.to_owned(),
    };
    let ascii = idna::domain_to_ascii_cow(s.as_bytes(), idna::AsciiDenyList::URL)
        .map_err(|_| bad("it is not a valid internationalised domain name"))?
        .into_owned();
    let ascii = ascii.strip_suffix('.').unwrap_or(&ascii).to_owned();
    if ascii.is_empty() {
        return Err(TargetError::Empty);
    }
    if ascii.len() > MAX_HOST_LEN {
        return Err(TargetError::TooLong);
    }
    // UTS-46 maps some characters to `-` (full-width hyphen-minus, for one).
    if ascii.starts_with('-') {
        return Err(TargetError::OptionLike(s.to_owned()));
    }
    Ok(ascii)
}

/// DNS label rules for names the tools resolve: 1-63 bytes of `[a-z0-9_-]`, not
/// starting with `-`.
fn check_labels(name: &str) -> Result<(), String> {
    for label in name.split('.') {
        if label.is_empty() {
            return Err("it has an empty label".to_owned());
        }
        if label.len() > 63 {
            return Err(format!("label {label:?} is longer than 63 bytes"));
        }
        if label.starts_with('-') {
            return Err(format!("label {label:?} starts with '-'"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_')))
        {
            return Err(format!("{c:?} is not allowed in a host name"));
        }
    }
    Ok(())
}

/// Normalises a DNS name for `dns_lookup`: the same checks as for a host (IDN, case,
/// one trailing dot, labels), but numeric last labels are not read as addresses.
pub fn normalize_dns_name(input: &str) -> Result<String, TargetError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(TargetError::Empty);
    }
    if s.starts_with('-') {
        return Err(TargetError::OptionLike(s.to_owned()));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(TargetError::BadCharacters(s.to_owned()));
    }
    if s.len() > MAX_HOST_LEN + 2 {
        return Err(TargetError::TooLong);
    }
    let ascii = to_ascii_name(s)?;
    check_labels(&ascii).map_err(|reason| TargetError::BadName {
        input: s.to_owned(),
        reason,
    })?;
    Ok(ascii)
}

/// Whether the last label is a number in one of `inet_aton`'s bases.
fn ends_in_number(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or("");
    if last.is_empty() {
        return false;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match last.strip_prefix("0x").or_else(|| last.strip_prefix("0X")) {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}

/// Parses IPv4 the way `inet_aton(3)` does: 1 to 4 parts, each decimal, octal
/// (leading `0`) or hex (`0x`); the last part fills the remaining bytes. `None` when
/// it is not such an address (including any empty part or a value out of range).
pub fn parse_ipv4_loose(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        values.push(parse_part(part)?);
    }
    let (last, init) = values.split_last()?;
    if init.iter().any(|&v| v > 255) {
        return None;
    }
    let last_bits = 8 * (5 - parts.len() as u32);
    if last_bits < 32 && *last >= 1u64 << last_bits {
        return None;
    }
    if *last > u64::from(u32::MAX) {
        return None;
    }
    let mut n: u32 = 0;
    for (i, v) in init.iter().enumerate() {
        n |= (*v as u32) << (24 - 8 * i as u32);
    }
    n |= *last as u32;
    Some(Ipv4Addr::from(n))
}

fn parse_part(part: &str) -> Option<u64> {
    if part.is_empty() || part.len() > 12 {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or(part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        return None;
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Resolves names to addresses. The system one uses `getaddrinfo` (so `/etc/hosts`,
/// nsswitch and the configured DNS servers, as every other program on the host);
/// tests substitute their own.
#[async_trait]
pub trait HostResolver: Send + Sync {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String>;
}

/// [`HostResolver`] through the C library's `getaddrinfo` (tokio's `lookup_host`).
pub struct SystemResolver;

#[async_trait]
impl HostResolver for SystemResolver {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        tokio::net::lookup_host((name, 0))
            .await
            .map(|addrs| addrs.map(|a| a.ip()).collect())
            .map_err(|e| e.to_string())
    }
}

/// A host after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What was parsed from the input.
    pub host: Host,
    /// Every address, canonical, without duplicates, in the resolver's order.
    pub addresses: Vec<IpAddr>,
    /// The address the tools probe: the first unicast IPv4 address, else the first
    /// unicast address.
    pub address: IpAddr,
    /// The class that decides: public if any address is public, else `address`'s.
    pub class: AddrClass,
    /// How long the lookup took (`None` for an address literal).
    pub dns_ms: Option<u64>,
}

/// Parses and resolves `input`, and classifies what it resolves to.
pub async fn resolve_target(
    input: &str,
    resolver: &dyn HostResolver,
    timeout: Duration,
) -> Result<Resolved, TargetError> {
    let host = parse_host(input)?;
    resolve_host(host, resolver, timeout).await
}

/// [`resolve_target`] for an already parsed host.
pub async fn resolve_host(
    host: Host,
    resolver: &dyn HostResolver,
    timeout: Duration,
) -> Result<Resolved, TargetError> {
    let (raw, dns_ms) = match &host {
        Host::Ip(ip) => (vec![*ip], None),
        Host::Name(name) => {
            let start = Instant::now();
            let found = tokio::time::timeout(timeout, resolver.resolve(name))
                .await
                .map_err(|_| TargetError::ResolveTimeout {
                    name: name.clone(),
                    seconds: timeout.as_secs().max(1),
                })?
                .map_err(|message| TargetError::Resolve {
                    name: name.clone(),
                    message,
                })?;
            (found, Some(start.elapsed().as_millis() as u64))
        }
    };
    from_addresses(host, raw, dns_ms)
}

/// Classifies a set of resolved addresses (public wins) and picks the one to probe.
pub fn from_addresses(
    host: Host,
    raw: Vec<IpAddr>,
    dns_ms: Option<u64>,
) -> Result<Resolved, TargetError> {
    let mut addresses: Vec<IpAddr> = Vec::with_capacity(raw.len());
    for ip in raw.into_iter().map(canonical) {
        if !addresses.contains(&ip) {
            addresses.push(ip);
        }
    }
    let name = host.to_string();
    if addresses.is_empty() {
        return Err(TargetError::NoAddress { name });
    }
    let unicast = |ip: &&IpAddr| classify(**ip) != AddrClass::NotUnicast;
    let address = addresses
        .iter()
        .filter(unicast)
        .find(|ip| ip.is_ipv4())
        .or_else(|| addresses.iter().find(unicast))
        .copied()
        .ok_or_else(|| TargetError::NotUnicast {
            name: name.clone(),
            addresses: join(&addresses),
        })?;
    let class = if addresses
        .iter()
        .any(|ip| classify(*ip) == AddrClass::Public)
    {
        AddrClass::Public
    } else {
        classify(address)
    };
    Ok(Resolved {
        host,
        addresses,
        address,
        class,
        dns_ms,
    })
}

fn join(addresses: &[IpAddr]) -> String {
    addresses
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a tool does with public targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicTargets {
    /// Never (`net_discover`).
    Refuse,
    /// Only with `external: true`, and then an operator must approve the call.
    WithExternal,
}

/// Whether a call may probe a resolved target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Private: runs without confirmation.
    Run,
    /// Public with `external: true`: runs once an operator approved the call.
    NeedsApproval { reason: String },
    /// Refused, with the message for the model.
    Refuse(String),
}

/// Decides what `tool` may do with `target` (pure: no approval is looked at here).
pub fn decide(tool: &str, target: &Resolved, external: bool, policy: PublicTargets) -> Decision {
    if target.class.is_private() {
        return Decision::Run;
    }
    let what = describe(target);
    match policy {
        PublicTargets::Refuse => Decision::Refuse(format!(
            "{tool} only probes private networks, and {what} is public"
        )),
        PublicTargets::WithExternal if !external => Decision::Refuse(format!(
            "{what} is a public address; {tool} probes public targets only with \
             \"external\": true, and then an operator must approve the call"
        )),
        PublicTargets::WithExternal => Decision::NeedsApproval {
            reason: format!(
                "{tool} would send probes to {what}, a public address outside the node's \
                 private networks"
            ),
        },
    }
}

/// `8.8.8.8`, or `example.com (93.184.216.34)`.
pub fn describe(target: &Resolved) -> String {
    match &target.host {
        Host::Ip(ip) => ip.to_string(),
        Host::Name(name) => format!("{name} ({})", join(&target.addresses)),
    }
}

/// An IPv4 subnet, normalised to its network address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl Subnet {
    /// The subnet of `ip` with `prefix` (host bits cleared). `prefix` is clamped to 32.
    pub fn of(ip: Ipv4Addr, prefix: u8) -> Subnet {
        let prefix = prefix.min(32);
        let mask = mask(prefix);
        Subnet {
            network: Ipv4Addr::from(u32::from(ip) & mask),
            prefix,
        }
    }

    /// The last address of the subnet.
    pub fn last(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !mask(self.prefix))
    }

    /// Number of addresses.
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }
}

fn mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Parses `a.b.c.d/len` (strict dotted quad; a bare address means `/32`). Host bits
/// are cleared: `192.168.1.7/24` is `192.168.1.0/24`. Not checked for privacy or size:
/// see [`check_subnet`].
pub fn parse_subnet(input: &str) -> Result<Subnet, SubnetError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(SubnetError::Empty);
    }
    if s.starts_with('-') {
        return Err(SubnetError::OptionLike(s.to_owned()));
    }
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    if addr.contains(':') {
        return Err(SubnetError::Ipv6(s.to_owned()));
    }
    let syntax = || SubnetError::Syntax(s.to_owned());
    let ip: Ipv4Addr = addr.parse().map_err(|_| syntax())?;
    let prefix = match prefix {
        None => 32,
        Some(p) if !p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()) => p
            .parse::<u8>()
            .ok()
            .filter(|&p| p <= 32)
            .ok_or_else(syntax)?,
        Some(_) => return Err(syntax()),
    };
    Ok(Subnet::of(ip, prefix))
}

/// Checks that `subnet` is at most /22 wide and lies inside one private block.
pub fn check_subnet(subnet: Subnet) -> Result<(), SubnetError> {
    if subnet.prefix < MIN_SUBNET_PREFIX {
        return Err(SubnetError::TooWide { subnet });
    }
    let first = classify(IpAddr::V4(subnet.network));
    let last = classify(IpAddr::V4(subnet.last()));
    if !first.is_private() || first != last {
        let why = if first == last {
            format!("{}", first)
        } else {
            format!("it spans {} and {} addresses", first, last)
        };
        return Err(SubnetError::NotPrivate { subnet, why });
    }
    Ok(())
}

/// [`parse_subnet`] then [`check_subnet`].
pub fn validate_subnet(input: &str) -> Result<Subnet, SubnetError> {
    let subnet = parse_subnet(input)?;
    check_subnet(subnet)?;
    Ok(subnet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_ipv4_forms() {
        for (input, want) in [
            ("127.0.0.1", Some([127, 0, 0, 1])),
            ("2130706433", Some([127, 0, 0, 1])),
            ("0x7f000001", Some([127, 0, 0, 1])),
            ("0X7F000001", Some([127, 0, 0, 1])),
            ("0177.0.0.1", Some([127, 0, 0, 1])),
            ("127.1", Some([127, 0, 0, 1])),
            ("10.1.2", Some([10, 1, 0, 2])),
            ("0x7f.1", Some([127, 0, 0, 1])),
            ("0", Some([0, 0, 0, 0])),
            ("4294967295", Some([255, 255, 255, 255])),
            ("4294967296", None),
            ("256.0.0.1", None),
            ("1.2.3.256", None),
            ("1.2.65536", None),
            ("08.0.0.1", None),
            ("0x", None),
            ("1..2", None),
            ("1.2.3.4.5", None),
            ("", None),
            ("1.2.3.4a", None),
            ("99999999999999999999", None),
        ] {
            assert_eq!(
                parse_ipv4_loose(input),
                want.map(Ipv4Addr::from),
                "{input:?}"
            );
        }
    }

    #[test]
    fn subnet_math() {
        let s = Subnet::of(Ipv4Addr::new(192, 168, 1, 77), 24);
        assert_eq!(s.to_string(), "192.168.1.0/24");
        assert_eq!(s.last(), Ipv4Addr::new(192, 168, 1, 255));
        assert_eq!(s.size(), 256);
        let all = Subnet::of(Ipv4Addr::new(1, 2, 3, 4), 0);
        assert_eq!(all.to_string(), "0.0.0.0/0");
        assert_eq!(all.size(), 1 << 32);
        assert_eq!(Subnet::of(Ipv4Addr::new(1, 2, 3, 4), 40).prefix, 32);
    }
}
