//! End to end: `gsv cp -r` through a real gateway and node on loopback: a tree with
//! nested directories, modes, mtimes, an empty directory, a relative, a dangling and
//! an outward symlink copied as links, both ways, node to node, and again into
//! existing directories (`cp -r` semantics); an interrupted copy finished; the token's Read/Write policy;
//! `--confine`; a hostile manifest sent to the node by hand, and a hostile node's
//! listing refused by the CLI.

mod common;

use common::fake::{agent_connect, tool, Raw};
use common::files::{s, sha, varied, write_file as file};
use common::{Gateway, TempDir};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

fn set_mtime(path: &Path, ms: u64) {
    let f = std::fs::File::open(path).expect("open");
    f.set_times(std::fs::FileTimes::new().set_modified(UNIX_EPOCH + Duration::from_millis(ms)))
        .expect("set mtime");
}

fn dir(path: &Path, mode: u32) {
    std::fs::create_dir_all(path).expect("mkdir");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The source tree: nested directories with their own modes and mtimes, files with
/// theirs (one over several chunks), an empty directory, a relative symlink, a
/// dangling one, and one pointing outside (`evil`, at `outside`).
fn make_tree(top: &Path, outside: &Path) {
    dir(top, 0o755);
    file(&top.join("a.txt"), b"alpha\n", 0o600, 1_600_000_001_000);
    dir(&top.join("bin"), 0o755);
    file(
        &top.join("bin/run.sh"),
        b"#!/bin/sh\necho hi\n",
        0o755,
        1_600_000_002_000,
    );
    dir(&top.join("private/deep/er"), 0o700);
    std::fs::set_permissions(top.join("private"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    file(
        &top.join("private/deep/er/big.bin"),
        &varied(3 * 1024 * 1024 + 77, 5),
        0o640,
        1_600_000_003_000,
    );
    file(
        &top.join("private/deep/key"),
        b"k",
        0o600,
        1_600_000_004_000,
    );
    dir(&top.join("empty"), 0o750);
    symlink("a.txt", top.join("rel-link")).expect("link");
    symlink("does/not/exist", top.join("private/dangling")).expect("link");
    symlink(outside, top.join("evil")).expect("link");
    // Directory mtimes last (writing into a directory changes its mtime).
    for (d, ms) in [
        ("private/deep/er", 1_500_000_001_000u64),
        ("private/deep", 1_500_000_002_000),
        ("private", 1_500_000_003_000),
        ("empty", 1_500_000_004_000),
        ("bin", 1_500_000_005_000),
        ("", 1_500_000_006_000),
    ] {
        set_mtime(&top.join(d), ms);
    }
}

/// Every entry below `top`: kind, mode, mtime (not a symlink's), and a file's hash
/// or a link's target; `top` itself as `.`.
fn snapshot(top: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![top.to_path_buf()];
    while let Some(d) = stack.pop() {
        let md = std::fs::symlink_metadata(&d).expect("lstat");
        let rel = d.strip_prefix(top).expect("below").display().to_string();
        let rel = if rel.is_empty() { ".".to_owned() } else { rel };
        out.insert(rel, describe(&d, &md));
        for e in std::fs::read_dir(&d).expect("ls").flatten() {
            let p = e.path();
            let md = std::fs::symlink_metadata(&p).expect("lstat");
            if md.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(top).expect("below").display().to_string();
                out.insert(rel, describe(&p, &md));
            }
        }
    }
    out
}

fn describe(p: &Path, md: &std::fs::Metadata) -> String {
    let mtime = md.mtime() as u64 * 1000 + md.mtime_nsec() as u64 / 1_000_000;
    if md.file_type().is_symlink() {
        format!(
            "link -> {}",
            std::fs::read_link(p).expect("readlink").display()
        )
    } else if md.is_dir() {
        format!("dir {:o} {mtime}", md.mode() & 0o7777)
    } else {
        let data = std::fs::read(p).expect("read");
        format!("file {:o} {mtime} {}", md.mode() & 0o7777, sha(&data))
    }
}

/// `gsv cp ARGS... --token TOKEN`: (exit code, stdout, stderr).
fn cp(gw: &Gateway, token: &str, args: &[&str]) -> (i32, String, String) {
    let mut all: Vec<&str> = vec!["cp"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--token", token]);
    tokio::task::block_in_place(|| gw.cli(&all))
}

fn empty(d: &Path) -> bool {
    std::fs::read_dir(d).expect("ls").next().is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_with_modes_mtimes_and_symlinks_crosses_both_ways() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let outside = TempDir::new("cpr-outside");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let src = local.path().join("src");
    make_tree(&src, outside.path());
    let want = snapshot(&src);

    // Put: `dest` does not exist, so it becomes the tree's top.
    let (code, out, err) = cp(&gw, &token, &["-r", s(&src), "box:dest", "--json"]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(err, "", "no progress when stderr is not a terminal");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["direction"], "put");
    assert_eq!(
        (&v["files"], &v["dirs"], &v["symlinks"]),
        (&json!(4), &json!(6), &json!(3)),
        "{v}"
    );
    assert_eq!(v["bytes"], 6 + 18 + 3 * 1024 * 1024 + 77 + 1);
    let dest = ws.path().join("dest");
    assert_eq!(
        Path::new(v["path"].as_str().expect("path"))
            .canonicalize()
            .expect("canonical"),
        dest.canonicalize().expect("canonical")
    );
    assert_eq!(snapshot(&dest), want);
    assert!(empty(outside.path()), "nothing written through evil");

    // Get: `back` does not exist, so it becomes the top.
    let back = local.path().join("back");
    let (code, out, err) = cp(&gw, &token, &["-r", "box:dest", s(&back), "--json"]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["direction"], "get");
    assert_eq!((&v["files"], &v["symlinks"]), (&json!(4), &json!(3)), "{v}");
    assert_eq!(snapshot(&back), want);
    assert!(empty(outside.path()));

    // Again, into directories that exist now: like `cp -r`, into `dest/src` and
    // `back/dest`.
    let (code, _out, err) = cp(&gw, &token, &["-r", s(&src), "box:dest"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(snapshot(&dest.join("src")), want);
    let (code, _out, err) = cp(&gw, &token, &["-r", "box:dest/src", s(&back)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(snapshot(&back.join("src")), want);
    assert!(empty(outside.path()));

    // A re-copy over a tree whose file was swapped for a symlink pointing out: the
    // link is replaced, the outside file untouched.
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"untouched").expect("write");
    std::fs::remove_file(dest.join("a.txt")).expect("rm");
    symlink(&victim, dest.join("a.txt")).expect("link");
    std::fs::remove_file(back.join("a.txt")).expect("rm");
    symlink(&victim, back.join("a.txt")).expect("link");
    let (code, _out, err) = cp(&gw, &token, &["-r", &format!("{}/.", s(&src)), "box:dest"]);
    assert_eq!(code, 0, "{err}");
    let (code, _out, err) = cp(&gw, &token, &["-r", "box:dest/.", s(&back)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&victim).expect("read"), b"untouched");
    for top in [&dest, &back] {
        let md = std::fs::symlink_metadata(top.join("a.txt")).expect("lstat");
        assert!(md.is_file(), "{}", top.display());
        assert_eq!(std::fs::read(top.join("a.txt")).expect("read"), b"alpha\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_and_confinement_refuse_trees() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let conf_ws = TempDir::new("cpr-conf");
    let outside = TempDir::new("cpr-outside");
    let local = TempDir::new("cpr-local");
    let _node = gw.node("box", ws.path()).await;
    let _confined = gw.spawn_node(
        "conf",
        &gw.node_token("conf"),
        conf_ws.path(),
        &["--confine"],
    );
    gw.wait_online("conf").await;
    let src = local.path().join("src");
    make_tree(&src, outside.path());
    dir(&ws.path().join("there/sub"), 0o755);
    std::fs::write(ws.path().join("there/sub/f"), b"f").expect("write");

    // Without box__Write no tree goes in; without box__Read none comes out.
    let reader = gw.token(&["agent", "reader", "--allow", "box__Read"]);
    let (code, _out, err) = cp(&gw, &reader, &["-r", s(&src), "box:dest"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    assert!(!ws.path().join("dest").exists());
    let writer = gw.token(&["agent", "writer", "--allow", "box__Write"]);
    let out_dir = local.path().join("out");
    let (code, _out, err) = cp(&gw, &writer, &["-r", "box:there", s(&out_dir)]);
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    assert!(!out_dir.exists());
    let (code, _out, err) = cp(&gw, &reader, &["-r", "box:there", s(&out_dir)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(out_dir.join("sub/f")).expect("read"), b"f");
    // A `confirm` rule: one approval for the whole tree, showing what it holds; its
    // files need none of their own. Denied: nothing is made.
    let careful = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "box__Write",
        "--confirm",
        "box__Read",
    ]);
    let operator = gw.agent_with(&gw.admin_token()).await;
    let spawn = |args: &[&str]| {
        std::process::Command::new(common::gsv_bin())
            .arg("cp")
            .args(args)
            .args(["--token", &careful, "--data"])
            .arg(gw.data.path())
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_AGENT_TOKEN")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn gsv cp")
    };
    let requested = || async {
        common::eventually("approval.requested", Duration::from_secs(20), || async {
            let e = operator.next_event(Duration::from_millis(100)).await?;
            (e.event == gsv_protocol::EventName::ApprovalRequested).then_some(e.payload)
        })
        .await
    };
    let decide = |req: &Value, verdict: &str| {
        let id = req["id"].as_str().expect("id").to_owned();
        let (code, _, err) = gw.cli(&["approvals", verdict, &id]);
        assert_eq!(code, 0, "{err}");
    };
    let wait = |child: std::process::Child| async move {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .expect("join")
            .expect("wait");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let no_more_requests = || async {
        let more = operator.next_event(Duration::from_millis(500)).await;
        assert!(
            more.is_none_or(|e| e.event != gsv_protocol::EventName::ApprovalRequested),
            "a second approval request for one tree"
        );
    };
    // In: denied first, then approved.
    let child = spawn(&["-r", s(&src), "box:dest"]);
    let req = requested().await;
    let summary = req["summary"].as_str().unwrap_or_default().to_owned();
    assert!(summary.starts_with("copy directory "), "{req}");
    assert!(
        summary.contains("/dest\" (a new directory; the agent named it \"dest\")")
            && summary.contains(" files"),
        "{req}"
    );
    assert_eq!(
        (req["node"].as_str(), req["tool"].as_str()),
        (Some("box"), Some("Write"))
    );
    decide(&req, "deny");
    let (code, err) = wait(child).await;
    assert_eq!(code, 5, "{err}");
    assert!(
        !ws.path().join("dest").exists(),
        "nothing made before the decision"
    );
    let child = spawn(&["-r", s(&src), "box:dest"]);
    let req = requested().await;
    decide(&req, "approve");
    let (code, err) = wait(child).await;
    assert_eq!(code, 0, "{err}");
    assert!(ws.path().join("dest").is_dir());
    no_more_requests().await;
    // Out: one approval, naming the node's tree and its size.
    let back = local.path().join("c");
    let child = spawn(&["-r", "box:there", s(&back)]);
    let req = requested().await;
    assert_eq!(
        (req["node"].as_str(), req["tool"].as_str()),
        (Some("box"), Some("Read"))
    );
    assert!(
        req["summary"]
            .as_str()
            .is_some_and(|t| t.contains("1 files")),
        "{req}"
    );
    decide(&req, "approve");
    let (code, err) = wait(child).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(back.join("sub/f")).expect("read"), b"f");
    no_more_requests().await;
    // A place step that is not part of an approved tree is refused.
    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    raw.handshake(|nonce| agent_connect(&careful, &nonce))
        .await
        .expect("agent connects");
    raw.send(
        &json!({"type": "req", "id": "l1", "method": "transfer.place", "params": {
            "node": "box", "path": "elsewhere", "step": "links",
            "entries": [{"path": "l", "kind": "symlink", "target": "/etc"}]}})
        .to_string(),
    )
    .await;
    let v = raw.recv_json().await;
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    assert!(!ws.path().join("elsewhere").exists());

    // Confined: a tree to or from outside the workspace is refused, nothing made.
    let target = outside.path().join("t");
    let (code, _out, err) = cp(
        &gw,
        &gw.agent_token(),
        &["-r", s(&src), &format!("conf:{}", s(&target))],
    );
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    assert!(empty(outside.path()));
    let (code, _out, err) = cp(
        &gw,
        &gw.agent_token(),
        &["-r", "conf:../", s(&local.path().join("o2"))],
    );
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    // Inside it: the whole tree, its outward link kept as a link.
    let (code, _out, err) = cp(&gw, &gw.agent_token(), &["-r", s(&src), "conf:in"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(snapshot(&conf_ws.path().join("in")), snapshot(&src));
    assert!(empty(outside.path()));
    // Listing through the link leads outside: refused.
    let (code, _out, err) = cp(
        &gw,
        &gw.agent_token(),
        &["-r", "conf:in/evil", s(&local.path().join("o3"))],
    );
    assert_eq!(code, 5, "{err}");
    assert!(err.starts_with("error: forbidden: "), "{err}");
    // A file source without -r... and -r of a file: usage errors.
    let (code, _out, err) = cp(
        &gw,
        &gw.agent_token(),
        &["-r", s(&src.join("a.txt")), "box:x"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a directory"), "{err}");
}

/// An agent connection spoken by hand.
struct Agent {
    raw: Raw,
    next: u64,
}

impl Agent {
    async fn connect(gw: &Gateway, token: &str) -> Agent {
        let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
        raw.handshake(|nonce| agent_connect(token, &nonce))
            .await
            .expect("agent connects");
        Agent { raw, next: 0 }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = format!("r{}", self.next);
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        self.raw.send(&frame.to_string()).await;
        for _ in 0..1000 {
            let v = self.raw.recv_json().await;
            if v["type"] == "res" && v["id"] == id {
                return v;
            }
        }
        panic!("no answer to {id}");
    }
}

fn entry(path: &str, kind: &str, target: Option<&str>) -> Value {
    let mut e = json!({"path": path, "kind": kind, "mode": 0o777, "mtimeMs": 1});
    if let Some(t) = target {
        e["target"] = json!(t);
    }
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_manifest_is_refused_by_the_node() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let conf_ws = TempDir::new("cpr-conf");
    let outside = TempDir::new("cpr-outside");
    // `x` beside the workspace is where `../x` would land. The temporary directory is
    // shared: something else may have made an `x` there, which is not this test's
    // business (only that the node makes none).
    let beside = ws.path().parent().expect("parent").join("x");
    let there_before = beside.exists();
    let _node = gw.node("box", ws.path()).await;
    let _confined = gw.spawn_node(
        "conf",
        &gw.node_token("conf"),
        conf_ws.path(),
        &["--confine"],
    );
    gw.wait_online("conf").await;
    let mut agent = Agent::connect(&gw, &gw.agent_token()).await;
    let escape = outside.path().join("x");

    for node in ["box", "conf"] {
        for (step, bad) in [
            ("dirs", entry("../x", "dir", None)),
            ("dirs", entry(s(&escape), "dir", None)),
            ("dirs", entry("a/../../x", "file", None)),
            ("links", entry("../x", "symlink", Some("/etc"))),
            ("links", entry(s(&escape), "symlink", Some("/etc"))),
            ("settle", entry("../..", "dir", None)),
            ("dirs", entry("l", "symlink", Some("/etc"))),
        ] {
            let v = agent
                .call(
                    "transfer.place",
                    json!({"node": node, "path": "dest", "step": step, "entries": [bad]}),
                )
                .await;
            assert_eq!(v["ok"], false, "{v}");
            assert_eq!(v["error"]["code"], "invalid_args", "{node} {step}: {v}");
        }
        let v = agent
            .call("transfer.place", json!({"node": node, "path": "dest", "into": "../up", "step": "dirs", "entries": []}))
            .await;
        assert_eq!(v["error"]["code"], "invalid_args", "{v}");
        assert!(empty(outside.path()));
        assert!(there_before || !beside.exists());

        // A link of the tree pointing out, then entries "under" it: never followed.
        let v = agent
            .call("transfer.place", json!({"node": node, "path": "dest", "step": "dirs", "entries": [entry(".", "dir", None)]}))
            .await;
        assert_eq!(v["ok"], true, "{v}");
        let v = agent
            .call("transfer.place", json!({"node": node, "path": "dest", "step": "links", "entries": [entry("evil", "symlink", Some(s(outside.path())))]}))
            .await;
        assert_eq!(v["ok"], true, "{v}");
        for (step, e) in [
            ("dirs", entry("evil/sub", "dir", None)),
            ("dirs", entry("evil", "dir", None)),
            ("dirs", entry("evil/f", "file", None)),
            ("links", entry("evil/l", "symlink", Some("/etc"))),
            ("settle", entry("evil", "dir", None)),
        ] {
            let v = agent
                .call(
                    "transfer.place",
                    json!({"node": node, "path": "dest", "step": step, "entries": [e]}),
                )
                .await;
            assert_eq!(v["error"]["code"], "invalid_args", "{node} {step}: {v}");
        }
        assert!(
            empty(outside.path()),
            "{node}: nothing made through the link"
        );
        assert_ne!(
            std::fs::metadata(outside.path()).expect("stat").mode() & 0o777,
            0o777,
            "{node}: the link's target was not settled"
        );
    }
    // On a confined node not even a file transfer goes through the tree's link.
    let v = agent
        .call(
            "transfer.open",
            json!({"node": "conf", "path": "dest/evil/f", "direction": "put", "meta": {"size": 1, "mode": 420, "mtimeMs": 1}}),
        )
        .await;
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    assert!(empty(outside.path()));

    // A token without box__Write is refused by the gateway before the node hears it.
    let reader = gw.token(&["agent", "reader", "--allow", "box__Read"]);
    let mut agent = Agent::connect(&gw, &reader).await;
    let v = agent
        .call(
            "transfer.place",
            json!({"node": "box", "path": "dest2", "step": "dirs", "entries": []}),
        )
        .await;
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    assert!(!ws.path().join("dest2").exists());
    let v = agent
        .call("transfer.list", json!({"node": "box", "path": "dest"}))
        .await;
    assert_eq!(v["ok"], true, "{v}");
    let paths: Vec<_> = v["result"]["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap_or_default().to_owned(),
                e["kind"].clone(),
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            (".".into(), json!("dir")),
            ("evil".into(), json!("symlink"))
        ]
    );

    // Each request is on the audit record: refused, placed, listed.
    let (code, out, err) =
        tokio::task::block_in_place(|| gw.cli(&["audit", "tail", "--lines", "200", "--json"]));
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &Value| r["kind"] == "transfer")
        .collect();
    let has = |method: &str, tool: &str, outcome: &str| {
        rows.iter().any(|r| {
            let detail: Value =
                serde_json::from_str(r["detail"].as_str().unwrap_or("{}")).unwrap_or_default();
            detail["method"] == method && r["tool"] == tool && r["outcome"] == outcome
        })
    };
    assert!(has("transfer.place", "Write", "invalid_args"), "{out}");
    assert!(has("transfer.place", "Write", "ok"), "{out}");
    assert!(has("transfer.place", "Write", "forbidden"), "{out}");
    assert!(has("transfer.list", "Read", "ok"), "{out}");
}

/// A node that answers `transfer.list` with `entries` (and nothing else).
async fn hostile_node(gw: &Gateway, id: &str, entries: Value) -> tokio::task::JoinHandle<()> {
    let token = gw.node_token(id);
    let (mut raw, r) = Raw::node(
        &gw.addr,
        id,
        &token,
        json!([tool("Read", "filesystem.read")]),
    )
    .await;
    r.expect("the fake node connects");
    tokio::spawn(async move {
        for _ in 0..100 {
            let gsv_protocol::Frame::Req { id, .. } = raw.frame().await else {
                continue;
            };
            let res = json!({"type": "res", "id": id, "ok": true, "result": {"root": "/srv/t", "entries": entries}});
            raw.send(&res.to_string()).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_nodes_listing_writes_nothing_outside_the_destination() {
    let gw = Gateway::start().await;
    let local = TempDir::new("cpr-local");
    let token = gw.agent_token();
    let cases = [
        (
            "evil1",
            json!([entry(".", "dir", None), entry("../escaped", "dir", None)]),
        ),
        (
            "evil2",
            json!([
                entry(".", "dir", None),
                entry("/tmp/escaped-abs", "dir", None)
            ]),
        ),
        (
            "evil3",
            json!([
                entry(".", "dir", None),
                entry("l", "symlink", Some("/tmp")),
                entry("l/escaped", "dir", None)
            ]),
        ),
        (
            "evil4",
            json!([
                entry(".", "dir", None),
                entry("d", "dir", None),
                entry("d", "symlink", Some("/tmp"))
            ]),
        ),
    ];
    for (id, entries) in cases {
        let task = hostile_node(&gw, id, entries).await;
        gw.wait_online(id).await;
        let out = local.path().join("out").join(id);
        std::fs::create_dir_all(out.parent().expect("parent")).expect("mkdir");
        let (code, _o, err) = cp(&gw, &token, &["-r", &format!("{id}:t"), s(&out)]);
        assert_ne!(code, 0, "{id}: {err}");
        assert!(err.contains("refused"), "{id}: {err}");
        assert!(!out.exists(), "{id}: nothing made locally");
        task.abort();
    }
    assert!(!local.path().join("out/escaped").exists());
    assert!(!PathBuf::from("/tmp/escaped-abs").exists());
    assert!(!PathBuf::from("/tmp/escaped").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_tree_is_finished_by_copying_its_contents_again() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpr-ws");
    let local = TempDir::new("cpr-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let top = ws.path().join("t");
    dir(&top.join("sub"), 0o750);
    file(&top.join("a.txt"), b"a\n", 0o644, 1_600_000_000_000);
    file(
        &top.join("sub/huge.bin"),
        &varied(192 * 1024 * 1024, 3),
        0o600,
        1_600_000_001_000,
    );
    file(&top.join("z.txt"), b"z\n", 0o644, 1_600_000_002_000);
    set_mtime(&top.join("sub"), 1_500_000_000_000);
    let want = snapshot(&top);
    let out = local.path().join("out");
    let child = std::process::Command::new(common::gsv_bin())
        .args(["cp", "-r", "box:t", s(&out), "--token", &token])
        .arg("--data")
        .arg(gw.data.path())
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn gsv cp");
    let partial_len = || {
        std::fs::read_dir(out.join("sub"))
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().contains("gsv-part"))
            .and_then(|e| e.metadata().ok())
            .map(|m| m.len())
    };
    common::eventually("a partial file", Duration::from_secs(60), || async {
        partial_len().filter(|&n| n > 0)
    })
    .await;
    // SAFETY: signalling our own child by its pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let done = tokio::task::block_in_place(|| child.wait_with_output()).expect("wait");
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{err}");
    assert!(
        err.contains("error: cancelled: ") && err.contains("SRC/."),
        "{err}"
    );
    assert!(out.join("a.txt").exists(), "copied before the interruption");
    assert!(!out.join("sub/huge.bin").exists());
    assert!(partial_len().is_some(), "the partial file is kept");

    // `out` exists now: its contents are copied into it, the big file resumed.
    let (code, _o, err) = cp(&gw, &token, &["-r", "box:t/.", s(&out)]);
    assert_eq!(code, 0, "{err}");
    assert!(partial_len().is_none());
    assert_eq!(snapshot(&out), want);
}

/// `gsv cp -r A:dir B:dest`: the tree goes from one node to another through the
/// gateway (each file a node → node copy), modes, mtimes and symlinks kept, `cp -r`'s
/// rule for an existing destination; it needs `A__Read` and `B__Write`, and under
/// `confirm` rules asks once per side, not per file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_crosses_from_node_to_node_with_one_approval_per_side() {
    let gw = Gateway::start().await;
    let near = TempDir::new("cpn-near");
    let far = TempDir::new("cpn-far");
    let outside = TempDir::new("cpn-outside");
    let _box = gw.node("box", near.path()).await;
    let _far = gw.node("far", far.path()).await;
    let src = near.path().join("src");
    make_tree(&src, outside.path());
    let want = snapshot(&src);
    let token = gw.agent_token();

    let (code, out, err) = cp(&gw, &token, &["-r", "box:src", "far:dest", "--json"]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["direction"], "copy");
    assert_eq!(
        (&v["files"], &v["dirs"], &v["symlinks"]),
        (&json!(4), &json!(6), &json!(3)),
        "{v}"
    );
    assert_eq!(snapshot(&far.path().join("dest")), want);
    // `dest` exists now: like `cp -r`, into `dest/src`.
    let (code, _out, err) = cp(&gw, &token, &["-r", "box:src", "far:dest"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(snapshot(&far.path().join("dest/src")), want);
    assert!(empty(outside.path()), "nothing written through evil");

    // Each side's permission: without far__Write nothing is made there, without
    // box__Read nothing is listed.
    for allow in ["box__Read", "far__Write"] {
        let t = gw.token(&["agent", &format!("only-{allow}"), "--allow", allow]);
        let (code, _out, err) = cp(&gw, &t, &["-r", "box:src", "far:other"]);
        assert_eq!(code, 5, "{allow}: {err}");
        assert!(err.starts_with("error: forbidden: "), "{err}");
        assert!(!far.path().join("other").exists(), "{allow}");
    }

    // `confirm` on both sides: the listing asks for box__Read, the placing for
    // far__Write, and the files ask nothing more.
    let careful = gw.token(&[
        "agent",
        "careful-n2n",
        "--allow",
        "*",
        "--confirm",
        "box__Read",
        "--confirm",
        "far__Write",
    ]);
    let operator = gw.agent_with(&gw.admin_token()).await;
    let child = std::process::Command::new(common::gsv_bin())
        .args([
            "cp",
            "-r",
            "box:src",
            "far:approved",
            "--token",
            &careful,
            "--data",
        ])
        .arg(gw.data.path())
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn gsv cp");
    for (node, tool) in [("box", "Read"), ("far", "Write")] {
        let req = common::eventually("approval.requested", Duration::from_secs(20), || async {
            let e = operator.next_event(Duration::from_millis(100)).await?;
            (e.event == gsv_protocol::EventName::ApprovalRequested).then_some(e.payload)
        })
        .await;
        assert_eq!(
            (req["node"].as_str(), req["tool"].as_str()),
            (Some(node), Some(tool)),
            "{req}"
        );
        let id = req["id"].as_str().expect("id").to_owned();
        let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
        assert_eq!(code, 0, "{err}");
    }
    let pid = child.id();
    let waited = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let Ok(out) = waited else {
        // SAFETY: killing our own child by its pid.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
        panic!("the copy did not finish: its files asked for approvals of their own?");
    };
    let out = out.expect("join").expect("wait");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(&far.path().join("approved")), want);
    let more = operator.next_event(Duration::from_millis(500)).await;
    assert!(
        more.is_none_or(|e| e.event != gsv_protocol::EventName::ApprovalRequested),
        "an approval request per file"
    );
}
