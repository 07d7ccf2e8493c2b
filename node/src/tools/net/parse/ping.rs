//! The statistics `ping` prints when it ends (iputils, and BusyBox's shorter form).
//!
//! ```text
//! 3 packets transmitted, 3 received, 0% packet loss, time 2003ms
//! 3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2041ms
//! rtt min/avg/max/mdev = 0.038/0.091/0.194/0.072 ms
//! round-trip min/avg/max = 0.038/0.091/0.194 ms
//! ```

use serde::Serialize;

/// Ping statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PingStats {
    pub sent: u32,
    pub received: u32,
    pub loss_pct: f64,
    /// ICMP errors (`+3 errors`: e.g. destination unreachable), when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<u32>,
    pub min_ms: Option<f64>,
    pub avg_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// Parses the summary; `None` if there is no `packets transmitted` line.
pub fn parse(text: &str) -> Option<PingStats> {
    let mut stats: Option<PingStats> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.contains("packets transmitted") {
            let mut s = PingStats::default();
            for part in line.split(',').map(str::trim) {
                let number = part.split_whitespace().next().unwrap_or("");
                if part.ends_with("packets transmitted") {
                    s.sent = number.parse().ok()?;
                } else if part.ends_with("received") || part.ends_with("packets received") {
                    s.received = number.parse().unwrap_or(0);
                } else if part.ends_with("errors") {
                    s.errors = number.trim_start_matches('+').parse().ok();
                } else if part.ends_with("packet loss") {
                    s.loss_pct = number.trim_end_matches('%').parse().unwrap_or(0.0);
                }
            }
            stats = Some(s);
        } else if let Some((names, values)) = line.split_once(" = ") {
            if !(names.starts_with("rtt") || names.starts_with("round-trip")) {
                continue;
            }
            let Some(s) = stats.as_mut() else { continue };
            let values = values.trim().trim_end_matches("ms").trim();
            let mut v = values.split('/').map(|x| x.trim().parse::<f64>().ok());
            s.min_ms = v.next().flatten();
            s.avg_ms = v.next().flatten();
            s.max_ms = v.next().flatten();
        }
    }
    stats
}
