//! A file being sent: read chunk by chunk from where the copy stands, from the page
//! cache when the bytes are cached and straight from the disk when they are not
//! ([`crate::direct`]). The node reads a `get`'s file here.

use crate::direct::{self, Direct};
use std::fs::File;
use std::io;

/// A file read for a transfer.
#[derive(Debug)]
pub struct Sending {
    file: File,
    direct: Option<Direct>,
}

impl Sending {
    pub fn new(file: File) -> Sending {
        let direct = Direct::probe(&file);
        Sending { file, direct }
    }

    /// Whether reads of uncached bytes go straight to the disk.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// Appends up to `want` bytes at `offset` to `out`; how many, fewer only at the
    /// end of the file.
    pub fn read_at(&mut self, offset: u64, want: usize, out: &mut Vec<u8>) -> io::Result<usize> {
        if let Some(d) = &mut self.direct {
            // Cached bytes (a file written a moment ago) are cheaper from the cache.
            if d.whole(offset, want) >= direct::DIRECT_MIN && !d.is_cached(&self.file, offset, want)
            {
                match d.read_at(&self.file, offset, want, out) {
                    Ok(n) => return Ok(n),
                    Err(e) if direct::refused(&e) => {
                        tracing::debug!(error = %e, "direct read refused; reading through the page cache");
                        d.off(&self.file);
                        self.direct = None;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if let Some(d) = &mut self.direct {
            d.off(&self.file);
        }
        read_onto(&self.file, offset, want, out)
    }
}

/// Appends up to `want` bytes at `offset` to `out` through the page cache.
fn read_onto(file: &File, offset: u64, want: usize, out: &mut Vec<u8>) -> io::Result<usize> {
    let from = out.len();
    out.resize(from + want, 0);
    let mut n = 0;
    while n < want {
        match read_at(file, &mut out[from + n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                out.truncate(from);
                return Err(e);
            }
        }
    }
    out.truncate(from + n);
    Ok(n)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.read(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(17).wrapping_add(seed))
            .collect()
    }

    /// Reads the whole file from `start` in chunks the way a `get` does.
    fn read_all(s: &mut Sending, start: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = start;
        loop {
            let n = s
                .read_at(at, gsv_protocol::transfer::CHUNK_BYTES, &mut out)
                .expect("read");
            if n == 0 {
                return out;
            }
            at += n as u64;
        }
    }

    #[test]
    fn cached_and_uncached_files_read_back_whole_from_any_start() {
        let path = std::env::temp_dir().join(format!("gsv-sending-{}", std::process::id()));
        let chunk = gsv_protocol::transfer::CHUNK_BYTES;
        let data = pattern(3 * chunk + 5000, 7);
        std::fs::write(&path, &data).expect("write");
        let file = File::open(&path).expect("open");
        // Cached: it was just written.
        let mut s = Sending::new(file.try_clone().expect("clone"));
        assert!(read_all(&mut s, 0) == data);
        // Not cached: evicted after being written out.
        #[cfg(target_os = "linux")]
        {
            file.sync_all().expect("sync");
            let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
        }
        let mut s = Sending::new(file.try_clone().expect("clone"));
        assert!(read_all(&mut s, 0) == data);
        // From a resumed offset, on a unit and off one.
        let mut s = Sending::new(file.try_clone().expect("clone"));
        assert!(read_all(&mut s, chunk as u64) == data[chunk..]);
        let mut s = Sending::new(file);
        assert!(read_all(&mut s, 4097) == data[4097..]);
        let _ = std::fs::remove_file(&path);
    }

    /// A direct read the kernel refuses (off the filesystem's alignment) is read
    /// through the page cache instead, and so is everything after it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_refused_direct_read_falls_back_to_the_page_cache_for_good() {
        let path = std::env::temp_dir().join(format!("gsv-sending-refused-{}", std::process::id()));
        let data = pattern(3 * 65536 + 10, 4);
        std::fs::write(&path, &data).expect("write");
        let file = File::open(&path).expect("open");
        file.sync_all().expect("sync");
        let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
        let uncached = crate::direct::cached_pages(&file, 0, data.len() as u64) == Some(0);
        let Some(direct) = Direct::probe(&file).filter(|_| uncached) else {
            let _ = std::fs::remove_file(&path);
            // No direct I/O on this filesystem, or no way to see the file is not
            // cached (a kernel before 6.5): nothing would be read directly.
            return;
        };
        let mut s = Sending {
            file,
            direct: Some(direct.misaligned()),
        };
        let mut out = Vec::new();
        let n = s.read_at(1, 2 * 65536, &mut out).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(n, 2 * 65536);
        assert!(out == data[1..1 + n]);
        assert!(
            !s.is_direct(),
            "a refused direct read must turn direct I/O off"
        );
    }

    /// An uncached file read where the filesystem takes direct I/O stays out of the
    /// page cache.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_uncached_file_is_read_past_the_page_cache_where_the_filesystem_allows() {
        let path = std::env::temp_dir().join(format!("gsv-sending-direct-{}", std::process::id()));
        let data = pattern(4 * gsv_protocol::transfer::CHUNK_BYTES, 3);
        std::fs::write(&path, &data).expect("write");
        let file = File::open(&path).expect("open");
        file.sync_all().expect("sync");
        let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
        let before = crate::direct::cached_pages(&file, 0, data.len() as u64);
        let mut s = Sending::new(file.try_clone().expect("clone"));
        let direct = s.is_direct();
        assert!(read_all(&mut s, 0) == data);
        let after = crate::direct::cached_pages(&file, 0, data.len() as u64);
        let _ = std::fs::remove_file(&path);
        if let (true, Some(0), Some(after)) = (direct, before, after) {
            assert_eq!(
                after, 0,
                "direct reads left {after} pages in the page cache"
            );
        }
    }
}
