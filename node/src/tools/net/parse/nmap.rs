//! nmap's greppable output (`-oG -`): one line per host and kind of fact.
//!
//! ```text
//! Host: 127.0.0.1 (localhost)<TAB>Status: Up
//! Host: 127.0.0.1 (localhost)<TAB>Ports: 22/open/tcp//ssh//OpenSSH 9.2p1 Debian 2/, 80/closed/tcp//http///<TAB>Ignored State: closed (98)
//! # Nmap done at … -- 1 IP address (1 host up) scanned in 0.29 seconds
//! ```
//!
//! (`<TAB>` is a tab.) Lines of one host are merged (by address, in first-seen order). A port entry is
//! `port/state/protocol/owner/service/rpc/version/`; nmap writes `/` inside a version
//! as `|`, and entries are separated by `, ` (a `, ` inside a version is kept, since a
//! new entry always starts with `digits/`).

use super::MAX_ENTRIES;
use serde::Serialize;

/// One host nmap reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NmapHost {
    pub ip: String,
    /// The reverse-DNS name nmap printed, if any.
    pub hostname: Option<String>,
    /// `up`, `down`, … (lower case), if a `Status:` field was seen.
    pub status: Option<String>,
    pub ports: Vec<NmapPort>,
    /// Ports not listed, e.g. `closed (98)`.
    pub ignored: Option<String>,
}

/// One port of a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NmapPort {
    pub port: u16,
    pub protocol: String,
    pub state: String,
    pub service: Option<String>,
    /// Product, version and extra information as nmap's version detection found them.
    pub version: Option<String>,
}

/// Everything parsed from one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NmapReport {
    pub hosts: Vec<NmapHost>,
    /// The `# Nmap done …` line's summary (`1 IP address (1 host up) scanned in 0.29 seconds`).
    pub summary: Option<String>,
}

/// Parses greppable output.
pub fn parse_greppable(text: &str) -> NmapReport {
    let mut report = NmapReport::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# Nmap done at ") {
            report.summary = rest.split_once(" -- ").map(|(_, s)| s.trim().to_owned());
            continue;
        }
        let mut fields = line.split('\t');
        let Some(head) = fields.next().and_then(|h| h.strip_prefix("Host: ")) else {
            continue;
        };
        let (ip, hostname) = match head.split_once(' ') {
            Some((ip, name)) => {
                let name = name.trim().trim_start_matches('(').trim_end_matches(')');
                (ip, (!name.is_empty()).then(|| name.to_owned()))
            }
            None => (head.trim(), None),
        };
        if ip.is_empty() {
            continue;
        }
        let index = match report.hosts.iter().position(|h| h.ip == ip) {
            Some(i) => i,
            None if report.hosts.len() < MAX_ENTRIES => {
                report.hosts.push(NmapHost {
                    ip: ip.to_owned(),
                    ..NmapHost::default()
                });
                report.hosts.len() - 1
            }
            None => continue,
        };
        let host = &mut report.hosts[index];
        if host.hostname.is_none() {
            host.hostname = hostname;
        }
        for field in fields {
            let Some((key, value)) = field.split_once(": ").or_else(|| field.split_once(':'))
            else {
                continue;
            };
            match key.trim() {
                "Status" => host.status = Some(value.trim().to_ascii_lowercase()),
                "Ports" => host.ports.extend(parse_ports(value)),
                "Ignored State" => {
                    let v = value.trim();
                    host.ignored = (!v.is_empty()).then(|| v.to_owned());
                }
                _ => {}
            }
        }
        host.ports.truncate(MAX_ENTRIES);
    }
    report
}

/// Parses the value of a `Ports:` field.
fn parse_ports(value: &str) -> Vec<NmapPort> {
    let mut entries: Vec<String> = Vec::new();
    for piece in value.split(", ") {
        let starts_entry = piece
            .split_once('/')
            .is_some_and(|(n, _)| !n.is_empty() && n.trim().bytes().all(|b| b.is_ascii_digit()));
        match entries.last_mut() {
            Some(last) if !starts_entry => {
                last.push_str(", ");
                last.push_str(piece);
            }
            _ => entries.push(piece.to_owned()),
        }
    }
    entries
        .iter()
        .filter_map(|e| parse_port(e.trim()))
        .collect()
}

fn parse_port(entry: &str) -> Option<NmapPort> {
    let mut parts = entry.splitn(7, '/');
    let port = parts.next()?.trim().parse::<u16>().ok()?;
    let state = parts.next()?.to_owned();
    let protocol = parts.next()?.to_owned();
    let _owner = parts.next();
    let service = parts.next().filter(|s| !s.is_empty()).map(str::to_owned);
    let _rpc = parts.next();
    let version = parts
        .next()
        .map(|v| v.strip_suffix('/').unwrap_or(v).trim())
        .filter(|v| !v.is_empty())
        .map(|v| v.replace('|', "/"));
    if state.is_empty() || protocol.is_empty() {
        return None;
    }
    Some(NmapPort {
        port,
        protocol,
        state,
        service,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_with_commas_stay_whole() {
        let r = parse_greppable(
            "Host: 10.0.0.5 ()\tPorts: 80/open/tcp//http//Apache httpd 2.4 (Debian, x)/, 443/open/tcp//ssl|https//nginx/\n",
        );
        let ports = &r.hosts[0].ports;
        assert_eq!(ports.len(), 2);
        assert_eq!(
            ports[0].version.as_deref(),
            Some("Apache httpd 2.4 (Debian, x)")
        );
        assert_eq!(ports[1].service.as_deref(), Some("ssl|https"));
        assert_eq!(r.hosts[0].hostname, None);
    }
}
