//! Files for the copy tests (`gsv cp`): varied contents, hashes, modes and mtimes,
//! and `gsv cp` run against a test gateway.

use super::Gateway;
use sha2::{Digest, Sha256};
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
