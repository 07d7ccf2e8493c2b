//! Looking at a directory entry itself, without following it: what fs_stat and
//! fs_list report (a symlink as a symlink, with its target's text).
//!
//! Reading *what* an entry is must not become a way around the path rules that guard
//! reading *into* it. So an entry is looked at through its parent directory, opened
//! like any file tool opens a path (beneath the workspace when confined, refused
//! when protected), and then only by name in that directory with `AT_SYMLINK_NOFOLLOW`:
//! a symlink inside the workspace that points outside is reported as a link (its
//! target's text, which is the content of an entry in the workspace) and never
//! followed, and a protected file is refused (fs_stat) or left out (fs_list) by its
//! device and inode. The file's first bytes (for its MIME type) are read through a
//! descriptor opened the same way with `O_NOFOLLOW`, and only when it is still the
//! file that was looked at.

use super::{AccessError, PathPolicy, WalkAccess};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One directory entry, looked at without following it.
#[derive(Debug)]
pub struct Entry {
    /// Its resolved path (the parent canonical when confined).
    pub path: PathBuf,
    /// `lstat` of the entry.
    pub stat: Stat,
    /// A symlink's target, as written in the link.
    pub link_target: Option<PathBuf>,
    /// The entry opened read-only, when it is a regular file that could be opened
    /// (for its content's type).
    pub file: Option<OwnedFd>,
}

impl PathPolicy {
    /// Looks at what `arg` names without following a final symlink (blocking). The
    /// parent directory goes through the path rules like any path; a name that has
    /// no parent to go through (`/`, the workspace itself, a path ending in `..`) is
    /// opened as a whole instead.
    pub fn entry(&self, arg: impl AsRef<Path>) -> Result<Entry, AccessError> {
        let arg = arg.as_ref();
        let joined = self.workspace.join(arg);
        let lexical = std::path::absolute(&joined).unwrap_or(joined);
        let (Some(parent), Some(name)) = (lexical.parent(), lexical.file_name()) else {
            return self.entry_followed(arg);
        };
        if self.confine {
            let workspace = self.canonical_workspace()?;
            if std::fs::canonicalize(&lexical).is_ok_and(|c| c == workspace) {
                return self.entry_followed(arg);
            }
        }
        let dir_path = self.resolve(parent)?;
        let path = dir_path.join(name);
        let snapshot = self.protected.snapshot();
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        let dir = match self.root()? {
            Some(root) => {
                let relative = root
                    .relative(&dir_path)
                    .ok_or_else(|| self.escaped(&path))?;
                root.open_beneath(relative, flags, Mode::empty())
                    .map_err(|e| self.beneath_error(&dir_path, e))?
            }
            None => rustix::fs::open(&dir_path, flags | OFlags::CLOEXEC, Mode::empty()).map_err(
                |e| AccessError::Io {
                    path: dir_path.clone(),
                    source: e.into(),
                },
            )?,
        };
        if snapshot.covers_fd(&dir) {
            return Err(self.protected_error(&path));
        }
        let stat = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| {
            AccessError::Io {
                path: path.clone(),
                source: e.into(),
            }
        })?;
        if snapshot.covers_walk_file(&path, stat.st_dev, stat.st_ino) {
            return Err(self.protected_error(&path));
        }
        Ok(Entry {
            link_target: link_target(&dir, name, &stat),
            file: open_file(&dir, name, &stat),
            path,
            stat,
        })
    }

    /// [`PathPolicy::entry`] for a path without a parent to look through: opened as a
    /// whole (following symlinks, through the path rules).
    fn entry_followed(&self, arg: &Path) -> Result<Entry, AccessError> {
        let opened = self.open(arg, OFlags::PATH)?;
        let stat = rustix::fs::fstat(&opened.fd).map_err(|e| AccessError::Io {
            path: opened.path.clone(),
            source: e.into(),
        })?;
        Ok(Entry {
            path: opened.path,
            stat,
            link_target: None,
            file: None,
        })
    }
}

impl WalkAccess {
    /// What a walk lists at `path`, without following it: `None` when its directory
    /// is not beneath the workspace at this moment (confined), it or its directory is
    /// protected, or it is gone. The walk does not enter protected directories, so
    /// the device and inode checks are enough here (as for [`WalkAccess::listing`]).
    pub fn entry(&self, path: &Path) -> Option<Entry> {
        let (parent, name) = (path.parent()?, path.file_name()?);
        let dir = self
            .open_unchecked(parent, OFlags::PATH | OFlags::DIRECTORY)
            .ok()?;
        let dir_stat = rustix::fs::fstat(&dir).ok()?;
        if self.snapshot.covers_stat(&dir_stat) {
            return None;
        }
        let stat = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if self
            .snapshot
            .covers_walk_file(path, stat.st_dev, stat.st_ino)
        {
            return None;
        }
        Some(Entry {
            path: path.to_path_buf(),
            link_target: link_target(&dir, name, &stat),
            file: None,
            stat,
        })
    }
}

/// The text of the symlink `name` in `dir`, if `stat` says it is one.
fn link_target(dir: &OwnedFd, name: &OsStr, stat: &Stat) -> Option<PathBuf> {
    if FileType::from_raw_mode(stat.st_mode) != FileType::Symlink {
        return None;
    }
    let target = rustix::fs::readlinkat(dir, name, Vec::new()).ok()?;
    Some(PathBuf::from(OsString::from_vec(target.into_bytes())))
}

/// The regular file `name` in `dir` opened read-only (never following a symlink,
/// never blocking on a FIFO swapped in), if it is still the file `stat` describes.
fn open_file(dir: &OwnedFd, name: &OsStr, stat: &Stat) -> Option<OwnedFd> {
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return None;
    }
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
    let now = rustix::fs::fstat(&fd).ok()?;
    (now.st_dev == stat.st_dev && now.st_ino == stat.st_ino).then_some(fd)
}
