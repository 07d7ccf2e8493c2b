//! `put`: a local file streamed to a node, hashed as it is read.

use super::{hex, io_error, Inbound, Window};
use crate::{AgentClient, ClientError};
use gsv_files::Sending;
use gsv_protocol::transfer::{
    Chunk, Direction, FileMeta, FinishParams, Finished, CHUNK_BYTES, HEADER_BYTES,
};
use gsv_protocol::Method;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::path::Path;

impl AgentClient {
    /// Copies the local file `local` to `remote` on `node` (relative: the node's
    /// workspace; ending in `/`: into that directory, under the local name). Its mode
    /// and mtime are kept; the node checks the SHA-256 before it puts the file in
    /// place. When the node holds part of an earlier, interrupted copy of the same file
    /// the copy resumes there. `progress(done, total)` is called as bytes go out.
    /// Dropping the future cancels the copy on the node (its partial file is kept).
    pub async fn put_file(
        &self,
        node: &str,
        local: &Path,
        remote: &str,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<Finished, ClientError> {
        let mut file = File::open(local).map_err(io_error(local))?;
        let meta = local_meta(&file).map_err(io_error(local))?;
        let target = remote_target(remote, local);
        let mut t = self
            .open_transfer(node, &target, Direction::Put, Some(meta), 0, local)
            .await?;
        let id = t.result.id;
        let size = meta.size;
        let changed = || {
            ClientError::Integrity(format!(
                "{} changed while it was copied (it was {size} bytes); copy it again",
                local.display()
            ))
        };
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; CHUNK_BYTES];
        // The node holds the first `offset` bytes already: hash them, send the rest.
        let start = t.result.offset.min(size);
        let mut pos = 0u64;
        while pos < start {
            let want = (start - pos).min(CHUNK_BYTES as u64) as usize;
            let n = read_full(&mut file, &mut buf[..want]).map_err(io_error(local))?;
            if n < want {
                return Err(t.discarding(changed()));
            }
            hasher.update(&buf[..n]);
            pos += n as u64;
            tokio::task::yield_now().await;
        }
        progress(pos, size);
        // Uncached bytes are read straight from the disk ([`Sending`]).
        let mut file = Sending::new(file);
        let mut window = Window::default();
        while pos < size {
            while window.room() == 0 {
                let m = t.next().await?;
                take(&mut window, m)?;
            }
            let want = (size - pos).min(window.room()).min(CHUNK_BYTES as u64) as usize;
            // The data is read straight into the frame, behind its header.
            let mut frame = Vec::with_capacity(HEADER_BYTES + want);
            frame.extend_from_slice(&Chunk::header(id, pos));
            let n = file
                .read_at(pos, want, &mut frame)
                .map_err(io_error(local))?;
            if n < want {
                return Err(t.discarding(changed()));
            }
            hasher.update(&frame[HEADER_BYTES..]);
            self.send_binary(frame).await?;
            window.sent(n as u64);
            pos += n as u64;
            progress(pos, size);
            while let Some(m) = t.try_next() {
                take(&mut window, m)?;
            }
        }
        // Nothing more to read, or the file grew.
        if file
            .read_at(size, 1, &mut Vec::new())
            .map_err(io_error(local))?
            != 0
        {
            return Err(t.discarding(changed()));
        }
        while !window.settled() {
            let m = t.next().await?;
            take(&mut window, m)?;
        }
        let raw = self
            .request(
                Method::TransferFinish,
                &FinishParams {
                    id,
                    sha256: hex(hasher),
                },
            )
            .await;
        // Once finish was answered there is nothing left to cancel; a failed finish
        // already ended the transfer on the node.
        if matches!(&raw, Ok(_) | Err(ClientError::Remote(_))) {
            t.done();
        }
        let finished: Finished = serde_json::from_str(raw?.get())
            .map_err(|e| ClientError::Protocol(format!("bad transfer.finish result: {e}")))?;
        Ok(finished)
    }
}

/// One message while sending: credit opens the window; a failure ends the copy.
fn take(window: &mut Window, m: Inbound) -> Result<(), ClientError> {
    match m {
        Inbound::Credit(n) => {
            if !window.credit(n) {
                tracing::debug!(n, "credit beyond the bytes sent");
            }
            Ok(())
        }
        Inbound::Failed(e) => Err(ClientError::Remote(e)),
        Inbound::Chunk { .. } | Inbound::End(_) => Err(ClientError::Protocol(
            "the gateway sent file data for a copy to the node".into(),
        )),
    }
}

/// Where the file goes on the node: `remote`, or `remote` + the local name when it
/// names a directory (ends in `/`).
pub(crate) fn remote_target(remote: &str, local: &Path) -> String {
    if remote.is_empty() || remote.ends_with('/') {
        let name = local
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("{remote}{name}")
    } else {
        remote.to_owned()
    }
}

/// Size, permission bits and mtime of an open local file (a regular file only).
fn local_meta(file: &File) -> std::io::Result<FileMeta> {
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        md.permissions().mode() & 0o7777
    };
    #[cfg(not(unix))]
    let mode = if md.permissions().readonly() {
        0o444
    } else {
        0o644
    };
    let mtime_ms = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    Ok(FileMeta {
        size: md.len(),
        mode,
        mtime_ms,
    })
}

/// Reads until `buf` is full or the file ends; the bytes read.
pub(crate) fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_directory_takes_the_local_name() {
        let local = Path::new("/tmp/x/report.pdf");
        assert_eq!(remote_target("docs/", local), "docs/report.pdf");
        assert_eq!(remote_target("", local), "report.pdf");
        assert_eq!(remote_target("docs/r.pdf", local), "docs/r.pdf");
    }
}
