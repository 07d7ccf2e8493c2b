//! Listening sockets: `ss -tulpn` and, where `ss` is missing, `netstat -tulpn`.
//!
//! ```text
//! Netid State  Recv-Q Send-Q Local Address:Port  Peer Address:PortProcess
//! tcp   LISTEN 0      128        127.0.0.1:631        0.0.0.0:*    users:(("cupsd",pid=812,fd=7))
//! udp   UNCONN 0      0      127.0.0.53%lo:53         0.0.0.0:*
//!
//! Proto Recv-Q Send-Q Local Address           Foreign Address         State       PID/Program name
//! tcp6       0      0 :::22                   :::*                    LISTEN      1042/sshd: /usr/sbi
//! udp        0      0 0.0.0.0:68              0.0.0.0:*                           612/dhclient
//! ```
//!
//! Processes are shown only for sockets the node's user may inspect (all of them as
//! root); others have none.

use super::MAX_ENTRIES;
use regex::Regex;
use serde::Serialize;
use std::sync::OnceLock;

/// One listening (or, for UDP, bound) socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    /// `tcp`, `udp`, `tcp6`, `udp6`, …
    pub protocol: String,
    /// `LISTEN`, `UNCONN`, … (netstat prints none for UDP).
    pub state: Option<String>,
    /// The local address without brackets (`0.0.0.0`, `::`, `*`, `127.0.0.53%lo`).
    pub address: String,
    /// The port, `None` for `*`.
    pub port: Option<u16>,
    pub processes: Vec<SocketProcess>,
}

/// A process holding a socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SocketProcess {
    pub name: String,
    pub pid: Option<u32>,
}

/// Splits `ADDR:PORT` (`[::]:22`, `*:*`, `:::22`).
fn split_endpoint(endpoint: &str) -> Option<(String, Option<u16>)> {
    let (addr, port) = endpoint.rsplit_once(':')?;
    let addr = addr
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(addr);
    if addr.is_empty() {
        return None;
    }
    Some((addr.to_owned(), port.parse().ok()))
}

/// Parses `ss -tulpn` output.
pub fn parse_ss(text: &str) -> Vec<Listener> {
    // `users:(("nginx",pid=1200,fd=6),…)`: a constant pattern, so it always compiles.
    static USERS: OnceLock<Option<Regex>> = OnceLock::new();
    let users = USERS.get_or_init(|| Regex::new(r#"\("((?:[^"\\]|\\.)*)",pid=(\d+)"#).ok());
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 6 || words[0] == "Netid" {
                return None;
            }
            let (address, port) = split_endpoint(words[4])?;
            let rest = words[6..].join(" ");
            let processes = users
                .iter()
                .flat_map(|re| re.captures_iter(&rest))
                .map(|c| SocketProcess {
                    name: c[1].to_owned(),
                    pid: c[2].parse().ok(),
                })
                .collect();
            Some(Listener {
                protocol: words[0].to_owned(),
                state: Some(words[1].to_owned()),
                address,
                port,
                processes,
            })
        })
        .take(MAX_ENTRIES)
        .collect()
}

/// Parses `netstat -tulpn` output.
pub fn parse_netstat(text: &str) -> Vec<Listener> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let proto = *words.first()?;
            if !(proto.starts_with("tcp") || proto.starts_with("udp") || proto.starts_with("raw"))
                || words.len() < 5
            {
                return None;
            }
            let (address, port) = split_endpoint(words[3])?;
            // After the foreign address: an optional state, then PID/Program.
            let mut rest = &words[5..];
            let state = match rest.first() {
                Some(w) if !w.contains('/') && *w != "-" => {
                    rest = &rest[1..];
                    Some((*w).to_owned())
                }
                _ => None,
            };
            let program = rest.join(" ");
            let processes = match program.split_once('/') {
                Some((pid, name)) if !name.is_empty() => vec![SocketProcess {
                    name: name.to_owned(),
                    pid: pid.parse().ok(),
                }],
                _ => Vec::new(),
            };
            Some(Listener {
                protocol: proto.to_owned(),
                state,
                address,
                port,
                processes,
            })
        })
        .take(MAX_ENTRIES)
        .collect()
}
