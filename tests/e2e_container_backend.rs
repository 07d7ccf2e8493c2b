//! End to end: a node that works inside a container (`gsv node --container NAME`),
//! through a real gateway, against a recorded fake engine on PATH that accepts only
//! the exact command lines a node may run (tests/fixtures/fake-engine.sh); and
//! against the real engine when this machine runs one.

mod common;

use base64::Engine;
use common::{eventually, http_request, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, ToolResult};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(&format!("box__{tool}"), args, None)
        .await
        .expect("call answered")
}

/// A `bin` directory holding the fake engine as `engine`, and its files.
struct Fake {
    bin: PathBuf,
    log: PathBuf,
    state: PathBuf,
    path: PathBuf,
    home: PathBuf,
}

impl Fake {
    fn new(dir: &Path, engine: &str) -> Fake {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-engine.sh");
        std::fs::copy(&fixture, bin.join(engine)).unwrap();
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let state = dir.join("state");
        std::fs::write(&state, "running").unwrap();
        let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .unwrap();
        Fake {
            log: dir.join("engine.log"),
            state,
            bin,
            path: PathBuf::from(path),
            home,
        }
    }

    fn env(&self) -> Vec<(&'static str, &Path)> {
        vec![
            ("PATH", self.path.as_path()),
            ("HOME", self.home.as_path()),
            ("FAKE_ENGINE_LOG", self.log.as_path()),
            ("FAKE_ENGINE_STATE", self.state.as_path()),
            ("FAKE_ENGINE_NAME", Path::new("web")),
        ]
    }
}

/// A gateway and node `box` working inside container `web` through `fake`, online;
/// its workspace is `DIR/ws`.
async fn box_node(dir: &Path, fake: &Fake) -> (Gateway, common::Proc, PathBuf) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let gw = Gateway::start().await;
    let node = gw.spawn_node_with_env(
        "box",
        &gw.node_token("box"),
        &ws,
        &["--container", "web"],
        &fake.env(),
        &[],
    );
    gw.wait_online("box").await;
    (gw, node, ws)
}

#[tokio::test]
async fn a_container_node_works_through_the_engine_and_goes_offline_with_it() {
    let dir = TempDir::new("container-backend");
    let fake = Fake::new(dir.path(), "docker");
    let (gw, _node, ws) = box_node(dir.path(), &fake).await;
    let agent = gw.agent().await;

    let r = call(&agent, "Bash", json!({"command": "echo inside; pwd"})).await;
    assert_eq!(sc(&r)["status"], "completed", "{}", r.joined_text());
    assert!(sc(&r)["output"].as_str().unwrap().contains("inside"));
    // Large content goes through `exec -i NAME /bin/sh -c`, small through the shell.
    for size in [10usize, 100_000] {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let r = call(
            &agent,
            "Write",
            json!({"path": "blob", "content": b64, "encoding": "base64"}),
        )
        .await;
        assert!(!r.is_error, "{}", r.joined_text());
        assert_eq!(std::fs::read(ws.join("blob")).unwrap(), bytes);
        let r = call(
            &agent,
            "Read",
            json!({"path": "blob", "encoding": "base64"}),
        )
        .await;
        assert_eq!(sc(&r)["data"], b64.as_str());
    }
    let r = call(
        &agent,
        "Bash",
        json!({"command": "sleep 0.3; echo bg", "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let s = eventually("the job ends", Duration::from_secs(20), || async {
        let r = call(
            &agent,
            "Process",
            json!({"action": "poll", "sessionId": id, "waitMs": 1000}),
        )
        .await;
        r.structured_content
            .clone()
            .filter(|s| s["status"] != "running")
    })
    .await;
    assert_eq!(s["status"], "completed", "{s}");

    // The facts say where the node works.
    let (status, body) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/box/probe",
        Some(&gw.admin_token()),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let probed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(probed["facts"]["backend"], "container", "{body}");
    assert_eq!(probed["facts"]["backendState"], "running", "{body}");

    // The container stops: each call is refused `node_offline`, and the facts say so.
    std::fs::write(&fake.state, "exited").unwrap();
    let e = eventually(
        "calls are refused node_offline",
        Duration::from_secs(20),
        || async {
            let e = agent
                .call("box__Bash", json!({"command": "true"}), None)
                .await
                .err()?;
            (e.remote()?.code == ErrorCode::NodeOffline).then_some(e)
        },
    )
    .await;
    assert!(e.to_string().contains("web"), "{e}");
    let (_, body) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/box/probe",
        Some(&gw.admin_token()),
        None,
    )
    .await;
    let probed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(probed["facts"]["backendState"], "not running", "{body}");
    // It starts again: calls work again.
    std::fs::write(&fake.state, "running").unwrap();
    eventually("calls work again", Duration::from_secs(20), || async {
        let r = agent
            .call("box__Bash", json!({"command": "echo back"}), None)
            .await
            .ok()?;
        (r.structured_content?["status"] == "completed").then_some(())
    })
    .await;

    // Every command line the node gave the engine was one of the three it may run.
    let log = std::fs::read_to_string(&fake.log).unwrap();
    let (mut shells, mut scripts, mut inspects) = (0, 0, 0);
    for line in log.lines() {
        if line == "docker [exec] [-i] [web] [/bin/sh]" {
            shells += 1;
        } else if line.starts_with("docker [exec] [-i] [web] [/bin/sh] [-c] [") {
            scripts += 1;
        } else if line == "docker [inspect] [-f] [{{.State.Running}}] [web]" {
            inspects += 1;
        } else {
            panic!("unexpected engine command line: {line}");
        }
    }
    assert!(shells > 0 && scripts > 0 && inspects > 0, "{log}");
    let _ = fake.bin;
}

#[tokio::test]
async fn the_engine_is_named_or_found_and_a_missing_container_is_waited_for() {
    let dir = TempDir::new("container-podman");
    let fake = Fake::new(dir.path(), "podman");
    std::fs::write(&fake.state, "absent").unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let gw = Gateway::start().await;
    let _node = gw.spawn_node_with_env(
        "box",
        &gw.node_token("box"),
        &ws,
        &["--container", "web", "--engine", "podman"],
        &fake.env(),
        &[],
    );
    // No container yet: the node waits for it instead of registering.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = std::fs::read_to_string(&fake.log).unwrap_or_default();
    assert!(
        log.starts_with("podman [exec] [-i] [web] [/bin/sh]"),
        "{log}"
    );
    std::fs::write(&fake.state, "running").unwrap();
    gw.wait_online("box").await;
    let agent = gw.agent().await;
    let r = call(&agent, "Bash", json!({"command": "echo ok"})).await;
    assert_eq!(sc(&r)["status"], "completed", "{}", r.joined_text());
}

/// Against the real engine, when this machine runs one (skipped otherwise: CI
/// machines usually have none; the fake engine above checks the command lines).
#[tokio::test]
async fn a_real_container_when_an_engine_runs_here() {
    let Some((engine, image)) = real_engine() else {
        eprintln!("skipped: no docker or podman with a local image here");
        return;
    };
    let name = format!("gsv-test-{}", std::process::id());
    let started = std::process::Command::new(&engine)
        .args([
            "run",
            "-d",
            "--rm",
            "--network",
            "none",
            "--name",
            &name,
            &image,
            "sleep",
            "300",
        ])
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let dir = TempDir::new("container-real");
    let gw = Gateway::start().await;
    let mut cmd = gw.node_command("box", &gw.node_token("box"), dir.path());
    // The workspace is a path in the container.
    cmd.args([
        "--container",
        &name,
        "--engine",
        &engine,
        "--workspace",
        "/tmp",
    ]);
    let _node = common::Proc(common::die_with_parent(&mut cmd).spawn().unwrap());
    gw.wait_online("box").await;
    let agent = gw.agent().await;
    let r = call(
        &agent,
        "Write",
        json!({"path": "x.txt", "content": "in the container"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let r = call(&agent, "Bash", json!({"command": "cat /tmp/x.txt"})).await;
    assert!(sc(&r)["output"]
        .as_str()
        .unwrap()
        .contains("in the container"));
    let _ = std::process::Command::new(&engine)
        .args(["rm", "-f", &name])
        .output();
}

fn real_engine() -> Option<(String, String)> {
    for engine in ["docker", "podman"] {
        let ok = std::process::Command::new(engine)
            .args(["info"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            continue;
        }
        // A small image already here (nothing is pulled: tests never leave loopback).
        for image in ["busybox", "alpine", "debian"] {
            let here = std::process::Command::new(engine)
                .args(["image", "inspect", image])
                .output()
                .is_ok_and(|o| o.status.success());
            if here {
                return Some((engine.to_owned(), image.to_owned()));
            }
        }
    }
    None
}

#[tokio::test]
async fn glob_and_grep_fall_back_to_find_and_grep_without_rg() {
    let dir = TempDir::new("container-fallback");
    let fake = Fake::new(dir.path(), "docker");
    // The "container" has the usual programs but no rg.
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for name in [
        "sh", "mkdir", "realpath", "readlink", "basename", "dirname", "wc", "cat", "head", "tail",
        "rm", "find", "grep", "awk", "ls", "mktemp", "cp", "chmod", "mv", "date", "uname",
        "getconf", "sleep", "tr", "env", "mkfifo", "setsid", "true", "false",
    ] {
        if let Some(p) = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.exists())
        {
            std::os::unix::fs::symlink(p, tools.join(name)).unwrap();
        }
    }
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/a.rs"), "fn alpha() {}\n").unwrap();
    std::fs::write(ws.join("src/b.txt"), "alpha\n").unwrap();
    let gw = Gateway::start().await;
    let mut env = fake.env();
    env.push(("FAKE_ENGINE_PATH", tools.as_path()));
    let _node = gw.spawn_node_with_env(
        "box",
        &gw.node_token("box"),
        &ws,
        &["--container", "web"],
        &env,
        &[],
    );
    gw.wait_online("box").await;
    let agent = gw.agent().await;
    let r = call(&agent, "Glob", json!({"pattern": "**/*.rs"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["count"], 1, "{}", r.joined_text());
    assert!(r.joined_text().contains("no rg"), "{}", r.joined_text());
    let r = call(
        &agent,
        "Grep",
        json!({"pattern": "alph[a]", "include": "*.rs"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["count"], 1, "{}", r.joined_text());
    assert_eq!(sc(&r)["matches"][0]["line"], 1);
    assert!(r.joined_text().contains("no rg"), "{}", r.joined_text());
}

/// Issue 42: copies to and from a `--container` node read and wrote the node
/// process's own machine, not the container. Refused with a clear error until copies
/// go through the engine, both ways; nothing read or written on this machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_to_a_container_node_are_refused_not_made_on_the_wrong_machine() {
    let dir = TempDir::new("container-cp");
    let fake = Fake::new(dir.path(), "docker");
    let (gw, _node, _ws) = box_node(dir.path(), &fake).await;
    let token = gw.agent_token();
    let secret = dir.path().join("host-secret");
    std::fs::write(&secret, "on the node's own machine").unwrap();
    let out = dir.path().join("stolen");
    let cp = |args: &[&str]| {
        let mut all = vec!["cp"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--token", &token]);
        tokio::task::block_in_place(|| gw.cli(&all))
    };
    let (code, _, err) = cp(&[&format!("box:{}", secret.display()), out.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("inside the container") && err.contains("not supported"),
        "{err}"
    );
    assert!(!out.exists());
    let planted = dir.path().join("planted");
    let (code, _, err) = cp(&[
        secret.to_str().unwrap(),
        &format!("box:{}", planted.display()),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("not supported"), "{err}");
    assert!(!planted.exists());
}
