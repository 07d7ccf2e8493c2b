//! Files for the copy tests (`gsv cp`): varied contents, hashes, modes and mtimes,
//! and `gsv cp` run against a test gateway.

use super::Gateway;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// `n` bytes that vary (xorshift), so a misplaced chunk changes the hash.
pub fn varied(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

pub fn sha(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn mtime_ms(path: &Path) -> u64 {
    std::fs::metadata(path)
        .expect("stat")
        .modified()
        .expect("mtime")
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64
}

pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
}

/// Writes `data` to `path` with mode `mode` and mtime `mtime` (ms).
pub fn write_file(path: &Path, data: &[u8], mode: u32, mtime: u64) {
    std::fs::write(path, data).expect("write");
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    f.set_times(std::fs::FileTimes::new().set_modified(UNIX_EPOCH + Duration::from_millis(mtime)))
        .expect("set mtime");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `gsv cp ARGS... --token TOKEN` against `gw`: (exit code, stdout, stderr).
pub async fn cp(gw: &Gateway, token: &str, args: &[&str]) -> (i32, String, String) {
    let mut all: Vec<String> = vec!["cp".into()];
    all.extend(args.iter().map(|a| a.to_string()));
    all.push("--token".into());
    all.push(token.into());
    let gw_args: Vec<&str> = all.iter().map(String::as_str).collect();
    let (code, out, err) = tokio::task::block_in_place(|| gw.cli(&gw_args));
    (code, out, err)
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

const MIB: u64 = 1024 * 1024;

/// Writes `size` bytes that vary (an xorshift block, every 4 KiB of each MiB stamped
/// with the MiB's number, so a misplaced chunk changes the hash) to `path`, a MiB at
/// a time; their SHA-256.
pub fn write_varied(path: &Path, size: u64, seed: u64) -> String {
    let mut x = seed | 1;
    let mut block = Vec::with_capacity(MIB as usize);
    while block.len() < MIB as usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        block.extend_from_slice(&x.to_le_bytes());
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut hasher = Sha256::new();
    let mut left = size;
    let mut piece = 0u64;
    let mut buf = block.clone();
    while left > 0 {
        let stamp = (piece ^ seed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .to_le_bytes();
        for at in (0..buf.len()).step_by(4096) {
            buf[at..at + 8].copy_from_slice(&stamp);
        }
        let n = left.min(MIB) as usize;
        if let Err(e) = f.write_all(&buf[..n]) {
            panic!("writing {}: {e}; {}", path.display(), free_space(path));
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
        piece += 1;
    }
    if let Err(e) = f.flush() {
        panic!("writing {}: {e}; {}", path.display(), free_space(path));
    }
    hex(hasher)
}

/// What `df` says of the disk under `path`, for a failure message (a full CI disk
/// reads as a write error otherwise).
fn free_space(path: &Path) -> String {
    let dir = path.parent().unwrap_or(path);
    match std::process::Command::new("df").arg("-h").arg(dir).output() {
        Ok(o) => format!("df: {}", String::from_utf8_lossy(&o.stdout).trim()),
        Err(e) => format!("df could not run: {e}"),
    }
}

/// Lower-case hex of a finished SHA-256.
pub fn hex(h: Sha256) -> String {
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a file, read a MiB at a time.
pub fn sha_file(path: &Path) -> String {
    let mut f = std::fs::File::open(path).expect("open");
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; MIB as usize];
    loop {
        let n = f.read(&mut buf).expect("read");
        if n == 0 {
            return hex(hasher);
        }
        hasher.update(&buf[..n]);
    }
}
