//! End to end: the one way a node opens a path (issue 42, "one way to open a path").
//! Every file tool and every copy opens through it, so each case below is tried
//! through more than one door: gsv's own process state on procfs, other gsv data
//! directories on the same host, files that are not regular files, modes that would
//! plant a setuid program, and copies asked of a node whose tools work elsewhere.
//! Real gateways and `gsv node` processes on loopback, with narrow agent tokens.

mod common;

use common::{eventually, gsv_bin, Gateway, Proc, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(&format!("box__{tool}"), args, None)
        .await
        .expect("call")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A refusal with `structuredContent: {code: denied, reason}`.
fn refused_with(r: &ToolResult, reason: &str, what: &str) {
    assert!(r.is_error, "{what} must be refused: {}", r.joined_text());
    let sc = r
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no code: {}", r.joined_text()));
    assert_eq!(sc["code"], "denied", "{what}: {}", r.joined_text());
    assert_eq!(sc["reason"], reason, "{what}: {}", r.joined_text());
}

/// `s` as a regex matching itself.
fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

fn found(r: &ToolResult) -> Vec<Value> {
    r.structured_content
        .as_ref()
        .and_then(|s| s["matches"].as_array().cloned())
        .unwrap_or_default()
}

/// A token allowed only the file tools (no Bash, no exec): the attacker of the
/// reported case, who must not reach a secret through a file tool.
fn file_tools_token(gw: &Gateway) -> String {
    let mut args = vec!["agent", "files-only"];
    for t in ["Read", "Glob", "Grep", "fs_stat", "fs_list", "Write"] {
        args.push("--allow");
        args.push(Box::leak(format!("box__{t}").into_boxed_str()));
    }
    gw.token(&args)
}

/// Every way of naming gsv's own process state that the reported attack or its
/// neighbours use, for the node process `node_pid` and the gateway `gateway_pid`.
fn own_proc_paths(node_pid: u32, gateway_pid: u32) -> Vec<String> {
    let mut paths: Vec<String> = [
        "/proc/self/mem",
        "/proc/self/environ",
        "/proc/self/cmdline",
        "/proc/self/maps",
        "/proc/thread-self/environ",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    // The machine's memory, where the kernel offers it.
    if Path::new("/proc/kcore").exists() {
        paths.push("/proc/kcore".to_owned());
    }
    for pid in [node_pid, gateway_pid, std::process::id()] {
        paths.push(format!("/proc/{pid}/mem"));
        paths.push(format!("/proc/{pid}/environ"));
    }
    // A thread of the node by its own id: not listed in /proc, reachable all the same.
    if let Some(tid) = std::fs::read_dir(format!("/proc/{node_pid}/task"))
        .ok()
        .and_then(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .find(|t| *t != node_pid)
        })
    {
        paths.push(format!("/proc/{tid}/environ"));
        paths.push(format!("/proc/{tid}/mem"));
    }
    paths
}

/// The reported attack: a token allowed only file tools reads `/proc/self/mem` at
/// chosen offsets (base64 Read) and finds every token. Now each spelling of gsv's own
/// process state (the node, its threads, its ancestors — here the test — and the
/// gateway, another process of the same executable) is refused by Read, fs_stat and
/// fs_list, and Glob/Grep over them find nothing; an ordinary procfs file and a
/// procfs file of an unrelated process still read.
#[tokio::test]
async fn no_file_tool_reads_gsv_process_state() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("gate-proc-ws");
    let mut node = gw.spawn_node("box", &gw.node_token("box"), ws.path(), &[]);
    gw.wait_online("box").await;
    let agent = gw.agent_with(&file_tools_token(&gw)).await;
    let node_pid = node.0.id();
    let gateway_pid = gw.proc.0.id();
    let secret = gw.admin_token();
    for path in own_proc_paths(node_pid, gateway_pid) {
        for args in [
            json!({"path": path}),
            json!({"path": path, "encoding": "base64", "offset": 4096, "limit": 65536}),
        ] {
            let r = call(&agent, "Read", args).await;
            refused_with(&r, "protected", &format!("Read {path}"));
            assert!(!r.joined_text().contains(&secret));
        }
        let r = call(&agent, "fs_stat", json!({"path": path})).await;
        assert!(r.is_error, "fs_stat {path}: {}", r.joined_text());
    }
    for dir in [
        "/proc/self".to_owned(),
        format!("/proc/{node_pid}"),
        format!("/proc/{gateway_pid}"),
        "/proc/self/task".to_owned(),
    ] {
        let r = call(&agent, "fs_list", json!({"path": dir})).await;
        assert!(r.is_error, "fs_list {dir}: {}", r.joined_text());
        let r = call(&agent, "Grep", json!({"pattern": "GSV|gsv_", "path": dir})).await;
        assert!(found(&r).is_empty(), "Grep {dir}: {}", r.joined_text());
        let r = call(&agent, "Glob", json!({"pattern": "*", "path": dir})).await;
        assert!(found(&r).is_empty(), "Glob {dir}: {}", r.joined_text());
    }
    // Through a symlink in the workspace, too.
    std::os::unix::fs::symlink("/proc/self", ws.path().join("me")).unwrap();
    let r = call(&agent, "Read", json!({"path": "me/environ"})).await;
    refused_with(&r, "protected", "Read me/environ");
    let r = call(&agent, "Grep", json!({"pattern": "GSV", "path": "me"})).await;
    assert!(found(&r).is_empty(), "Grep me: {}", r.joined_text());
    // What is not gsv's still reads: machine-wide procfs, an unrelated process.
    let r = call(&agent, "Read", json!({"path": "/proc/cpuinfo"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    let mut other = Command::new("sleep").arg("30").spawn().expect("sleep");
    let r = call(
        &agent,
        "Read",
        json!({"path": format!("/proc/{}/status", other.id())}),
    )
    .await;
    let _ = other.kill();
    let _ = other.wait();
    assert!(!r.is_error, "{}", r.joined_text());
    node.kill();
}

/// `gsv up` runs the node in the gateway's process: `/proc/self` is the gateway, with
/// every token in its memory. Refused there too.
#[tokio::test]
async fn gsv_up_node_never_reads_the_gateway_memory() {
    let ws = TempDir::new("gate-up-ws");
    let data = TempDir::new("gate-up-data");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut up = Proc(
        common::die_with_parent(&mut Command::new(gsv_bin()))
            .args(["up", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--node-id", "box", "--workspace", s(ws.path())])
            .args(["--data", s(data.path())])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn gsv up"),
    );
    let url = format!("http://127.0.0.1:{port}");
    let agent = eventually("gsv up online", Duration::from_secs(30), || {
        let (url, data) = (url.clone(), data.path().to_path_buf());
        async move {
            let token = std::fs::read_to_string(data.join("agent.token")).ok()?;
            let agent = AgentClient::connect(&url, token.trim()).await.ok()?;
            let nodes = agent.list_nodes().await.ok()?;
            nodes
                .iter()
                .any(|n| n.id == "box" && n.online)
                .then_some(agent)
        }
    })
    .await;
    let admin = std::fs::read_to_string(data.path().join("admin.token")).unwrap();
    let pid = up.0.id();
    for path in own_proc_paths(pid, pid) {
        let r = call(
            &agent,
            "Read",
            json!({"path": path, "encoding": "base64", "offset": 0, "limit": 65536}),
        )
        .await;
        refused_with(&r, "protected", &format!("Read {path}"));
        assert!(!r.joined_text().contains(admin.trim()));
    }
    up.kill();
}

/// Another gsv's data on the same host, which this node was never told about: a
/// second node's `--data` (its credential and journal) and a gateway's non-default
/// `--data` (no `$GSV_DATA` pointing at it). Found by the marker every gsv process
/// leaves in its data directory and by the names of gsv's secret files.
#[tokio::test]
async fn other_gsv_data_directories_on_the_host_are_protected() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("gate-other-ws");
    let other_data = TempDir::new("gate-other-data");
    // The second node, with a data directory of its own.
    let mut cmd = Command::new(gsv_bin());
    cmd.args(["node", "--gateway", &gw.url(), "--id", "other"])
        .args(["--token", &gw.node_token("other")])
        .args(["--workspace", s(ws.path()), "--data", s(other_data.path())])
        .env("RUST_LOG", "warn")
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut other = Proc(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn the other node"),
    );
    gw.wait_online("other").await;
    let mut node = gw.spawn_node_with_env(
        "box",
        &gw.node_token("box"),
        ws.path(),
        &[],
        &[],
        &["GSV_DATA", "XDG_DATA_HOME"],
    );
    gw.wait_online("box").await;
    let agent = gw.agent_with(&file_tools_token(&gw)).await;
    let credential = other_data.path().join("node-other.credential");
    assert!(credential.is_file(), "the other node stored its credential");
    let cred_text = std::fs::read_to_string(&credential).unwrap();
    let admin = gw.data.path().join("admin.token");
    for f in [&credential, &admin, &gw.data.path().join("gsv.db")] {
        let r = call(&agent, "Read", json!({"path": s(f)})).await;
        refused_with(&r, "protected", &format!("Read {}", f.display()));
        let r = call(&agent, "Read", json!({"path": s(f), "encoding": "base64"})).await;
        refused_with(&r, "protected", &format!("Read base64 {}", f.display()));
    }
    // A symlink and a copy of the name inside the workspace lead to the same refusal.
    std::os::unix::fs::symlink(other_data.path(), ws.path().join("od")).unwrap();
    let r = call(&agent, "Read", json!({"path": "od/node-other.credential"})).await;
    refused_with(&r, "protected", "Read through a symlink");
    for dir in [other_data.path(), gw.data.path(), ws.path()] {
        for pattern in [cred_text.trim(), gw.admin_token().as_str()] {
            let r = call(
                &agent,
                "Grep",
                json!({"pattern": escape(pattern), "path": s(dir)}),
            )
            .await;
            assert!(
                found(&r).is_empty(),
                "Grep {}: {}",
                dir.display(),
                r.joined_text()
            );
        }
        let r = call(&agent, "Glob", json!({"pattern": "**/*", "path": s(dir)})).await;
        let names: Vec<String> = found(&r).iter().map(|m| m.to_string()).collect();
        assert!(
            !names
                .iter()
                .any(|n| n.contains("credential") || n.contains(".token")),
            "Glob {}: {names:?}",
            dir.display()
        );
    }
    // Nothing written into them either.
    let r = call(
        &agent,
        "Write",
        json!({"path": s(&other_data.path().join("planted")), "content": "x"}),
    )
    .await;
    refused_with(&r, "protected", "Write into another node's data");
    assert!(!other_data.path().join("planted").exists());
    node.kill();
    other.kill();
}

fn cp(gw: &Gateway, token: &str, args: &[&str]) -> (i32, String, String) {
    let mut all: Vec<&str> = vec!["cp"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--token", token]);
    tokio::task::block_in_place(|| gw.cli(&all))
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(ok.success());
}

/// Files that are not what they seem. A get of a FIFO used to strand one of the
/// node's blocking threads for good; now every get of one is refused at once and the
/// node goes on serving. Read refuses a character device as a special file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_files_are_refused_by_every_door() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("gate-fifo-ws");
    let local = TempDir::new("gate-fifo-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    mkfifo(&ws.path().join("pipe"));
    // More gets than the node has blocking threads to spare would have been stranded.
    let started = Instant::now();
    for i in 0..24 {
        let dest = local.path().join(format!("out{i}"));
        let (code, out, err) = cp(&gw, &token, &["box:pipe", s(&dest)]);
        assert_ne!(code, 0, "a FIFO must not be copied: {out} {err}");
        assert!(
            err.contains("FIFO") || err.contains("not a regular file"),
            "{err}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "no get waited on the FIFO"
    );
    let agent = gw.agent().await;
    for path in ["pipe", "/dev/zero", "/dev/null"] {
        let r = call(&agent, "Read", json!({"path": path})).await;
        refused_with(&r, "special_file", &format!("Read {path}"));
        let r = call(&agent, "Read", json!({"path": path, "encoding": "base64"})).await;
        refused_with(&r, "special_file", &format!("Read base64 {path}"));
    }
    // The node still serves ordinary copies.
    std::fs::write(ws.path().join("ok.txt"), "fine\n").unwrap();
    let dest = local.path().join("ok.txt");
    let (code, out, err) = cp(&gw, &token, &["box:ok.txt", s(&dest)]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(std::fs::read_to_string(dest).unwrap(), "fine\n");
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777
}

/// A put with Write rights alone used to land a setuid/setgid file (mode 6755) owned
/// by the node's user, and a get made `gsv cp` create setuid files and 0777
/// directories on the copying machine. Neither side gives those bits now, whatever
/// the other sends; Write over an existing setuid file does not keep the bits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_gsv_creates_gets_setuid_setgid_sticky_or_world_write() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("gate-mode-ws");
    let local = TempDir::new("gate-mode-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    // Put of a 6755 file.
    let src = local.path().join("tool");
    std::fs::write(&src, "#!/bin/sh\nid\n").unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let (code, out, err) = cp(&gw, &token, &[s(&src), "box:tool"]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(mode_of(&ws.path().join("tool")), 0o755);
    // A tree with a 1777 directory and a 4777 file, both ways.
    let tree = local.path().join("tree");
    std::fs::create_dir_all(tree.join("open")).unwrap();
    std::fs::write(tree.join("open/run"), "x").unwrap();
    std::fs::set_permissions(
        tree.join("open/run"),
        std::fs::Permissions::from_mode(0o4777),
    )
    .unwrap();
    std::fs::set_permissions(tree.join("open"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (code, out, err) = cp(&gw, &token, &["-r", s(&tree), "box:tree"]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(mode_of(&ws.path().join("tree/open")), 0o775);
    assert_eq!(mode_of(&ws.path().join("tree/open/run")), 0o775);
    // The node's side holds such files (made there by hand): a get does not carry the
    // bits onto the copying machine.
    std::fs::set_permissions(
        ws.path().join("tool"),
        std::fs::Permissions::from_mode(0o6777),
    )
    .unwrap();
    std::fs::set_permissions(
        ws.path().join("tree/open"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    let back = local.path().join("back");
    let (code, out, err) = cp(&gw, &token, &["box:tool", s(&back)]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(mode_of(&back), 0o775);
    let back_tree = local.path().join("back-tree");
    let (code, out, err) = cp(&gw, &token, &["-r", "box:tree", s(&back_tree)]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(mode_of(&back_tree.join("open")), 0o775);
    // Write over an existing setuid file keeps its owner and mode, but not the bits.
    let agent = gw.agent().await;
    let r = call(
        &agent,
        "Write",
        json!({"path": "tool", "content": "#!/bin/sh\n"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(mode_of(&ws.path().join("tool")), 0o775);
}

/// The marker that makes a directory gsv's is not an agent's to plant: a `.gsv-data`
/// (or any of gsv's secret names) made by Write, by a directory Write creates, or by a
/// copy would hide the files around it from every other agent's file tools. Refused,
/// and another agent still finds the files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_plant_the_marker_to_hide_files_from_others() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("gate-plant-ws");
    let local = TempDir::new("gate-plant-local");
    std::fs::create_dir_all(ws.path().join("shared")).unwrap();
    std::fs::write(ws.path().join("shared/report.txt"), "FINDME\n").unwrap();
    let _node = gw.node("box", ws.path()).await;
    let token = gw.agent_token();
    let hostile = gw.agent_with(&token).await;
    for path in [
        "shared/.gsv-data",
        "shared/.gsv-data/x",
        "shared/admin.token",
    ] {
        let r = call(&hostile, "Write", json!({"path": path, "content": ""})).await;
        refused_with(&r, "protected", &format!("Write {path}"));
    }
    let src = local.path().join("empty");
    std::fs::write(&src, "").unwrap();
    let (code, _, err) = cp(&gw, &token, &[s(&src), "box:shared/.gsv-data"]);
    assert_ne!(code, 0, "a copy planted the marker: {err}");
    assert!(!ws.path().join("shared/.gsv-data").exists());
    let other = gw.agent().await;
    let r = call(
        &other,
        "Grep",
        json!({"pattern": "FINDME", "path": "shared"}),
    )
    .await;
    assert_eq!(found(&r).len(), 1, "{}", r.joined_text());
}
