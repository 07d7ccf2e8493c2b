//! A file being received: its chunks written in order as they land, the large aligned
//! ones straight to the disk ([`crate::direct`]), the rest through the page cache
//! with their write-out started early ([`Writeback`]). Both ends that receive a
//! transfer write here: the node for a `put`, `gsv cp` for a `get`.

use crate::direct;
use crate::Writeback;
use std::fs::File;
use std::io;

/// A received file and how its next bytes are written.
#[derive(Debug)]
pub struct Received {
    file: File,
    writeback: Writeback,
    direct: Option<direct::Direct>,
}

impl Received {
    /// The file `file`, whose bytes from `offset` on are about to be written (the
    /// start of a resumed copy; what came before was written by an earlier one).
    pub fn new(file: File, offset: u64) -> Received {
        let direct = direct::Direct::probe(&file);
        Received {
            file,
            writeback: Writeback::from(offset),
            direct,
        }
    }

    /// The same, never with direct I/O.
    pub fn buffered(file: File, offset: u64) -> Received {
        Received {
            file,
            writeback: Writeback::from(offset),
            direct: None,
        }
    }

    /// Whether large aligned writes go straight to the disk.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// Writes `data` at `offset` (the file's end so far).
    pub fn write_at(&mut self, mut offset: u64, mut data: &[u8]) -> io::Result<()> {
        if let Some(d) = &mut self.direct {
            let whole = d.whole(offset, data.len());
            if whole >= direct::DIRECT_MIN {
                match d.write_at(&self.file, offset, &data[..whole]) {
                    Ok(()) => {
                        offset += whole as u64;
                        data = &data[whole..];
                        // Nothing of it waits in the page cache.
                        self.writeback = Writeback::from(offset);
                    }
                    Err(e) if direct::refused(&e) => {
                        tracing::debug!(error = %e, "direct write refused; writing through the page cache");
                        d.off(&self.file);
                        self.direct = None;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if data.is_empty() {
            return Ok(());
        }
        if let Some(d) = &mut self.direct {
            d.off(&self.file);
        }
        write_all_at(&self.file, data, offset)?;
        self.writeback.wrote(&self.file, offset + data.len() as u64);
        Ok(())
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// The file, back to ordinary (page cache) access.
    pub fn into_file(mut self) -> File {
        if let Some(d) = &mut self.direct {
            d.off(&self.file);
        }
        self.file
    }
}

#[cfg(unix)]
fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, data, offset)
}

#[cfg(not(unix))]
fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.write_all(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary file path of its own for one test.
    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("gsv-received-{}-{name}", std::process::id()))
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn open(path: &std::path::Path) -> File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("open")
    }

    #[test]
    fn chunks_a_tail_and_a_resumed_unaligned_start_all_land_where_they_belong() {
        let path = temp("mixed");
        let chunk = gsv_protocol::transfer::CHUNK_BYTES;
        let a = pattern(chunk, 1);
        let b = pattern(chunk, 2);
        let tail = pattern(1234, 3);
        let mut r = Received::new(open(&path), 0);
        r.write_at(0, &a).expect("first chunk");
        r.write_at(chunk as u64, &b).expect("second chunk");
        r.write_at(2 * chunk as u64, &tail).expect("tail");
        let file = r.into_file();
        file.sync_all().expect("sync");
        drop(file);
        // A resumed copy starts where the partial file ends: not on a unit.
        let end = (2 * chunk + tail.len()) as u64;
        let more = pattern(3 * 4096 + 100, 4);
        let mut r = Received::new(open(&path), end);
        r.write_at(end, &more).expect("resumed chunk");
        drop(r.into_file());
        let got = std::fs::read(&path).expect("read back");
        let _ = std::fs::remove_file(&path);
        let want: Vec<u8> = [a, b, tail, more].concat();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the file's bytes differ from what was written");
    }

    #[test]
    fn a_buffered_writer_writes_the_same_bytes() {
        let path = temp("buffered");
        let data = pattern(300_000, 9);
        let mut r = Received::buffered(open(&path), 0);
        assert!(!r.is_direct());
        r.write_at(0, &data).expect("write");
        drop(r.into_file());
        let got = std::fs::read(&path).expect("read back");
        let _ = std::fs::remove_file(&path);
        assert!(got == data);
    }

    /// A direct write the kernel refuses (here: off the filesystem's alignment) is
    /// written through the page cache instead, and so is everything after it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_refused_direct_write_falls_back_to_the_page_cache_for_good() {
        let path = temp("refused");
        let file = open(&path);
        let Some(direct) = direct::Direct::probe(&file) else {
            let _ = std::fs::remove_file(&path);
            return; // no direct I/O on this filesystem: nothing to refuse
        };
        let mut r = Received {
            file,
            writeback: Writeback::from(0),
            direct: Some(direct.misaligned()),
        };
        let head = pattern(1, 6);
        let body = pattern(200_000, 7);
        r.write_at(0, &head).expect("one byte, buffered");
        assert!(r.is_direct());
        r.write_at(1, &body).expect("refused direct, then buffered");
        assert!(
            !r.is_direct(),
            "a refused direct write must turn direct I/O off"
        );
        drop(r.into_file());
        let got = std::fs::read(&path).expect("read back");
        let _ = std::fs::remove_file(&path);
        assert!(got == [head, body].concat());
    }

    /// Where the filesystem takes direct I/O, large aligned writes leave nothing in
    /// the page cache (the point of them); elsewhere this only checks the bytes.
    #[cfg(target_os = "linux")]
    #[test]
    fn direct_writes_bypass_the_page_cache_where_the_filesystem_allows() {
        let path = temp("bypass");
        let chunk = gsv_protocol::transfer::CHUNK_BYTES;
        let data = pattern(4 * chunk, 5);
        let mut r = Received::new(open(&path), 0);
        let direct = r.is_direct();
        for (i, part) in data.chunks(chunk).enumerate() {
            r.write_at((i * chunk) as u64, part).expect("write");
        }
        let file = r.into_file();
        let cached = crate::direct::cached_pages(&file, 0, data.len() as u64);
        drop(file);
        let got = std::fs::read(&path).expect("read back");
        let _ = std::fs::remove_file(&path);
        assert!(got == data);
        if direct {
            if let Some(cached) = cached {
                assert_eq!(
                    cached, 0,
                    "direct writes left {cached} pages in the page cache"
                );
            }
        }
    }
}
