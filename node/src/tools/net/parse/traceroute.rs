//! Hops from `traceroute -n -q 1` and, where it is missing, `tracepath -n`.
//!
//! ```text
//! traceroute to 10.0.0.9 (10.0.0.9), 20 hops max, 60 byte packets
//!  1  192.168.1.1  0.512 ms
//!  2  *
//!  3  10.0.0.9  1.204 ms !H
//!
//!  1?: [LOCALHOST]                      pmtu 1500
//!  1:  192.168.1.1                                           0.612ms
//!  2:  no reply
//!  3:  10.0.0.9                                              1.301ms reached
//! ```

use super::MAX_ENTRIES;
use serde::Serialize;

/// One hop.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hop {
    pub hop: u32,
    /// The address that answered; `None` when nothing did (`*`, `no reply`).
    pub address: Option<String>,
    pub rtt_ms: Option<f64>,
    /// traceroute's annotations (`!H` host unreachable, `!N`, `!X`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Parses `traceroute -n` output.
pub fn parse_traceroute(text: &str) -> Vec<Hop> {
    let mut hops = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(hop) = words.next().and_then(|w| w.parse::<u32>().ok()) else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        let address = rest
            .iter()
            .find(|w| **w != "*" && (w.contains('.') || w.contains(':')) && !w.starts_with('!'))
            .filter(|w| w.parse::<f64>().is_err())
            .map(|w| (*w).to_owned());
        let rtt_ms = rest
            .windows(2)
            .find(|w| w[1] == "ms")
            .and_then(|w| w[0].parse::<f64>().ok());
        let note = rest
            .iter()
            .find(|w| w.starts_with('!'))
            .map(|w| (*w).to_owned());
        if hops.len() < MAX_ENTRIES {
            hops.push(Hop {
                hop,
                address,
                rtt_ms,
                note,
            });
        }
    }
    hops
}

/// Parses `tracepath -n` output (one entry per hop number, the first that answered).
pub fn parse_tracepath(text: &str) -> Vec<Hop> {
    let mut hops: Vec<Hop> = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(label) = words.next() else { continue };
        // `1:` is a hop; `1?:` is the path-MTU probe of the local host.
        let Some(hop) = label.strip_suffix(':').and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        let replied = !(rest.first() == Some(&"no") && rest.get(1) == Some(&"reply"));
        let address = rest
            .first()
            .filter(|_| replied)
            .filter(|w| !w.starts_with('['))
            .map(|w| (*w).to_owned());
        let rtt_ms = rest
            .iter()
            .find_map(|w| w.strip_suffix("ms").and_then(|n| n.parse::<f64>().ok()));
        let note = rest.contains(&"reached").then(|| "reached".to_owned());
        let count = hops.len();
        match hops.iter_mut().find(|h| h.hop == hop) {
            Some(existing) if existing.address.is_none() && address.is_some() => {
                existing.address = address;
                existing.rtt_ms = rtt_ms;
                existing.note = note;
            }
            Some(_) => {}
            None if count < MAX_ENTRIES => hops.push(Hop {
                hop,
                address,
                rtt_ms,
                note,
            }),
            None => {}
        }
    }
    hops
}
