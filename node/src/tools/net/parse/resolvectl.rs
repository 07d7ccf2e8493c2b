//! `resolvectl status`: systemd-resolved's view of DNS, globally and per link.
//!
//! ```text
//! Global
//!        Protocols: +LLMNR +mDNS -DNSOverTLS DNSSEC=no/unsupported
//! resolv.conf mode: stub
//!
//! Link 2 (enp0s31f6)
//!     Current Scopes: DNS
//! Current DNS Server: 192.168.1.1
//!        DNS Servers: 192.168.1.1
//!                     fd00::1
//!         DNS Domain: lan
//! ```
//!
//! A line that starts in the first column and has no `: ` opens a section; `Key: value`
//! lines fill it; a line with no key continues the previous key's value.

use super::MAX_ENTRIES;
use serde::Serialize;
use std::collections::BTreeMap;

/// One section: `Global` or one link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolverScope {
    /// `global` or `link`.
    pub scope: String,
    /// The interface name of a link section.
    pub interface: Option<String>,
    pub ifindex: Option<u32>,
    pub current_server: Option<String>,
    pub servers: Vec<String>,
    pub domains: Vec<String>,
    /// Every other `Key: value` as printed.
    pub settings: BTreeMap<String, String>,
}

/// Parses `resolvectl status` output.
pub fn parse_status(text: &str) -> Vec<ResolverScope> {
    let mut scopes: Vec<ResolverScope> = Vec::new();
    let mut last_key: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let kv = trimmed
            .split_once(": ")
            .or_else(|| trimmed.strip_suffix(':').map(|k| (k, "")));
        if !line.starts_with(char::is_whitespace) && kv.is_none() {
            if scopes.len() >= MAX_ENTRIES {
                break;
            }
            scopes.push(section(trimmed));
            last_key = None;
            continue;
        }
        if scopes.is_empty() {
            scopes.push(section("Global"));
        }
        let Some(scope) = scopes.last_mut() else {
            continue;
        };
        match kv {
            Some((key, value)) => {
                let key = key.trim().to_owned();
                add(scope, &key, value.trim());
                last_key = Some(key);
            }
            None => {
                if let Some(key) = &last_key {
                    add(scope, key, trimmed);
                }
            }
        }
    }
    scopes
}

fn section(header: &str) -> ResolverScope {
    match header.strip_prefix("Link ") {
        Some(rest) => {
            let (index, name) = match rest.split_once(' ') {
                Some((i, n)) => (i, n.trim().trim_start_matches('(').trim_end_matches(')')),
                None => (rest, ""),
            };
            ResolverScope {
                scope: "link".to_owned(),
                interface: (!name.is_empty()).then(|| name.to_owned()),
                ifindex: index.parse().ok(),
                ..ResolverScope::default()
            }
        }
        None => ResolverScope {
            scope: header.to_ascii_lowercase(),
            ..ResolverScope::default()
        },
    }
}

fn add(scope: &mut ResolverScope, key: &str, value: &str) {
    let words = || value.split_whitespace().map(str::to_owned);
    match key {
        "Current DNS Server" => scope.current_server = Some(value.to_owned()),
        "DNS Servers" | "DNS Server" => scope.servers.extend(words()),
        "DNS Domain" | "DNS Domains" => scope.domains.extend(words()),
        _ => {
            let entry = scope.settings.entry(key.to_owned()).or_default();
            if !entry.is_empty() {
                entry.push(' ');
            }
            entry.push_str(value);
        }
    }
    scope.servers.truncate(MAX_ENTRIES);
    scope.domains.truncate(MAX_ENTRIES);
}
