//! Opening a path beneath a directory without a check-then-use race.
//!
//! `--confine` used to canonicalise a path, check the result against the workspace and
//! then open it by name. A local process that swaps a directory for a symlink between
//! the two steps (`renameat2(RENAME_EXCHANGE)`) made the open land outside. Here the
//! kernel resolves the path once, relative to a descriptor of the workspace:
//!
//! - **Linux ≥ 5.6**: `openat2(root_fd, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
//!   Every component, `..` and symlink is resolved by the kernel in one walk that may
//!   not leave `root_fd`'s directory (an absolute symlink, a `..` above the root or a
//!   symlink pointing out fails with `EXDEV`; `/proc/self/fd/N`-style magic links fail
//!   with `ELOOP`). What is opened is what was checked.
//! - **Elsewhere** (other systems, older kernels, a seccomp filter that answers
//!   `ENOSYS`): the path is opened by name under the root's path, and afterwards the
//!   opened descriptor's real path (`/proc/self/fd/N` where there is one, else the
//!   canonicalised name) must lie inside the root. Without `/proc` that last check is
//!   by name again, so this fallback is racy in the way described above.

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a path could not be opened beneath the root.
#[derive(Debug, Error)]
pub enum BeneathError {
    /// The path (or something swapped into it) leads outside the root.
    #[error("it leads outside the directory it must stay in")]
    Escapes,
    /// Anything else the kernel said (not found, permission denied, ...).
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A directory held open by descriptor, that paths are resolved beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

impl Root {
    /// Opens `canonical` (an absolute path without symlinks) as the root.
    pub fn open(canonical: &Path) -> io::Result<Root> {
        let fd = rustix::fs::open(
            canonical,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root {
            fd,
            path: canonical.to_path_buf(),
        })
    }

    /// The root's descriptor (`O_PATH`).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The root's path, as it was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path` made relative to the root, if it is the root or below it by name.
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.path).ok()
    }

    /// Opens `relative` (relative to the root; empty means the root) with `flags`
    /// (`O_CLOEXEC` is added), never leaving the root.
    pub fn open_beneath(
        &self,
        relative: &Path,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, BeneathError> {
        open_beneath_fd(&self.fd, &self.path, relative, flags, mode)
    }
}

/// How many times an `EAGAIN` from `openat2` (a rename raced a `..` lookup) is retried
/// before the path is treated as escaping.
const AGAIN_RETRIES: usize = 8;

/// [`Root::open_beneath`] for any directory descriptor `dir` whose path is `dir_path`.
pub fn open_beneath_fd(
    dir: impl AsFd,
    dir_path: &Path,
    relative: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, BeneathError> {
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    if relative.is_absolute() {
        return Err(BeneathError::Escapes);
    }
    let flags = flags | OFlags::CLOEXEC;
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        use std::sync::atomic::{AtomicBool, Ordering};
        /// Set once the kernel answered `ENOSYS`: later calls go to the fallback.
        static UNSUPPORTED: AtomicBool = AtomicBool::new(false);
        if !UNSUPPORTED.load(Ordering::Relaxed) {
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            for _ in 0..AGAIN_RETRIES {
                match rustix::fs::openat2(dir.as_fd(), relative, flags, mode, resolve) {
                    Ok(fd) => return Ok(fd),
                    Err(Errno::AGAIN) => continue,
                    Err(Errno::NOSYS) => {
                        UNSUPPORTED.store(true, Ordering::Relaxed);
                        tracing::warn!(
                            "openat2 is not available (kernel before 5.6 or a seccomp filter): \
                             confinement falls back to checking paths by name, which is racy"
                        );
                        break;
                    }
                    Err(Errno::XDEV) => return Err(BeneathError::Escapes),
                    // A magic link (`/proc/self/fd/N`); with `O_NOFOLLOW`, a symlink at
                    // the end of the path, which the caller handles.
                    Err(Errno::LOOP) if !flags.contains(OFlags::NOFOLLOW) => {
                        return Err(BeneathError::Escapes)
                    }
                    Err(e) => return Err(BeneathError::Io(e.into())),
                }
            }
            if !UNSUPPORTED.load(Ordering::Relaxed) {
                return Err(BeneathError::Escapes);
            }
        }
    }
    fallback(dir_path, relative, flags, mode)
}

/// Opens by name, then checks where the descriptor really is (racy without `/proc`).
fn fallback(
    dir_path: &Path,
    relative: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, BeneathError> {
    let joined = dir_path.join(relative);
    let fd = rustix::fs::open(&joined, flags, mode).map_err(io::Error::from)?;
    let real = real_path(&fd).or_else(|| std::fs::canonicalize(&joined).ok());
    match real {
        Some(real) if real.starts_with(dir_path) => Ok(fd),
        _ => Err(BeneathError::Escapes),
    }
}

/// Where an open descriptor really is, as the kernel names it (`/proc/self/fd/N`);
/// `None` where there is no `/proc` or the file was deleted.
pub fn real_path(fd: &impl AsFd) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let link = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    let path = std::fs::read_link(link).ok()?;
    if !path.is_absolute() || path.to_string_lossy().ends_with(" (deleted)") {
        return None;
    }
    Some(path)
}

/// Whether an error from [`Root::open_beneath`] means "not there".
pub fn is_not_found(e: &BeneathError) -> bool {
    matches!(e, BeneathError::Io(io) if io.kind() == io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn layout() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let ws = base.join("ws");
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::write(ws.join("sub/a.txt"), "a").unwrap();
        fs::write(base.join("outside.txt"), "o").unwrap();
        symlink(base.join("outside.txt"), ws.join("abs-out")).unwrap();
        symlink("../outside.txt", ws.join("rel-out")).unwrap();
        (tmp, ws)
    }

    /// What runs where `openat2` answers `ENOSYS`: open by name, then check the
    /// descriptor's real path.
    #[test]
    fn the_fallback_checks_where_the_descriptor_is() {
        let (_tmp, ws) = layout();
        let rd = OFlags::RDONLY | OFlags::CLOEXEC;
        assert!(fallback(&ws, Path::new("sub/a.txt"), rd, Mode::empty()).is_ok());
        for escape in [
            "../outside.txt",
            "abs-out",
            "rel-out",
            "sub/../../outside.txt",
        ] {
            let r = fallback(&ws, Path::new(escape), rd, Mode::empty());
            assert!(matches!(r, Err(BeneathError::Escapes)), "{escape}: {r:?}");
        }
    }

    #[test]
    fn opens_inside_and_refuses_every_way_out() {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let ws = base.join("ws");
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::write(ws.join("sub/a.txt"), "a").unwrap();
        fs::write(base.join("outside.txt"), "o").unwrap();
        symlink(base.join("outside.txt"), ws.join("abs-out")).unwrap();
        symlink("../outside.txt", ws.join("rel-out")).unwrap();
        symlink("sub/a.txt", ws.join("rel-in")).unwrap();
        let root = Root::open(&ws).unwrap();
        let rd = OFlags::RDONLY;
        assert!(root
            .open_beneath(Path::new("sub/a.txt"), rd, Mode::empty())
            .is_ok());
        assert!(root
            .open_beneath(Path::new("rel-in"), rd, Mode::empty())
            .is_ok());
        assert!(root
            .open_beneath(Path::new("sub/../sub/a.txt"), rd, Mode::empty())
            .is_ok());
        for escape in [
            "../outside.txt",
            "abs-out",
            "rel-out",
            "sub/../../outside.txt",
        ] {
            let r = root.open_beneath(Path::new(escape), rd, Mode::empty());
            assert!(matches!(r, Err(BeneathError::Escapes)), "{escape}: {r:?}");
        }
        let r = root.open_beneath(Path::new("/etc/hosts"), rd, Mode::empty());
        assert!(matches!(r, Err(BeneathError::Escapes)));
        let r = root.open_beneath(Path::new("nope"), rd, Mode::empty());
        assert!(r.as_ref().is_err_and(is_not_found), "{r:?}");
        let dir = root
            .open_beneath(
                Path::new(""),
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
        assert_eq!(real_path(&dir).unwrap(), ws);
    }
}
