//! The transfer engine on real files: a round trip, a corrupt chunk, a resumed copy,
//! bad chunk orders and confinement.

use super::*;
use crate::tools::paths::PathPolicy;
use gsv_protocol::transfer::FileMeta;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        let d =
            std::env::temp_dir().join(format!("gsv-transfer-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).expect("dir");
        Dir(d.canonicalize().expect("canonical"))
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Bytes that differ along the file, so a misplaced chunk shows.
fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

/// Everything `out` sends, written into `inc`; returns the sender's hash.
fn pump(out: &mut Outgoing, inc: &mut Incoming) -> String {
    let mut buf = Vec::new();
    loop {
        let at = out.offset();
        let n = out.next_chunk(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        inc.write(at, &buf).expect("write");
    }
    let sha = hex({
        let mut h = Sha256::new();
        h.update(std::fs::read(out.path()).expect("source"));
        h
    });
    sha
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".gsv-part-"))
        .collect()
}

#[test]
fn a_file_crosses_whole_with_its_mode_and_mtime() {
    let d = Dir::new();
    let src = d.0.join("src.bin");
    std::fs::write(&src, content(3 * 1024 * 1024 + 17)).expect("write");
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let policy = PathPolicy::new(&d.0, true);
    let mut out = Outgoing::open(&policy, "src.bin", 0).expect("open source");
    let meta = out.meta();
    assert_eq!((meta.size, meta.mode), (3 * 1024 * 1024 + 17, 0o750));
    let mut inc = Incoming::open(&policy, "sub/dst.bin", meta, None).expect("open target");
    assert_eq!(inc.offset(), 0);
    let sha = pump(&mut out, &mut inc);
    let (bytes, sent_sha) = out.finish();
    assert_eq!((bytes, sent_sha.as_str()), (meta.size, sha.as_str()));
    let (written, got) = inc.finish(&sha).expect("finish");
    assert_eq!((written, got), (meta.size, sha));
    let dst = d.0.join("sub/dst.bin");
    assert_eq!(
        std::fs::read(&dst).expect("read"),
        std::fs::read(&src).expect("read")
    );
    let dm = std::fs::metadata(&dst).expect("meta");
    assert_eq!(dm.permissions().mode() & 0o7777, 0o750);
    let sm = std::fs::metadata(&src).expect("meta");
    assert_eq!(
        dm.modified()
            .expect("mtime")
            .duration_since(std::time::UNIX_EPOCH)
            .expect("epoch")
            .as_millis(),
        sm.modified()
            .expect("mtime")
            .duration_since(std::time::UNIX_EPOCH)
            .expect("epoch")
            .as_millis(),
    );
    assert!(leftovers(&d.0.join("sub")).is_empty());
}

#[test]
fn a_corrupt_chunk_is_caught_and_nothing_is_put_in_place() {
    let d = Dir::new();
    std::fs::write(d.0.join("dst"), b"the old content").expect("old");
    let data = content(100_000);
    let sha = hex({
        let mut h = Sha256::new();
        h.update(&data);
        h
    });
    let policy = PathPolicy::new(&d.0, false);
    let meta = FileMeta {
        size: data.len() as u64,
        mode: 0o644,
        mtime_ms: 0,
    };
    let mut inc = Incoming::open(&policy, "dst", meta, None).expect("open");
    let mut bad = data.clone();
    bad[50_000] ^= 1;
    inc.write(0, &bad).expect("write");
    let e = inc.finish(&sha).expect_err("corrupt");
    assert!(matches!(e, TransferError::Corrupt { .. }), "{e}");
    assert_eq!(e.code(), gsv_protocol::ErrorCode::InvalidArgs);
    assert_eq!(
        std::fs::read(d.0.join("dst")).expect("old"),
        b"the old content"
    );
    assert!(leftovers(&d.0).is_empty(), "the partial file is removed");
}

#[test]
fn an_interrupted_copy_resumes_where_it_stopped() {
    let d = Dir::new();
    let data = content(2 * 1024 * 1024 + 5);
    let sha = hex({
        let mut h = Sha256::new();
        h.update(&data);
        h
    });
    let policy = PathPolicy::new(&d.0, true);
    let meta = FileMeta {
        size: data.len() as u64,
        mode: 0o600,
        mtime_ms: 1_700_000_000_123,
    };
    let half = 1024 * 1024 + 3;
    {
        let mut inc = Incoming::open(&policy, "f", meta, Some(sha.clone())).expect("open");
        inc.write(0, &data[..half]).expect("first half");
        // The link drops: the Incoming goes away without finish.
    }
    assert_eq!(leftovers(&d.0).len(), 1);
    let mut inc = Incoming::open(&policy, "f", meta, Some(sha.clone())).expect("reopen");
    assert_eq!(inc.offset(), half as u64, "resumes after the bytes held");
    inc.write(half as u64, &data[half..]).expect("rest");
    inc.finish(&sha).expect("finish");
    assert_eq!(std::fs::read(d.0.join("f")).expect("read"), data);
    assert!(leftovers(&d.0).is_empty());

    // Another file for the same target (another size) does not take that partial up.
    let other = FileMeta { size: 10, ..meta };
    let inc = Incoming::open(&policy, "f", other, None).expect("open");
    assert_eq!(inc.offset(), 0);
    inc.discard();
    assert!(leftovers(&d.0).is_empty());
}

#[test]
fn chunks_out_of_order_too_long_or_missing_are_refused() {
    let d = Dir::new();
    let policy = PathPolicy::new(&d.0, true);
    let meta = FileMeta {
        size: 10,
        mode: 0,
        mtime_ms: 0,
    };
    let mut inc = Incoming::open(&policy, "f", meta, None).expect("open");
    assert!(matches!(
        inc.write(5, b"x"),
        Err(TransferError::OutOfOrder {
            expected: 0,
            got: 5
        })
    ));
    assert!(matches!(
        inc.write(0, &[0u8; 11]),
        Err(TransferError::TooLong { .. })
    ));
    inc.write(0, b"12345").expect("write");
    // A second copy of the same file at once is refused while this one holds it.
    let e = Incoming::open(&policy, "f", meta, None)
        .err()
        .expect("busy");
    assert!(e.to_string().contains("in progress"), "{e}");
    let e = inc.finish("00").expect_err("short");
    assert!(
        matches!(e, TransferError::Short { size: 10, got: 5 }),
        "{e}"
    );
    assert!(!d.0.join("f").exists());
}

#[test]
fn confinement_applies_both_ways() {
    let d = Dir::new();
    let ws = d.0.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(d.0.join("secret"), b"s").expect("secret");
    std::os::unix::fs::symlink(d.0.join("secret"), ws.join("link")).expect("symlink");
    let policy = PathPolicy::new(&ws, true);
    for arg in ["../secret", "link", "/etc/hostname"] {
        let e = Outgoing::open(&policy, arg, 0).err().expect("refused");
        assert_eq!(e.code(), gsv_protocol::ErrorCode::Forbidden, "{arg}: {e}");
    }
    let meta = FileMeta {
        size: 1,
        mode: 0,
        mtime_ms: 0,
    };
    for arg in ["../planted", "link", "/tmp/gsv-planted"] {
        let e = Incoming::open(&policy, arg, meta, None)
            .err()
            .expect("refused");
        assert_eq!(e.code(), gsv_protocol::ErrorCode::Forbidden, "{arg}: {e}");
    }
    assert_eq!(std::fs::read(d.0.join("secret")).expect("secret"), b"s");
    // A directory is not a file to copy over, nor one to send.
    std::fs::create_dir_all(ws.join("dir")).expect("dir");
    assert!(matches!(
        Outgoing::open(&policy, "dir", 0),
        Err(TransferError::NotAFile { .. })
    ));
    assert!(matches!(
        Incoming::open(&policy, "dir", meta, None),
        Err(TransferError::NotAFile { .. })
    ));
    let e = Outgoing::open(&policy, "missing", 0)
        .err()
        .expect("missing");
    assert_eq!(e.code(), gsv_protocol::ErrorCode::NotFound, "{e}");
}

#[test]
fn a_resumed_send_hashes_the_whole_file() {
    let d = Dir::new();
    let data = content(1_500_000);
    std::fs::write(d.0.join("f"), &data).expect("write");
    let policy = PathPolicy::new(&d.0, false);
    let mut out = Outgoing::open(&policy, "f", 1_000_000).expect("open");
    assert_eq!(out.offset(), 1_000_000);
    let mut buf = Vec::new();
    let n = out.next_chunk(&mut buf).expect("read");
    assert_eq!(&buf[..n], &data[1_000_000..]);
    let (bytes, sha) = out.finish();
    let whole = hex({
        let mut h = Sha256::new();
        h.update(&data);
        h
    });
    assert_eq!((bytes, sha), (1_500_000, whole));
}
