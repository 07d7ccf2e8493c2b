//! End to end: `gsv cp` carries on by itself, through a real gateway and node on
//! loopback, when the agent's link is cut by a proxy, when the node's link is cut, and
//! when the gateway is killed and started again, each mid-put and mid-get; the retry
//! resumes from what was verified (the bytes sent after the fault, counted by the
//! proxy, are fewer than the file); a directory copy (`-r`) goes on into the top its
//! first try made. A node whose link is cut while its put waits lets
//! go of the partial file; one that does not come back is given up on after
//! `--retry-for`. A refusal, a corrupt partial copy, an offline node or an absent
//! gateway at the start are not retried. And 1 GiB each way, with SHA-256 compared.
//!
//! Every fault is made once the copy has visibly begun (its partial file holds
//! [`CUT_AT`] bytes), never after a sleep.

mod common;

use common::chaos::ChaosProxy;
use common::files::{s, sha_file, write_varied};
use common::{Gateway, Proc, TempDir};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;
/// Size of a file copied across a fault: the fault comes at [`CUT_AT`], far from the
/// end, and the file is copied in seconds.
const BIG: u64 = 128 * MIB + 4321;
/// Bytes that must have reached the partial file before the fault.
const CUT_AT: u64 = 16 * MIB;
/// Headroom for framing (chunk headers, WebSocket frames, requests) in byte counts.
const FRAMING: u64 = 2 * MIB;
/// How long one copy across a fault may take.
const COPY_LIMIT: Duration = Duration::from_secs(180);
/// How long a 1 GiB copy may take in a debug build on a busy machine.
const GIB_LIMIT: Duration = Duration::from_secs(900);

/// Length of the partial file in `dir`, if there is one.
fn part_len(dir: &Path) -> Option<u64> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("gsv-part"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .max()
}

/// Waits until the partial file in `dir` holds at least [`CUT_AT`] bytes; its length.
async fn copy_under_way(dir: &Path) -> u64 {
    let dir = dir.to_owned();
    common::eventually(
        "the copy under way (its partial file growing)",
        Duration::from_secs(60),
        || {
            let dir = dir.clone();
            async move { part_len(&dir).filter(|&n| n >= CUT_AT) }
        },
    )
    .await
}

/// Starts `gsv cp ARGS... --json --gateway URL --token TOKEN --data DATA`.
fn spawn_cp(gateway: &str, token: &str, data: &Path, args: &[&str]) -> Child {
    let mut cmd = Command::new(common::gsv_bin());
    cmd.arg("cp")
        .args(args)
        .args(["--json", "--gateway", gateway, "--token", token, "--data"])
        .arg(data)
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .env_remove("GSV_CA")
        .env_remove("GSV_PIN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    common::die_with_parent(&mut cmd)
        .spawn()
        .expect("spawn gsv cp")
}

/// Waits (at most `limit`) for a `gsv cp`: its exit code, stdout and stderr.
async fn finish(child: Child, limit: Duration) -> (i32, String, String) {
    let pid = child.id();
    let waited = tokio::time::timeout(
        limit,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    match waited {
        Ok(Ok(Ok(out))) => (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Ok(other) => panic!("waiting for gsv cp failed: {other:?}"),
        Err(_) => {
            // SAFETY: killing our own child by its pid.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
            panic!("gsv cp did not finish within {limit:?}");
        }
    }
}

/// The highest connection number the proxy has seen (0 for none).
fn last_conn(proxy: &ChaosProxy) -> u64 {
    proxy.forwarded().last().map_or(0, |c| c.0)
}

/// Bytes the proxy forwarded up (`up`) or down on connections after `after`.
fn forwarded_since(proxy: &ChaosProxy, after: u64, up: bool) -> u64 {
    proxy
        .forwarded()
        .iter()
        .filter(|c| c.0 > after)
        .map(|&(_, u, d)| if up { u } else { d })
        .sum()
}

/// Checks a successful `gsv cp --json` that was retried: exit 0, retries counted, a
/// notice per retry on stderr.
fn assert_retried(code: i32, out: &str, err: &str, direction: &str) -> Value {
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(out).expect("json");
    assert_eq!(v["direction"], direction);
    let retries = v["retries"].as_u64().expect("retries");
    assert!(retries >= 1, "{v}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("trying again in"))
            .count() as u64,
        retries,
        "one notice per retry: {err}"
    );
    assert!(err.lines().all(|l| l.starts_with("gsv cp: ")), "{err}");
    v
}

/// A node `id` on `ws` that dials `gateway` (a proxy in front of `gw`).
async fn node_via(gw: &Gateway, gateway: &str, id: &str, ws: &Path) -> Proc {
    let mut cmd = gw.node_command_via(gateway, id, &gw.node_token(id), ws);
    let proc = Proc(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn gsv node"),
    );
    gw.wait_online(id).await;
    proc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_link_cut_mid_put_and_mid_get_resumes_by_itself() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let proxy = ChaosProxy::start(&gw.addr, common::chaos::seed_from_env()).await;

    // Put: cut once the node's partial file holds CUT_AT bytes.
    let src = local.path().join("up.bin");
    let want = write_varied(&src, BIG, 21);
    let child = spawn_cp(
        &proxy.url(),
        &token,
        gw.data.path(),
        &[s(&src), "box:up.bin"],
    );
    let held = copy_under_way(ws.path()).await;
    let before = last_conn(&proxy);
    proxy.cut_all();
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    let v = assert_retried(code, &out, &err, "put");
    assert_eq!(v["sha256"], want.as_str());
    assert_eq!(sha_file(&ws.path().join("up.bin")), want);
    assert_eq!(part_len(ws.path()), None, "no partial file left");
    let again = forwarded_since(&proxy, before, true);
    assert!(
        again > 0 && again <= BIG - held + FRAMING,
        "after the cut {again} bytes went up; the node held {held} of {BIG} before it"
    );

    // Get: cut once the local partial file holds CUT_AT bytes.
    let remote = ws.path().join("down.bin");
    let want = write_varied(&remote, BIG, 22);
    let target = local.path().join("down.bin");
    let child = spawn_cp(
        &proxy.url(),
        &token,
        gw.data.path(),
        &["box:down.bin", s(&target)],
    );
    let held = copy_under_way(local.path()).await;
    let before = last_conn(&proxy);
    proxy.cut_all();
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    let v = assert_retried(code, &out, &err, "get");
    assert_eq!(v["sha256"], want.as_str());
    assert_eq!(sha_file(&target), want);
    assert_eq!(part_len(local.path()), None, "no partial file left");
    let again = forwarded_since(&proxy, before, false);
    assert!(
        again > 0 && again <= BIG - held + FRAMING,
        "after the cut {again} bytes came down; {held} of {BIG} were here before it"
    );
    eprintln!("{}", proxy.summary());
}

/// A small tree beside a [`BIG`] file, in `dir`: its files' paths (relative) and
/// SHA-256s.
fn write_tree(dir: &Path, seed: u64) -> Vec<(String, String)> {
    std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    let mut files = vec![
        (
            "a.txt".to_owned(),
            write_varied(&dir.join("a.txt"), 1000, seed),
        ),
        (
            "sub/c.txt".to_owned(),
            write_varied(&dir.join("sub/c.txt"), 5000, seed + 1),
        ),
    ];
    files.push((
        "big.bin".to_owned(),
        write_varied(&dir.join("big.bin"), BIG, seed + 2),
    ));
    files
}

/// `top` holds each of `files` with its SHA-256, and no partial file.
fn assert_tree(top: &Path, files: &[(String, String)]) {
    for (path, sha) in files {
        assert_eq!(&sha_file(&top.join(path)), sha, "{path}");
    }
    assert_eq!(
        part_len(top),
        None,
        "no partial file left in {}",
        top.display()
    );
}

/// `gsv cp -r` across a cut link, both ways: it tries again by itself, into the top
/// its first try made (never into `DST/NAME`, which a new `cp -r` would choose now
/// that `DST` exists), and the file under way resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_copy_cut_mid_file_resumes_by_itself_into_the_same_top() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cprt-ws");
    let local = TempDir::new("cprt-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let proxy = ChaosProxy::start(&gw.addr, common::chaos::seed_from_env()).await;

    // Put: ./tree → box:copy (missing, so it becomes the copy).
    let src = local.path().join("tree");
    let files = write_tree(&src, 31);
    let child = spawn_cp(
        &proxy.url(),
        &token,
        gw.data.path(),
        &["-r", s(&src), "box:copy"],
    );
    copy_under_way(&ws.path().join("copy")).await;
    proxy.cut_all();
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    let v = assert_retried(code, &out, &err, "put");
    assert_eq!(v["files"], 3, "{v}");
    assert_tree(&ws.path().join("copy"), &files);
    assert!(!ws.path().join("copy/tree").exists(), "not into copy/NAME");

    // Get: box:tree → ./back (missing, so it becomes the copy).
    let remote = ws.path().join("tree");
    let files = write_tree(&remote, 41);
    let back = local.path().join("back");
    let child = spawn_cp(
        &proxy.url(),
        &token,
        gw.data.path(),
        &["-r", "box:tree", s(&back)],
    );
    copy_under_way(&back).await;
    proxy.cut_all();
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    let v = assert_retried(code, &out, &err, "get");
    assert_eq!(v["files"], 3, "{v}");
    assert_tree(&back, &files);
    assert!(!back.join("tree").exists(), "not into back/NAME");
    eprintln!("{}", proxy.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_link_cut_mid_put_and_mid_get_resumes_by_itself() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let proxy = ChaosProxy::start(&gw.addr, common::chaos::seed_from_env()).await;
    let _node = node_via(&gw, &proxy.url(), "box", ws.path()).await;
    let token = gw.agent_token();

    // Put: the node's link is cut; the node comes back and takes up its partial file.
    let src = local.path().join("up.bin");
    let want = write_varied(&src, BIG, 31);
    let child = spawn_cp(&gw.url(), &token, gw.data.path(), &[s(&src), "box:up.bin"]);
    let held = copy_under_way(ws.path()).await;
    let before = last_conn(&proxy);
    proxy.cut_all();
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    let v = assert_retried(code, &out, &err, "put");
    assert_eq!(v["sha256"], want.as_str());
    assert_eq!(sha_file(&ws.path().join("up.bin")), want);
    assert_eq!(part_len(ws.path()), None, "no partial file left");
    let again = forwarded_since(&proxy, before, false);
    assert!(
        again > 0 && again <= BIG - held + FRAMING,
        "after the cut {again} bytes went to the node; it held {held} of {BIG} before it"
    );

    // Get.
    let remote = ws.path().join("down.bin");
    let want = write_varied(&remote, BIG, 32);
    let target = local.path().join("down.bin");
    let child = spawn_cp(
        &gw.url(),
        &token,
        gw.data.path(),
        &["box:down.bin", s(&target)],
    );
    let held = copy_under_way(local.path()).await;
    let before = last_conn(&proxy);
    proxy.cut_all();
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    let v = assert_retried(code, &out, &err, "get");
    assert_eq!(v["sha256"], want.as_str());
    assert_eq!(sha_file(&target), want);
    assert_eq!(part_len(local.path()), None, "no partial file left");
    let again = forwarded_since(&proxy, before, true);
    assert!(
        again > 0 && again <= BIG - held + FRAMING,
        "after the cut the node sent {again} bytes; {held} of {BIG} were here before it"
    );
    eprintln!("{}", proxy.summary());
}

/// The node's link cut while its put waits for the next chunk (every byte sent so far
/// written): the node must let go of the partial file when its connection ends, or the
/// resumed copy on its next connection finds it locked for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_link_cut_while_its_put_waits_frees_the_partial_file() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let proxy = ChaosProxy::start(&gw.addr, common::chaos::seed_from_env()).await;
    let _node = node_via(&gw, &proxy.url(), "box", ws.path()).await;
    let token = gw.agent_token();
    let agent = gw.agent_with(&token).await;
    let src = local.path().join("idle.bin");
    let want = write_varied(&src, 32 * MIB, 51);

    // Once CUT_AT bytes are sent, the sender stops until the node has written all it
    // got (its put now waits for more), then the node's link is cut.
    let mut cut = false;
    let first = agent
        .put_file("box", &src, "idle.bin", |done, _| {
            if cut || done < CUT_AT {
                return;
            }
            cut = true;
            let limit = Instant::now() + Duration::from_secs(30);
            while part_len(ws.path()) != Some(done) {
                assert!(Instant::now() < limit, "the node never wrote {done} bytes");
                std::thread::sleep(Duration::from_millis(20));
            }
            proxy.cut_all();
        })
        .await;
    let e = first.expect_err("the node went away");
    assert!(
        e.remote()
            .is_some_and(|r| r.code == gsv_protocol::ErrorCode::NodeDisconnected),
        "{e}"
    );
    let held = part_len(ws.path()).expect("the partial file is kept");

    // The same copy again takes up the partial file on the node's next connection.
    gw.wait_online("box").await;
    let child = spawn_cp(
        &gw.url(),
        &token,
        gw.data.path(),
        &[s(&src), "box:idle.bin", "--retry-for", "20"],
    );
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(
        !err.contains("overloaded"),
        "the partial file was still held: {err}"
    );
    assert_eq!(sha_file(&ws.path().join("idle.bin")), want);
    assert!(held >= CUT_AT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_killed_mid_put_and_mid_get_and_restarted_resumes_by_itself() {
    let mut gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    // Only to count what the agent sends after the restart; it cuts nothing.
    let proxy = ChaosProxy::start(&gw.addr, common::chaos::seed_from_env()).await;

    for (round, put) in [(1u64, true), (2, false)] {
        let name = format!("f{round}.bin");
        let (src, dst, watch, finished) = if put {
            let src = local.path().join(&name);
            let want = write_varied(&src, BIG, 40 + round);
            (
                s(&src).to_owned(),
                format!("box:{name}"),
                ws.path().to_owned(),
                (ws.path().join(&name), want),
            )
        } else {
            let remote = ws.path().join(&name);
            let want = write_varied(&remote, BIG, 40 + round);
            let target = local.path().join(&name);
            (
                format!("box:{name}"),
                s(&target).to_owned(),
                local.path().to_owned(),
                (target, want),
            )
        };
        let child = spawn_cp(&proxy.url(), &token, gw.data.path(), &[&src, &dst]);
        let held = copy_under_way(&watch).await;
        let before = last_conn(&proxy);
        gw.kill();
        gw.restart().await;
        let (code, out, err) = finish(child, COPY_LIMIT).await;
        let v = assert_retried(code, &out, &err, if put { "put" } else { "get" });
        let (path, want) = finished;
        assert_eq!(v["sha256"], want.as_str());
        assert_eq!(sha_file(&path), want);
        assert_eq!(part_len(&watch), None, "no partial file left");
        let again = forwarded_since(&proxy, before, put);
        assert!(
            again > 0 && again <= BIG - held + FRAMING,
            "round {round}: after the restart {again} bytes moved; {held} of {BIG} were held before it"
        );
    }
}

/// A node → node copy: the destination node's link cut mid-copy, then the gateway
/// killed and restarted mid-copy; each time `gsv cp` carries on by itself and the
/// destination takes up what it verified (`resumedFrom`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_to_node_copy_resumes_by_itself_after_a_cut_link_and_a_gateway_restart() {
    let mut gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("cpr-a"), TempDir::new("cpr-b"));
    let _alpha = gw.node("alpha", wa.path()).await;
    let proxy = ChaosProxy::start(&gw.addr, common::chaos::seed_from_env()).await;
    let _beta = node_via(&gw, &proxy.url(), "beta", wb.path()).await;
    let token = gw.agent_token();

    for round in [1u64, 2] {
        let name = format!("n{round}.bin");
        let want = write_varied(&wa.path().join(&name), BIG, 50 + round);
        let child = spawn_cp(
            &gw.url(),
            &token,
            gw.data.path(),
            &[&format!("alpha:{name}"), &format!("beta:{name}")],
        );
        let held = copy_under_way(wb.path()).await;
        if round == 1 {
            proxy.cut_all();
        } else {
            gw.kill();
            gw.restart().await;
        }
        let (code, out, err) = finish(child, COPY_LIMIT).await;
        let v = assert_retried(code, &out, &err, "copy");
        assert_eq!(v["sha256"], want.as_str());
        let resumed = v["resumedFrom"].as_u64().expect("resumedFrom");
        assert!(
            resumed > 0 && resumed < BIG,
            "round {round}: resumed from {resumed} ({held} were held at the fault)"
        );
        assert_eq!(sha_file(&wb.path().join(&name)), want);
        assert_eq!(part_len(wb.path()), None, "no partial file left");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_a_corrupt_copy_an_offline_node_and_no_gateway_are_not_retried() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let _node = gw.node("box", ws.path()).await;
    let all = gw.agent_token();
    let reader = gw.token(&["agent", "reader", "--allow", "box__Read"]);
    let src = local.path().join("a.bin");
    write_varied(&src, 3 * MIB, 5);
    let quick = Duration::from_secs(30);

    // The policy refuses a put: said once, at once.
    let started = Instant::now();
    let child = spawn_cp(&gw.url(), &reader, gw.data.path(), &[s(&src), "box:a.bin"]);
    let (code, out, err) = finish(child, quick).await;
    assert_eq!(code, 5, "stdout: {out}\nstderr: {err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    assert!(!err.contains("trying again"), "{err}");
    assert!(!ws.path().join("a.bin").exists());

    // A corrupt partial copy: the hash catches it, and it is not tried again.
    let remote = ws.path().join("c.bin");
    write_varied(&remote, 6 * MIB, 6);
    let target = local.path().join("c.bin");
    let mtime = std::fs::metadata(&remote)
        .expect("stat")
        .modified()
        .expect("mtime")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64;
    let part = local
        .path()
        .join(partial_name("c.bin", "box", "c.bin", 6 * MIB, mtime));
    let mut wrong = std::fs::read(&remote).expect("read");
    wrong.truncate(2 * MIB as usize);
    wrong[1234] ^= 0x5a;
    std::fs::write(&part, &wrong).expect("partial");
    let child = spawn_cp(&gw.url(), &all, gw.data.path(), &["box:c.bin", s(&target)]);
    let (code, out, err) = finish(child, quick).await;
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    assert!(err.starts_with("error: integrity: "), "{err}");
    assert!(!err.contains("trying again"), "{err}");
    assert!(!target.exists() && !part.exists());

    // A node that is offline when the copy starts, and a gateway that is not there.
    let child = spawn_cp(&gw.url(), &all, gw.data.path(), &[s(&src), "gone:a.bin"]);
    let (code, _out, err) = finish(child, quick).await;
    assert_eq!(code, 4, "{err}");
    assert!(err.starts_with("error: node_offline: "), "{err}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let nobody = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let child = spawn_cp(&nobody, &all, gw.data.path(), &[s(&src), "box:a.bin"]);
    let (code, _out, err) = finish(child, quick).await;
    assert_eq!(code, 4, "{err}");
    assert!(err.starts_with("error: unreachable: "), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "none of them waited for a retry"
    );
}

/// A node that goes away mid-copy and does not come back: the copy retries, then
/// gives up once `--retry-for` passes without progress, saying so, exit 4; the
/// partial file stays for a later copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_does_not_come_back_is_given_up_on_after_retry_for() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let mut node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let src = local.path().join("gone.bin");
    write_varied(&src, BIG, 61);
    let child = spawn_cp(
        &gw.url(),
        &token,
        gw.data.path(),
        &[s(&src), "box:gone.bin", "--retry-for", "3"],
    );
    copy_under_way(ws.path()).await;
    node.kill();
    let (code, out, err) = finish(child, COPY_LIMIT).await;
    assert_eq!(code, 4, "stdout: {out}\nstderr: {err}");
    assert_eq!(out, "");
    assert!(err.contains("trying again in"), "{err}");
    assert!(
        err.contains("giving up after") && err.contains("no progress for 3 s"),
        "{err}"
    );
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: node_offline: ") || last.starts_with("error: node_disconnected: "),
        "{err}"
    );
    assert!(part_len(ws.path()).is_some_and(|n| n >= CUT_AT));
    assert!(!ws.path().join("gone.bin").exists());
}

/// Ctrl-C while the copy waits to retry cancels it at once: exit 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_waiting_to_retry_cancels_at_once() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let mut node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let src = local.path().join("wait.bin");
    write_varied(&src, BIG, 71);
    let mut child = spawn_cp(
        &gw.url(),
        &token,
        gw.data.path(),
        &[s(&src), "box:wait.bin"],
    );
    // Its stderr, line by line, as it comes.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = {
        let seen = std::sync::Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = seen.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        })
    };
    copy_under_way(ws.path()).await;
    node.kill();
    common::eventually("a retry notice", Duration::from_secs(30), || {
        let seen = std::sync::Arc::clone(&seen);
        async move {
            let s = seen.lock().ok()?;
            s.contains("trying again in").then_some(())
        }
    })
    .await;
    let asked = Instant::now();
    // SAFETY: signalling our own child by its pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let (code, _out, _err) = finish(child, Duration::from_secs(30)).await;
    let _ = reader.join();
    let err = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(code, 130, "{err}");
    assert!(err.contains("error: cancelled: "), "{err}");
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "cancelled without waiting out the retries"
    );
    assert!(part_len(ws.path()).is_some_and(|n| n >= CUT_AT), "kept");
}

/// The name `gsv cp` gives a get's partial file (client/src/transfer/partial.rs).
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

/// 1 GiB local → node and a different 1 GiB node → local, SHA-256 compared, timed
/// (printed: `cargo test --test e2e_cp_resume one_gib -- --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gib_each_way_with_hashes_compared() {
    const GIB: u64 = 1024 * MIB;
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();

    let src = local.path().join("gib.bin");
    let want = write_varied(&src, GIB, 1);
    let started = Instant::now();
    let child = spawn_cp(&gw.url(), &token, gw.data.path(), &[s(&src), "box:gib.bin"]);
    let (code, out, err) = finish(child, GIB_LIMIT).await;
    let put_took = started.elapsed();
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (v["bytes"].as_u64(), v["sha256"].as_str()),
        (Some(GIB), Some(want.as_str()))
    );
    assert_eq!(sha_file(&ws.path().join("gib.bin")), want);
    std::fs::remove_file(&src).expect("rm");
    std::fs::remove_file(ws.path().join("gib.bin")).expect("rm");

    let remote = ws.path().join("back.bin");
    let want = write_varied(&remote, GIB, 2);
    let target = local.path().join("back.bin");
    let started = Instant::now();
    let child = spawn_cp(
        &gw.url(),
        &token,
        gw.data.path(),
        &["box:back.bin", s(&target)],
    );
    let (code, out, err) = finish(child, GIB_LIMIT).await;
    let get_took = started.elapsed();
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (v["bytes"].as_u64(), v["sha256"].as_str()),
        (Some(GIB), Some(want.as_str()))
    );
    assert_eq!(sha_file(&target), want);
    eprintln!(
        "1 GiB local -> node: {:.1} s; node -> local: {:.1} s",
        put_took.as_secs_f64(),
        get_took.as_secs_f64()
    );
}
