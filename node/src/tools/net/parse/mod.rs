//! Parsers for the text the network tools' programs print.
//!
//! Each parser takes the whole output of one program run (as the runner captured it,
//! in the `C` locale) and returns plain serialisable data; none of them fails or
//! panics on unexpected text: lines they do not understand are skipped, so a format
//! change degrades a section instead of breaking the call. They are pure functions,
//! tested against captured real output in `node/tests/fixtures/net/`.
//!
//! - [`nmap`]: `nmap -oG -` (greppable) host and port lines.
//! - [`ip_addr`], [`ip_route`]: `ip -br addr`, `ip route` / `ip -6 route` / `ip route get`.
//! - [`sockets`]: `ss -tulpn` and `netstat -tulpn`.
//! - [`nmcli`]: `nmcli -t` (terse, `:`-separated with `\` escapes).
//! - [`resolvectl`], [`resolv_conf`]: `resolvectl status` and `/etc/resolv.conf`.
//! - [`ping`], [`traceroute`]: iputils `ping` statistics; `traceroute -n` and `tracepath -n` hops.
//! - [`arp`]: the kernel's IPv4 neighbour table (`/proc/net/arp`).

pub mod arp;
pub mod ip_addr;
pub mod ip_route;
pub mod nmap;
pub mod nmcli;
pub mod ping;
pub mod resolv_conf;
pub mod resolvectl;
pub mod sockets;
pub mod traceroute;

/// Most entries any parser returns (a runaway output cannot make a huge result).
pub const MAX_ENTRIES: usize = 4096;
