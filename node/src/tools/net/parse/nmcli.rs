//! `nmcli -t -f NAME,TYPE,DEVICE,STATE connection show --active`: NetworkManager's
//! active connections in terse form.
//!
//! Terse output separates fields with `:` and escapes a `:` or `\` inside a value with
//! `\` (`Home\: 5 GHz:802-11-wireless:wlp2s0:activated`); an empty field is `--` in
//! the pretty form and empty here.

use super::MAX_ENTRIES;
use serde::Serialize;

/// One active connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    pub name: String,
    /// `802-3-ethernet`, `802-11-wireless`, `wireguard`, `vpn`, …
    #[serde(rename = "type")]
    pub kind: String,
    pub device: Option<String>,
    /// `activated`, `activating`, …
    pub state: Option<String>,
}

/// Splits one terse line into its fields, undoing the escapes.
pub fn split_terse(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    if let Some(f) = fields.last_mut() {
                        f.push(next);
                    }
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

/// Parses the active-connection listing (fields NAME, TYPE, DEVICE, STATE).
pub fn parse_active(text: &str) -> Vec<Connection> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let mut f = split_terse(line).into_iter();
            let name = f.next()?;
            let kind = f.next()?;
            let opt = |v: Option<String>| v.filter(|s| !s.is_empty() && s != "--");
            Some(Connection {
                name,
                kind,
                device: opt(f.next()),
                state: opt(f.next()),
            })
        })
        .take(MAX_ENTRIES)
        .collect()
}
