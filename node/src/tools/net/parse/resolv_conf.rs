//! `/etc/resolv.conf`: the C library's resolver configuration, read when
//! `resolvectl` is missing or fails.

use super::MAX_ENTRIES;
use serde::Serialize;

/// The parts of resolv.conf that matter for triage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    /// `search` domains (and a legacy `domain` line).
    pub search: Vec<String>,
    pub options: Vec<String>,
}

/// Parses resolv.conf text (comments start with `#` or `;`).
pub fn parse(text: &str) -> ResolvConf {
    let mut conf = ResolvConf::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut words = line.split_whitespace();
        let target = match words.next() {
            Some("nameserver") => &mut conf.nameservers,
            Some("search") | Some("domain") => &mut conf.search,
            Some("options") => &mut conf.options,
            _ => continue,
        };
        for word in words.take_while(|w| !w.starts_with('#') && !w.starts_with(';')) {
            if target.len() < MAX_ENTRIES && !target.iter().any(|t| t == word) {
                target.push(word.to_owned());
            }
        }
    }
    conf
}
