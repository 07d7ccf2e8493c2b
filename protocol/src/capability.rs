//! The capability ids a tool may declare: a closed set of built-in ids, and third
//! parties' own ids under a reserved prefix.
//!
//! Capabilities let a gateway (and a policy) reason about what a tool can do without
//! trusting its name. The built-in set is closed on purpose: a node that declares
//! anything else is refused at connect, so a typo can never silently widen or narrow
//! a tool. A third-party tool that does something no built-in id describes declares
//! its own id, `x.<vendor>.<name>` ([`VENDOR_PREFIX`]), instead of borrowing a
//! built-in one; such ids are checked for their form only ([`check`]) and are opaque
//! to the gateway: it lists them and never gives them a meaning.

use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// The prefix reserved for third parties' capability ids: `x.<vendor>.<name>`.
pub const VENDOR_PREFIX: &str = "x.";
/// Longest `<vendor>` or `<name>` part of a third-party id.
pub const MAX_VENDOR_PART_LEN: usize = 32;

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
    FilesystemStat => "filesystem.stat",
    ProcessList => "process.list",
    ProcessSignal => "process.signal",
    ProcessExec => "process.exec",
    VcsRead => "vcs.read",
    VcsWrite => "vcs.write",
    ContainerRead => "container.read",
    ContainerExec => "container.exec",
    PackageRead => "package.read",
    PackageInstall => "package.install",
    HttpFetch => "http.fetch",
    SystemTime => "system.time",
    TerminalControl => "terminal.control",
}

/// Why a capability id a tool declares is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CapabilityError {
    /// Neither a built-in id nor under the third-party prefix.
    #[error("unknown capability id {0:?} (not a built-in id, and third-party ids are x.<vendor>.<name>)")]
    Unknown(String),
    /// Under the third-party prefix but not of its form.
    #[error(
        "malformed third-party capability id {id:?}: {why} (the form is x.<vendor>.<name>, \
         each part 1 to {MAX_VENDOR_PART_LEN} of a-z 0-9 - _, starting with a letter)"
    )]
    Vendor { id: String, why: &'static str },
}

impl CapabilityError {
    /// The refused id.
    pub fn id(&self) -> &str {
        match self {
            CapabilityError::Unknown(id) | CapabilityError::Vendor { id, .. } => id,
        }
    }
}

/// A capability id a tool may declare: built-in, or a third party's own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapabilityId {
    Builtin(Capability),
    /// `x.<vendor>.<name>`, checked for its form only.
    Vendor(String),
}

impl CapabilityId {
    /// The id as it appears on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            CapabilityId::Builtin(c) => c.as_str(),
            CapabilityId::Vendor(id) => id,
        }
    }
}

/// Checks a declared capability id: a built-in one, or `x.<vendor>.<name>` where each
/// part is 1 to [`MAX_VENDOR_PART_LEN`] characters of `a-z`, `0-9`, `-` and `_`,
/// starting with a letter. Nothing else (upper case, more or fewer parts, empty
/// parts) is accepted, so one vendor id has exactly one spelling.
pub fn check(id: &str) -> Result<CapabilityId, CapabilityError> {
    if let Some(c) = Capability::parse(id) {
        return Ok(CapabilityId::Builtin(c));
    }
    let Some(rest) = id.strip_prefix(VENDOR_PREFIX) else {
        return Err(CapabilityError::Unknown(id.to_owned()));
    };
    let vendor_error = |why| CapabilityError::Vendor {
        id: id.to_owned(),
        why,
    };
    let parts: Vec<&str> = rest.split('.').collect();
    if parts.len() != 2 {
        return Err(vendor_error(
            "it must have exactly three dot-separated parts",
        ));
    }
    for part in parts {
        if part.is_empty() || part.len() > MAX_VENDOR_PART_LEN {
            return Err(vendor_error("a part is empty or too long"));
        }
        if !part.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(vendor_error(
                "a part does not start with a lower-case letter",
            ));
        }
        let allowed =
            |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
        if !part.chars().all(allowed) {
            return Err(vendor_error(
                "a part has a character other than a-z 0-9 - _",
            ));
        }
    }
    Ok(CapabilityId::Vendor(id.to_owned()))
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
        assert!(matches!(
            check("filesystem.delete"),
            Err(CapabilityError::Unknown(_))
        ));
    }

    #[test]
    fn built_in_ids_pass_the_check() {
        for c in Capability::ALL {
            assert_eq!(check(c.as_str()), Ok(CapabilityId::Builtin(*c)));
        }
        for id in [
            "system.time",
            "process.exec",
            "terminal.control",
            "filesystem.stat",
        ] {
            assert!(Capability::parse(id).is_some(), "{id}");
        }
    }

    #[test]
    fn third_party_ids_are_checked_for_their_form_only() {
        for ok in [
            "x.acme.deploy",
            "x.a.b",
            "x.acme-corp.db_query2",
            &format!("x.{}.{}", "a".repeat(32), "b".repeat(32)),
        ] {
            let id = check(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(id, CapabilityId::Vendor(ok.to_owned()));
            assert_eq!(id.as_str(), ok);
        }
        for bad in [
            "x.",
            "x.acme",
            "x.acme.",
            "x..deploy",
            "x.acme.deploy.now",
            "x.Acme.deploy",
            "x.acme.Deploy",
            "x.1acme.deploy",
            "x.acme.-deploy",
            "x.acme.de ploy",
            "x.acme.dé",
            &format!("x.{}.b", "a".repeat(33)),
            &format!("x.a.{}", "b".repeat(33)),
        ] {
            assert!(
                matches!(check(bad), Err(CapabilityError::Vendor { .. })),
                "{bad:?} must be refused"
            );
        }
        // Only the reserved prefix makes an id a third party's.
        assert!(matches!(
            check("acme.deploy"),
            Err(CapabilityError::Unknown(_))
        ));
        assert!(matches!(
            check("X.acme.deploy"),
            Err(CapabilityError::Unknown(_))
        ));
        assert_eq!(check("x.Acme.deploy").unwrap_err().id(), "x.Acme.deploy");
        let e = check("x.Acme.deploy").unwrap_err().to_string();
        assert!(e.contains("x.<vendor>.<name>"), "{e}");
    }
}
