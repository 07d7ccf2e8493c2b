//! The `gsv` binary's allocator settings take effect: mimalloc's arena is committed on
//! demand, which needs the option set before mimalloc reserves its first arena while
//! the process loads (src/allocator.rs). With eager commit the gateway holds about
//! 10 KiB more per connected node at 1,000 nodes (BENCHMARKS.md, memory). The
//! constructor that sets it is Linux-only (an ELF `.init_array` entry).
#![cfg(target_os = "linux")]

use std::process::Command;

#[test]
fn arena_eager_commit_is_off_from_process_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_gsv"))
        .arg("--version")
        .env("MIMALLOC_VERBOSE", "1")
        .output()
        .expect("run gsv --version");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // mimalloc prints every option as it initializes (before main), then reserves
    // its first arena; the option must already read 0 there.
    assert!(
        stderr.contains("option 'arena_eager_commit': 0"),
        "mimalloc did not start with eager arena commit off:\n{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("gsv "),
        "{out:?}"
    );
}
