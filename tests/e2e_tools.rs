//! End to end: the Bash and Process tools and the session manager, driven through a
//! real gateway and a real node on loopback, as an agent uses them.

mod common;

use common::{eventually, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, EventName, ToolResult};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn setup() -> (Gateway, TempDir, common::Proc, AgentClient) {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;
    (gw, ws, node, agent)
}

async fn bash(agent: &AgentClient, args: Value) -> ToolResult {
    agent
        .call("box__Bash", args, None)
        .await
        .expect("Bash call")
}

async fn process(agent: &AgentClient, args: Value) -> ToolResult {
    agent
        .call("box__Process", args, None)
        .await
        .expect("Process call")
}

/// Waits until a session's output starts with a number (a pid it echoed) and returns it.
async fn first_output_line_number(agent: &AgentClient, id: &str, what: &str) -> u64 {
    eventually(what, Duration::from_secs(10), || async {
        let log = process(agent, json!({"action": "log", "sessionId": id})).await;
        sc(&log)["output"]
            .as_str()?
            .trim()
            .lines()
            .next()?
            .parse()
            .ok()
    })
    .await
}

fn pid_alive(pid: u64) -> bool {
    // A zombie still has a /proc entry; it is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

#[tokio::test]
async fn bash_sync_yield_and_background() {
    let (_gw, ws, _node, agent) = setup().await;
    let r = bash(
        &agent,
        json!({"command": "echo hello; echo oops >&2; pwd; exit 3"}),
    )
    .await;
    assert!(!r.is_error);
    let s = sc(&r);
    assert_eq!(s["status"], "failed");
    assert_eq!(s["exitCode"], 3);
    assert_eq!(s["timedOut"], false);
    let out = s["output"].as_str().unwrap();
    assert!(out.contains("hello") && out.contains("oops"), "{out}");
    assert!(
        out.contains(ws.path().to_str().unwrap()),
        "runs in the workspace: {out}"
    );
    for field in [
        "sessionId",
        "startedAt",
        "endedAt",
        "durationMs",
        "tail",
        "truncated",
        "workdir",
        "signal",
    ] {
        assert!(s.get(field).is_some(), "missing {field}");
    }

    // A yield that completes in time returns the result.
    let r = bash(&agent, json!({"command": "echo quick", "yieldMs": 10000})).await;
    assert_eq!(sc(&r)["status"], "completed");
    assert_eq!(sc(&r)["output"].as_str().unwrap().trim(), "quick");

    // One that does not backgrounds, and poll with waitMs returns when it ends.
    let r = bash(
        &agent,
        json!({"command": "sleep 0.6; echo done", "yieldMs": 50}),
    )
    .await;
    let s = sc(&r).clone();
    assert_eq!(s["status"], "running");
    assert!(s["pid"].as_u64().unwrap() > 0);
    let id = s["sessionId"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let mut status = Value::Null;
    for _ in 0..10 {
        let p = process(
            &agent,
            json!({"action": "poll", "sessionId": id, "waitMs": 5000}),
        )
        .await;
        status = sc(&p)["status"].clone();
        if status != "running" {
            break;
        }
    }
    assert_eq!(status, "completed");
    assert!(started.elapsed() < Duration::from_secs(5));
    let log = process(&agent, json!({"action": "log", "sessionId": id})).await;
    assert!(sc(&log)["output"].as_str().unwrap().contains("done"));
    assert!(sc(&log)["totalLines"].as_u64().unwrap() >= 1);

    // background: true returns at once.
    let started = Instant::now();
    let r = bash(&agent, json!({"command": "sleep 30", "background": true})).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let list = process(&agent, json!({"action": "list"})).await;
    let ids: Vec<&str> = sc(&list)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&id.as_str()));
    let k = process(&agent, json!({"action": "kill", "sessionId": id})).await;
    assert!(!k.is_error, "{}", k.joined_text());
}

#[tokio::test]
async fn write_and_submit_to_stdin() {
    let (_gw, _ws, _node, agent) = setup().await;
    let r = bash(
        &agent,
        json!({"command": "read x; echo got $x", "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let w = process(
        &agent,
        json!({"action": "submit", "sessionId": id, "data": "42"}),
    )
    .await;
    assert!(!w.is_error, "{}", w.joined_text());
    let p = process(
        &agent,
        json!({"action": "poll", "sessionId": id, "waitMs": 5000}),
    )
    .await;
    let p = if sc(&p)["status"] == "running" {
        process(
            &agent,
            json!({"action": "poll", "sessionId": id, "waitMs": 5000}),
        )
        .await
    } else {
        p
    };
    // The whole poll answer on failure: it failed once in a loaded SSH-backed run.
    assert_eq!(sc(&p)["status"], "completed", "{}", sc(&p));
    let log = process(&agent, json!({"action": "log", "sessionId": id})).await;
    assert!(sc(&log)["output"].as_str().unwrap().contains("got 42"));

    let r = bash(&agent, json!({"command": "cat", "background": true})).await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    process(
        &agent,
        json!({"action": "write", "sessionId": id, "data": "abc"}),
    )
    .await;
    process(
        &agent,
        json!({"action": "submit", "sessionId": id, "data": "def"}),
    )
    .await;
    let text = eventually("cat to echo its input", Duration::from_secs(10), || async {
        let log = process(&agent, json!({"action": "log", "sessionId": id})).await;
        let out = sc(&log)["output"].as_str().unwrap_or("").to_owned();
        out.contains("abcdef").then_some(out)
    })
    .await;
    assert!(text.contains("abcdef"));
    process(&agent, json!({"action": "kill", "sessionId": id})).await;
    // Writing to an exited session is an error the agent can read.
    let w = process(
        &agent,
        json!({"action": "write", "sessionId": id, "data": "x"}),
    )
    .await;
    assert!(w.is_error);
    assert!(w.joined_text().contains("exited"), "{}", w.joined_text());
}

#[tokio::test]
async fn kill_and_timeout_take_the_whole_process_tree() {
    let (_gw, _ws, _node, agent) = setup().await;
    // kill: the grandchild started with `&` dies too.
    let r = bash(
        &agent,
        json!({"command": "sleep 1000 & echo $!; sleep 1000", "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let grandchild: u64 = first_output_line_number(&agent, &id, "the grandchild pid").await;
    assert!(pid_alive(grandchild));
    let k = process(&agent, json!({"action": "kill", "sessionId": id})).await;
    assert!(!k.is_error);
    eventually(
        "the grandchild to die after kill",
        Duration::from_secs(10),
        || async { (!pid_alive(grandchild)).then_some(()) },
    )
    .await;

    // timeout: a synchronous call past its timeout kills the tree and says so.
    let started = Instant::now();
    let r = bash(
        &agent,
        json!({"command": "sleep 1000 & echo $!; sleep 1000", "timeout": 700}),
    )
    .await;
    let s = sc(&r);
    assert_eq!(s["timedOut"], true);
    assert_eq!(s["status"], "failed");
    assert!(started.elapsed() < Duration::from_secs(10));
    let grandchild: u64 = s["output"]
        .as_str()
        .unwrap()
        .trim()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    eventually(
        "the grandchild to die after timeout",
        Duration::from_secs(10),
        || async { (!pid_alive(grandchild)).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn cancelling_a_call_kills_its_process() {
    let (_gw, _ws, _node, agent) = setup().await;
    let agent = std::sync::Arc::new(agent);
    let marker = format!("gsv-cancel-{}", uuid::Uuid::new_v4().simple());
    let a = agent.clone();
    let cmd = format!("sleep 1000 & echo $! > /tmp/{marker}; wait");
    let call = tokio::spawn(async move {
        a.call_with_id("c1", "box__Bash", json!({"command": cmd}), None)
            .await
    });
    let path = format!("/tmp/{marker}");
    let pid: u64 = eventually("the pid file", Duration::from_secs(10), || {
        let path = path.clone();
        async move { std::fs::read_to_string(&path).ok()?.trim().parse().ok() }
    })
    .await;
    agent.cancel("c1").await.unwrap();
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Cancelled);
    eventually(
        "the cancelled call's process to die",
        Duration::from_secs(10),
        || async { (!pid_alive(pid)).then_some(()) },
    )
    .await;
    let _ = std::fs::remove_file(path);
}

#[tokio::test]
async fn five_megabytes_of_output_stay_within_the_caps() {
    let (_gw, _ws, node, agent) = setup().await;
    let rss = |pid: u32| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let pid = node.0.id();
    let before = rss(pid);
    for _ in 0..3 {
        let r = bash(
            &agent,
            json!({"command": "head -c 5000000 /dev/zero | tr '\\0' a; echo; echo END"}),
        )
        .await;
        let s = sc(&r);
        assert_eq!(s["truncated"], true);
        let out = s["output"].as_str().unwrap();
        assert!(out.chars().count() <= 200_000, "{}", out.len());
        assert!(out.trim_end().ends_with("END"), "the tail is kept");
        assert!(s["tail"].as_str().unwrap().chars().count() <= 4_000);
    }
    let after = rss(pid);
    // Three 5 MB jobs retained in the session list cost the caps (~1 MB each), not 15 MB.
    assert!(
        after < before + 16 * 1024,
        "node RSS grew from {before} KiB to {after} KiB"
    );
}

#[tokio::test]
async fn pty_sessions_and_send_keys() {
    let (_gw, _ws, _node, agent) = setup().await;
    let r = bash(&agent, json!({"command": "tty", "pty": true})).await;
    let out = sc(&r)["output"].as_str().unwrap().trim().to_owned();
    assert!(out.starts_with("/dev/pts/"), "{out}");
    // send-keys C-c interrupts a program in a pty.
    let r = bash(
        &agent,
        json!({"command": "echo ready; sleep 100", "pty": true, "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    // C-c only interrupts once the pty has a foreground process group.
    eventually(
        "the pty session to start",
        Duration::from_secs(10),
        || async {
            let log = process(&agent, json!({"action": "log", "sessionId": id})).await;
            sc(&log)["output"].as_str()?.contains("ready").then_some(())
        },
    )
    .await;
    let k = process(
        &agent,
        json!({"action": "send-keys", "sessionId": id, "keys": ["C-c"]}),
    )
    .await;
    assert!(!k.is_error, "{}", k.joined_text());
    // `poll` with `waitMs` returns on any change, e.g. the pty echoing `^C` before
    // the shell exits: poll until the status changes.
    eventually(
        "C-c to end the session",
        Duration::from_secs(10),
        || async {
            let p = process(
                &agent,
                json!({"action": "poll", "sessionId": id, "waitMs": 1000}),
            )
            .await;
            (sc(&p)["status"] != "running").then_some(())
        },
    )
    .await;
    // send-keys to a session without a pty is an error.
    let r = bash(&agent, json!({"command": "sleep 100", "background": true})).await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let k = process(
        &agent,
        json!({"action": "send-keys", "sessionId": id, "keys": ["Enter"]}),
    )
    .await;
    assert!(k.is_error);
    process(&agent, json!({"action": "kill", "sessionId": id})).await;
}

#[tokio::test]
async fn process_error_conditions() {
    let (_gw, _ws, _node, agent) = setup().await;
    for action in ["poll", "log", "write", "submit", "kill"] {
        let r = agent
            .call("box__Process", json!({"action": action}), None)
            .await;
        match r {
            Ok(r) => assert!(r.is_error, "{action} without sessionId"),
            Err(e) => assert_eq!(e.remote().unwrap().code, ErrorCode::InvalidArgs),
        }
        let r = process(
            &agent,
            json!({"action": action, "sessionId": "no-such-session"}),
        )
        .await;
        assert!(r.is_error, "{action} on an unknown session");
    }
    let e = agent
        .call("box__Process", json!({"action": "explode"}), None)
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::InvalidArgs);
    let e = agent
        .call("box__Bash", json!({"command": ""}), None)
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::InvalidArgs);
    // remove forgets a finished session; a running one must be killed first.
    let r = bash(&agent, json!({"command": "sleep 100", "background": true})).await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    assert!(
        process(&agent, json!({"action": "remove", "sessionId": id}))
            .await
            .is_error
    );
    process(&agent, json!({"action": "kill", "sessionId": id})).await;
    assert!(
        !process(&agent, json!({"action": "remove", "sessionId": id}))
            .await
            .is_error
    );
    assert!(
        process(&agent, json!({"action": "poll", "sessionId": id}))
            .await
            .is_error
    );
}

#[tokio::test]
async fn background_job_survives_a_gateway_restart() {
    let (mut gw, _ws, _node, _) = setup().await;
    // The session is this token's: the same token reconnects after the restart.
    let token = gw.agent_token();
    let agent = gw.agent_with(&token).await;
    let r = bash(
        &agent,
        json!({"command": "for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.5; done", "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    drop(agent);
    gw.restart().await;
    gw.wait_online("box").await;
    let agent = gw.agent_with(&token).await;
    // The job kept running; its exit arrives as an event and log has every line.
    let ev = eventually("process.exited", Duration::from_secs(20), || async {
        let e = agent.next_event(Duration::from_millis(200)).await?;
        (e.event == EventName::ProcessExited).then_some(e.payload)
    })
    .await;
    assert_eq!(ev["node"], "box");
    assert_eq!(ev["data"]["sessionId"], id.as_str());
    assert_eq!(ev["data"]["status"], "completed");
    let log = process(&agent, json!({"action": "log", "sessionId": id})).await;
    let out = sc(&log)["output"].as_str().unwrap().to_owned();
    for i in 1..=8 {
        assert!(
            out.contains(&format!("line{i}")),
            "line{i} missing from {out}"
        );
    }
    // The gateway lists sessions across nodes.
    let (status, body) = common::http_get(&gw.addr, "/v1/sessions", Some(&gw.admin_token())).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["sessionId"] == id.as_str() && s["node"] == "box"));
}

#[tokio::test]
async fn stopping_the_node_ends_its_sessions_even_if_they_ignore_sigterm() {
    let (_gw, _ws, mut node, agent) = setup().await;
    let r = bash(
        &agent,
        json!({"command": "trap '' TERM; sleep 1000 & echo $!; wait", "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let pid: u64 = first_output_line_number(&agent, &id, "the stubborn pid").await;
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(node.0.id() as i32, libc::SIGTERM);
    }
    let status = eventually("the node to stop", Duration::from_secs(15), || {
        let s = node.0.try_wait().ok().flatten();
        async move { s }
    })
    .await;
    assert!(status.success(), "{status:?}");
    assert!(!pid_alive(pid), "a session outlived the node");
}
