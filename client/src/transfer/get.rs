//! `get`: a node's file streamed into a partial file beside the local target, checked
//! against the node's SHA-256, then given its mode and mtime and renamed into place.

use super::get_writer::{Refused, Writer};
use super::partial::{self, Found};
use super::{hex, io_error, Inbound};
use crate::{AgentClient, ClientError};
use gsv_files::Received;
use gsv_protocol::file_mode::safe_mode;
use gsv_protocol::transfer::{Credit, Direction, FileMeta, Finished, CHUNK_BYTES};
use gsv_protocol::Method;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Credit the node every time this many bytes were written (and at the end).
const CREDIT_EVERY: u64 = CHUNK_BYTES as u64;

impl AgentClient {
    /// Copies `remote` on `node` to the local path `local` (an existing directory:
    /// into it, under the remote name). The bytes go to a partial file beside the
    /// target; once the node has sent them all, their SHA-256 is checked against the
    /// node's, the file gets the remote mode and mtime, is synced and renamed into
    /// place. A partial file of an earlier copy of the same, unchanged remote file is
    /// resumed. `progress(done, total)` is called as bytes arrive. Dropping the future
    /// cancels the copy (the partial file is kept for the next try).
    pub async fn get_file(
        &self,
        node: &str,
        remote: &str,
        local: &Path,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<Finished, ClientError> {
        let target = local_target(local, remote);
        let dir = partial::dir_of(&target);
        if !dir.is_dir() {
            return Err(ClientError::Io {
                path: dir.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such directory to copy into",
                ),
            });
        }
        let earlier = pick_partial(partial::find(&target, node, remote));
        let offset = earlier.as_ref().map_or(0, |f| f.len.min(f.size));
        let mut t = self
            .open_transfer(node, remote, Direction::Get, None, offset, &target)
            .await?;
        let meta = t.result.meta;
        let resumable = earlier
            .as_ref()
            .is_some_and(|f| f.size == meta.size && f.mtime_ms == meta.mtime_ms)
            && t.result.offset <= offset;
        if !resumable && t.result.offset > 0 {
            // The remote file changed since the partial copy: start over.
            drop(t);
            if let Some(f) = &earlier {
                let _ = std::fs::remove_file(&f.path);
            }
            t = self
                .open_transfer(node, remote, Direction::Get, None, 0, &target)
                .await?;
        } else if !resumable {
            if let Some(f) = &earlier {
                let _ = std::fs::remove_file(&f.path);
            }
        }
        let meta = t.result.meta;
        let id = t.result.id;
        let start = t.result.offset;
        let part_path = partial::path_for(&target, node, remote, meta.size, meta.mtime_ms);
        let (file, mut hasher) = open_part(&part_path, start).map_err(io_error(&part_path))?;
        let mut writer = Writer::start(Received::new(file, start)).map_err(io_error(&part_path))?;
        // `pos`: received, hashed and handed to the writer; `written`: on disk.
        let (mut pos, mut written) = (start, start);
        let mut uncredited = 0u64;
        progress(pos, meta.size);
        let end = loop {
            tokio::select! {
                biased;
                done = writer.written() => {
                    let n = match done {
                        Some(Ok(n)) => n,
                        Some(Err(e)) => return Err(io_error(&part_path)(e)),
                        None => return Err(io_error(&part_path)(std::io::Error::other(
                            "the file's writing thread ended",
                        ))),
                    };
                    written += n;
                    uncredited += n;
                    progress(written, meta.size.max(written));
                    if uncredited >= CREDIT_EVERY || written >= meta.size {
                        self.send_unanswered(
                            Method::TransferCredit,
                            &Credit {
                                id,
                                bytes: uncredited,
                            },
                        )
                        .await?;
                        uncredited = 0;
                    }
                }
                inbound = t.next() => match inbound? {
                    Inbound::Chunk { offset, data } => {
                        if offset != pos {
                            return Err(ClientError::Protocol(format!(
                                "chunk at offset {offset}, expected {pos}"
                            )));
                        }
                        pos += data.len() as u64;
                        hasher.update(&data);
                        if let Err(refused) = writer.push(offset, data) {
                            return Err(match refused {
                                Refused::Overflow => ClientError::Protocol(
                                    "the node sent more than its window".into(),
                                ),
                                Refused::Stopped => io_error(&part_path)(std::io::Error::other(
                                    "the file's writing thread ended",
                                )),
                            });
                        }
                    }
                    Inbound::End(f) => break f,
                    Inbound::Failed(e) => return Err(ClientError::Remote(e)),
                    Inbound::Credit(_) => {}
                },
            }
        };
        let file = writer.finish().await.map_err(io_error(&part_path))?;
        t.done();
        drop(t);
        if end.bytes != pos || end.sha256 != hex(hasher) {
            drop(file);
            let _ = std::fs::remove_file(&part_path);
            return Err(ClientError::Integrity(format!(
                "{node}:{remote}: received {pos} bytes that do not match what the node sent ({} bytes, SHA-256 {}); nothing was written, copy it again",
                end.bytes, end.sha256
            )));
        }
        place(file.into_file(), &part_path, &target, meta).map_err(io_error(&target))?;
        let path = std::path::absolute(&target).unwrap_or(target);
        Ok(Finished {
            path: path.display().to_string(),
            ..end
        })
    }
}

/// Where the file lands: `local`, or `local/NAME` when `local` is a directory.
pub(crate) fn local_target(local: &Path, remote: &str) -> PathBuf {
    let ends_in_slash = local.as_os_str().to_string_lossy().ends_with('/');
    if local.is_dir() || ends_in_slash {
        let name = remote.rsplit('/').next().unwrap_or(remote);
        local.join(name)
    } else {
        local.to_owned()
    }
}

/// The partial file to resume from, if any (the longest); the others, and one longer
/// than the file it claims to copy, are stale and removed.
fn pick_partial(mut found: Vec<Found>) -> Option<Found> {
    found.sort_by_key(|f| std::cmp::Reverse(f.len));
    let mut found = found.into_iter();
    let best = found.next()?;
    for stale in found {
        let _ = std::fs::remove_file(&stale.path);
    }
    if best.len > best.size {
        let _ = std::fs::remove_file(&best.path);
        return None;
    }
    Some(best)
}

/// Opens the partial file, keeps its first `start` bytes (hashed) and drops any
/// beyond, ready to append.
fn open_part(path: &Path, start: u64) -> std::io::Result<(File, Sha256)> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    // Nobody else reads a file before it is whole; it gets its own mode at the end.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    let held = file.metadata()?.len();
    if held < start {
        return Err(std::io::Error::other(format!(
            "the partial file holds {held} bytes, fewer than the {start} to resume from"
        )));
    }
    file.set_len(start)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut pos = 0u64;
    file.seek(SeekFrom::Start(0))?;
    while pos < start {
        let want = (start - pos).min(CHUNK_BYTES as u64) as usize;
        let n = super::put::read_full(&mut file, &mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::other("the partial file shrank"));
        }
        hasher.update(&buf[..n]);
        pos += n as u64;
    }
    file.seek(SeekFrom::Start(start))?;
    Ok((file, hasher))
}

/// Gives the received file its mode and mtime, syncs it and renames it over `target`.
fn place(file: File, part: &Path, target: &Path, meta: FileMeta) -> std::io::Result<()> {
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_millis(meta.mtime_ms);
    file.set_times(std::fs::FileTimes::new().set_modified(mtime))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(safe_mode(meta.mode, false)))?;
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(part, target)?;
    if let Ok(dir) = File::open(partial::dir_of(target)) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_local_directory_takes_the_remote_name() {
        let dir = std::env::temp_dir();
        assert_eq!(local_target(&dir, "logs/app.log"), dir.join("app.log"));
        assert_eq!(
            local_target(Path::new("out/x.log"), "logs/app.log"),
            PathBuf::from("out/x.log")
        );
    }

    #[test]
    fn the_longest_partial_file_is_resumed_and_stale_ones_removed() {
        let dir = std::env::temp_dir().join(format!("gsv-pick-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let found = |name: &str, len: usize, size: u64| {
            let path = dir.join(name);
            std::fs::write(&path, vec![0u8; len]).expect("write");
            Found {
                path,
                size,
                mtime_ms: 1,
                len: len as u64,
            }
        };
        let short = found("a", 2, 10);
        let long = found("b", 5, 10);
        let picked = pick_partial(vec![short.clone(), long.clone()]);
        assert_eq!(picked, Some(long.clone()));
        assert!(!short.path.exists() && long.path.exists());
        // Longer than the file it claims to copy: not a copy of it.
        let over = found("c", 12, 10);
        assert_eq!(pick_partial(vec![over.clone()]), None);
        assert!(!over.path.exists());
        assert_eq!(pick_partial(Vec::new()), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_resumed_partial_file_keeps_and_hashes_its_first_bytes() {
        let dir = std::env::temp_dir().join(format!("gsv-part-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join(".x.gsv-part");
        std::fs::write(&p, b"hello world").expect("write");
        let (mut f, h) = open_part(&p, 5).expect("open");
        f.write_all(b"!").expect("append");
        drop(f);
        assert_eq!(std::fs::read(&p).expect("read"), b"hello!");
        let mut expect = Sha256::new();
        expect.update(b"hello");
        assert_eq!(hex(h), hex(expect));
        assert!(open_part(&p, 100).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
