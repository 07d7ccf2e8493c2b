//! End to end: the exec tool (argv, no shell) and `--approve-exec`, driven through a
//! real gateway and a real `gsv node` on loopback, as an agent uses them.

mod common;

use common::{eventually, next_approval_request, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(tool, args, Some(30_000))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn pid_alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

async fn poll_until_done(agent: &AgentClient, tool: &str, id: &str) -> Value {
    eventually("the session to finish", Duration::from_secs(15), || async {
        let p = call(
            agent,
            tool,
            json!({"action": "poll", "sessionId": id, "waitMs": 2000}),
        )
        .await;
        (sc(&p)["status"] != "running").then(|| sc(&p).clone())
    })
    .await
}

#[tokio::test]
async fn exec_runs_argv_without_a_shell() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let _node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;

    // Separate streams, exit code, timing.
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let s = sc(&r);
    assert_eq!(s["status"], "failed");
    assert_eq!(s["exitCode"], 3);
    assert_eq!(s["signal"], Value::Null);
    assert_eq!(s["stdout"], "out\n");
    assert_eq!(s["stderr"], "err\n");
    assert_eq!(s["timedOut"], false);
    assert!(s["durationMs"].as_u64().is_some() && s["startedAt"].as_u64().is_some());
    assert!(s["program"].as_str().unwrap().starts_with('/'), "{s}");

    // No shell: metacharacters are plain arguments.
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["echo", "$HOME; touch PWNED", "*"]}),
    )
    .await;
    assert_eq!(sc(&r)["stdout"], "$HOME; touch PWNED *\n");
    assert_eq!(sc(&r)["status"], "completed");
    assert!(!ws.path().join("PWNED").exists());

    // The shell blocklist judges the argv as the command line it amounts to (the
    // destructive part sits behind `false &&`: harmless even if the guard failed).
    let e = agent
        .call(
            "box__exec",
            json!({"argv": ["sh", "-c", "false && reboot; touch BLOCKED"]}),
            Some(30_000),
        )
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, gsv_protocol::ErrorCode::Denied);
    assert!(!ws.path().join("BLOCKED").exists());

    // Killed by a signal.
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["sh", "-c", "kill -TERM $$"]}),
    )
    .await;
    assert_eq!(sc(&r)["signal"], "SIGTERM");
    assert_eq!(sc(&r)["exitCode"], Value::Null);

    // A timeout kills the whole process tree.
    let started = Instant::now();
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["sh", "-c", "sleep 1000 & echo $!; wait"], "timeout": 500}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(sc(&r)["timedOut"], true);
    let child: u64 = sc(&r)["stdout"].as_str().unwrap().trim().parse().unwrap();
    eventually("the grandchild to die", Duration::from_secs(10), || async {
        (!pid_alive(child)).then_some(())
    })
    .await;

    // stdin, env, cwd.
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["cat"], "stdin": "fed\nin"}),
    )
    .await;
    assert_eq!(sc(&r)["stdout"], "fed\nin");
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["sh", "-c", "echo $GSV_T"], "env": {"GSV_T": "v a l"}}),
    )
    .await;
    assert_eq!(sc(&r)["stdout"], "v a l\n");
    let r = call(&agent, "box__exec", json!({"argv": ["pwd"], "cwd": "sub"})).await;
    assert!(
        sc(&r)["stdout"]
            .as_str()
            .unwrap()
            .trim_end()
            .ends_with("/sub"),
        "{}",
        r.joined_text()
    );
    // A planted program is found only by path, relative to cwd.
    let r = call(&agent, "box__exec", json!({"argv": ["./nope"]})).await;
    assert!(r.is_error);
    let r = call(&agent, "box__exec", json!({"argv": [""]})).await;
    assert!(
        r.is_error && r.joined_text().contains("argv[0]"),
        "{}",
        r.joined_text()
    );

    // Background, then Process poll and kill.
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["sleep", "30"], "background": true}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "running");
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let p = call(
        &agent,
        "box__Process",
        json!({"action": "poll", "sessionId": id}),
    )
    .await;
    assert_eq!(sc(&p)["status"], "running");
    let k = call(
        &agent,
        "box__Process",
        json!({"action": "kill", "sessionId": id}),
    )
    .await;
    assert!(!k.is_error, "{}", k.joined_text());
    let done = poll_until_done(&agent, "box__Process", &id).await;
    assert_eq!(done["status"], "failed");

    // yieldMs: quick ones return the result, slow ones go on in the background.
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["echo", "quick"], "yieldMs": 10000}),
    )
    .await;
    assert_eq!(sc(&r)["stdout"], "quick\n");
    let r = call(
        &agent,
        "box__exec",
        json!({"argv": ["sh", "-c", "sleep 0.5; echo done"], "yieldMs": 50}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "running");
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let done = poll_until_done(&agent, "box__Process", &id).await;
    assert_eq!(done["status"], "completed");
    let log = call(
        &agent,
        "box__Process",
        json!({"action": "log", "sessionId": id, "stream": "stdout"}),
    )
    .await;
    assert!(
        sc(&log)["output"].as_str().unwrap_or("").contains("done"),
        "{}",
        log.joined_text()
    );

    // cwd follows the file tools' rules: a confined node refuses one outside.
    let ws2 = TempDir::new("ws2");
    let _confined = gw.spawn_node("conf", &gw.node_token("conf"), ws2.path(), &["--confine"]);
    gw.wait_online("conf").await;
    let r = call(
        &agent,
        "conf__exec",
        json!({"argv": ["pwd"], "cwd": "/etc"}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    let r = call(&agent, "conf__exec", json!({"argv": ["pwd"], "cwd": "."})).await;
    assert!(!r.is_error, "{}", r.joined_text());
}

fn plant(path: &std::path::Path, marker: &std::path::Path) {
    std::fs::write(
        path,
        format!("#!/bin/sh\ntouch '{}'\necho planted\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn approve_exec_allowlists_argv_and_asks_for_the_rest() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let marker = ws.path().join("PLANTED_RAN");
    let bin = ws.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    plant(&ws.path().join("systemctl"), &marker);
    plant(&bin.join("systemctl"), &marker);
    // The node's own PATH, and its login PATH (through the profile of its HOME),
    // start with the planted directory.
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = TempDir::new("home");
    std::fs::write(
        home.path().join(".profile"),
        format!("PATH=\"{}:$PATH\"\nexport PATH\n", bin.display()),
    )
    .unwrap();
    let _node = gw.spawn_node_with_env(
        "ax",
        &gw.node_token("ax"),
        ws.path(),
        &[
            "--approve-exec",
            "/usr/bin/systemctl --version",
            "--approve-exec",
            "/usr/bin/echo hello *",
            "--approve-exec",
            "/usr/bin/git config --get **",
        ],
        &[("PATH", std::path::Path::new(&path)), ("HOME", home.path())],
        &[],
    );
    gw.wait_online("ax").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);

    // Matching argv runs at once; the same program via `..` is the same entry.
    let r = call(
        &agent,
        "ax__exec",
        json!({"argv": ["/usr/bin/echo", "hello", "x"]}),
    )
    .await;
    assert_eq!(sc(&r)["stdout"], "hello x\n", "{}", r.joined_text());
    let r = call(
        &agent,
        "ax__exec",
        json!({"argv": ["/usr/bin/../bin/systemctl", "--version"]}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert!(
        sc(&r)["stdout"].as_str().unwrap().contains("systemd"),
        "{}",
        r.joined_text()
    );
    // Auto-approved runs get git's hardening.
    let r = call(
        &agent,
        "ax__exec",
        json!({"argv": ["/usr/bin/git", "config", "--get", "core.hooksPath"]}),
    )
    .await;
    assert_eq!(sc(&r)["stdout"], "/dev/null\n", "{}", r.joined_text());

    // Everything below needs an operator; without one, nothing happens.
    for args in [
        json!({"argv": ["./systemctl", "--version"]}),
        json!({"argv": ["bin/systemctl", "--version"]}),
        json!({"argv": ["/usr/bin/echo", "hello"]}),
        json!({"argv": ["/usr/bin/echo", "bye", "x"]}),
        json!({"argv": ["/usr/bin/systemctl", "--version"], "env": {"LD_PRELOAD": "x"}}),
        json!({"argv": ["sh", "-c", "touch NOPE"]}),
    ] {
        let a = agent.clone();
        let sent = args.clone();
        let call = tokio::spawn(async move { a.call("ax__exec", sent, Some(60_000)).await });
        let req = next_approval_request(&operator).await;
        assert_eq!(req["tool"], "exec", "{args}");
        assert!(
            req["reason"].as_str().unwrap().contains("--approve-exec"),
            "{req}"
        );
        let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(call.await.unwrap().is_err(), "{args}");
    }
    // By bare name, systemctl resolves on the node's PATH at call time, where the
    // planted one comes first: another path than the entry's, so it waits.
    let a = agent.clone();
    let bare = tokio::spawn(async move {
        a.call(
            "ax__exec",
            json!({"argv": ["systemctl", "--version"]}),
            Some(60_000),
        )
        .await
    });
    let req = next_approval_request(&operator).await;
    let planted = std::fs::canonicalize(bin.join("systemctl")).unwrap();
    assert!(
        req["reason"]
            .as_str()
            .unwrap()
            .contains(planted.to_str().unwrap()),
        "{req}"
    );
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(bare.await.unwrap().is_err());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!marker.exists(), "a planted systemctl ran");
    assert!(!ws.path().join("NOPE").exists());

    // No operator: the call ends without effect.
    let r = agent
        .call("ax__exec", json!({"argv": ["touch", "LATE"]}), Some(2_000))
        .await;
    assert!(r.is_err() || r.unwrap().is_error);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!ws.path().join("LATE").exists());
    let _ = tokio::time::timeout(Duration::from_secs(1), next_approval_request(&operator)).await;

    // Approved, a call outside the allowlist runs.
    let a = agent.clone();
    let call_t = tokio::spawn(async move {
        a.call("ax__exec", json!({"argv": ["touch", "OK"]}), Some(60_000))
            .await
    });
    let req = next_approval_request(&operator).await;
    let (code, _, err) = gw.cli(&["approvals", "approve", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let r = call_t.await.unwrap().unwrap();
    assert!(!r.is_error, "{}", r.joined_text());
    assert!(ws.path().join("OK").exists());

    // Bash is no way around the allowlist: every command waits too.
    let a = agent.clone();
    let bash = tokio::spawn(async move {
        a.call(
            "ax__Bash",
            json!({"command": "touch VIA_BASH"}),
            Some(60_000),
        )
        .await
    });
    let req = next_approval_request(&operator).await;
    assert_eq!(req["tool"], "Bash");
    assert!(
        req["reason"].as_str().unwrap().contains("--approve-exec"),
        "{req}"
    );
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(bash.await.unwrap().is_err());
    assert!(!ws.path().join("VIA_BASH").exists());
}

#[test]
fn a_bad_approve_exec_entry_is_a_usage_error() {
    let out = std::process::Command::new(common::gsv_bin())
        .args([
            "node",
            "--gateway",
            "ws://127.0.0.1:1",
            "--id",
            "x",
            "--token",
            "t",
            "--approve-exec",
            "./systemctl status *",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--approve-exec"), "{err}");
}
