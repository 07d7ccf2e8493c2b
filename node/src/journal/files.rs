//! The journal's file operations: directories created 0700 and files 0600 by the
//! node's own `open`/`mkdir` calls (never by a umask's grace), with symlinks refused
//! at every step (`O_NOFOLLOW`, `lstat`), and reads capped in size.
//!
//! No `fsync`: the journal guards against the node *process* dying (SIGKILL, a
//! panic, the OOM killer); the page cache outlives the process, so plain writes are
//! enough and cost the fast path nothing measurable. A power loss may lose the last
//! entries (the affected calls are then answered as never seen or `lost:`).

use crate::journal::JournalError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Creates `dir` (one level) 0700 if missing; an existing one must be a real directory
/// (not a symlink) and is narrowed to 0700 if it was wider.
pub(crate) fn private_dir(dir: &Path) -> Result<(), JournalError> {
    let err = |error| JournalError::Dir {
        path: dir.to_owned(),
        error,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(err)?;
    if meta.file_type().is_symlink() {
        return Err(JournalError::Foreign {
            path: dir.to_owned(),
            what: "a symlink",
        });
    }
    if !meta.is_dir() {
        return Err(JournalError::Foreign {
            path: dir.to_owned(),
            what: "not a directory",
        });
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    }
    Ok(())
}

fn file_err(path: &Path) -> impl Fn(std::io::Error) -> JournalError + '_ {
    move |error| JournalError::File {
        path: path.to_owned(),
        error,
    }
}

/// Creates the new file `path` (0600, `O_EXCL`, `O_NOFOLLOW`) for appending.
pub(crate) fn create_append(path: &Path) -> Result<File, JournalError> {
    OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(file_err(path))
}

/// Opens (creating it 0600) the lock file `path` and takes its exclusive `flock`
/// without waiting; `Busy` if another process holds it.
pub(crate) fn lock(path: &Path) -> Result<File, JournalError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(file_err(path))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(JournalError::Busy {
            path: path.to_owned(),
        }),
        Err(e) => Err(JournalError::File {
            path: path.to_owned(),
            error: e.into(),
        }),
    }
}

/// Opens `path` for reading, refusing a symlink.
pub(crate) fn open_read(path: &Path) -> Result<File, JournalError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(file_err(path))
}

/// Writes `content` to `path` (0600), replacing it: a plain write for a new file, or
/// written beside it and renamed over it when `atomic` (a reader never sees half).
pub(crate) fn write(path: &Path, content: &[u8], atomic: bool) -> Result<(), JournalError> {
    let target = if atomic {
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(".tmp");
        path.with_file_name(name)
    } else {
        path.to_owned()
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&target)
        .map_err(file_err(&target))?;
    file.write_all(content).map_err(file_err(&target))?;
    drop(file);
    if atomic {
        std::fs::rename(&target, path).map_err(file_err(path))?;
    }
    Ok(())
}

/// Reads `path` whole, refusing a symlink, a non-regular file or one over `max` bytes.
pub(crate) fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, JournalError> {
    let file = open_read(path)?;
    let meta = file.metadata().map_err(file_err(path))?;
    if !meta.is_file() || meta.len() > max {
        return Err(JournalError::Corrupt {
            path: path.to_owned(),
            problem: format!("not a regular file of at most {max} bytes"),
        });
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut out)
        .map_err(file_err(path))?;
    Ok(out)
}

/// Removes `path`; a missing file is not an error.
pub(crate) fn remove(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = ?path, error = %e, "could not remove a journal file"),
    }
}

/// Milliseconds since the Unix epoch of `path`'s last change, if known.
pub(crate) fn modified_ms(path: &Path) -> Option<u64> {
    let modified = std::fs::symlink_metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// A call or session id as a file name: lower-case hex of its bytes (ids are chosen
/// by the gateway and must never become a path). `None` for an empty or overlong id.
pub(crate) fn id_name(id: &str) -> Option<String> {
    if id.is_empty() || id.len() > 100 {
        return None;
    }
    Some(hex::encode(id))
}

/// The id a file name made by [`id_name`] stands for.
pub(crate) fn name_id(name: &str) -> Option<String> {
    if name.is_empty() || name.len() % 2 != 0 || name.len() > 200 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..name.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(name.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_as_names() {
        for id in ["c-1", "../../etc/passwd", "é/x", "a"] {
            let name = id_name(id).unwrap();
            assert!(name.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
            assert_eq!(name_id(&name).as_deref(), Some(id));
        }
        assert!(id_name("").is_none());
        assert!(id_name(&"x".repeat(101)).is_none());
        assert!(name_id("zz").is_none());
        assert!(name_id("abc").is_none());
    }
}
