//! What a tool can do, in a few classes a policy can name (`--deny 'class:run'`).
//!
//! Policies over tool names broke whenever a new tool did an old thing under a new
//! name (`exec` runs programs as Bash does; a `--deny '*__Bash'` did not cover it).
//! A class is a property of the tool, not of its name: the gateway gives every tool
//! the classes its capability id implies ([`ToolClasses::of`]), and a policy that
//! names a class covers every tool of that class, on every node, present and future.
//!
//! - `run`: runs a program or code the caller chooses (Bash, exec, input to a
//!   session, a terminal, a container's exec, a package install). Code can do
//!   anything, so a `run` tool is in every other class too: `--deny 'class:write'`
//!   denies Bash as well.
//! - `write`: changes files (Write, Edit, git commits and pulls).
//! - `read`: reads files or the host's state (Read, Grep, git log, proc_list).
//! - `network`: sends traffic to other hosts (ping, DNS, fetch_url, git push).
//! - `signal`: signals processes the caller did not start (proc_kill).
//! - `readonly`: none of `run`, `write`, `network`, `signal`: a tool that only looks
//!   (Read, Glob, git_status, time, Echo). It is computed, never declared.
//!
//! A third party's capability id (`x.<vendor>.<name>`) implies nothing the gateway
//! can know: such a tool is `run`.

use crate::capability::{Capability, CapabilityId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One class a policy can name as `class:<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolClass {
    Run,
    Write,
    Read,
    Network,
    Signal,
    Readonly,
}

impl ToolClass {
    /// Every class, in the order the docs list them.
    pub const ALL: [ToolClass; 6] = [
        ToolClass::Run,
        ToolClass::Write,
        ToolClass::Read,
        ToolClass::Network,
        ToolClass::Signal,
        ToolClass::Readonly,
    ];

    /// The name used in policies and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Run => "run",
            ToolClass::Write => "write",
            ToolClass::Read => "read",
            ToolClass::Network => "network",
            ToolClass::Signal => "signal",
            ToolClass::Readonly => "readonly",
        }
    }

    /// Parses a class name; `None` for anything else.
    pub fn parse(s: &str) -> Option<ToolClass> {
        ToolClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for ToolClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of classes (a tool's, or the classes a policy names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ToolClasses(u8);

impl ToolClasses {
    /// No class.
    pub const NONE: ToolClasses = ToolClasses(0);

    /// Every class but `readonly`: what a tool of unknown effect is taken to do.
    pub fn unknown() -> ToolClasses {
        ToolClasses::NONE.with(ToolClass::Run).completed()
    }

    /// This set with `class` added.
    pub fn with(self, class: ToolClass) -> ToolClasses {
        ToolClasses(self.0 | class.bit())
    }

    /// Whether `class` is in the set.
    pub fn contains(self, class: ToolClass) -> bool {
        self.0 & class.bit() != 0
    }

    /// Whether the two sets share a class.
    pub fn intersects(self, other: ToolClasses) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The classes in the set, in [`ToolClass::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = ToolClass> {
        ToolClass::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }

    /// What a tool with `capability` does: what a built-in capability implies, and
    /// for a third party's capability [`ToolClasses::unknown`].
    pub fn of(capability: &CapabilityId) -> ToolClasses {
        match capability {
            CapabilityId::Builtin(c) => implied(*c)
                .iter()
                .fold(ToolClasses::NONE, |set, class| set.with(*class))
                .completed(),
            CapabilityId::Vendor(_) => ToolClasses::unknown(),
        }
    }

    /// `run` implies every effect; no effect at all is `readonly`.
    fn completed(self) -> ToolClasses {
        let mut set = self;
        if set.contains(ToolClass::Run) {
            for c in [
                ToolClass::Write,
                ToolClass::Read,
                ToolClass::Network,
                ToolClass::Signal,
            ] {
                set = set.with(c);
            }
        }
        let effects = [
            ToolClass::Run,
            ToolClass::Write,
            ToolClass::Network,
            ToolClass::Signal,
        ];
        if !effects.iter().any(|c| set.contains(*c)) {
            set = set.with(ToolClass::Readonly);
        }
        set
    }

    /// The names of the classes, for listings (`["read", "readonly"]`).
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(ToolClass::as_str).collect()
    }
}

/// The classes a built-in capability implies.
fn implied(c: Capability) -> &'static [ToolClass] {
    use Capability as C;
    use ToolClass as K;
    match c {
        C::FilesystemRead
        | C::FilesystemList
        | C::TextSearch
        | C::FilesystemStat
        | C::ProcessList
        | C::VcsRead
        | C::ContainerRead
        | C::PackageRead
        | C::NetworkStatus => &[K::Read],
        C::FilesystemWrite => &[K::Write],
        C::FilesystemEdit => &[K::Read, K::Write],
        C::ShellExec
        | C::ProcessManage
        | C::ProcessExec
        | C::ContainerExec
        | C::PackageInstall
        | C::TerminalControl => &[K::Run],
        C::NetworkDiagnose | C::NetworkDiscover | C::NetworkScan | C::DnsQuery | C::HttpFetch => {
            &[K::Network]
        }
        C::ProcessSignal => &[K::Signal],
        C::VcsWrite => &[K::Read, K::Write, K::Network],
        C::DiagnosticsEcho | C::SystemTime => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(cap: &str) -> Vec<&'static str> {
        ToolClasses::of(&crate::capability::check(cap).unwrap()).names()
    }

    #[test]
    fn capabilities_imply_classes() {
        assert_eq!(
            of("shell.exec"),
            ["run", "write", "read", "network", "signal"]
        );
        assert_eq!(of("process.exec"), of("shell.exec"));
        assert_eq!(of("filesystem.read"), ["read", "readonly"]);
        assert_eq!(of("filesystem.edit"), ["write", "read"]);
        assert_eq!(of("system.time"), ["readonly"]);
        assert_eq!(of("http.fetch"), ["network"]);
        assert_eq!(of("process.signal"), ["signal"]);
    }

    #[test]
    fn vendor_tools_count_as_run() {
        assert_eq!(of("x.acme.deploy"), of("shell.exec"));
    }

    #[test]
    fn every_capability_has_classes_and_names_parse() {
        for c in Capability::ALL {
            assert!(!ToolClasses::of(&CapabilityId::Builtin(*c)).is_empty());
        }
        for c in ToolClass::ALL {
            assert_eq!(ToolClass::parse(c.as_str()), Some(c));
        }
        assert_eq!(ToolClass::parse("Run"), None);
    }
}
