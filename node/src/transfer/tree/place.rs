//! `transfer.place`: a tree's directories (and the ground cleared for its files), its
//! symlinks, and its directories' modes and mtimes, each reached from the top's
//! descriptor one name at a time without following a symlink.

use super::{kind_name, TreeError};
use crate::protected::Snapshot;
use crate::tools::paths::{AccessError, PathPolicy};
use gsv_protocol::file_mode::safe_mode;
use gsv_protocol::transfer::tree::{
    check_into, check_step, depth, EntryKind, PlaceParams, PlaceStep, Placed, TreeEntry, ROOT,
};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timespec, Timestamps, UTIME_OMIT};
use rustix::io::Errno;
use std::path::{Path, PathBuf};

/// Mode of a directory the copy makes, until `settle` gives it its own.
const MADE_DIR_MODE: u32 = 0o700;

/// The top of the tree, open, and where it is.
struct Top {
    fd: OwnedFd,
    path: PathBuf,
    snapshot: Snapshot,
}

/// Carries out one step of placing a tree (blocking).
pub(super) fn place(policy: &PathPolicy, p: PlaceParams) -> Result<Placed, TreeError> {
    check_step(p.step, &p.entries)?;
    if let Some(into) = &p.into {
        check_into(into)?;
    }
    let top = match p.step {
        PlaceStep::Dirs => make_top(policy, &p.path, p.into.as_deref())?,
        PlaceStep::Links | PlaceStep::Settle => {
            let opened = policy.open(&p.path, OFlags::RDONLY | OFlags::DIRECTORY)?;
            Top {
                fd: opened.fd,
                path: opened.path,
                snapshot: policy.protected_snapshot(),
            }
        }
    };
    if top.snapshot.covers_fd(&top.fd) {
        return Err(TreeError::Protected {
            path: top.path.display().to_string(),
        });
    }
    let mut entries = p.entries;
    if p.step == PlaceStep::Settle {
        // Deepest first: settling a directory must come after everything below it.
        entries.sort_by_key(|e| std::cmp::Reverse(depth(&e.path)));
    }
    for e in &entries {
        match (p.step, e.kind) {
            (PlaceStep::Dirs, EntryKind::Dir) => top.make_dir(e)?,
            (PlaceStep::Dirs, _) => top.clear_for_file(e)?,
            (PlaceStep::Links, _) => top.make_link(e)?,
            (PlaceStep::Settle, _) => top.settle(e)?,
        }
    }
    Ok(Placed {
        root: top.path.display().to_string(),
        done: entries.len(),
    })
}

/// Opens (making it if missing) the top of the tree: `path` itself, or `path/into`
/// when `path` is an existing directory and `into` is given.
fn make_top(policy: &PathPolicy, path: &str, into: Option<&str>) -> Result<Top, TreeError> {
    let snapshot = policy.protected_snapshot();
    match policy.open(path, OFlags::RDONLY | OFlags::DIRECTORY) {
        Ok(existing) => match into {
            None => Ok(Top {
                fd: existing.fd,
                path: existing.path,
                snapshot,
            }),
            Some(name) => {
                let path = existing.path.join(name);
                let fd = make_dir_at(&existing.fd, name, &path)?;
                Ok(Top { fd, path, snapshot })
            }
        },
        Err(AccessError::Io { source, .. })
            if source.raw_os_error() == Some(Errno::NOENT.raw_os_error()) =>
        {
            let parent = policy.open_parent(path)?;
            let fd = make_dir_at(&parent.dir, &parent.name, &parent.path)?;
            Ok(Top {
                fd,
                path: parent.path,
                snapshot,
            })
        }
        Err(AccessError::Io { source, path })
            if source.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) =>
        {
            Err(TreeError::InTheWay {
                path: path.display().to_string(),
                found: "file",
                wanted: "directory",
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// Makes the directory `name` in `dir` unless it is there, and opens it without
/// following a symlink.
fn make_dir_at(
    dir: &impl AsFd,
    name: impl AsRef<std::ffi::OsStr>,
    shown: &Path,
) -> Result<OwnedFd, TreeError> {
    let name = name.as_ref();
    if crate::protected::data_dirs::refuses_new_name(name) {
        return Err(TreeError::Protected {
            path: shown.display().to_string(),
        });
    }
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(MADE_DIR_MODE)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(TreeError::io(shown, e)),
    }
    open_dir_nofollow(dir, name, shown, OFlags::RDONLY)
}

/// Opens the directory `name` in `dir`, refusing a symlink or anything else there.
fn open_dir_nofollow(
    dir: &impl AsFd,
    name: &std::ffi::OsStr,
    shown: &Path,
    access: OFlags,
) -> Result<OwnedFd, TreeError> {
    rustix::fs::openat(
        dir,
        name,
        access | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::LOOP | Errno::NOTDIR => TreeError::InTheWay {
            path: shown.display().to_string(),
            found: found_at(dir, name),
            wanted: "directory",
        },
        e => TreeError::io(shown, e),
    })
}

/// What is at `name` in `dir`, for a message.
fn found_at(dir: &impl AsFd, name: &std::ffi::OsStr) -> &'static str {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_or("missing entry", |st| {
        kind_name(FileType::from_raw_mode(st.st_mode))
    })
}

impl Top {
    /// The directory an entry lives in, opened from the top one name at a time (never
    /// following a symlink, never a protected directory), and the entry's name.
    fn parent_of<'e>(&self, e: &'e TreeEntry) -> Result<(OwnedFd, &'e str), TreeError> {
        let (dirs, name) = match e.path.rsplit_once('/') {
            Some((dirs, name)) => (Some(dirs), name),
            None => (None, e.path.as_str()),
        };
        let mut cur = rustix::io::dup(&self.fd).map_err(|err| TreeError::io(&self.path, err))?;
        let mut shown = self.path.clone();
        for part in dirs.into_iter().flat_map(|d| d.split('/')) {
            shown.push(part);
            cur = open_dir_nofollow(&cur, part.as_ref(), &shown, OFlags::PATH)?;
            if self.snapshot.covers_fd(&cur) {
                return Err(TreeError::Protected {
                    path: shown.display().to_string(),
                });
            }
        }
        Ok((cur, name))
    }

    /// `dirs`: makes directory `e` (owner-only), keeps one that is there.
    fn make_dir(&self, e: &TreeEntry) -> Result<(), TreeError> {
        if e.path == ROOT {
            return Ok(());
        }
        let (dir, name) = self.parent_of(e)?;
        let fd = make_dir_at(&dir, name, &self.path.join(&e.path))?;
        if self.snapshot.covers_fd(&fd) {
            return Err(TreeError::Protected {
                path: self.path.join(&e.path).display().to_string(),
            });
        }
        Ok(())
    }

    /// `dirs`, for a file of the tree: a symlink at its place is removed (the file's
    /// transfer must not write through it); a directory there is in the way.
    fn clear_for_file(&self, e: &TreeEntry) -> Result<(), TreeError> {
        let (dir, name) = self.parent_of(e)?;
        let shown = self.path.join(&e.path);
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => Ok(()),
            Err(err) => Err(TreeError::io(&shown, err)),
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Ok(()),
                FileType::Symlink => rustix::fs::unlinkat(&dir, name, AtFlags::empty())
                    .map_err(|err| TreeError::io(&shown, err)),
                other => Err(TreeError::InTheWay {
                    path: shown.display().to_string(),
                    found: kind_name(other),
                    wanted: "file",
                }),
            },
        }
    }

    /// `links`: makes symlink `e` (replacing a file or symlink there in one rename),
    /// with its mtime.
    fn make_link(&self, e: &TreeEntry) -> Result<(), TreeError> {
        let (dir, name) = self.parent_of(e)?;
        let shown = self.path.join(&e.path);
        let target = e.target.as_deref().unwrap_or_default();
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => rustix::fs::symlinkat(target, &dir, name)
                .map_err(|err| TreeError::io(&shown, err))?,
            Err(err) => return Err(TreeError::io(&shown, err)),
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                return Err(TreeError::InTheWay {
                    path: shown.display().to_string(),
                    found: "directory",
                    wanted: "symlink",
                })
            }
            Ok(_) => {
                let tmp = format!(".gsv-link-{}", uuid::Uuid::new_v4().simple());
                rustix::fs::symlinkat(target, &dir, tmp.as_str())
                    .map_err(|err| TreeError::io(&shown, err))?;
                if let Err(err) = rustix::fs::renameat(&dir, tmp.as_str(), &dir, name) {
                    let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
                    return Err(TreeError::io(&shown, err));
                }
            }
        }
        if e.mtime_ms != 0 {
            // The link's own time; a file system that cannot set it keeps the link.
            let _ =
                rustix::fs::utimensat(&dir, name, &times(e.mtime_ms), AtFlags::SYMLINK_NOFOLLOW);
        }
        Ok(())
    }

    /// `settle`: gives directory `e` its mtime and mode.
    fn settle(&self, e: &TreeEntry) -> Result<(), TreeError> {
        let shown = self.path.join(&e.path);
        let fd = if e.path == ROOT {
            rustix::io::dup(&self.fd).map_err(|err| TreeError::io(&shown, err))?
        } else {
            let (dir, name) = self.parent_of(e)?;
            open_dir_nofollow(&dir, name.as_ref(), &shown, OFlags::RDONLY)?
        };
        if self.snapshot.covers_fd(&fd) {
            return Err(TreeError::Protected {
                path: shown.display().to_string(),
            });
        }
        if e.mtime_ms != 0 {
            rustix::fs::futimens(&fd, &times(e.mtime_ms))
                .map_err(|err| TreeError::io(&shown, err))?;
        }
        if e.mode != 0 {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(safe_mode(e.mode, false)))
                .map_err(|err| TreeError::io(&shown, err))?;
        }
        Ok(())
    }
}

/// The mtime `ms` (ms since the epoch), the access time left as it is.
fn times(ms: u64) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: (ms / 1000) as i64,
            tv_nsec: ((ms % 1000) * 1_000_000) as _,
        },
    }
}
