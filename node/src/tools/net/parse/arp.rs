//! The kernel's IPv4 neighbour table, `/proc/net/arp`: where `net_discover` finds the
//! MAC addresses of the hosts it saw (nmap's greppable output has none).
//!
//! ```text
//! IP address       HW type     Flags       HW address            Mask     Device
//! 192.168.1.1      0x1         0x2         a4:2b:b0:12:34:56     *        wlp2s0
//! ```
//!
//! Incomplete entries (flags `0x0`, or an all-zero address) are skipped.

use super::MAX_ENTRIES;
use serde::Serialize;

/// One resolved neighbour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Neighbour {
    pub ip: String,
    pub mac: String,
    pub device: String,
}

/// Parses `/proc/net/arp`.
pub fn parse_proc_net_arp(text: &str) -> Vec<Neighbour> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() < 6 {
                return None;
            }
            let flags = u32::from_str_radix(w[2].trim_start_matches("0x"), 16).ok()?;
            let mac = w[3].to_ascii_lowercase();
            if flags & 0x2 == 0 || mac == "00:00:00:00:00:00" {
                return None;
            }
            Some(Neighbour {
                ip: w[0].to_owned(),
                mac,
                device: w[5].to_owned(),
            })
        })
        .take(MAX_ENTRIES)
        .collect()
}
