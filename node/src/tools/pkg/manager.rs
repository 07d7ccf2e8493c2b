//! Which package manager the node has (apt, dnf, apk, brew, looked for in that order
//! on the node's own `PATH` when a call runs), and what a package name may be for it.
//!
//! A package name reaches the manager's command line after `--`, but it is also
//! checked here, strictly, so it can never be an option (`-o APT::…`), a file
//! (`./evil.deb`, `/tmp/x.rpm`), a glob, a version pin or a URL: only the characters
//! the manager's own naming rules allow, starting with a letter or digit.

use crate::tools::host_run;
use serde::Serialize;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Longest package name.
pub const MAX_NAME_LEN: usize = 128;

/// A package manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Apt,
    Dnf,
    Apk,
    Brew,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Apt => "apt",
            Kind::Dnf => "dnf",
            Kind::Apk => "apk",
            Kind::Brew => "brew",
        }
    }

    /// Whether installing needs root (brew refuses to run as root).
    pub fn needs_root(self) -> bool {
        self != Kind::Brew
    }

    /// What a package name may contain, in words, for messages.
    fn rule(self) -> &'static str {
        match self {
            Kind::Apt => "a-z 0-9 + . - (and an optional :arch)",
            Kind::Dnf => "A-Z a-z 0-9 _ + . -",
            Kind::Apk => "a-z 0-9 _ + . -",
            Kind::Brew => "a-z 0-9 @ _ + . - (or user/tap/name)",
        }
    }
}

/// The programs each manager is detected by, in detection order: the first element
/// is what installs, the second what searches.
const MANAGERS: &[(Kind, &str, &str)] = &[
    (Kind::Apt, "apt-get", "apt-cache"),
    (Kind::Dnf, "dnf", "dnf"),
    (Kind::Apk, "apk", "apk"),
    (Kind::Brew, "brew", "brew"),
];

/// The binaries the package tools may use (for `requiresBins`).
pub const BINS: &[&str] = &["apt-get", "apt-cache", "dnf", "apk", "brew"];

/// The manager a call uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    pub kind: Kind,
    /// The program that installs (`apt-get`, `dnf`, `apk`, `brew`).
    pub install: PathBuf,
    /// The program that searches (`apt-cache` for apt, else the same).
    pub search: PathBuf,
}

/// Why a package tool call is refused before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PkgError {
    #[error("{0}")]
    Shape(String),
    #[error("no supported package manager (apt-get, dnf, apk, brew) was found on the node's PATH")]
    NoManager,
    #[error("package name {0:?} must not start with '-' (it would be read as an option)")]
    Option(String),
    #[error("package name {name:?} is not valid for {manager}: 1 to {MAX_NAME_LEN} characters from {rule}, starting with a letter or digit")]
    Name {
        name: String,
        manager: &'static str,
        rule: &'static str,
    },
}

impl From<String> for PkgError {
    fn from(message: String) -> Self {
        PkgError::Shape(message)
    }
}

/// The first manager found (apt, dnf, apk, brew); apt needs both apt-get and
/// apt-cache.
pub fn detect(workspace: &Path) -> Result<Manager, PkgError> {
    for &(kind, install, search) in MANAGERS {
        let Some((_, install)) = host_run::find(&[install], workspace) else {
            continue;
        };
        let Some((_, search)) = host_run::find(&[search], workspace) else {
            continue;
        };
        return Ok(Manager {
            kind,
            install,
            search,
        });
    }
    Err(PkgError::NoManager)
}

/// Checks one package name for `kind`.
pub fn package_name(kind: Kind, name: &str) -> Result<String, PkgError> {
    if name.starts_with('-') {
        return Err(PkgError::Option(short(name)));
    }
    let bad = || PkgError::Name {
        name: short(name),
        manager: kind.name(),
        rule: kind.rule(),
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(bad());
    }
    let ok = match kind {
        Kind::Apt => {
            let (base, arch) = match name.split_once(':') {
                Some((b, a)) => (b, Some(a)),
                None => (name, None),
            };
            word(base, |c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c)
            }) && arch.is_none_or(|a| {
                word(a, |c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
                })
            })
        }
        Kind::Dnf => word(name, |c| c.is_ascii_alphanumeric() || "_+.-".contains(c)),
        Kind::Apk => word(name, |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || "_+.-".contains(c)
        }),
        Kind::Brew => {
            let parts: Vec<&str> = name.split('/').collect();
            parts.len() != 2
                && parts.len() <= 3
                && parts.iter().all(|p| {
                    word(p, |c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || "@_+.-".contains(c)
                    })
                })
        }
    };
    if ok {
        Ok(name.to_owned())
    } else {
        Err(bad())
    }
}

/// Non-empty, starts with a letter or digit, every character allowed.
fn word(s: &str, allowed: impl Fn(char) -> bool) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) && s.chars().all(allowed)
}

fn short(value: &str) -> String {
    if value.chars().count() <= 60 {
        return value.to_owned();
    }
    value.chars().take(60).collect::<String>() + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_names_and_nothing_else() {
        for good in ["sl", "g++", "libc6:amd64", "python3.11", "lib32z1-dev"] {
            assert_eq!(package_name(Kind::Apt, good).as_deref(), Ok(good));
        }
        let e = package_name(Kind::Apt, "-oAPT::Get::AllowUnauthenticated=1").unwrap_err();
        assert!(matches!(e, PkgError::Option(_)), "{e}");
        for bad in [
            "",
            "./x.deb",
            "/tmp/x.deb",
            "Sl",
            "sl=1.0",
            "sl*",
            "a b",
            "sl;id",
            "http://x",
            ":amd64",
            "sl:",
            ".hidden",
        ] {
            assert!(package_name(Kind::Apt, bad).is_err(), "{bad}");
        }
        assert!(package_name(Kind::Dnf, "NetworkManager").is_ok());
        assert!(package_name(Kind::Dnf, "foo(x86-64)").is_err());
        assert!(package_name(Kind::Apk, "py3-pip").is_ok());
        assert!(package_name(Kind::Brew, "python@3.12").is_ok());
        assert!(package_name(Kind::Brew, "homebrew/core/wget").is_ok());
        assert!(package_name(Kind::Brew, "a/b").is_err());
        assert!(package_name(Kind::Brew, "../x").is_err());
        assert!(package_name(Kind::Apt, &"a".repeat(MAX_NAME_LEN + 1)).is_err());
    }
}
