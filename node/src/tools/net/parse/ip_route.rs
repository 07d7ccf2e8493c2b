//! `ip route`, `ip -6 route` and `ip route get ADDR`: one route per line.
//!
//! ```text
//! default via 192.0.2.1 dev eth0 proto dhcp src 192.0.2.2 metric 100
//! 192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
//! unreachable 10.9.0.0/16 metric 1024
//! 1.1.1.1 via 192.168.1.1 dev wlp2s0 src 192.168.1.42 uid 1000
//!     cache
//! ```
//!
//! Indented lines continue the route above (`nexthop …` of a multipath route, or the
//! `cache` flag of `ip route get`).

use super::MAX_ENTRIES;
use serde::Serialize;

/// Route types `ip` prints before the destination (`unicast` is the silent default).
const TYPES: &[&str] = &[
    "unicast",
    "local",
    "broadcast",
    "multicast",
    "throw",
    "unreachable",
    "prohibit",
    "blackhole",
    "nat",
    "anycast",
];
/// Keywords followed by a value.
const VALUED: &[&str] = &[
    "via", "dev", "proto", "scope", "src", "metric", "table", "pref", "mtu", "uid", "expires",
    "weight", "advmss", "hoplimit", "realm", "tos", "dsfield", "initcwnd", "initrwnd", "rtt",
    "rttvar", "from", "iif", "oif", "error",
];

/// One route.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    /// `default`, `192.0.2.0/24`, `1.1.1.1`, …
    pub destination: String,
    /// The route type when it is not a plain unicast route (`unreachable`, `local`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub gateway: Option<String>,
    pub dev: Option<String>,
    pub proto: Option<String>,
    pub scope: Option<String>,
    pub src: Option<String>,
    pub metric: Option<u32>,
    /// Bare words (`linkdown`, `onlink`, `cache`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Next hops of a multipath route.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nexthops: Vec<Route>,
}

/// Parses a routing table.
pub fn parse_routes(text: &str) -> Vec<Route> {
    let mut routes: Vec<Route> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let continuation = line.starts_with(char::is_whitespace);
        let words: Vec<&str> = line.split_whitespace().collect();
        let count = routes.len();
        match (continuation, routes.last_mut()) {
            (true, Some(last)) => {
                if words.first() == Some(&"nexthop") {
                    let mut hop = Route::default();
                    fill(&mut hop, &words[1..]);
                    last.nexthops.push(hop);
                } else {
                    fill(last, &words);
                }
            }
            _ if count < MAX_ENTRIES => {
                let mut words = &words[..];
                let mut route = Route::default();
                if let Some(first) = words.first() {
                    if TYPES.contains(first) && words.len() > 1 {
                        if *first != "unicast" {
                            route.kind = Some((*first).to_owned());
                        }
                        words = &words[1..];
                    }
                }
                let Some((destination, rest)) = words.split_first() else {
                    continue;
                };
                route.destination = (*destination).to_owned();
                fill(&mut route, rest);
                routes.push(route);
            }
            _ => {}
        }
    }
    routes
}

/// The route of `ip route get ADDR` (its first line).
pub fn parse_route_get(text: &str) -> Option<Route> {
    parse_routes(text).into_iter().next()
}

fn fill(route: &mut Route, words: &[&str]) {
    let mut i = 0;
    while i < words.len() {
        let key = words[i];
        if VALUED.contains(&key) && i + 1 < words.len() {
            let mut value = words[i + 1];
            // `via inet6 fe80::1`: an address family before the gateway.
            if key == "via" && matches!(value, "inet" | "inet6") && i + 2 < words.len() {
                i += 1;
                value = words[i + 1];
            }
            let value = value.to_owned();
            match key {
                "via" => route.gateway = Some(value),
                "dev" => route.dev = Some(value),
                "proto" => route.proto = Some(value),
                "scope" => route.scope = Some(value),
                "src" => route.src = Some(value),
                "metric" => route.metric = value.parse().ok(),
                _ => {}
            }
            i += 2;
        } else {
            if route.flags.len() < 32 {
                route.flags.push(key.to_owned());
            }
            i += 1;
        }
    }
}
