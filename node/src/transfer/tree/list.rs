//! `transfer.list`: a directory tree read into a manifest, parents before children,
//! without following any symlink below the top.

use super::{TreeError, MAX_TREE_DEPTH};
use crate::protected::Snapshot;
use crate::tools::paths::PathPolicy;
use gsv_protocol::limits::MAX_RESULT_BYTES;
use gsv_protocol::transfer::tree::{
    EntryKind, Listing, TreeEntry, TreeError as ManifestError, MAX_TREE_ENTRIES,
    MAX_TREE_NAME_BYTES, ROOT,
};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::Arc;

/// A directory found and not read yet: its name in its (open) parent.
struct Pending {
    parent: Arc<OwnedFd>,
    name: OsString,
    rel: String,
    depth: usize,
}

/// The walk's state: what it found so far, within the bounds.
struct Walk {
    top: PathBuf,
    snapshot: Snapshot,
    entries: Vec<TreeEntry>,
    names: usize,
    pending: Vec<Pending>,
}

/// Lists the tree `arg` names (its top followed if it is a symlink, through the path
/// rules; nothing below it followed) (blocking).
pub(super) fn list(policy: &PathPolicy, arg: &str) -> Result<Listing, TreeError> {
    let top = policy.open(arg, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let st = rustix::fs::fstat(&top.fd).map_err(|e| TreeError::io(&top.path, e))?;
    let mut walk = Walk {
        top: top.path.clone(),
        snapshot: policy.protected_snapshot(),
        entries: vec![entry(ROOT.into(), EntryKind::Dir, &st, None)],
        names: ROOT.len(),
        pending: Vec::new(),
    };
    walk.read(Arc::new(top.fd), "", 0)?;
    while let Some(p) = walk.pending.pop() {
        let opened = rustix::fs::openat(
            &*p.parent,
            p.name.as_os_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let dir = match opened {
            Ok(fd) => fd,
            Err(e) => {
                // Replaced or removed since it was looked at: the listing keeps the
                // directory, empty.
                tracing::debug!(path = ?p.rel, error = %e, "a directory of the tree could not be opened");
                continue;
            }
        };
        if walk.snapshot.covers_fd(&dir) {
            continue;
        }
        walk.read(Arc::new(dir), &p.rel, p.depth)?;
    }
    let listing = Listing {
        root: top.path.display().to_string(),
        entries: walk.entries,
    };
    let bytes = serde_json::to_vec(&listing).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_RESULT_BYTES {
        return Err(TreeError::ListingTooLarge {
            path: listing.root,
            bytes,
            limit: MAX_RESULT_BYTES,
        });
    }
    Ok(listing)
}

impl Walk {
    /// Lists the directory `dir` (at `rel` below the top, `depth` deep): its entries
    /// sorted by name, protected ones and special files left out, its directories
    /// queued.
    fn read(&mut self, dir: Arc<OwnedFd>, rel: &str, depth: usize) -> Result<(), TreeError> {
        let shown = self.top.join(rel);
        let reader = rustix::fs::Dir::read_from(&*dir).map_err(|e| TreeError::io(&shown, e))?;
        let mut names: Vec<OsString> = Vec::new();
        for item in reader {
            let item = item.map_err(|e| TreeError::io(&shown, e))?;
            let name = item.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            names.push(OsString::from_vec(name.to_vec()));
            if names.len() > MAX_TREE_ENTRIES {
                return Err(ManifestError::TooManyEntries.into());
            }
        }
        names.sort();
        let mut dirs = Vec::new();
        for name in names {
            let path = shown.join(&name);
            let st = match rustix::fs::statat(&*dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Gone since the directory was read.
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(TreeError::io(&path, e)),
            };
            if self.snapshot.covers_walk_file(&path, st.st_dev, st.st_ino)
                || (FileType::from_raw_mode(st.st_mode) == FileType::Directory
                    && crate::protected::data_dirs::holds_marker(&path))
            {
                tracing::debug!(?path, "a protected entry is left out of a listing");
                continue;
            }
            let kind = match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => EntryKind::File,
                FileType::Directory => EntryKind::Dir,
                FileType::Symlink => EntryKind::Symlink,
                _ => {
                    tracing::debug!(?path, "a special file is left out of a listing");
                    continue;
                }
            };
            let utf8 = |s: OsString| {
                s.into_string().map_err(|_| TreeError::NotUtf8 {
                    path: path.display().to_string(),
                })
            };
            let name = utf8(name)?;
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let target = if kind == EntryKind::Symlink {
                let t = rustix::fs::readlinkat(&*dir, name.as_str(), Vec::new())
                    .map_err(|e| TreeError::io(&path, e))?;
                Some(utf8(OsString::from_vec(t.into_bytes()))?)
            } else {
                None
            };
            self.names = self
                .names
                .saturating_add(child.len())
                .saturating_add(target.as_deref().map_or(0, str::len));
            if self.names > MAX_TREE_NAME_BYTES {
                return Err(ManifestError::NamesTooLong.into());
            }
            if self.entries.len() >= MAX_TREE_ENTRIES {
                return Err(ManifestError::TooManyEntries.into());
            }
            if kind == EntryKind::Dir {
                if depth + 1 > MAX_TREE_DEPTH {
                    return Err(TreeError::TooDeep {
                        path: path.display().to_string(),
                    });
                }
                dirs.push(Pending {
                    parent: Arc::clone(&dir),
                    name: OsString::from(&name),
                    rel: child.clone(),
                    depth: depth + 1,
                });
            }
            self.entries.push(entry(child, kind, &st, target));
        }
        // Popped in name order.
        self.pending.extend(dirs.into_iter().rev());
        Ok(())
    }
}

/// A manifest entry from an `lstat`.
fn entry(path: String, kind: EntryKind, st: &Stat, target: Option<String>) -> TreeEntry {
    TreeEntry {
        path,
        kind,
        mode: if kind == EntryKind::Symlink {
            0
        } else {
            st.st_mode & 0o7777
        },
        mtime_ms: mtime_ms(st),
        size: if kind == EntryKind::File {
            st.st_size.max(0) as u64
        } else {
            0
        },
        target,
    }
}

/// A stat's mtime in ms since the epoch (0 before it).
// `st_mtime_nsec` is unsigned on some targets and signed on others.
#[allow(clippy::unnecessary_cast)]
pub(super) fn mtime_ms(st: &Stat) -> u64 {
    (st.st_mtime.max(0) as u64) * 1000 + (st.st_mtime_nsec as u64) / 1_000_000
}
