//! End to end: the file tools cannot be raced out of `--confine` (issue 14 item 7), and
//! never touch the node's or the gateway's data, confined or not (item 8). Real
//! gateways and nodes on loopback.

mod common;

use common::{eventually, gsv_bin, Gateway, Proc, TempDir};
use gsv_client::{AgentClient, TlsOptions};
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(&format!("box__{tool}"), args, None)
        .await
        .expect("call")
}

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_owned()
}

/// Swaps two entries with `renameat2(RENAME_EXCHANGE)` until stopped (bounded by a
/// count and a time cap); returns how many swaps it made.
#[cfg(target_os = "linux")]
fn swapper(
    a: PathBuf,
    b: PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    use std::os::unix::ffi::OsStrExt;
    std::thread::spawn(move || {
        let a = std::ffi::CString::new(a.as_os_str().as_bytes()).unwrap();
        let b = std::ffi::CString::new(b.as_os_str().as_bytes()).unwrap();
        let started = Instant::now();
        let mut swaps = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed)
            && swaps < 100_000_000
            && started.elapsed() < Duration::from_secs(180)
        {
            // SAFETY: two valid NUL-terminated paths; AT_FDCWD; no memory is shared.
            let rc = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            };
            assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
            swaps += 1;
        }
        swaps
    })
}

/// Issue 14 item 7: a directory inside the workspace is swapped, over and over, with a
/// symlink (also inside) that points outside, while the agent reads, writes and greps
/// through it. Before openat2 some of the 400 Reads returned the outside file and some
/// Writes landed outside; now no Read returns it, no file appears outside, Grep never
/// finds the outside line and Glob never lists an outside name.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn confined_tools_never_cross_a_directory_swapped_for_a_symlink() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const SECRET: &str = "OUTSIDE-SECRET-7f3a";
    let gw = Gateway::start().await;
    let ws = TempDir::new("race-ws");
    let outside = TempDir::new("race-out");
    std::fs::write(outside.path().join("secret.txt"), SECRET).unwrap();
    std::fs::write(outside.path().join("outside-only.txt"), "o").unwrap();
    std::fs::create_dir(ws.path().join("d")).unwrap();
    std::fs::write(ws.path().join("d/secret.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("l")).unwrap();
    let _node = gw.spawn_node("box", &gw.node_token("box"), ws.path(), &["--confine"]);
    gw.wait_online("box").await;
    let agent = gw.agent().await;

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(ws.path().join("d"), ws.path().join("l"), Arc::clone(&stop));
    let deadline = Instant::now() + Duration::from_secs(150);
    let (mut inside, mut leaked) = (0, Vec::new());
    for i in 0..400 {
        if Instant::now() > deadline {
            break;
        }
        let r = call(&agent, "Read", json!({"path": "d/secret.txt"})).await;
        let text = r.joined_text();
        if text.contains(SECRET) {
            leaked.push(format!("Read {i}: {text}"));
        }
        if !r.is_error && text.contains("inside") {
            inside += 1;
        }
        if i % 2 == 0 {
            call(
                &agent,
                "Write",
                json!({"path": format!("d/w-{i}.txt"), "content": "w"}),
            )
            .await;
        }
        if i % 8 == 4 {
            let r = call(&agent, "Glob", json!({"pattern": "**/*.txt"})).await;
            let listed = matches(&r);
            if listed
                .iter()
                .any(|m| m.as_str().is_some_and(|m| m.ends_with("outside-only.txt")))
            {
                leaked.push(format!("Glob {i}: {}", r.joined_text()));
            }
        }
        if i % 8 == 0 {
            let r = call(&agent, "Grep", json!({"pattern": SECRET})).await;
            if !matches(&r).is_empty() {
                leaked.push(format!("Grep {i}: {}", r.joined_text()));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().expect("swapper");
    assert!(swaps > 1000, "the race was not exercised ({swaps} swaps)");
    let mut outside_now: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    outside_now.sort();
    assert!(
        leaked.is_empty() && outside_now == ["outside-only.txt", "secret.txt"],
        "content from outside came back: {leaked:?}; files now outside: {outside_now:?}"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        SECRET
    );
    // The tools kept working for what is inside.
    assert!(inside > 0, "no Read succeeded while racing");
}

/// The files no file tool may touch, with what must never come back from them.
struct Guarded {
    /// Protected files (each one inside the workspace, so `--confine` alone would not
    /// refuse it).
    files: Vec<PathBuf>,
    /// Protected directories.
    dirs: Vec<PathBuf>,
}

fn refused(r: &ToolResult, what: &str) {
    assert!(r.is_error, "{what} must be refused: {}", r.joined_text());
}

fn refused_as_protected(r: &ToolResult, what: &str) {
    refused(r, what);
    let sc = r
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no code: {}", r.joined_text()));
    assert_eq!(sc["code"], "denied", "{what}: {}", r.joined_text());
    assert_eq!(sc["reason"], "protected", "{what}: {}", r.joined_text());
}

fn matches(r: &ToolResult) -> Vec<Value> {
    r.structured_content
        .as_ref()
        .and_then(|s| s["matches"].as_array().cloned())
        .unwrap_or_default()
}

/// Every file tool against every protected file, through its path, a symlink, `..`
/// and a hard link (all inside the workspace `ws`), and Glob/Grep over the workspace
/// and the protected directories themselves.
async fn assert_guarded(agent: &AgentClient, ws: &Path, g: &Guarded) {
    let ws_name = ws.file_name().unwrap().to_str().unwrap();
    let before: Vec<Vec<u8>> = g.files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let mut ways: Vec<(String, PathBuf)> = Vec::new();
    for (i, f) in g.files.iter().enumerate() {
        let rel = f
            .strip_prefix(ws)
            .expect("protected file inside the workspace");
        let link = ws.join(format!("link-{i}"));
        let hard = ws.join(format!("hard-{i}"));
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_file(&hard);
        std::os::unix::fs::symlink(f, &link).unwrap();
        std::fs::hard_link(f, &hard).unwrap();
        ways.push((s(f), f.clone()));
        ways.push((s(rel), f.clone()));
        ways.push((format!("link-{i}"), f.clone()));
        ways.push((format!("../{ws_name}/{}", s(rel)), f.clone()));
        ways.push((format!("./x/../{}", s(rel)), f.clone()));
        ways.push((format!("hard-{i}"), f.clone()));
    }
    // `./x/../` needs x to exist for the kernel to take `..` after it.
    std::fs::create_dir_all(ws.join("x")).unwrap();
    for (path, file) in &ways {
        let what = format!("{path} ({})", file.display());
        let r = call(agent, "Read", json!({"path": path})).await;
        refused_as_protected(&r, &format!("Read {what}"));
        let r = call(agent, "Write", json!({"path": path, "content": "pwned"})).await;
        refused_as_protected(&r, &format!("Write {what}"));
        let r = call(
            agent,
            "Edit",
            json!({"path": path, "oldString": "a", "newString": "pwned", "replaceAll": true}),
        )
        .await;
        refused_as_protected(&r, &format!("Edit {what}"));
        let r = call(agent, "Grep", json!({"pattern": ".", "path": path})).await;
        assert!(!r.is_error, "Grep {what}: {}", r.joined_text());
        assert!(matches(&r).is_empty(), "Grep {what}: {}", r.joined_text());
    }
    // Writing a new file into a protected directory, directly or through `..`.
    for (i, dir) in g.dirs.iter().enumerate() {
        let rel = s(dir.strip_prefix(ws).unwrap());
        for path in [
            s(&dir.join("planted")),
            format!("{rel}/planted"),
            format!("x/../{rel}/sub/planted"),
        ] {
            let r = call(agent, "Write", json!({"path": path, "content": "x"})).await;
            refused_as_protected(&r, &format!("Write {path}"));
        }
        assert!(!dir.join("planted").exists() && !dir.join("sub").exists());
        // Glob and Grep started inside find nothing, also through a symlink.
        let dlink = ws.join(format!("dlink-{i}"));
        let _ = std::fs::remove_file(&dlink);
        std::os::unix::fs::symlink(dir, &dlink).unwrap();
        for path in [s(dir), rel.clone(), format!("dlink-{i}")] {
            let r = call(agent, "Glob", json!({"pattern": "**/*", "path": path})).await;
            assert!(
                matches(&r).is_empty(),
                "Glob in {path}: {}",
                r.joined_text()
            );
            let r = call(agent, "Grep", json!({"pattern": ".", "path": path})).await;
            assert!(
                matches(&r).is_empty(),
                "Grep in {path}: {}",
                r.joined_text()
            );
        }
    }
    // A walk over the whole workspace skips them silently and still finds the rest.
    std::fs::write(ws.join("ok.txt"), "an ordinary line\n").unwrap();
    let r = call(agent, "Glob", json!({"pattern": "**/*"})).await;
    let listed: Vec<String> = matches(&r)
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect();
    assert!(
        listed.iter().any(|m| m.ends_with("ok.txt")),
        "Glob: {listed:?}"
    );
    for m in &listed {
        let name = Path::new(m).file_name().unwrap().to_str().unwrap();
        assert!(
            !(name.starts_with("link-") || name.starts_with("hard-")),
            "Glob listed {m}"
        );
        for f in &g.files {
            assert_ne!(Path::new(m), f.as_path(), "Glob listed a protected file");
        }
        for d in &g.dirs {
            assert!(!Path::new(m).starts_with(d), "Glob listed {m}");
        }
    }
    let r = call(agent, "Grep", json!({"pattern": "."})).await;
    let hits = matches(&r);
    assert!(
        hits.iter()
            .any(|h| h["path"].as_str().unwrap().ends_with("ok.txt")),
        "Grep: {}",
        r.joined_text()
    );
    for h in &hits {
        let p = h["path"].as_str().unwrap();
        let name = Path::new(p).file_name().unwrap().to_str().unwrap();
        assert!(
            !(name.starts_with("link-") || name.starts_with("hard-")),
            "Grep searched {p}"
        );
        assert!(
            !g.dirs.iter().any(|d| Path::new(p).starts_with(d)) && !p.contains("dlink-"),
            "Grep searched {p}"
        );
    }
    // Nothing protected changed.
    for (f, old) in g.files.iter().zip(&before) {
        if f.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("gsv.db"))
        {
            continue; // the gateway itself writes its database
        }
        assert_eq!(&std::fs::read(f).unwrap(), old, "{} changed", f.display());
    }
}

/// A TLS certificate and key made by a throwaway self-signed gateway, copied to `dir`
/// (so `gsv up --tls-key` can point outside its data directory).
async fn make_tls_files(dir: &Path) -> (PathBuf, PathBuf) {
    let mut gw = Gateway::start_with(&["--tls-self-signed"]).await;
    gw.kill();
    std::fs::create_dir_all(dir).unwrap();
    let cert = dir.join("tls-cert.pem");
    let key = dir.join("tls-key.pem");
    std::fs::copy(gw.data.path().join("tls-cert.pem"), &cert).unwrap();
    std::fs::copy(gw.data.path().join("tls-key.pem"), &key).unwrap();
    (cert, key)
}

/// `gsv up` with its data directory and its TLS key inside the node's workspace.
async fn start_up(ws: &Path, data: &Path, cert: &Path, key: &Path, extra: &[&str]) -> Proc {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let listen = format!("127.0.0.1:{port}");
    let up = Proc(
        common::die_with_parent(&mut Command::new(gsv_bin()))
            .args(["up", "--listen", &listen, "--node-id", "box", "--workspace"])
            .arg(ws)
            .arg("--data")
            .arg(data)
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .args(extra)
            .env("RUST_LOG", "warn")
            .env("GSV_DATA", data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn gsv up"),
    );
    up
}

async fn up_agent(data: &Path, cert: &Path, port_of: &Path) -> AgentClient {
    let tls = TlsOptions {
        ca: None,
        pin: gsv_gateway::tls::fingerprint_pem_file(cert).ok(),
    };
    let (data, port_of) = (data.to_path_buf(), port_of.to_path_buf());
    eventually(
        "gsv up with its node online",
        Duration::from_secs(30),
        || {
            let (data, tls, port_of) = (data.clone(), tls.clone(), port_of.clone());
            async move {
                let addr = std::fs::read_to_string(port_of).ok()?;
                let addr = addr.trim();
                let url = if addr.starts_with("https://") {
                    addr.to_owned()
                } else {
                    format!("https://{addr}")
                };
                let token = std::fs::read_to_string(data.join("agent.token")).ok()?;
                let agent = AgentClient::connect_with(&url, token.trim(), &tls)
                    .await
                    .ok()?;
                let nodes = agent.list_nodes().await.ok()?;
                nodes
                    .iter()
                    .any(|n| n.id == "box" && n.online)
                    .then_some(agent)
            }
        },
    )
    .await
}

/// Issue 14 item 8, the reported attack: on the node `gsv up` starts, no file tool
/// reaches admin.token, agent.token, node.token, gsv.db or the TLS key (here outside
/// the data directory), by path, symlink, `..` or hard link — with and without
/// `--confine` (the data directory and key sit inside the workspace, so confinement
/// alone would allow them).
#[tokio::test]
async fn gsv_up_node_never_touches_the_gateway_data_or_tls_key() {
    for extra in [&[][..], &["--confine"][..]] {
        let ws = TempDir::new("guard-ws");
        let data = ws.path().join("gsvdata");
        let keys = ws.path().join("keys");
        let (cert, key) = make_tls_files(&keys).await;
        let mut up = start_up(ws.path(), &data, &cert, &key, extra).await;
        let agent = up_agent(&data, &cert, &data.join("gateway.addr")).await;
        // A normal file works, so refusals below are not a broken node.
        std::fs::write(ws.path().join("hello.txt"), "hello\n").unwrap();
        let r = call(&agent, "Read", json!({"path": "hello.txt"})).await;
        assert!(!r.is_error, "{extra:?}: {}", r.joined_text());
        let mut files: Vec<PathBuf> = ["admin.token", "agent.token", "node.token", "gsv.db"]
            .iter()
            .map(|f| data.join(f))
            .collect();
        files.push(key.clone());
        for f in &files {
            assert!(f.is_file(), "{} missing", f.display());
        }
        // The token values themselves never come back from a Grep anywhere.
        let tokens: Vec<String> = files[..3]
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap().trim().to_owned())
            .collect();
        assert_guarded(
            &agent,
            ws.path(),
            &Guarded {
                files,
                dirs: vec![data.clone()],
            },
        )
        .await;
        for t in &tokens {
            let r = call(&agent, "Grep", json!({"pattern": regex_escape(t)})).await;
            assert!(matches(&r).is_empty(), "{extra:?}: {}", r.joined_text());
        }
        let r = call(&agent, "Grep", json!({"pattern": "PRIVATE KEY"})).await;
        assert!(matches(&r).is_empty(), "{extra:?}: {}", r.joined_text());
        up.kill();
    }
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if !r"\.+*?()|[]{}^$#&-~".contains(c) {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// A standalone `gsv node` on the gateway's host: its own credential
/// (`node-box.credential` in its `--data`) and the default gateway data directory
/// (`$GSV_DATA`, here the running gateway's) are protected, with and without
/// `--confine`.
#[tokio::test]
async fn standalone_node_protects_its_credential_and_the_default_gateway_data() {
    for confine in [false, true] {
        let gw = Gateway::start().await;
        let ws = TempDir::new("guard-node-ws");
        let node_data = ws.path().join("nodedata");
        let mut cmd = Command::new(gsv_bin());
        cmd.arg("node")
            .arg("--gateway")
            .arg(gw.url())
            .args(["--id", "box", "--token", &gw.node_token("box")])
            .arg("--workspace")
            .arg(ws.path())
            .arg("--data")
            .arg(&node_data)
            .args(["--heartbeat-ms", "1000"])
            .args(if confine { &["--confine"][..] } else { &[][..] })
            .env("RUST_LOG", "warn")
            .env("GSV_DATA", gw.data.path())
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let _node = Proc(common::die_with_parent(&mut cmd).spawn().expect("spawn"));
        gw.wait_online("box").await;
        let agent = gw.agent().await;
        let credential = node_data.join("node-box.credential");
        assert!(credential.is_file());
        assert_guarded(
            &agent,
            ws.path(),
            &Guarded {
                files: vec![credential.clone()],
                dirs: vec![node_data.clone()],
            },
        )
        .await;
        // The gateway's data directory (outside the workspace): refused as protected
        // when not confined (confined, it is outside the workspace anyway).
        let admin = gw.data.path().join("admin.token");
        let r = call(&agent, "Read", json!({"path": s(&admin)})).await;
        if confine {
            refused(&r, "Read admin.token (confined)");
            let sc = r.structured_content.as_ref().expect("refusal code");
            assert_eq!(sc["code"], "denied", "{}", r.joined_text());
            assert_eq!(sc["reason"], "outside_workspace", "{}", r.joined_text());
        } else {
            refused_as_protected(&r, "Read admin.token");
        }
        assert!(!r.joined_text().contains(&gw.admin_token()));
        let r = call(
            &agent,
            "Grep",
            json!({"pattern": regex_escape(&gw.admin_token()), "path": s(gw.data.path())}),
        )
        .await;
        assert!(matches(&r).is_empty(), "{}", r.joined_text());
        let r = call(
            &agent,
            "Glob",
            json!({"pattern": "*", "path": s(gw.data.path())}),
        )
        .await;
        assert!(matches(&r).is_empty(), "{}", r.joined_text());
    }
}

/// `gsv node --protect PATH` protects a path of the operator's choosing.
#[tokio::test]
async fn protect_flag_adds_a_path() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("guard-protect-ws");
    let secret = ws.path().join("secret.env");
    std::fs::write(&secret, "API_KEY=abc\n").unwrap();
    let _node = gw.spawn_node(
        "box",
        &gw.node_token("box"),
        ws.path(),
        &["--protect", &s(&secret)],
    );
    gw.wait_online("box").await;
    let agent = gw.agent().await;
    let r = call(&agent, "Read", json!({"path": "secret.env"})).await;
    refused_as_protected(&r, "Read secret.env");
    let r = call(&agent, "Grep", json!({"pattern": "API_KEY"})).await;
    assert!(matches(&r).is_empty(), "{}", r.joined_text());
}
