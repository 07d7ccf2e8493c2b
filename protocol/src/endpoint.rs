//! Gateway addresses: every `--gateway` value accepts `http(s)://host:port` or
//! `ws(s)://host:port` (with or without a path) and derives the endpoint URLs from it.
//!
//! Pure string work, shared by the node, the CLI and the examples so they all accept
//! the same spellings.

use thiserror::Error;

/// Why a gateway address was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EndpointError {
    #[error("gateway address {0:?} must start with http://, https://, ws:// or wss://")]
    Scheme(String),
    #[error("gateway address {0:?} has no host")]
    NoHost(String),
}

/// A parsed gateway address: whether it is TLS, and its `host:port` authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    pub tls: bool,
    pub authority: String,
}

impl Gateway {
    /// Parses `http(s)://host[:port][/path]`, `ws(s)://…`, or a bare `host:port`
    /// (taken as plain `http`). Any path is dropped: endpoints are fixed.
    pub fn parse(input: &str) -> Result<Gateway, EndpointError> {
        let s = input.trim();
        let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("wss://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = s.strip_prefix("ws://") {
            (false, r)
        } else if s.contains("://") {
            return Err(EndpointError::Scheme(input.to_owned()));
        } else {
            (false, s)
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.is_empty() || authority.starts_with(':') {
            return Err(EndpointError::NoHost(input.to_owned()));
        }
        Ok(Gateway {
            tls,
            authority: authority.to_owned(),
        })
    }

    /// `ws(s)://authority{path}`
    pub fn ws_url(&self, path: &str) -> String {
        format!(
            "{}://{}{}",
            if self.tls { "wss" } else { "ws" },
            self.authority,
            path
        )
    }

    /// `http(s)://authority{path}`
    pub fn http_url(&self, path: &str) -> String {
        format!(
            "{}://{}{}",
            if self.tls { "https" } else { "http" },
            self.authority,
            path
        )
    }

    /// The host part of the authority, without port or IPv6 brackets.
    pub fn host(&self) -> &str {
        let a = self.authority.as_str();
        let a = a.rsplit_once('@').map(|(_, h)| h).unwrap_or(a);
        if let Some(rest) = a.strip_prefix('[') {
            return rest.split(']').next().unwrap_or(rest);
        }
        a.split(':').next().unwrap_or(a)
    }

    /// Whether the host is a loopback name or address (plain `ws://` is fine there).
    pub fn is_loopback(&self) -> bool {
        let h = self.host();
        h.eq_ignore_ascii_case("localhost")
            || h.parse::<std::net::IpAddr>()
                .map(|ip| ip.is_loopback())
                .unwrap_or(false)
    }
}

/// WebSocket path for nodes.
pub const NODE_PATH: &str = "/v1/node";
/// WebSocket path for agents.
pub const AGENT_PATH: &str = "/v1/agent";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_spelling() {
        for (input, tls, auth) in [
            ("http://127.0.0.1:8787", false, "127.0.0.1:8787"),
            ("ws://127.0.0.1:8787/v1/node", false, "127.0.0.1:8787"),
            ("https://gw.example:443/", true, "gw.example:443"),
            ("wss://[::1]:9000", true, "[::1]:9000"),
            ("localhost:8787", false, "localhost:8787"),
        ] {
            let g = Gateway::parse(input).unwrap();
            assert_eq!((g.tls, g.authority.as_str()), (tls, auth), "{input}");
        }
        let g = Gateway::parse("http://127.0.0.1:8787").unwrap();
        assert_eq!(g.ws_url(NODE_PATH), "ws://127.0.0.1:8787/v1/node");
        assert_eq!(g.http_url("/healthz"), "http://127.0.0.1:8787/healthz");
    }

    #[test]
    fn refuses_garbage() {
        assert!(matches!(
            Gateway::parse("ftp://x"),
            Err(EndpointError::Scheme(_))
        ));
        assert!(matches!(
            Gateway::parse("http://"),
            Err(EndpointError::NoHost(_))
        ));
        assert!(matches!(Gateway::parse(""), Err(EndpointError::NoHost(_))));
    }

    #[test]
    fn loopback_detection() {
        for (input, lo) in [
            ("ws://127.0.0.1:1", true),
            ("ws://127.9.9.9:1", true),
            ("ws://[::1]:1", true),
            ("ws://localhost:1", true),
            ("ws://10.0.0.1:1", false),
            ("ws://example.com:1", false),
        ] {
            assert_eq!(Gateway::parse(input).unwrap().is_loopback(), lo, "{input}");
        }
    }
}
