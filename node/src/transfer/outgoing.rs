//! A file read out in chunks for a `get` transfer.

use super::{hex, TransferError};
use crate::tools::paths::PathPolicy;
use gsv_files::Sending;
use gsv_protocol::transfer::{FileMeta, CHUNK_BYTES};
use rustix::fs::{FileType, OFlags};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::path::{Path, PathBuf};

/// A regular file being sent, from where the copy stands.
pub struct Outgoing {
    file: Sending,
    path: PathBuf,
    /// `path` is the opened file's real path.
    resolved: bool,
    meta: FileMeta,
    offset: u64,
    hasher: Sha256,
}

impl Outgoing {
    /// Opens the file `arg` names (by the file tools' rules) to send from `offset`.
    /// The bytes before `offset` are read and hashed, so the hash at the end is the
    /// whole file's (blocking).
    pub fn open(policy: &PathPolicy, arg: &str, offset: u64) -> Result<Outgoing, TransferError> {
        let opened = policy.open(arg, OFlags::RDONLY)?;
        let (path, resolved) = opened.canonical();
        let st = rustix::fs::fstat(&opened.fd).map_err(|e| TransferError::io(&path, e.into()))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(TransferError::NotAFile {
                path: path.display().to_string(),
            });
        }
        let meta = FileMeta {
            size: st.st_size.max(0) as u64,
            mode: st.st_mode & 0o7777,
            mtime_ms: (st.st_mtime.max(0) as u64) * 1000 + (st.st_mtime_nsec as u64) / 1_000_000,
        };
        let mut out = Outgoing {
            file: Sending::new(File::from(opened.fd)),
            path,
            resolved,
            meta,
            offset: 0,
            hasher: Sha256::new(),
        };
        let start = offset.min(meta.size);
        let mut buf = Vec::new();
        while out.offset < start {
            let want = (start - out.offset).min(CHUNK_BYTES as u64) as usize;
            buf.clear();
            if out.read_at_most(&mut buf, want)? == 0 {
                break;
            }
        }
        Ok(out)
    }

    /// The file as it was opened.
    pub fn meta(&self) -> FileMeta {
        self.meta
    }

    /// The file's resolved path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether [`Outgoing::path`] is the opened file's real path.
    pub fn resolved(&self) -> bool {
        self.resolved
    }

    /// Bytes read (and hashed) so far: where the next chunk starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the next chunk (at most [`CHUNK_BYTES`]) into `buf`; its length, 0 at
    /// the end of the file.
    pub fn next_chunk(&mut self, buf: &mut Vec<u8>) -> Result<usize, TransferError> {
        buf.clear();
        self.read_at_most(buf, CHUNK_BYTES)
    }

    /// Reads the next chunk (at most [`CHUNK_BYTES`]) onto the end of `frame` (behind
    /// a chunk header, so the data is not copied again); its length, 0 at the end of
    /// the file.
    pub fn append_chunk(&mut self, frame: &mut Vec<u8>) -> Result<usize, TransferError> {
        self.read_at_most(frame, CHUNK_BYTES)
    }

    /// The bytes sent in all and their SHA-256 (the file may have changed size while
    /// it was read: this is what was sent).
    pub fn finish(self) -> (u64, String) {
        (self.offset, hex(self.hasher))
    }

    /// Appends at most `want` bytes to `buf` (fewer only at the end of the file) and
    /// hashes them.
    fn read_at_most(&mut self, buf: &mut Vec<u8>, want: usize) -> Result<usize, TransferError> {
        let from = buf.len();
        let filled = self
            .file
            .read_at(self.offset, want, buf)
            .map_err(|e| TransferError::io(&self.path, e))?;
        self.hasher.update(&buf[from..]);
        self.offset += filled as u64;
        Ok(filled)
    }
}
