//! Direct I/O (`O_DIRECT`) on a transferred file, where the filesystem does it well.
//!
//! A transfer's bytes pass through the page cache twice over on a node: the kernel
//! copies each chunk into freshly allocated cache pages on the way in, and a file not
//! in the cache is read into fresh cache pages and copied again on the way out. On a
//! busy machine that copying costs more than anything else in a transfer (a profile of
//! `gsv bench transfer` on two cores has the node's writer at a whole core in
//! `copy_folio_from_iter_atomic`; BENCHMARKS.md), and it fills the cache with a file
//! nobody asked to keep there. The receiver syncs the whole file before renaming it
//! into place anyway, so the cache buys a transfer nothing.
//!
//! [`Direct`] moves whole alignment units between the disk and one aligned buffer the
//! transfer reuses. It is used only on local filesystems known to do direct I/O well
//! (ext4, XFS) that report their alignment (`statx` `STATX_DIOALIGN`, Linux 6.1): on a
//! network filesystem each direct write would be a synchronous round trip. Callers
//! fall back to ordinary reads and writes for what is not aligned, and for good when
//! the kernel refuses a direct one ([`refused`]).

use std::io;

/// Reads and writes shorter than this go through the page cache: a small file gains
/// nothing from skipping it, and a copy of many small files would wait on the disk
/// for each one.
pub const DIRECT_MIN: usize = 64 * 1024;

/// Whether `e` is the kernel refusing a direct read or write (alignment, or a
/// filesystem that does not do it after all): the caller goes on without.
pub fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(EINVAL)
}

#[cfg(target_os = "linux")]
const EINVAL: i32 = libc::EINVAL;
#[cfg(not(target_os = "linux"))]
const EINVAL: i32 = 22;

#[cfg(target_os = "linux")]
pub use linux::{cached_pages, Direct};
#[cfg(not(target_os = "linux"))]
pub use other::Direct;

#[cfg(target_os = "linux")]
mod linux {
    use rustix::fs::{AtFlags, OFlags, StatxFlags};
    use std::fs::File;
    use std::io;
    use std::os::unix::fs::FileExt;

    /// Memory alignment of the buffer (a page: at least what any local block device
    /// asks).
    const MEM_ALIGN: usize = 4096;
    /// Bytes the buffer holds: one protocol chunk.
    const BUF_BYTES: usize = gsv_protocol::transfer::CHUNK_BYTES;
    /// `statfs` magic numbers of the filesystems direct I/O is used on.
    const EXT4: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;

    /// Direct I/O on one file: its alignment, a reused aligned buffer, and whether the
    /// descriptor has `O_DIRECT` set now.
    #[derive(Debug)]
    pub struct Direct {
        align: usize,
        /// Holds an aligned [`BUF_BYTES`] region at `start`.
        buf: Vec<u8>,
        start: usize,
        on: bool,
    }

    impl Direct {
        /// Direct I/O for `file`, if its filesystem is one to use it on and says how it
        /// must be aligned.
        pub fn probe(file: &File) -> Option<Direct> {
            let fs = rustix::fs::fstatfs(file).ok()?;
            #[allow(clippy::unnecessary_cast)]
            let kind = fs.f_type as i64;
            if kind != EXT4 && kind != XFS {
                return None;
            }
            let st = rustix::fs::statx(file, "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN).ok()?;
            if st.stx_mask & StatxFlags::DIOALIGN.bits() == 0 {
                return None;
            }
            let (mem, offset) = (
                st.stx_dio_mem_align as usize,
                st.stx_dio_offset_align as usize,
            );
            if mem == 0 || offset == 0 || mem > MEM_ALIGN || offset > BUF_BYTES {
                return None;
            }
            let buf = vec![0u8; BUF_BYTES + MEM_ALIGN];
            let start = buf.as_ptr().align_offset(MEM_ALIGN);
            if start + BUF_BYTES > buf.len() {
                return None;
            }
            Some(Direct {
                align: offset.max(512),
                buf,
                start,
                on: false,
            })
        }

        /// The same with the alignment taken as one byte: its writes off the real
        /// alignment are refused by the kernel (tests of the fallback).
        #[cfg(test)]
        pub fn misaligned(mut self) -> Direct {
            self.align = 1;
            self
        }

        /// How many of `len` bytes at `offset` are whole alignment units: none if
        /// `offset` is not on one.
        pub fn whole(&self, offset: u64, len: usize) -> usize {
            if offset % self.align as u64 != 0 {
                return 0;
            }
            len / self.align * self.align
        }

        /// Writes `data` (a [`Direct::whole`] length) at `offset` straight to the disk.
        pub fn write_at(&mut self, file: &File, offset: u64, data: &[u8]) -> io::Result<()> {
            self.set(file, true)?;
            let mut done = 0usize;
            while done < data.len() {
                let n = (data.len() - done).min(BUF_BYTES);
                let buf = &mut self.buf[self.start..self.start + n];
                buf.copy_from_slice(&data[done..done + n]);
                file.write_all_at(buf, offset + done as u64)?;
                done += n;
            }
            Ok(())
        }

        /// Whether at least half of the `len` bytes at `offset` are in the page cache
        /// (then a copy from the cache is cheaper than going to the disk), asked
        /// without reading them: a read would start the kernel's read-ahead. A kernel
        /// that cannot say is taken to have them cached: the reads stay ordinary.
        pub fn is_cached(&self, file: &File, offset: u64, len: usize) -> bool {
            let pages = (len as u64).div_ceil(4096).max(1);
            cached_pages(file, offset, len as u64).is_none_or(|n| n * 2 >= pages)
        }

        /// Reads up to `want` bytes at `offset` (on an alignment unit) straight from
        /// the disk onto the end of `out`. Returns how many were read: fewer only at
        /// the end of the file.
        pub fn read_at(
            &mut self,
            file: &File,
            offset: u64,
            want: usize,
            out: &mut Vec<u8>,
        ) -> io::Result<usize> {
            let want = want.min(BUF_BYTES);
            self.set(file, true)?;
            // Whole units: the file's end may fall inside the last one.
            let len = want.div_ceil(self.align) * self.align;
            let len = len.min(BUF_BYTES);
            let buf = &mut self.buf[self.start..self.start + len];
            let n = read_direct(file, buf, offset, self.align)?.min(want);
            out.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        /// Back to the page cache for the next reads and writes (best effort: a
        /// descriptor that cannot be switched back fails its next call, which reports it).
        pub fn off(&mut self, file: &File) {
            let _ = self.set(file, false);
        }

        fn set(&mut self, file: &File, on: bool) -> io::Result<()> {
            if self.on == on {
                return Ok(());
            }
            let mut flags = rustix::fs::fcntl_getfl(file)?;
            flags.set(OFlags::DIRECT, on);
            rustix::fs::fcntl_setfl(file, flags)?;
            self.on = on;
            Ok(())
        }
    }

    /// `cachestat(2)` (Linux 6.5; the same number on every architecture).
    const SYS_CACHESTAT: libc::c_long = 451;

    /// Pages of the `len` bytes at `offset` in the page cache (`cachestat(2)`);
    /// `None` from a kernel without it.
    pub fn cached_pages(file: &File, offset: u64, len: u64) -> Option<u64> {
        #[repr(C)]
        struct Range {
            off: u64,
            len: u64,
        }
        #[repr(C)]
        #[derive(Default)]
        struct Stat {
            nr_cache: u64,
            nr_dirty: u64,
            nr_writeback: u64,
            nr_evicted: u64,
            nr_recently_evicted: u64,
        }
        use std::os::fd::AsRawFd;
        let range = Range { off: offset, len };
        let mut stat = Stat::default();
        // SAFETY: the descriptor is borrowed from a live `File`; the kernel reads
        // `range` and writes `stat`, both live, `repr(C)` and of the sizes it expects.
        let rc = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                file.as_raw_fd(),
                &range as *const Range,
                &mut stat as *mut Stat,
                0u32,
            )
        };
        (rc == 0).then_some(stat.nr_cache)
    }

    /// Reads with `O_DIRECT` until `buf` is full or the file ends (a read that stops
    /// off an alignment unit has reached it: the next one could not start there).
    fn read_direct(file: &File, buf: &mut [u8], offset: u64, align: usize) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match file.read_at(&mut buf[n..], offset + n as u64) {
                Ok(0) => break,
                Ok(k) => {
                    n += k;
                    if k % align != 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
}

#[cfg(not(target_os = "linux"))]
mod other {
    use std::fs::File;
    use std::io;

    /// No direct I/O off Linux: every read and write goes through the page cache.
    #[derive(Debug)]
    pub enum Direct {}

    impl Direct {
        pub fn probe(_file: &File) -> Option<Direct> {
            None
        }
        pub fn whole(&self, _offset: u64, _len: usize) -> usize {
            match *self {}
        }
        pub fn write_at(&mut self, _file: &File, _offset: u64, _data: &[u8]) -> io::Result<()> {
            match *self {}
        }
        pub fn is_cached(&self, _file: &File, _offset: u64, _len: usize) -> bool {
            match *self {}
        }
        pub fn read_at(
            &mut self,
            _file: &File,
            _offset: u64,
            _want: usize,
            _out: &mut Vec<u8>,
        ) -> io::Result<usize> {
            match *self {}
        }
        pub fn off(&mut self, _file: &File) {
            match *self {}
        }
    }
}
