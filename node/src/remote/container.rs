//! `--container NAME [--engine docker|podman]`: which container a node works in, and
//! through which engine. The engine is the system's `docker` or `podman` program
//! (found on `PATH` when not named); the node runs nothing but `ENGINE exec -i NAME
//! /bin/sh`, `ENGINE exec -i NAME /bin/sh -c SCRIPT` and `ENGINE inspect -f
//! {{.State.Running}} NAME`.

use super::error::RemoteError;
use std::path::PathBuf;

/// The engines a node can drive.
pub const ENGINES: &[&str] = &["docker", "podman"];

/// The engine's program: `name` (one of [`ENGINES`]) on `PATH`, or the first of them
/// found there.
pub fn engine(name: Option<&str>) -> Result<PathBuf, RemoteError> {
    match name {
        Some(n) if !ENGINES.contains(&n) => Err(RemoteError::BadTarget(format!(
            "--engine {n:?}: expected docker or podman"
        ))),
        Some(n) => which::which(n)
            .map_err(|_| RemoteError::Unsupported(format!("--engine {n}: `{n}` is not on PATH"))),
        None => ENGINES
            .iter()
            .find_map(|n| which::which(n).ok())
            .ok_or_else(|| {
                RemoteError::Unsupported(
                    "--container needs docker or podman on PATH (or name one with --engine)".into(),
                )
            }),
    }
}

/// A container name or id as the engines accept them (`[A-Za-z0-9][A-Za-z0-9_.-]*`).
pub fn check_name(name: &str) -> Result<&str, RemoteError> {
    let ok = name.len() <= 255
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(name)
    } else {
        Err(RemoteError::BadTarget(format!(
            "--container {name:?}: a container name or id (letters, digits, '_', '.', '-'; not starting with '-')"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_engines() {
        for ok in ["web", "web_1", "a.b-c", "3f2a9c"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-it", "a b", "a;b", "$(x)", "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            engine(Some("lxc")),
            Err(RemoteError::BadTarget(_))
        ));
    }
}
