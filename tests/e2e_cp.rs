//! End to end: `gsv cp` between this machine and a node, through a real gateway and
//! node on loopback: 64 MiB each way with hashes, mode and mtime kept, `--json`, a
//! resumed and a corrupt partial copy, the token's Read/Write policy, `--confine`, a
//! missing file, and the operands this slice refuses.

mod common;

use common::files::{cp, mode, mtime_ms, s, sha, varied, write_file};
use common::{Gateway, TempDir};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_each_way_with_mode_mtime_and_json() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cp-ws");
    let local = TempDir::new("cp-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();

    let data = varied(64 * 1024 * 1024 + 12_345, 7);
    let want = sha(&data);
    let src = local.path().join("big.bin");
    let mtime = 1_700_000_123_456u64;
    write_file(&src, &data, 0o640, mtime);

    // Put, with --json.
    let (code, out, err) = cp(&gw, &token, &[s(&src), "box:big.bin", "--json"]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(err, "", "no progress when stderr is not a terminal");
    let v: Value = serde_json::from_str(&out).expect("json");
    let placed = ws.path().join("big.bin");
    assert_eq!(v["direction"], "put");
    assert_eq!(v["bytes"], data.len() as u64);
    assert_eq!(v["sha256"], want.as_str());
    assert_eq!(
        Path::new(v["path"].as_str().expect("path"))
            .canonicalize()
            .expect("canonical"),
        placed.canonicalize().expect("canonical")
    );
    assert_eq!(sha(&std::fs::read(&placed).expect("read")), want);
    assert_eq!(mode(&placed), 0o640);
    assert_eq!(mtime_ms(&placed), mtime);
    // No partial file left beside it.
    let leftovers: Vec<_> = std::fs::read_dir(ws.path())
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("gsv-part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Get it back under another name (and its mode and mtime); nothing on stdout.
    let on_node = ws.path().join("other.bin");
    let other = varied(64 * 1024 * 1024 - 3, 99);
    write_file(&on_node, &other, 0o600, 1_600_000_000_789);
    let back = local.path().join("back.bin");
    let (code, out, err) = cp(&gw, &token, &["box:other.bin", s(&back)]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!((out.as_str(), err.as_str()), ("", ""));
    assert_eq!(sha(&std::fs::read(&back).expect("read")), sha(&other));
    assert_eq!(mode(&back), 0o600);
    assert_eq!(mtime_ms(&back), 1_600_000_000_789);

    // Into a local directory: the remote name; --json says get.
    let (code, out, err) = cp(&gw, &token, &["box:big.bin", s(local.path()), "--json"]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["direction"], "get");
    assert_eq!(v["sha256"], want.as_str());
    assert_eq!(v["path"], s(&local.path().join("big.bin")));
    let leftovers: Vec<_> = std::fs::read_dir(local.path())
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("gsv-part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The name `gsv cp` gives its partial file (client/src/transfer/partial.rs).
fn partial_name(target: &str, node: &str, remote: &str, size: u64, mtime: u64) -> String {
    let mut h = Sha256::new();
    h.update(node.as_bytes());
    h.update([0]);
    h.update(remote.as_bytes());
    let key: String = h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(".{target}.gsv-part-{key}-{size}-{mtime}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_resumes_a_partial_copy_and_refuses_a_corrupt_one() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cp-ws");
    let local = TempDir::new("cp-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let data = varied(20 * 1024 * 1024 + 5, 3);
    let mtime = 1_650_000_000_000u64;
    write_file(&ws.path().join("f.bin"), &data, 0o644, mtime);
    let size = data.len() as u64;
    let part = local
        .path()
        .join(partial_name("f.bin", "box", "f.bin", size, mtime));
    let target = local.path().join("f.bin");

    // A partial copy of the first 5 MiB and a bit: the rest is fetched, the whole checked.
    std::fs::write(&part, &data[..5 * 1024 * 1024 + 17]).expect("partial");
    let (code, out, err) = cp(&gw, &token, &["box:f.bin", s(&target), "--json"]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(std::fs::read(&target).expect("read"), data);
    assert!(!part.exists(), "the partial file became the target");

    // A partial copy whose bytes are wrong: caught by the hash, nothing placed, the
    // partial removed, so the next try starts over and succeeds.
    std::fs::remove_file(&target).expect("rm");
    let mut wrong = data[..3 * 1024 * 1024].to_vec();
    wrong[1000] ^= 0xff;
    std::fs::write(&part, &wrong).expect("partial");
    let (code, _out, err) = cp(&gw, &token, &["box:f.bin", s(&target)]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("error: integrity: "), "{err}");
    assert!(!target.exists());
    assert!(!part.exists());
    let (code, _out, err) = cp(&gw, &token, &["box:f.bin", s(&target)]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&target).expect("read"), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_confinement_and_missing_files_are_refused() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cp-ws");
    let conf_ws = TempDir::new("cp-conf");
    let outside = TempDir::new("cp-outside");
    let local = TempDir::new("cp-local");
    let _node = gw.node("box", ws.path()).await;
    let _confined = gw.spawn_node(
        "conf",
        &gw.node_token("conf"),
        conf_ws.path(),
        &["--confine"],
    );
    gw.wait_online("conf").await;
    let all = gw.agent_token();
    let src = local.path().join("a.txt");
    std::fs::write(&src, b"hello\n").expect("write");
    std::fs::write(ws.path().join("there.txt"), b"there\n").expect("write");

    // Outside a confined node's workspace: forbidden (exit 5), nothing written.
    let dest = outside.path().join("a.txt");
    let (code, _out, err) = cp(&gw, &all, &[s(&src), &format!("conf:{}", s(&dest))]).await;
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    assert!(!dest.exists());
    // Inside it: fine.
    let (code, _out, err) = cp(&gw, &all, &[s(&src), "conf:a.txt"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(conf_ws.path().join("a.txt")).expect("read"),
        b"hello\n"
    );

    // A token without box__Write cannot put; without box__Read cannot get.
    let reader = gw.token(&["agent", "reader", "--allow", "box__Read"]);
    let (code, _out, err) = cp(&gw, &reader, &[s(&src), "box:a.txt"]).await;
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    assert!(!ws.path().join("a.txt").exists());
    let (code, _out, err) = cp(&gw, &reader, &["box:there.txt", s(&local.path().join("t"))]).await;
    assert_eq!(code, 0, "{err}");
    let writer = gw.token(&["agent", "writer", "--allow", "box__Write"]);
    let (code, _out, err) = cp(&gw, &writer, &["box:there.txt", s(&local.path().join("u"))]).await;
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    assert!(!local.path().join("u").exists());
    let (code, _out, err) = cp(&gw, &writer, &[s(&src), "box:a.txt"]).await;
    assert_eq!(code, 0, "{err}");

    // A missing remote file: not_found; a missing local one: io.
    let (code, _out, err) = cp(&gw, &all, &["box:nope.txt", s(&local.path().join("n"))]).await;
    assert!(err.starts_with("error: not_found: "), "{err}");
    assert_eq!(code, 2, "{err}");
    let (code, _out, err) = cp(&gw, &all, &[s(&local.path().join("nope")), "box:x"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("error: io: "), "{err}");
    // Into a local directory that does not exist: io, nothing asked of the node.
    let (code, _out, err) = cp(
        &gw,
        &all,
        &["box:there.txt", s(&local.path().join("no/such/dir/t"))],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("error: io: "), "{err}");
    // An offline node.
    let (code, _out, err) = cp(&gw, &all, &[s(&src), "gone:a.txt"]).await;
    assert_eq!(code, 4, "{err}");
}

#[test]
fn recursion_and_two_local_paths_are_refused_for_now() {
    for args in [&["cp", "-r", "dir", "box:dir"][..], &["cp", "x", "y"][..]] {
        let out = std::process::Command::new(common::gsv_bin())
            .args(args)
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_AGENT_TOKEN")
            .output()
            .expect("run gsv");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: invalid_args: "), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_with_130_and_the_same_command_resumes() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cp-ws");
    let local = TempDir::new("cp-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let data = varied(256 * 1024 * 1024, 11);
    write_file(&ws.path().join("huge.bin"), &data, 0o644, 1_700_000_000_000);
    let target = local.path().join("huge.bin");
    let args = [
        "cp",
        "box:huge.bin",
        s(&target),
        "--token",
        &token,
        "--data",
        s(gw.data.path()),
    ];
    let child = std::process::Command::new(common::gsv_bin())
        .args(args)
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn gsv cp");
    // Once some bytes have landed in the partial file: Ctrl-C.
    let partial_len = || {
        std::fs::read_dir(local.path())
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().contains("gsv-part"))
            .and_then(|e| e.metadata().ok())
            .map(|m| m.len())
    };
    common::eventually("a partial file", Duration::from_secs(30), || async {
        partial_len().filter(|&n| n > 0)
    })
    .await;
    // SAFETY: signalling our own child by its pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = tokio::task::block_in_place(|| child.wait_with_output()).expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("error: cancelled: "), "{err}");
    assert!(!target.exists());
    let kept = partial_len().expect("the partial file is kept");
    assert!(kept > 0 && kept < data.len() as u64, "{kept}");

    let (code, _out, err) = cp(&gw, &token, &["box:huge.bin", s(&target)]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(sha(&std::fs::read(&target).expect("read")), sha(&data));
    assert!(partial_len().is_none());
}

/// A copy to a node cut by the gateway going away: the node's side of it ends with the
/// connection (it does not wait for chunks that cannot come, holding the partial
/// file's lock), so the same command resumes once the node is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_cut_by_a_gateway_restart_resumes_once_the_node_is_back() {
    let mut gw = Gateway::start().await;
    let ws = TempDir::new("cp-ws");
    let local = TempDir::new("cp-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let data = varied(256 * 1024 * 1024, 13);
    let src = local.path().join("huge.bin");
    write_file(&src, &data, 0o644, 1_700_000_000_000);
    let child = std::process::Command::new(common::gsv_bin())
        .args([
            "cp",
            s(&src),
            "box:huge.bin",
            "--token",
            &token,
            "--data",
            s(gw.data.path()),
        ])
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn gsv cp");
    let partial_len = || {
        std::fs::read_dir(ws.path())
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().contains("gsv-part"))
            .and_then(|e| e.metadata().ok())
            .map(|m| m.len())
    };
    common::eventually("a partial file", Duration::from_secs(30), || async {
        partial_len().filter(|&n| n > 0)
    })
    .await;
    gw.restart().await;
    let out = tokio::task::block_in_place(|| child.wait_with_output()).expect("wait");
    if out.status.success() {
        // The copy won the race with the restart: nothing left to resume.
        return;
    }
    assert!(partial_len().is_some(), "the partial file is kept");
    // The node reconnects with a backoff; until then the copy is refused.
    let err = common::eventually("the copy resumed", Duration::from_secs(60), || async {
        let (code, _out, err) = cp(&gw, &token, &[s(&src), "box:huge.bin"]).await;
        (code == 0).then_some(err)
    })
    .await;
    assert!(!err.contains("in progress"), "{err}");
    let landed = std::fs::read(ws.path().join("huge.bin")).expect("landed");
    assert_eq!(sha(&landed), sha(&data));
    assert!(partial_len().is_none());
}

/// Small files, many times, through the library: a node sends a `get`'s first chunk
/// as soon as it has opened the file, which may reach the gateway before the node's
/// answer and the client before the gateway's; neither may drop it (that hung).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_small_copies_never_lose_their_first_chunk() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cp-ws");
    let local = TempDir::new("cp-local");
    let _node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;
    std::fs::write(ws.path().join("small.txt"), b"small\n").expect("write");
    let up = local.path().join("up.txt");
    std::fs::write(&up, b"up\n").expect("write");
    for i in 0..100 {
        let target = local.path().join(format!("s{i}"));
        let got = tokio::time::timeout(
            Duration::from_secs(10),
            agent.get_file("box", "small.txt", &target, |_, _| {}),
        )
        .await
        .unwrap_or_else(|_| panic!("get {i} hung"))
        .expect("get");
        assert_eq!(got.bytes, 6);
        assert_eq!(std::fs::read(&target).expect("read"), b"small\n");
        let put = tokio::time::timeout(
            Duration::from_secs(10),
            agent.put_file("box", &up, &format!("u{i}"), |_, _| {}),
        )
        .await
        .unwrap_or_else(|_| panic!("put {i} hung"))
        .expect("put");
        assert_eq!(put.bytes, 3);
    }
}

/// A local file that shrinks or grows while it is sent: the copy fails saying so, and
/// nothing is put in place on the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_changes_size_while_sent_is_refused() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cp-ws");
    let local = TempDir::new("cp-local");
    let _node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;
    let src = local.path().join("moving.bin");
    for (name, change) in [("shrunk", 1u64), ("grown", 64 * 1024 * 1024)] {
        std::fs::write(&src, varied(16 * 1024 * 1024, 5)).expect("write");
        let mut changed = false;
        let outcome = agent
            .put_file("box", &src, name, |_, _| {
                if !changed {
                    changed = true;
                    let f = std::fs::File::options()
                        .write(true)
                        .open(&src)
                        .expect("open");
                    f.set_len(change).expect("resize");
                }
            })
            .await;
        let e = outcome.expect_err(name);
        assert!(
            matches!(&e, gsv_client::ClientError::Integrity(m) if m.contains("changed while it was copied")),
            "{name}: {e}"
        );
        assert!(!ws.path().join(name).exists(), "{name}");
        // Its partial file is of no use to a later copy: the cancel discards it.
        let ws_path = ws.path().to_owned();
        common::eventually(
            "no partial file on the node",
            Duration::from_secs(10),
            || {
                let ws_path = ws_path.clone();
                async move {
                    let parts = std::fs::read_dir(&ws_path)
                        .ok()?
                        .flatten()
                        .filter(|e| e.file_name().to_string_lossy().contains("gsv-part"))
                        .count();
                    (parts == 0).then_some(())
                }
            },
        )
        .await;
    }
}
