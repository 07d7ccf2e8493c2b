//! Where `fetch_url` may connect: the network tools' address guardrails, applied to
//! every address a URL's host resolves to, at every redirect.
//!
//! An agent that can make a node send HTTP requests can reach what the node reaches:
//! the cloud's instance metadata service (credentials), the LAN, and the internet as
//! the node. So, on the *resolved* addresses (never the host text, so a name that
//! resolves to a refused address is refused too):
//!
//! - **never**: link-local addresses (169.254/16 — which holds the metadata service
//!   of AWS, GCP, Azure, OpenStack and others — and fe80::/10), the metadata
//!   addresses outside that range ([`METADATA`]: AWS's fd00:ec2::254, Alibaba's
//!   100.100.100.200, Azure's wire server 168.63.129.16), and anything that is not
//!   unicast (0.0.0.0, which Linux treats as "this host", multicast, broadcast);
//! - **private** addresses (loopback, RFC 1918, CGNAT, unique-local) are allowed, as
//!   for the network tools: a node's own services and its LAN are what it is for;
//! - **public** addresses only when the node's owner allows the host with `gsv node
//!   --fetch-allow GLOB` (a glob over the URL's host name or address literal, e.g.
//!   `*.example.com`, `203.0.113.7`, or `*` for every public host).
//!
//! A name with several addresses is judged by all of them: one refused address
//! refuses the name, one public address makes it public. The connection then goes to
//! an address that was checked, never to a fresh lookup of the name.

use crate::tools::net::target::{canonical, classify, stands_for, AddrClass};
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use thiserror::Error;

/// Metadata-service addresses outside link-local, refused whatever the class.
pub const METADATA: &[IpAddr] = &[
    // AWS IMDS over IPv6.
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    // Alibaba Cloud.
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    // Azure's wire server (public range).
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
];

/// A bad `--fetch-allow` glob.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("--fetch-allow {glob:?}: {reason}")]
pub struct FetchAllowError {
    pub glob: String,
    pub reason: String,
}

/// The node owner's choice of public hosts (`--fetch-allow`).
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    allow: GlobSet,
    globs: Vec<String>,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        FetchPolicy {
            allow: GlobSet::empty(),
            globs: Vec::new(),
        }
    }
}

/// Why a host may not be fetched. Messages are written for the model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    #[error(
        "{host} resolves to {address}, a {class} address: fetch_url never connects to \
         link-local or cloud-metadata addresses"
    )]
    Forbidden {
        host: String,
        address: IpAddr,
        class: &'static str,
    },
    #[error("{host} resolves to {address}, which is not a unicast address")]
    NotUnicast { host: String, address: IpAddr },
    #[error(
        "{host} resolves to {address}, a public address; this node fetches public hosts \
         only when its owner allows them (`gsv node --fetch-allow GLOB`), and {host} \
         matches none of its globs{allowed}"
    )]
    Public {
        host: String,
        address: IpAddr,
        allowed: String,
    },
}

impl FetchPolicy {
    /// The policy allowing the public hosts that match one of `globs` (matched on
    /// the lower-case host, `*` crossing dots).
    pub fn new(globs: &[String]) -> Result<Self, FetchAllowError> {
        let mut builder = GlobSetBuilder::new();
        for glob in globs {
            let bad = |reason: String| FetchAllowError {
                glob: glob.clone(),
                reason,
            };
            if glob.trim().is_empty() || glob.chars().any(|c| c.is_whitespace()) {
                return Err(bad("a host glob has no spaces and is not empty".into()));
            }
            let parsed = Glob::new(&glob.to_ascii_lowercase()).map_err(|e| bad(e.to_string()))?;
            builder.add(parsed);
        }
        let allow = builder.build().map_err(|e| FetchAllowError {
            glob: globs.join(","),
            reason: e.to_string(),
        })?;
        Ok(FetchPolicy {
            allow,
            globs: globs.to_vec(),
        })
    }

    /// The owner's globs, as given.
    pub fn globs(&self) -> &[String] {
        &self.globs
    }

    /// Checks every address `host` resolved to; `Ok` with the address to connect to
    /// (the first IPv4 one, else the first).
    pub fn check(&self, host: &str, addresses: &[IpAddr]) -> Result<IpAddr, Refusal> {
        let mut public = None;
        for &raw in addresses {
            let address = canonical(raw);
            let class = classify(address);
            if METADATA.contains(&address) || METADATA.contains(&stands_for(address)) {
                return Err(Refusal::Forbidden {
                    host: host.to_owned(),
                    address,
                    class: "cloud-metadata",
                });
            }
            match class {
                AddrClass::LinkLocal => {
                    return Err(Refusal::Forbidden {
                        host: host.to_owned(),
                        address,
                        class: "link-local",
                    })
                }
                AddrClass::NotUnicast => {
                    return Err(Refusal::NotUnicast {
                        host: host.to_owned(),
                        address,
                    })
                }
                AddrClass::Public => public = public.or(Some(address)),
                _ => {}
            }
        }
        if let Some(address) = public {
            if !self.allow.is_match(host.to_ascii_lowercase()) {
                let allowed = if self.globs.is_empty() {
                    " (it allows no public host)".to_owned()
                } else {
                    format!(" ({})", self.globs.join(", "))
                };
                return Err(Refusal::Public {
                    host: host.to_owned(),
                    address,
                    allowed,
                });
            }
        }
        let pick = addresses
            .iter()
            .map(|a| canonical(*a))
            .find(IpAddr::is_ipv4)
            .or_else(|| addresses.first().map(|a| canonical(*a)));
        pick.ok_or_else(|| Refusal::NotUnicast {
            host: host.to_owned(),
            address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_addresses_pass_and_link_local_or_metadata_never_do() {
        let p = FetchPolicy::default();
        assert_eq!(
            p.check("localhost", &[ip("127.0.0.1")]),
            Ok(ip("127.0.0.1"))
        );
        assert_eq!(
            p.check("lan", &[ip("::1"), ip("192.168.1.5")]),
            Ok(ip("192.168.1.5"))
        );
        for bad in [
            "169.254.169.254",
            "fe80::1",
            "fd00:ec2::254",
            "100.100.100.200",
            "168.63.129.16",
            "::ffff:169.254.169.254",
            // Other IPv6 spellings of the metadata service (issue 42): IPv4-compatible,
            // SIIT, NAT64 (well-known and local-use prefixes), 6to4, Teredo.
            "::169.254.169.254",
            "::ffff:0:169.254.169.254",
            "64:ff9b::169.254.169.254",
            "64:ff9b:1::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:5601:5601",
            // And of the other metadata addresses.
            "64:ff9b::100.100.100.200",
            "2002:a83f:8110::",
        ] {
            let e = p.check("metadata.internal", &[ip("10.0.0.1"), ip(bad)]);
            assert!(matches!(e, Err(Refusal::Forbidden { .. })), "{bad}: {e:?}");
            // Whatever the owner allows.
            let all = FetchPolicy::new(&["*".into()]).unwrap();
            let e = all.check("metadata.internal", &[ip(bad)]);
            assert!(
                matches!(e, Err(Refusal::Forbidden { .. })),
                "{bad} with *: {e:?}"
            );
        }
        // A 6to4 address that embeds a LAN address is still public, not the LAN.
        let e = p.check("x", &[ip("2002:c0a8:0101::1")]);
        assert!(matches!(e, Err(Refusal::Public { .. })), "{e:?}");
        // Even an owner who allows every public host cannot open the metadata service.
        let all = FetchPolicy::new(&["*".into()]).unwrap();
        assert!(all.check("x", &[ip("168.63.129.16")]).is_err());
        for bad in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255"] {
            let e = p.check("x", &[ip(bad)]);
            assert!(matches!(e, Err(Refusal::NotUnicast { .. })), "{bad}: {e:?}");
        }
        assert!(p.check("x", &[]).is_err());
    }

    #[test]
    fn public_hosts_need_the_owners_glob() {
        let none = FetchPolicy::default();
        let e = none.check("example.com", &[ip("127.0.0.1"), ip("93.184.216.34")]);
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains("--fetch-allow"), "{msg}");
        assert!(msg.contains("allows no public host"), "{msg}");
        let some = FetchPolicy::new(&["*.example.com".into(), "203.0.113.7".into()]).unwrap();
        assert_eq!(
            some.check("API.Example.com", &[ip("93.184.216.34")]),
            Ok(ip("93.184.216.34"))
        );
        assert_eq!(
            some.check("203.0.113.7", &[ip("203.0.113.7")]),
            Ok(ip("203.0.113.7"))
        );
        assert!(some.check("example.org", &[ip("93.184.216.34")]).is_err());
        assert!(some.check("203.0.113.8", &[ip("203.0.113.8")]).is_err());
        assert!(FetchPolicy::new(&["a b".into()]).is_err());
        assert!(FetchPolicy::new(&["".into()]).is_err());
        assert!(FetchPolicy::new(&["[".into()]).is_err());
    }
}
