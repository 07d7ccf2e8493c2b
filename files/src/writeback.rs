//! Starting a received file's write-out to disk while it is still arriving.
//!
//! Both ends that receive a transfer (the node for a `put`, `gsv cp` for a `get`) sync
//! the finished file before renaming it into place, so that a crash never leaves a
//! renamed but empty file. Left alone, the kernel writes a fast transfer's pages out
//! only when that final sync asks for them: a 1 GiB file then waits some half a second
//! at its end for a disk that sat idle while the bytes came in. [`Writeback`] asks the
//! kernel to start writing each span of [`SPAN`] bytes as soon as it is written
//! (`sync_file_range(SYNC_FILE_RANGE_WRITE)`: it starts the write, it does not wait
//! for it), so the disk works alongside the network and the final sync finds little
//! left to do. It is advice only: an error is ignored (the final sync still decides),
//! and on systems without `sync_file_range` it does nothing.

use std::fs::File;

/// Bytes written before their write-out is started.
pub const SPAN: u64 = 8 * 1024 * 1024;

/// Where a received file's write-out has been started up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writeback {
    started: u64,
}

impl Writeback {
    /// A file whose bytes from `offset` on are about to be written (the start of a
    /// resumed copy; what came before was written by an earlier one).
    pub fn from(offset: u64) -> Writeback {
        Writeback { started: offset }
    }

    /// The file now holds its bytes up to `end`: once a whole span is written past the
    /// last start, starts writing that span out.
    pub fn wrote(&mut self, file: &File, end: u64) {
        if end < self.started.saturating_add(SPAN) {
            return;
        }
        start_write(file, self.started, end - self.started);
        self.started = end;
    }

    /// Where write-out was last started.
    pub fn started(&self) -> u64 {
        self.started
    }
}

#[cfg(target_os = "linux")]
fn start_write(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: the descriptor is borrowed from a live `File` for the call; the kernel
    // reads only the integers passed.
    let rc = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    if rc != 0 {
        tracing::trace!(error = %std::io::Error::last_os_error(), "sync_file_range");
    }
}

#[cfg(not(target_os = "linux"))]
fn start_write(_file: &File, _offset: u64, _len: u64) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_span_is_started_once_it_is_whole() {
        let dir = std::env::temp_dir().join(format!("gsv-writeback-{}", std::process::id()));
        let mut file = File::create(&dir).expect("temp file");
        let mut wb = Writeback::from(0);
        let block = vec![7u8; 1024 * 1024];
        let mut end = 0u64;
        for _ in 0..20 {
            file.write_all(&block).expect("write");
            end += block.len() as u64;
            wb.wrote(&file, end);
            assert!(wb.started() <= end);
            assert!(end - wb.started() < SPAN, "a whole span waited: {end}");
        }
        assert_eq!(wb.started(), 16 * 1024 * 1024);
        let mut resumed = Writeback::from(5);
        resumed.wrote(&file, SPAN);
        assert_eq!(
            resumed.started(),
            5,
            "less than a span since the resume point"
        );
        resumed.wrote(&file, SPAN + 5);
        assert_eq!(resumed.started(), SPAN + 5);
        drop(file);
        let _ = std::fs::remove_file(&dir);
    }
}
