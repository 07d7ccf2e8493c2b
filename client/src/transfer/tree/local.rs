//! The local side of a directory copy: a local tree read into a manifest (a put), and
//! a node's manifest placed below a local directory (a get).
//!
//! Nothing below the top is followed: a symlink is read as a link, and before any
//! entry is made each directory on its way down from the top is checked to be a
//! real directory (not a symlink), so a listing from a hostile node (already checked
//! for `..`, absolute and repeated entries) cannot lead a write out of the top.

use crate::ClientError;
use gsv_protocol::file_mode::safe_mode;
use gsv_protocol::transfer::tree::{
    check_manifest, depth, EntryKind, TreeEntry, MAX_TREE_DEPTH, MAX_TREE_ENTRIES, ROOT,
};
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

/// Mode of a directory the copy makes, until it is settled.
const MADE_DIR_MODE: u32 = 0o700;

fn io_err(path: &Path, source: io::Error) -> ClientError {
    ClientError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn in_the_way(path: &Path, found: &str, wanted: &str) -> ClientError {
    io_err(
        path,
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("in the way: it is a {found}, and the copy needs a {wanted} there"),
        ),
    )
}

fn kind_of(md: &Metadata) -> &'static str {
    let ft = md.file_type();
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else {
        "special file"
    }
}

fn mtime_ms(md: &Metadata) -> u64 {
    (md.mtime().max(0) as u64) * 1000 + (md.mtime_nsec().max(0) as u64) / 1_000_000
}

fn entry(path: String, kind: EntryKind, md: &Metadata, target: Option<String>) -> TreeEntry {
    TreeEntry {
        path,
        kind,
        mode: if kind == EntryKind::Symlink {
            0
        } else {
            md.mode() & 0o7777
        },
        mtime_ms: mtime_ms(md),
        size: if kind == EntryKind::File { md.len() } else { 0 },
        target,
    }
}

/// The last name of an operand, where a `cp -r` of it lands in an existing
/// directory; `None` for `.`, `..` or `/` (their contents are copied).
pub(super) fn name_of(operand: &str) -> Option<String> {
    let trimmed = operand.trim_end_matches('/');
    let name = trimmed.rsplit('/').next().unwrap_or(trimmed);
    (!name.is_empty() && name != "." && name != ".." && !name.contains('\0'))
        .then(|| name.to_owned())
}

/// Reads the local tree `top` (followed if it is a symlink; nothing below it is) into
/// a manifest, parents first; special files are left out.
pub(super) fn walk(top: &Path) -> Result<Vec<TreeEntry>, ClientError> {
    let md = fs::metadata(top).map_err(|e| io_err(top, e))?;
    if !md.is_dir() {
        return Err(io_err(
            top,
            io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        ));
    }
    let mut entries = vec![entry(ROOT.into(), EntryKind::Dir, &md, None)];
    let mut pending = vec![(top.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, level)) = pending.pop() {
        let mut names = Vec::new();
        for item in fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
            names.push(item.map_err(|e| io_err(&dir, e))?.file_name());
            if names.len() > MAX_TREE_ENTRIES {
                return Err(too_large(top));
            }
        }
        names.sort();
        let mut dirs = Vec::new();
        for name in names {
            let path = dir.join(&name);
            let md = match fs::symlink_metadata(&path) {
                Ok(md) => md,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&path, e)),
            };
            let ft = md.file_type();
            let kind = if ft.is_symlink() {
                EntryKind::Symlink
            } else if ft.is_dir() {
                EntryKind::Dir
            } else if ft.is_file() {
                EntryKind::File
            } else {
                tracing::debug!(?path, "a special file is not copied");
                continue;
            };
            let not_utf8 = || {
                io_err(
                    &path,
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a name that is not UTF-8 cannot be copied",
                    ),
                )
            };
            let name = name.into_string().map_err(|_| not_utf8())?;
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let target = match kind {
                EntryKind::Symlink => Some(
                    fs::read_link(&path)
                        .map_err(|e| io_err(&path, e))?
                        .into_os_string()
                        .into_string()
                        .map_err(|_| not_utf8())?,
                ),
                _ => None,
            };
            if kind == EntryKind::Dir {
                if level + 1 > MAX_TREE_DEPTH {
                    return Err(io_err(
                        &path,
                        io::Error::other(format!("more than {MAX_TREE_DEPTH} directories deep")),
                    ));
                }
                dirs.push((path.clone(), child.clone(), level + 1));
            }
            entries.push(entry(child, kind, &md, target));
            if entries.len() > MAX_TREE_ENTRIES {
                return Err(too_large(top));
            }
        }
        pending.extend(dirs.into_iter().rev());
    }
    check_manifest(&entries).map_err(|e| io_err(top, io::Error::other(e.to_string())))?;
    Ok(entries)
}

fn too_large(top: &Path) -> ClientError {
    io_err(
        top,
        io::Error::other(format!(
            "the tree has more than {MAX_TREE_ENTRIES} entries, the most one copy takes"
        )),
    )
}

/// The local top of a get: `local/into` when `local` is a directory and `into` is
/// given, else `local` (made when missing; its parent must exist, as for `cp -r`).
pub(super) fn make_top(local: &Path, into: Option<&str>) -> Result<PathBuf, ClientError> {
    match fs::metadata(local) {
        Ok(md) if md.is_dir() => match into {
            Some(name) => {
                let top = local.join(name);
                make_dir(&top)?;
                Ok(top)
            }
            None => Ok(local.to_path_buf()),
        },
        Ok(md) => Err(in_the_way(local, kind_of(&md), "directory")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            make_dir(local)?;
            Ok(local.to_path_buf())
        }
        Err(e) => Err(io_err(local, e)),
    }
}

/// Whether `target` is a file an earlier try of this copy finished: a regular file
/// (not followed if a symlink) with the listed size and mtime, as a finished copy
/// leaves it.
pub(super) fn finished(target: &Path, e: &TreeEntry) -> bool {
    fs::symlink_metadata(target)
        .is_ok_and(|md| md.is_file() && md.len() == e.size && mtime_ms(&md) == e.mtime_ms)
}

/// Makes directory `path` (owner-only until settled) unless a real directory is
/// there; anything else there is in the way.
fn make_dir(path: &Path) -> Result<(), ClientError> {
    match fs::symlink_metadata(path) {
        Ok(md) if md.is_dir() => Ok(()),
        Ok(md) => Err(in_the_way(path, kind_of(&md), "directory")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
            .mode(MADE_DIR_MODE)
            .create(path)
            .map_err(|e| io_err(path, e)),
        Err(e) => Err(io_err(path, e)),
    }
}

/// `top/rel`, once every directory between `top` and it is a real directory (no
/// symlink, whatever it points to).
fn below(top: &Path, rel: &str) -> Result<PathBuf, ClientError> {
    let mut cur = top.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        cur.push(part);
        let md = fs::symlink_metadata(&cur).map_err(|e| io_err(&cur, e))?;
        if !md.is_dir() {
            return Err(in_the_way(&cur, kind_of(&md), "directory"));
        }
    }
    Ok(top.join(rel))
}

/// Makes the tree's directories below `top` and clears the way for its files (a
/// symlink where a file goes is removed, never written through).
pub(super) fn make_ground(top: &Path, entries: &[TreeEntry]) -> Result<(), ClientError> {
    for e in entries.iter().filter(|e| e.path != ROOT) {
        match e.kind {
            EntryKind::Dir => make_dir(&below(top, &e.path)?)?,
            EntryKind::File => {
                let path = below(top, &e.path)?;
                match fs::symlink_metadata(&path) {
                    Ok(md) if md.file_type().is_symlink() => {
                        fs::remove_file(&path).map_err(|err| io_err(&path, err))?
                    }
                    Ok(md) if !md.is_file() => return Err(in_the_way(&path, kind_of(&md), "file")),
                    _ => {}
                }
            }
            EntryKind::Symlink => {}
        }
    }
    Ok(())
}

/// Where file `rel` goes: below `top` through real directories, and not a directory
/// or symlink itself.
pub(super) fn file_target(top: &Path, rel: &str) -> Result<PathBuf, ClientError> {
    let path = below(top, rel)?;
    match fs::symlink_metadata(&path) {
        Ok(md) if !md.is_file() => Err(in_the_way(&path, kind_of(&md), "file")),
        _ => Ok(path),
    }
}

/// Makes the tree's symlinks (after its files), replacing a file or symlink there in
/// one rename.
pub(super) fn make_links(top: &Path, entries: &[TreeEntry]) -> Result<(), ClientError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    for e in entries.iter().filter(|e| e.kind == EntryKind::Symlink) {
        let path = below(top, &e.path)?;
        let target = e.target.as_deref().unwrap_or_default();
        match fs::symlink_metadata(&path) {
            Ok(md) if md.is_dir() => return Err(in_the_way(&path, "directory", "symlink")),
            Ok(_) => {
                let tmp = path.with_file_name(format!(
                    ".gsv-link-{}-{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                std::os::unix::fs::symlink(target, &tmp).map_err(|err| io_err(&tmp, err))?;
                if let Err(err) = fs::rename(&tmp, &path) {
                    let _ = fs::remove_file(&tmp);
                    return Err(io_err(&path, err));
                }
            }
            Err(_) => {
                std::os::unix::fs::symlink(target, &path).map_err(|err| io_err(&path, err))?
            }
        }
    }
    Ok(())
}

/// Gives the tree's directories their mtimes and modes, deepest first (last of all,
/// since writing into a directory changes its mtime).
pub(super) fn settle(top: &Path, entries: &[TreeEntry]) -> Result<(), ClientError> {
    let mut dirs: Vec<&TreeEntry> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Dir)
        .collect();
    dirs.sort_by_key(|e| std::cmp::Reverse(depth(&e.path)));
    for e in dirs {
        let path = if e.path == ROOT {
            top.to_path_buf()
        } else {
            below(top, &e.path)?
        };
        let md = fs::symlink_metadata(&path).map_err(|err| io_err(&path, err))?;
        if !md.is_dir() {
            return Err(in_the_way(&path, kind_of(&md), "directory"));
        }
        let dir = fs::File::open(&path).map_err(|err| io_err(&path, err))?;
        if e.mtime_ms != 0 {
            let mtime = UNIX_EPOCH + Duration::from_millis(e.mtime_ms);
            dir.set_times(fs::FileTimes::new().set_modified(mtime))
                .map_err(|err| io_err(&path, err))?;
        }
        if e.mode != 0 {
            dir.set_permissions(fs::Permissions::from_mode(safe_mode(e.mode, false)))
                .map_err(|err| io_err(&path, err))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "gsv-local-tree-{tag}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        fs::create_dir_all(&d).expect("tmp");
        d
    }

    #[test]
    fn names_of_operands() {
        assert_eq!(name_of("a/b"), Some("b".into()));
        assert_eq!(name_of("a/b/"), Some("b".into()));
        assert_eq!(name_of("b"), Some("b".into()));
        assert_eq!(name_of("."), None);
        assert_eq!(name_of("a/.."), None);
        assert_eq!(name_of("/"), None);
        assert_eq!(name_of(""), None);
    }

    #[test]
    fn a_listing_never_leads_a_write_through_a_local_symlink() {
        let top = tmp("top");
        let outside = tmp("outside");
        std::os::unix::fs::symlink(&outside, top.join("evil")).expect("link");
        let dir = |p: &str| TreeEntry {
            path: p.into(),
            kind: EntryKind::Dir,
            mode: 0o777,
            mtime_ms: 1,
            size: 0,
            target: None,
        };
        let e = make_ground(&top, &[dir("evil/x")]).expect_err("under a link");
        assert!(e.to_string().contains("in the way"), "{e}");
        let e = make_ground(&top, &[dir("evil")]).expect_err("a link as a dir");
        assert!(e.to_string().contains("in the way"), "{e}");
        let e = file_target(&top, "evil/f").expect_err("a file under a link");
        assert!(e.to_string().contains("in the way"), "{e}");
        let e = settle(&top, &[dir("evil")]).expect_err("settle through a link");
        assert!(e.to_string().contains("in the way"), "{e}");
        assert!(fs::read_dir(&outside).expect("outside").next().is_none());
        assert_ne!(
            fs::metadata(&outside).expect("outside").mode() & 0o777,
            0o777
        );
    }

    #[test]
    fn a_walk_lists_parents_first_and_links_as_links() {
        let top = tmp("walk");
        fs::create_dir_all(top.join("a/b")).expect("mkdir");
        fs::write(top.join("a/b/f"), "xyz").expect("write");
        std::os::unix::fs::symlink("/nowhere", top.join("dangling")).expect("link");
        let got: Vec<_> = walk(&top)
            .expect("walks")
            .into_iter()
            .map(|e| (e.path, e.kind, e.size, e.target))
            .collect();
        assert_eq!(
            got,
            [
                (".".into(), EntryKind::Dir, 0, None),
                ("a".into(), EntryKind::Dir, 0, None),
                (
                    "dangling".into(),
                    EntryKind::Symlink,
                    0,
                    Some("/nowhere".into())
                ),
                ("a/b".into(), EntryKind::Dir, 0, None),
                ("a/b/f".into(), EntryKind::File, 3, None),
            ]
        );
    }
}
