//! Which container runtime a call uses: docker, else podman (or the one the call
//! names), found on the node's own `PATH` when the call runs
//! ([`crate::tools::host_run::find`]).
//!
//! Both take the same command line for what the tools run (`ps`, `logs`, `exec`), so
//! the rest of the container tools only need the program's path and which one it is
//! (their `ps` JSON differs a little; [`super::list`] reads both).

use crate::tools::host_run;
use serde::Serialize;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A container runtime's command-line interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Docker,
    Podman,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Docker => "docker",
            Kind::Podman => "podman",
        }
    }

    fn parse(name: &str) -> Option<Kind> {
        match name {
            "docker" => Some(Kind::Docker),
            "podman" => Some(Kind::Podman),
            _ => None,
        }
    }
}

/// The runtimes, in the order they are looked for.
pub const BINS: &[&str] = &["docker", "podman"];

/// The runtime a call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    pub kind: Kind,
    pub path: PathBuf,
}

/// Why no runtime can be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RuntimeError {
    #[error("\"runtime\" must be \"docker\" or \"podman\", got {0:?}")]
    Unknown(String),
    #[error("{0} is not installed on this node (not found on the node's PATH)")]
    Missing(&'static str),
    #[error("neither docker nor podman is installed on this node (not found on the node's PATH)")]
    None,
}

/// Parses the optional `runtime` argument.
pub fn requested(value: Option<&str>) -> Result<Option<Kind>, RuntimeError> {
    value
        .map(|v| Kind::parse(v).ok_or_else(|| RuntimeError::Unknown(v.to_owned())))
        .transpose()
}

/// The runtime to use: `want`, or docker then podman.
pub fn detect(want: Option<Kind>, workspace: &Path) -> Result<Runtime, RuntimeError> {
    let names: &[&str] = match want {
        Some(Kind::Docker) => &["docker"],
        Some(Kind::Podman) => &["podman"],
        None => BINS,
    };
    match host_run::find(names, workspace) {
        Some((name, path)) => Ok(Runtime {
            kind: Kind::parse(name).unwrap_or(Kind::Docker),
            path,
        }),
        None => Err(match want {
            Some(k) => RuntimeError::Missing(k.name()),
            None => RuntimeError::None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_argument_is_one_of_two() {
        assert_eq!(requested(None), Ok(None));
        assert_eq!(requested(Some("podman")), Ok(Some(Kind::Podman)));
        assert!(matches!(
            requested(Some("--host=x")),
            Err(RuntimeError::Unknown(_))
        ));
    }
}
