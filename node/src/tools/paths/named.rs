//! What a path a call gives names on this node, for the operator deciding on the call
//! (`paths.resolve`).
//!
//! The gateway asks before it puts a file tool's call to an operator: the question
//! then shows the file the tool would touch — the workspace applied, every symlink of
//! the part that exists resolved, `..` collapsed — and whether something stands there,
//! and the gateway sends the approved call with that absolute path, so a symlink the
//! agent swaps while the operator reads cannot redirect it. Nothing is opened for
//! writing or created here; the tool's own open still goes through every check of
//! [`PathPolicy`] when the call runs.

use super::PathPolicy;
use gsv_protocol::resolve::Resolved;
use std::ffi::OsString;
use std::path::PathBuf;

impl PathPolicy {
    /// What `asked` names now (blocking: it walks the file system).
    pub fn named(&self, asked: &str) -> Resolved {
        let lexical = match self.resolve(asked) {
            Ok(p) => p,
            Err(e) => {
                return Resolved {
                    asked: asked.to_owned(),
                    error: Some(e.to_string()),
                    ..Resolved::default()
                }
            }
        };
        let (path, resolved) = canonical_prefix(&lexical);
        let (exists, kind) = match std::fs::symlink_metadata(&path) {
            Err(_) => (false, None),
            Ok(m) if m.file_type().is_symlink() => (true, Some("symlink")),
            Ok(m) if m.is_file() => (true, Some("file")),
            Ok(m) if m.is_dir() => (true, Some("dir")),
            Ok(_) => (true, Some("other")),
        };
        let link = (kind == Some("symlink"))
            .then(|| std::fs::read_link(&path).ok())
            .flatten()
            .map(|t| t.display().to_string());
        Resolved {
            asked: asked.to_owned(),
            path: path.display().to_string(),
            resolved,
            exists,
            kind: kind.map(str::to_owned),
            link,
            error: None,
        }
    }
}

/// `path` with its longest existing prefix canonicalized (symlinks followed, `..`
/// collapsed by the kernel) and the rest joined on; `false` when no prefix resolves.
fn canonical_prefix(path: &std::path::Path) -> (PathBuf, bool) {
    let mut existing = path.to_path_buf();
    let mut missing: Vec<OsString> = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(&existing) {
            let mut out = canonical;
            for name in missing.iter().rev() {
                out.push(name);
            }
            return (out, true);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => return (path.to_path_buf(), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_planted_symlink_and_dotdot_are_resolved_and_nothing_is_made() {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = std::fs::canonicalize(tmp.path()).expect("canonical");
        let (ws, out) = (base.join("ws"), base.join("out"));
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::create_dir_all(&out).expect("out");
        symlink(&out, ws.join("docs")).expect("link");
        std::fs::write(out.join("there.txt"), b"x").expect("file");
        let policy = PathPolicy::new(&ws, false);

        let r = policy.named("docs/new/notes.txt");
        assert!(r.resolved && !r.exists, "{r:?}");
        assert_eq!(r.path, out.join("new/notes.txt").display().to_string());
        assert!(!out.join("new").exists(), "nothing is created");

        let r = policy.named("docs/there.txt");
        assert_eq!((r.exists, r.kind.as_deref()), (true, Some("file")), "{r:?}");

        // `docs/..` is `out`'s parent, as the kernel walks it.
        let r = policy.named("docs/../x");
        assert_eq!(r.path, base.join("x").display().to_string());

        // A dangling symlink is named as the link.
        symlink(base.join("nowhere"), ws.join("dangling")).expect("link");
        let r = policy.named("dangling");
        assert_eq!(
            (r.exists, r.kind.as_deref()),
            (true, Some("symlink")),
            "{r:?}"
        );
        assert_eq!(r.link, Some(base.join("nowhere").display().to_string()));
    }

    #[test]
    fn a_confined_node_says_why_it_would_refuse() {
        let tmp = tempfile::tempdir().expect("tmp");
        let policy = PathPolicy::new(tmp.path(), true);
        let r = policy.named("../../etc/passwd");
        assert!(r.error.is_some() && !r.resolved, "{r:?}");
    }
}
