//! The closed set of capability ids a tool may declare.
//!
//! Capabilities let a gateway (and a policy) reason about what a tool can do without
//! trusting its name. The set is closed on purpose: a node that declares anything else
//! is refused at connect, so a typo can never silently widen or narrow a tool.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! capabilities {
    ($($variant:ident => $id:literal),* $(,)?) => {
        /// One capability id. Serialised as its dotted id, e.g. `filesystem.read`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Capability {
            $(#[serde(rename = $id)] $variant,)*
        }

        impl Capability {
            /// Every capability id, in declaration order.
            pub const ALL: &'static [Capability] = &[$(Capability::$variant,)*];

            /// The dotted id as it appears on the wire.
            pub fn as_str(self) -> &'static str {
                match self { $(Capability::$variant => $id,)* }
            }

            /// Parses a dotted id; `None` for anything outside the closed set.
            pub fn parse(s: &str) -> Option<Capability> {
                match s { $($id => Some(Capability::$variant),)* _ => None }
            }
        }
    };
}

capabilities! {
    FilesystemRead => "filesystem.read",
    FilesystemWrite => "filesystem.write",
    FilesystemEdit => "filesystem.edit",
    FilesystemList => "filesystem.list",
    TextSearch => "text.search",
    ShellExec => "shell.exec",
    ProcessManage => "process.manage",
    NetworkDiagnose => "network.diagnose",
    NetworkDiscover => "network.discover",
    NetworkScan => "network.scan",
    NetworkStatus => "network.status",
    DnsQuery => "dns.query",
    DiagnosticsEcho => "diagnostics.echo",
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_round_trips() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.as_str()), Some(*c));
            let json = serde_json::to_string(c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            let back: Capability = serde_json::from_str(&json).unwrap();
            assert_eq!(back, *c);
        }
    }

    #[test]
    fn unknown_ids_are_refused() {
        assert_eq!(Capability::parse("filesystem.delete"), None);
        assert_eq!(Capability::parse(""), None);
        assert!(serde_json::from_str::<Capability>("\"shell.root\"").is_err());
    }
}
