//! Which program an exec call runs: `argv[0]` resolved to a canonical absolute path,
//! without a shell.
//!
//! Both the exec tool and `--approve-exec` ([`super::approve_exec`]) need the same
//! answer, so it lives in one place, on the guards' floor (what is judged is what
//! runs): `argv[0]` with a `/` is a path (a relative
//! one, `./x`, is joined to the call's cwd); a bare name is searched in the `PATH` of
//! the node's environment at call time (the captured login environment, never the
//! caller's `env`), skipping relative `PATH` entries (`.`, empty), which would make
//! the answer depend on the cwd. The result must be an executable regular file and is
//! made canonical (symlinks and `..` resolved): that path is what is executed and what
//! allowlist entries are compared with.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why `argv[0]` names no program that can be run.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProgramError {
    #[error("{0:?} was not found on the node's PATH")]
    NotFound(String),
    #[error("{path:?} cannot be run: {problem}")]
    Unusable { path: String, problem: String },
}

/// The first executable regular file called `name` in the absolute entries of `path`.
pub fn search_path(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The canonical path of the program `arg0` names, for a call whose cwd is `cwd`, with
/// the node's `PATH` `path`. Blocking (reads the file system).
pub fn resolve(arg0: &str, cwd: &Path, path: Option<&OsStr>) -> Result<PathBuf, ProgramError> {
    let found = if arg0.contains('/') {
        cwd.join(arg0)
    } else {
        search_path(arg0, path).ok_or_else(|| ProgramError::NotFound(arg0.to_owned()))?
    };
    let unusable = |problem: String| ProgramError::Unusable {
        path: found.display().to_string(),
        problem,
    };
    let canonical = std::fs::canonicalize(&found).map_err(|e| unusable(e.to_string()))?;
    if !is_executable(&canonical) {
        return Err(unusable("not an executable regular file".to_owned()));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn resolution() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(bin.join("plain"), "x").unwrap();
        symlink(&tool, dir.path().join("link")).unwrap();
        let canonical = std::fs::canonicalize(&tool).unwrap();
        let path = std::env::join_paths([Path::new("relative"), &bin]).unwrap();
        let path = Some(path.as_os_str());
        assert_eq!(resolve("tool", Path::new("/"), path), Ok(canonical.clone()));
        assert_eq!(resolve("./link", dir.path(), path), Ok(canonical.clone()));
        assert_eq!(resolve("bin/../bin/tool", dir.path(), path), Ok(canonical));
        assert!(matches!(
            resolve("nope", dir.path(), path),
            Err(ProgramError::NotFound(_))
        ));
        assert!(matches!(
            resolve("plain", dir.path(), path),
            Err(ProgramError::NotFound(_))
        ));
        assert!(matches!(
            resolve("./bin/plain", dir.path(), path),
            Err(ProgramError::Unusable { .. })
        ));
        assert!(matches!(
            resolve("./bin", dir.path(), path),
            Err(ProgramError::Unusable { .. })
        ));
        // A relative PATH entry is never searched.
        let rel = Some(OsStr::new("bin"));
        assert!(matches!(
            resolve("tool", dir.path(), rel),
            Err(ProgramError::NotFound(_))
        ));
    }
}
