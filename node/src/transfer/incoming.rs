//! A file written in from chunks for a `put` transfer, put in place only once it is
//! whole and its SHA-256 is the sender's.

use super::{hex, TransferError};
use crate::tools::paths::{Parent, PathPolicy};
use gsv_files::Received;
use gsv_protocol::file_mode::safe_mode;
use gsv_protocol::transfer::{FileMeta, CHUNK_BYTES};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Timespec, Timestamps};
use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Longest part of the target's name kept in the partial file's name.
const PART_NAME_KEEP: usize = 100;

/// A file being received beside its target.
pub struct Incoming {
    dir: OwnedFd,
    name: OsString,
    part: OsString,
    out: Received,
    path: PathBuf,
    /// `path` is the opened directory's real path (see [`Parent::canonical`]).
    resolved: bool,
    /// A file stood at the target when the transfer opened.
    replaces: bool,
    meta: FileMeta,
    expected: Option<String>,
    offset: u64,
    hasher: Sha256,
}

impl Incoming {
    /// Opens (or takes up again) the partial file for the target `arg` names, which
    /// is to become `meta.size` bytes (SHA-256 `expected`, when known). The bytes a
    /// partial file already holds are read and hashed: [`Incoming::offset`] says where
    /// the sender goes on from (blocking).
    pub fn open(
        policy: &PathPolicy,
        arg: &str,
        meta: FileMeta,
        expected: Option<String>,
    ) -> Result<Incoming, TransferError> {
        let parent = policy.open_parent(arg)?;
        let (path, resolved) = parent.canonical();
        let Parent { dir, name, .. } = parent;
        let mut replaces = false;
        if let Ok(st) = rustix::fs::statat(&dir, &name, AtFlags::empty()) {
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                return Err(TransferError::NotAFile {
                    path: path.display().to_string(),
                });
            }
            replaces = true;
        }
        let part = part_name(&name, &meta, expected.as_deref());
        let fd = rustix::fs::openat(
            &dir,
            part.as_os_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| TransferError::io(&path, e.into()))?;
        // One copy of a file at a time: a second one would interleave its bytes.
        rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).map_err(|_| {
            TransferError::InUse {
                path: path.display().to_string(),
            }
        })?;
        let mut file = File::from(fd);
        let (held, hasher) =
            rehash(&mut file, meta.size).map_err(|e| TransferError::io(&path, e))?;
        Ok(Incoming {
            dir,
            name,
            part,
            out: Received::new(file, held),
            path,
            resolved,
            replaces,
            meta,
            expected,
            offset: held,
            hasher,
        })
    }

    /// Bytes held so far: where the next chunk must start.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The target's resolved path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether [`Incoming::path`] is the real path of the opened directory.
    pub fn resolved(&self) -> bool {
        self.resolved
    }

    /// Whether a file stood at the target when the transfer opened.
    pub fn replaces(&self) -> bool {
        self.replaces
    }

    /// The file as announced.
    pub fn meta(&self) -> FileMeta {
        self.meta
    }

    /// Appends the chunk at `offset`, which must be where the file stands.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), TransferError> {
        if offset != self.offset {
            return Err(TransferError::OutOfOrder {
                expected: self.offset,
                got: offset,
            });
        }
        let end = offset + data.len() as u64;
        if end > self.meta.size {
            return Err(TransferError::TooLong {
                size: self.meta.size,
                got: end,
            });
        }
        self.out
            .write_at(offset, data)
            .map_err(|e| TransferError::io(&self.path, e))?;
        self.hasher.update(data);
        self.offset = end;
        Ok(())
    }

    /// Every byte came: checks the size and the SHA-256 (`sha256`, the sender's, and
    /// the one announced at open), gives the file its mode and mtime, and renames it
    /// over the target. A mismatch removes the partial file and puts nothing in place.
    /// Returns the bytes and the SHA-256.
    pub fn finish(self, sha256: &str) -> Result<(u64, String), TransferError> {
        if self.offset != self.meta.size {
            return Err(TransferError::Short {
                size: self.meta.size,
                got: self.offset,
            });
        }
        let got = hex(self.hasher.clone());
        let matches = |want: &str| want.eq_ignore_ascii_case(&got);
        if !matches(sha256) || !self.expected.as_deref().is_none_or(matches) {
            let expected = self.expected.clone().unwrap_or_else(|| sha256.to_owned());
            self.discard();
            return Err(TransferError::Corrupt { expected, got });
        }
        let result = (|| {
            if self.meta.mode != 0 {
                rustix::fs::fchmod(
                    self.out.file(),
                    Mode::from_raw_mode(safe_mode(self.meta.mode, false)),
                )?;
            }
            if self.meta.mtime_ms != 0 {
                let t = Timespec {
                    tv_sec: (self.meta.mtime_ms / 1000) as i64,
                    tv_nsec: ((self.meta.mtime_ms % 1000) * 1_000_000) as _,
                };
                rustix::fs::futimens(
                    self.out.file(),
                    &Timestamps {
                        last_access: t,
                        last_modification: t,
                    },
                )?;
            }
            self.out.file().sync_all()?;
            rustix::fs::renameat(&self.dir, self.part.as_os_str(), &self.dir, &self.name)?;
            Ok::<_, std::io::Error>(())
        })();
        if let Err(e) = result {
            return Err(TransferError::io(&self.path, e));
        }
        let _ = rustix::fs::fsync(&self.dir);
        Ok((self.offset, got))
    }

    /// Gives up and removes the partial file (a cancelled copy that is not to be
    /// resumed, or corrupt bytes).
    pub fn discard(self) {
        let _ = rustix::fs::unlinkat(&self.dir, self.part.as_os_str(), AtFlags::empty());
    }
}

/// Reads and hashes what a partial file holds; one longer than `size` is not a
/// prefix of this file and is emptied. Returns the bytes held and their hash.
fn rehash(file: &mut File, size: u64) -> std::io::Result<(u64, Sha256)> {
    let mut hasher = Sha256::new();
    if file.metadata()?.len() > size {
        file.set_len(0)?;
        return Ok((0, hasher));
    }
    file.seek(SeekFrom::Start(0))?;
    let mut held = 0u64;
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok((held, hasher));
        }
        hasher.update(&buf[..n]);
        held += n as u64;
    }
}

/// `.NAME.gsv-part-KEY`: one name per target name, size, mtime and announced hash, so
/// a copy of the same file takes its partial file up again and another file never
/// does.
fn part_name(name: &OsStr, meta: &FileMeta, expected: Option<&str>) -> OsString {
    let mut key = Sha256::new();
    key.update(name.as_encoded_bytes());
    key.update(meta.size.to_be_bytes());
    key.update(meta.mtime_ms.to_be_bytes());
    key.update(expected.unwrap_or("").as_bytes());
    let key = hex(key);
    let name = name.to_string_lossy();
    let kept: String = name
        .char_indices()
        .take_while(|(i, c)| i + c.len_utf8() <= PART_NAME_KEEP)
        .map(|(_, c)| c)
        .collect();
    OsString::from(format!(".{kept}.gsv-part-{}", &key[..16]))
}
