//! Where a file tool's path argument points, and whether the tool may go there.
//!
//! Every file tool (Read, Write, Edit, Glob, Grep) resolves its path arguments here, so
//! the workspace rule lives in one place:
//!
//! - **Not confined** (the default): relative paths are joined to the workspace,
//!   absolute ones are used as given (made absolute, `.` dropped, `..` left to the
//!   kernel). Nothing is refused; this is the reference's behaviour.
//! - **Confined** (`gsv node --confine`, [`crate::NodeConfig::confine`]): the path is
//!   canonicalised — every symlink and `..` resolved by the kernel — and must end up
//!   inside the canonical workspace. A path that does not exist yet (a Write target,
//!   a new directory) is checked through its nearest existing ancestor, and the
//!   missing rest may not contain `..` nor start at a dangling symlink, so a new file
//!   created under a symlinked directory that points outside is refused too. The
//!   tool then works on the canonical path, so what was checked is what is opened.
//!
//! Walks (Glob, Grep) start from a checked directory and use [`WalkGuard`] on every
//! symlink they meet, so a link inside the workspace that points outside is skipped
//! rather than followed.
//!
//! Confinement protects the node from a model that asks for the wrong path; it is not
//! a sandbox against other local processes that swap directories for symlinks between
//! the check and the use (that needs `openat2(RESOLVE_BENEATH)` or a container).

use crate::tool::ToolContext;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// How path arguments are resolved for one call: the workspace and whether the tools
/// are confined to it. Cheap to clone and `Send`, so it moves into blocking tasks.
#[derive(Debug, Clone)]
pub struct PathPolicy {
    workspace: PathBuf,
    confine: bool,
}

impl PathPolicy {
    pub fn new(workspace: impl Into<PathBuf>, confine: bool) -> Self {
        PathPolicy {
            workspace: workspace.into(),
            confine,
        }
    }

    /// The policy of the call `ctx` describes.
    pub fn of(ctx: &ToolContext) -> Self {
        PathPolicy::new(ctx.workspace.clone(), ctx.confine)
    }

    /// Whether paths are confined to the workspace.
    pub fn is_confined(&self) -> bool {
        self.confine
    }

    /// The path `arg` names, absolute. Blocking when confined (it reads the file
    /// system); errors are messages for the model.
    pub fn resolve(&self, arg: impl AsRef<Path>) -> Result<PathBuf, String> {
        let arg = arg.as_ref();
        let joined = self.workspace.join(arg);
        let lexical = std::path::absolute(&joined).unwrap_or(joined);
        if !self.confine {
            return Ok(lexical);
        }
        let workspace = self.canonical_workspace()?;
        let shown = arg.display();
        let mut existing = lexical.clone();
        let mut missing: Vec<OsString> = Vec::new();
        let canonical = loop {
            match std::fs::canonicalize(&existing) {
                Ok(canonical) => break canonical,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if std::fs::symlink_metadata(&existing).is_ok() {
                        return Err(format!(
                            "Refused: {} is a symlink whose target does not exist, so it cannot \
                             be checked against the workspace {} (this node is confined to its \
                             workspace)",
                            existing.display(),
                            workspace.display()
                        ));
                    }
                    match (existing.parent(), existing.file_name()) {
                        (Some(parent), Some(name)) => {
                            missing.push(name.to_owned());
                            existing = parent.to_path_buf();
                        }
                        _ => {
                            return Err(format!(
                                "Refused: {shown} uses `..` after a directory that does not \
                                 exist; give a path inside the workspace {} (this node is \
                                 confined to its workspace)",
                                workspace.display()
                            ))
                        }
                    }
                }
                Err(e) => return Err(format!("Cannot resolve {}: {e}", lexical.display())),
            }
        };
        let mut resolved = canonical;
        resolved.extend(missing.iter().rev());
        if resolved.starts_with(&workspace) {
            return Ok(resolved);
        }
        let how = if lexical
            .components()
            .all(|c| !matches!(c, Component::ParentDir))
            && std::path::absolute(&self.workspace).is_ok_and(|ws| lexical.starts_with(ws))
        {
            " through a symlink"
        } else {
            ""
        };
        Err(format!(
            "Refused: {shown} resolves{how} to {}, outside the workspace {} (this node is \
             confined to its workspace)",
            resolved.display(),
            workspace.display()
        ))
    }

    /// What a walk checks its symlinks with: `None` when not confined.
    pub fn walk_guard(&self) -> Result<Option<WalkGuard>, String> {
        if !self.confine {
            return Ok(None);
        }
        Ok(Some(WalkGuard {
            root: self.canonical_workspace()?,
        }))
    }

    fn canonical_workspace(&self) -> Result<PathBuf, String> {
        std::fs::canonicalize(&self.workspace).map_err(|e| {
            format!(
                "The workspace {} cannot be resolved ({e}), and this node is confined to it",
                self.workspace.display()
            )
        })
    }
}

/// Checks paths met during a confined walk.
#[derive(Debug, Clone)]
pub struct WalkGuard {
    root: PathBuf,
}

impl WalkGuard {
    /// Whether `path` (typically a symlink) resolves to somewhere inside the
    /// workspace. Paths that cannot be resolved (dangling links) are not allowed.
    pub fn allows(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|real| real.starts_with(&self.root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::write(ws.join("sub/a.txt"), "a").unwrap();
        fs::write(tmp.path().join("outside.txt"), "o").unwrap();
        (tmp, ws)
    }

    #[test]
    fn unconfined_paths_are_lexical() {
        let p = PathPolicy::new("/srv/ws", false);
        assert_eq!(p.resolve("a/b").unwrap(), Path::new("/srv/ws/a/b"));
        assert_eq!(p.resolve("../x").unwrap(), Path::new("/srv/ws/../x"));
        assert_eq!(p.resolve("/etc/hosts").unwrap(), Path::new("/etc/hosts"));
        assert!(p.walk_guard().unwrap().is_none());
    }

    #[test]
    fn confined_paths_inside_are_canonical() {
        let (_tmp, ws) = setup();
        let real = fs::canonicalize(&ws).unwrap();
        let p = PathPolicy::new(&ws, true);
        assert_eq!(p.resolve("sub/a.txt").unwrap(), real.join("sub/a.txt"));
        assert_eq!(
            p.resolve("sub/../sub/a.txt").unwrap(),
            real.join("sub/a.txt")
        );
        assert_eq!(p.resolve(".").unwrap(), real);
        assert_eq!(
            p.resolve("new/dir/f.txt").unwrap(),
            real.join("new/dir/f.txt")
        );
        // A symlink inside pointing inside is fine and resolved.
        symlink(ws.join("sub"), ws.join("alias")).unwrap();
        assert_eq!(p.resolve("alias/a.txt").unwrap(), real.join("sub/a.txt"));
    }

    #[test]
    fn confined_escapes_are_refused() {
        let (tmp, ws) = setup();
        let p = PathPolicy::new(&ws, true);
        let err = p.resolve("../outside.txt").unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        assert!(err.contains("../outside.txt"), "{err}");
        assert!(p.resolve("../x").unwrap_err().contains("outside"));
        assert!(p.resolve("/etc/hosts").unwrap_err().contains("outside"));
        assert!(p.resolve("nope/../../x").unwrap_err().contains("`..`"));
        symlink("/etc", ws.join("etc")).unwrap();
        let err = p.resolve("etc/hosts").unwrap_err();
        assert!(err.contains("through a symlink"), "{err}");
        assert!(p.resolve("etc/new-file").unwrap_err().contains("outside"));
        symlink(tmp.path().join("gone"), ws.join("dangling")).unwrap();
        assert!(p.resolve("dangling").unwrap_err().contains("symlink"));
        assert!(p.resolve("dangling/x").unwrap_err().contains("symlink"));
        let guard = p.walk_guard().unwrap().unwrap();
        assert!(!guard.allows(&ws.join("etc")));
        assert!(guard.allows(&ws.join("sub")));
        assert!(!guard.allows(&ws.join("dangling")));
    }

    #[test]
    fn missing_workspace_is_an_error_when_confined() {
        let p = PathPolicy::new("/definitely/not/here", true);
        assert!(p.resolve("a").unwrap_err().contains("workspace"));
        assert!(p.walk_guard().is_err());
    }
}
