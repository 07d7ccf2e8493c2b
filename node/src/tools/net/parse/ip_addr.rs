//! `ip -br addr`: one line per interface, `NAME STATE ADDRESS/PREFIX…`.
//!
//! ```text
//! lo               UNKNOWN        127.0.0.1/8 ::1/128
//! eth0@if12        UP             192.0.2.2/24 fe80::fc:ff:fe00:1/64
//! ```
//!
//! A `@peer` suffix (veth pairs, VLANs) is split off the name.

use super::MAX_ENTRIES;
use serde::Serialize;

/// One interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    pub name: String,
    /// The link it sits on (`eth0@if12` → `if12`), if shown.
    pub link: Option<String>,
    /// `UP`, `DOWN`, `UNKNOWN`, …
    pub state: String,
    /// Addresses with their prefix length (`192.0.2.2/24`).
    pub addresses: Vec<String>,
}

/// Parses `ip -br addr` output.
pub fn parse_brief_addr(text: &str) -> Vec<Interface> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let full = words.next()?;
            let state = words.next()?.to_owned();
            let (name, link) = match full.split_once('@') {
                Some((n, l)) => (n, Some(l.to_owned())),
                None => (full, None),
            };
            Some(Interface {
                name: name.to_owned(),
                link,
                state,
                addresses: words.map(str::to_owned).collect(),
            })
        })
        .take(MAX_ENTRIES)
        .collect()
}
