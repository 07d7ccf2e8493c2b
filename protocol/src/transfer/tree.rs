//! Directory copies (`gsv cp -r`): a tree travels as a manifest of its entries plus
//! one ordinary file transfer per regular file, so every file keeps its own SHA-256
//! check and its resume.
//!
//! `transfer.list` reads a tree on a node into a [`Listing`] (never following a
//! symlink below its top); `transfer.place` makes a tree's directories, then its
//! symlinks, then settles its directories' modes and mtimes ([`PlaceStep`]). Paths in
//! a manifest are relative, `/`-separated and checked here ([`check_path`],
//! [`check_manifest`]) by whoever is about to act on them: a node refuses a client's
//! `..` or absolute entry, and a client refuses a node's.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Most entries in one tree (directories, files and symlinks together).
pub const MAX_TREE_ENTRIES: usize = 100_000;
/// Most bytes of entry paths and link targets in one tree (4 MiB), so a listing fits
/// in one frame.
pub const MAX_TREE_NAME_BYTES: usize = 4 * 1024 * 1024;
/// Deepest a tree may go below its top (a walk holds a descriptor per level).
pub const MAX_TREE_DEPTH: usize = 256;
/// Most entries in one `transfer.place` request: a client splits a larger step.
pub const MAX_PLACE_ENTRIES: usize = 10_000;

/// The path a manifest uses for the top directory itself.
pub const ROOT: &str = ".";

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

/// One entry of a tree, relative to its top.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeEntry {
    /// Relative, `/`-separated, without `.` or `..` components; [`ROOT`] for the top
    /// directory.
    pub path: String,
    pub kind: EntryKind,
    /// Permission bits (`0o755`), without the file type; 0 for a symlink.
    #[serde(default)]
    pub mode: u32,
    /// Modification time, ms since the epoch.
    #[serde(default)]
    pub mtime_ms: u64,
    /// A file's size in bytes.
    #[serde(default)]
    pub size: u64,
    /// A symlink's target, as written in the link (never followed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// Params of `transfer.list` to a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    /// The directory on the node (relative paths resolve against its workspace).
    pub path: String,
}

/// Params of `transfer.list` from an agent to the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentListParams {
    pub node: String,
    pub path: String,
    /// Where the agent copies the tree to (its local path), shown to an operator
    /// asked to approve the copy; cut to [`super::MAX_SOURCE_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Result of `transfer.list`: the tree, parents before their children, the top
/// directory first (as [`ROOT`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    /// The directory resolved on the node (absolute).
    pub root: String,
    pub entries: Vec<TreeEntry>,
}

/// Which part of a tree a `transfer.place` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlaceStep {
    /// Creates the top directory if missing and these directories (owner-only until
    /// `settle`); an existing directory is kept, anything else in the way refused.
    /// Takes the tree's files too: a symlink where a file is to go is removed, so the
    /// file's transfer never writes through it.
    Dirs,
    /// Creates these symlinks (replacing a symlink already there), after the files.
    Links,
    /// Gives these directories their modes and mtimes, deepest first: last, since
    /// writing into a directory changes its mtime.
    Settle,
}

/// Params of `transfer.place` to a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlaceParams {
    /// The top directory on the node.
    pub path: String,
    /// `dirs`: the source's name. When `path` is an existing directory the tree goes
    /// into `path/into` (like `cp -r SRC DEST`); else `path` becomes the top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    pub step: PlaceStep,
    pub entries: Vec<TreeEntry>,
}

/// Params of `transfer.place` from an agent to the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentPlaceParams {
    pub node: String,
    pub path: String,
    /// `dirs`: the source's name. When `path` is an existing directory the tree goes
    /// into `path/into` (like `cp -r SRC DEST`); else `path` becomes the top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    pub step: PlaceStep,
    pub entries: Vec<TreeEntry>,
    /// `dirs`: the tree the agent copies (its local path), shown to an operator asked
    /// to approve the copy; cut to [`super::MAX_SOURCE_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Result of `transfer.place`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placed {
    /// The top directory resolved on the node (absolute).
    pub root: String,
    /// Entries made or settled.
    pub done: usize,
}

/// Why a manifest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("the tree has more than {MAX_TREE_ENTRIES} entries")]
    TooManyEntries,
    #[error("the tree's names and link targets are over {MAX_TREE_NAME_BYTES} bytes")]
    NamesTooLong,
    #[error("entry {0:?}: a path in a tree must be relative, without empty, `.` or `..` parts")]
    BadPath(String),
    #[error("entry {0:?} is listed twice")]
    Duplicate(String),
    #[error("entry {0:?}: only a symlink has a target, and a symlink needs one (without NUL)")]
    BadTarget(String),
    #[error(
        "entry {0:?} comes before its directory, or its parent is not a directory of the tree"
    )]
    Orphan(String),
    #[error("entry {0:?}: the top of the tree ({ROOT}) is a directory")]
    RootNotDir(String),
    #[error("entry {path:?} is a {kind:?}, which step {step:?} does not take")]
    WrongKind {
        path: String,
        kind: EntryKind,
        step: PlaceStep,
    },
}

impl TreeError {
    /// The wire code: `too_large` for a tree over its bounds, else `invalid_args`.
    pub fn code(&self) -> crate::ErrorCode {
        match self {
            TreeError::TooManyEntries | TreeError::NamesTooLong => crate::ErrorCode::TooLarge,
            _ => crate::ErrorCode::InvalidArgs,
        }
    }
}

/// Checks one entry's path: relative, `/`-separated, no empty, `.` or `..`
/// component, no NUL; [`ROOT`] alone is the top.
pub fn check_path(path: &str) -> Result<(), TreeError> {
    let bad = || TreeError::BadPath(path.to_owned());
    if path == ROOT {
        return Ok(());
    }
    if path.is_empty() || path.starts_with('/') || path.contains('\0') {
        return Err(bad());
    }
    if path
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Err(bad());
    }
    Ok(())
}

/// Checks the entries of one request or listing: bounds, each path, no path twice,
/// targets on symlinks only, [`ROOT`] a directory.
pub fn check_entries(entries: &[TreeEntry]) -> Result<(), TreeError> {
    if entries.len() > MAX_TREE_ENTRIES {
        return Err(TreeError::TooManyEntries);
    }
    let mut names = 0usize;
    let mut seen = HashSet::with_capacity(entries.len());
    for e in entries {
        names = names
            .saturating_add(e.path.len())
            .saturating_add(e.target.as_deref().map_or(0, str::len));
        if names > MAX_TREE_NAME_BYTES {
            return Err(TreeError::NamesTooLong);
        }
        check_path(&e.path)?;
        if e.path == ROOT && e.kind != EntryKind::Dir {
            return Err(TreeError::RootNotDir(e.path.clone()));
        }
        let target_ok = match (e.kind, e.target.as_deref()) {
            (EntryKind::Symlink, Some(t)) => !t.is_empty() && !t.contains('\0'),
            (EntryKind::Symlink, None) => false,
            (_, t) => t.is_none(),
        };
        if !target_ok {
            return Err(TreeError::BadTarget(e.path.clone()));
        }
        if !seen.insert(e.path.as_str()) {
            return Err(TreeError::Duplicate(e.path.clone()));
        }
    }
    Ok(())
}

/// Checks a whole manifest ([`check_entries`]) and its order: every entry's parent is
/// the top or a directory listed before it, so nothing lives under a file or a
/// symlink of the tree.
pub fn check_manifest(entries: &[TreeEntry]) -> Result<(), TreeError> {
    check_entries(entries)?;
    let mut dirs: HashSet<&str> = HashSet::new();
    for e in entries {
        if e.path == ROOT {
            continue;
        }
        if let Some((parent, _)) = e.path.rsplit_once('/') {
            if !dirs.contains(parent) {
                return Err(TreeError::Orphan(e.path.clone()));
            }
        }
        if e.kind == EntryKind::Dir {
            dirs.insert(e.path.as_str());
        }
    }
    Ok(())
}

/// Checks that a `transfer.place` step gets only the kinds it takes: directories and
/// files for `dirs`, directories for `settle`, symlinks for `links`.
pub fn check_step(step: PlaceStep, entries: &[TreeEntry]) -> Result<(), TreeError> {
    let takes = |kind: EntryKind| match step {
        PlaceStep::Dirs => kind != EntryKind::Symlink,
        PlaceStep::Settle => kind == EntryKind::Dir,
        PlaceStep::Links => kind == EntryKind::Symlink,
    };
    match entries.iter().find(|e| !takes(e.kind)) {
        Some(e) => Err(TreeError::WrongKind {
            path: e.path.clone(),
            kind: e.kind,
            step,
        }),
        None => check_entries(entries),
    }
}

/// Checks the `into` of a `dirs` step: one name, neither `.` nor `..`.
pub fn check_into(into: &str) -> Result<(), TreeError> {
    if into == ROOT || into.contains('/') {
        return Err(TreeError::BadPath(into.to_owned()));
    }
    check_path(into)
}

/// How deep an entry is: its count of `/` (the top is 0, like its children's
/// parent), for settling directories deepest first.
pub fn depth(path: &str) -> usize {
    if path == ROOT {
        0
    } else {
        1 + path.matches('/').count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: EntryKind) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            kind,
            mode: 0o644,
            mtime_ms: 1,
            size: 0,
            target: (kind == EntryKind::Symlink).then(|| "t".into()),
        }
    }

    #[test]
    fn paths_must_stay_below_the_top() {
        for ok in [".", "a", "a/b", "a b/c.d", ".hidden", "a/..b", "a/b.."] {
            assert_eq!(check_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "/",
            "/etc/passwd",
            "..",
            "../x",
            "a/../../x",
            "a/..",
            "./a",
            "a/./b",
            "a//b",
            "a/",
            "a\0b",
        ] {
            assert_eq!(
                check_path(bad),
                Err(TreeError::BadPath(bad.into())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_manifest_lists_parents_first_and_nothing_under_a_file_or_link() {
        let good = vec![
            entry(".", EntryKind::Dir),
            entry("d", EntryKind::Dir),
            entry("d/f", EntryKind::File),
            entry("d/l", EntryKind::Symlink),
            entry("top", EntryKind::File),
        ];
        assert_eq!(check_manifest(&good), Ok(()));
        let under_link = vec![
            entry("l", EntryKind::Symlink),
            entry("l/f", EntryKind::File),
        ];
        assert_eq!(
            check_manifest(&under_link),
            Err(TreeError::Orphan("l/f".into()))
        );
        let child_first = vec![entry("d/f", EntryKind::File), entry("d", EntryKind::Dir)];
        assert_eq!(
            check_manifest(&child_first),
            Err(TreeError::Orphan("d/f".into()))
        );
        let twice = vec![entry("a", EntryKind::Dir), entry("a", EntryKind::Symlink)];
        assert_eq!(
            check_manifest(&twice),
            Err(TreeError::Duplicate("a".into()))
        );
        let escape = vec![entry("../x", EntryKind::File)];
        assert_eq!(
            check_manifest(&escape),
            Err(TreeError::BadPath("../x".into()))
        );
        let root_file = vec![entry(".", EntryKind::File)];
        assert_eq!(
            check_manifest(&root_file),
            Err(TreeError::RootNotDir(".".into()))
        );
    }

    #[test]
    fn targets_belong_to_symlinks_only() {
        let mut f = entry("f", EntryKind::File);
        f.target = Some("x".into());
        assert_eq!(check_entries(&[f]), Err(TreeError::BadTarget("f".into())));
        let mut l = entry("l", EntryKind::Symlink);
        l.target = None;
        assert_eq!(check_entries(&[l]), Err(TreeError::BadTarget("l".into())));
        let mut l = entry("l", EntryKind::Symlink);
        l.target = Some("a\0b".into());
        assert_eq!(check_entries(&[l]), Err(TreeError::BadTarget("l".into())));
        // An absolute or `..` target is a link's text, kept as it is (never followed).
        let mut l = entry("l", EntryKind::Symlink);
        l.target = Some("/tmp/elsewhere/../x".into());
        assert_eq!(check_entries(&[l]), Ok(()));
    }

    #[test]
    fn a_tree_over_its_bounds_is_too_large() {
        let many: Vec<_> = (0..=MAX_TREE_ENTRIES)
            .map(|i| entry(&format!("f{i}"), EntryKind::File))
            .collect();
        let e = check_entries(&many).expect_err("too many");
        assert_eq!(
            (e.clone(), e.code()),
            (TreeError::TooManyEntries, crate::ErrorCode::TooLarge)
        );
        let long = "n".repeat(64 * 1024);
        let wide: Vec<_> = (0..(MAX_TREE_NAME_BYTES / long.len() + 1))
            .map(|i| entry(&format!("{long}{i}"), EntryKind::File))
            .collect();
        assert_eq!(check_entries(&wide), Err(TreeError::NamesTooLong));
    }

    #[test]
    fn steps_take_their_own_kinds() {
        assert!(check_step(PlaceStep::Dirs, &[entry("d", EntryKind::Dir)]).is_ok());
        assert!(check_step(PlaceStep::Dirs, &[entry("f", EntryKind::File)]).is_ok());
        assert!(check_step(PlaceStep::Dirs, &[entry("l", EntryKind::Symlink)]).is_err());
        assert!(check_step(PlaceStep::Links, &[entry("d", EntryKind::Dir)]).is_err());
        assert!(check_step(PlaceStep::Settle, &[entry("f", EntryKind::File)]).is_err());
        assert!(check_step(PlaceStep::Links, &[entry("l", EntryKind::Symlink)]).is_ok());
        assert_eq!((depth("."), depth("a"), depth("a/b/c")), (0, 1, 3));
    }

    #[test]
    fn the_wire_names() {
        let text = serde_json::to_string(&entry("d/l", EntryKind::Symlink)).expect("json");
        assert_eq!(
            text,
            r#"{"path":"d/l","kind":"symlink","mode":420,"mtimeMs":1,"size":0,"target":"t"}"#
        );
        let p: PlaceParams =
            serde_json::from_str(r#"{"path":"x","step":"settle","entries":[]}"#).expect("back");
        assert_eq!(p.step, PlaceStep::Settle);
    }
}
