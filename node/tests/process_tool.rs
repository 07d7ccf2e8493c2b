//! The Process tool: every action, its result shape and its errors, against real
//! background sessions.

mod sessions_support;

use gsv_node::sessions::Limits;
use gsv_protocol::{EventName, Frame};
use serde_json::{json, Value};
use sessions_support::{pids_in, str_of, wait_gone, Node};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

fn keys_of(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_is_newest_first() {
    let node = Node::new();
    let empty = node.process_ok(json!({"action": "list"})).await;
    assert_eq!(empty, json!({"sessions": [], "count": 0}));
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(node.start(&format!("echo {i}; sleep 1000")).await);
    }
    let v = node.process_ok(json!({"action": "list"})).await;
    assert_eq!(v["count"], 3);
    let listed: Vec<&str> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()]);
    let first = &v["sessions"][0];
    assert_eq!(
        keys_of(first),
        [
            "command",
            "durationMs",
            "endedAt",
            "exitCode",
            "pid",
            "pty",
            "sessionId",
            "signal",
            "startedAt",
            "status",
            "timedOut",
            "truncated",
            "workdir"
        ]
    );
    assert_eq!(first["status"], "running");
    assert_eq!(first["command"], "echo 2; sleep 1000");
    for id in &ids {
        node.process_ok(json!({"action": "kill", "sessionId": id}))
            .await;
    }
    let v = node.process_ok(json!({"action": "list"})).await;
    assert!(v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["status"] == "failed"));
}

/// `v` with the fields that differ from run to run (present, and numbers) set to 0.
fn steady(mut v: Value, volatile: &[&str]) -> Value {
    for key in volatile {
        assert!(v[*key].is_u64(), "{key} in {v}");
        v[*key] = json!(0);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_entries_exactly() {
    let node = Node::new();
    let id = node.start("echo hi; exit 3").await;
    node.wait_done(&id).await;
    let v = node.process_ok(json!({"action": "list"})).await;
    assert_eq!(v["count"], 1);
    let entry = steady(
        v["sessions"][0].clone(),
        &["pid", "startedAt", "endedAt", "durationMs"],
    );
    assert_eq!(
        entry,
        json!({
            "sessionId": id,
            "status": "failed",
            "pid": 0,
            "command": "echo hi; exit 3",
            "workdir": node.dir.path().display().to_string(),
            "pty": false,
            "startedAt": 0,
            "endedAt": 0,
            "durationMs": 0,
            "exitCode": 3,
            "signal": null,
            "timedOut": false,
            "truncated": false,
        })
    );
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_shape_and_wait_returning_early() {
    let node = Node::new();
    let id = node.start("sleep 0.3; echo hi; sleep 1000").await;
    let v = node
        .process_ok(json!({"action": "poll", "sessionId": id}))
        .await;
    assert_eq!(
        keys_of(&v),
        [
            "command",
            "durationMs",
            "endedAt",
            "exitCode",
            "pid",
            "pty",
            "running",
            "sessionId",
            "signal",
            "startedAt",
            "status",
            "tail",
            "timedOut",
            "totalChars",
            "truncated",
            "workdir"
        ]
    );
    assert_eq!(
        (v["status"].as_str(), v["running"].as_bool()),
        (Some("running"), Some(true))
    );

    // New output ends the wait long before waitMs.
    let start = Instant::now();
    let v = node.wait_tail(&id, |t| t.contains("hi")).await;
    assert!(start.elapsed() < Duration::from_secs(8));
    assert_eq!(v["running"], true);
    assert_eq!(v["totalChars"], 3);
    let start = Instant::now();
    let v = node
        .process_ok(json!({"action": "poll", "sessionId": id, "waitMs": 300}))
        .await;
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "no change: waits"
    );
    assert_eq!(v["status"], "running");
    node.process_ok(json!({"action": "kill", "sessionId": id}))
        .await;

    // So does the end of the job.
    let id = node.start("sleep 0.3").await;
    let start = Instant::now();
    let v = node
        .process_ok(json!({"action": "poll", "sessionId": id, "waitMs": 20_000}))
        .await;
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(v["status"], "completed");
    assert_eq!(v["running"], false);
    assert_eq!(v["exitCode"], 0);
    assert!(v["endedAt"].is_u64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_and_submit_to_stdin() {
    let node = Node::new();
    let id = node.start("cat").await;
    let v = node
        .process_ok(json!({"action": "write", "sessionId": id, "data": "hello "}))
        .await;
    assert_eq!(v, json!({"sessionId": id, "status": "running", "bytes": 6}));
    let v = node
        .process_ok(json!({"action": "submit", "sessionId": id, "data": "world"}))
        .await;
    assert_eq!(v["bytes"], 6);
    node.wait_tail(&id, |t| t == "hello world\n").await;
    node.process_ok(json!({"action": "kill", "sessionId": id}))
        .await;

    let id = node.start("read x; echo got $x").await;
    node.process_ok(json!({"action": "submit", "sessionId": id, "data": "abc"}))
        .await;
    let done = node.wait_done(&id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["tail"], "got abc\n");

    // Writing to a finished session is refused.
    let err = node
        .process_err(json!({"action": "write", "sessionId": id, "data": "more"}))
        .await;
    assert!(err.contains("has already exited"), "{err}");
    let err = node
        .process_err(json!({"action": "submit", "sessionId": id}))
        .await;
    assert!(err.contains("has already exited"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_ends_the_whole_process_tree() {
    let node = Node::new();
    let id = node
        .start("echo $$; sleep 1000 & echo $!; sleep 1000 & echo $!; wait")
        .await;
    let v = node.wait_tail(&id, |t| pids_in(t).len() == 3).await;
    let pids = pids_in(str_of(&v, "tail"));
    assert_eq!(pids[0] as u64, v["pid"].as_u64().unwrap());
    let killed = node
        .process_ok(json!({"action": "kill", "sessionId": id}))
        .await;
    assert_eq!(killed["killed"], true);
    assert_eq!(killed["status"], "failed");
    assert_eq!(killed["running"], false);
    assert_eq!(killed["signal"], "SIGTERM");
    assert_eq!(killed["timedOut"], false);
    wait_gone(&pids).await;

    let err = node
        .process_err(json!({"action": "kill", "sessionId": id}))
        .await;
    assert!(err.contains("has already exited"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_escalates_to_sigkill() {
    let node = Node::new();
    let id = node
        .start("trap '' TERM; echo ready; while :; do sleep 0.05; done")
        .await;
    node.wait_tail(&id, |t| t.contains("ready")).await;
    let killed = node
        .process_ok(json!({"action": "kill", "sessionId": id}))
        .await;
    assert_eq!(killed["status"], "failed");
    assert_eq!(killed["signal"], "SIGKILL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_keys_to_a_pty() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "echo ready; sleep 100", "background": true, "pty": true}))
        .await;
    let id = str_of(&v, "sessionId").to_owned();
    // Wait until the shell runs on the terminal (a C-c typed before the pty has a
    // foreground process group is just a byte of input).
    let started = std::time::Instant::now();
    loop {
        let log = node
            .process_ok(json!({"action": "log", "sessionId": id}))
            .await;
        if str_of(&log, "output").contains("ready") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the pty session never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = node
        .process_ok(json!({"action": "send-keys", "sessionId": id, "keys": ["C-c"]}))
        .await;
    // The status is read just after the byte is written: the program may already
    // have died of the SIGINT by then.
    assert!(
        sent["status"] == "running" || sent["status"] == "failed",
        "{sent}"
    );
    assert_eq!(
        json!({"sessionId": sent["sessionId"], "bytes": sent["bytes"], "keys": sent["keys"]}),
        json!({"sessionId": id, "bytes": 1, "keys": ["C-c"]})
    );
    let done = node.wait_done(&id).await;
    assert_eq!(done["status"], "failed");
    assert!(
        done["signal"] == "SIGINT" || done["exitCode"] == 130,
        "{done}"
    );

    // A line typed into a pty program, raw bytes kept for log.
    let v = node
        .bash_ok(json!({"command": "read x; printf '\\033[1mgot %s\\033[0m\\n' \"$x\"", "background": true, "pty": true}))
        .await;
    let id = str_of(&v, "sessionId").to_owned();
    node.process_ok(
        json!({"action": "send-keys", "sessionId": id, "data": "abc", "keys": ["Enter"]}),
    )
    .await;
    let done = node.wait_done(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let log = node
        .process_ok(json!({"action": "log", "sessionId": id}))
        .await;
    assert!(str_of(&log, "output").contains("got abc"), "{log}");
    assert!(!str_of(&log, "output").contains('\u{1b}'));
    let raw = node
        .process_ok(json!({"action": "log", "sessionId": id, "raw": true}))
        .await;
    assert_eq!(raw["raw"], true);
    assert!(str_of(&raw, "output").contains("\u{1b}[1mgot abc"), "{raw}");
    let err = node
        .process_err(json!({"action": "log", "sessionId": id, "stream": "stderr"}))
        .await;
    assert!(err.contains("pty session"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_pages_by_line_with_totals() {
    let node = Node::new();
    let id = node
        .start("i=0; while [ $i -lt 500 ]; do i=$((i+1)); echo $i; done; echo problem >&2")
        .await;
    node.wait_done(&id).await;
    let total_chars: usize = (1..=500)
        .map(|i: usize| i.to_string().len() + 1)
        .sum::<usize>()
        + 8;
    let v = node
        .process_ok(json!({"action": "log", "sessionId": id}))
        .await;
    assert_eq!(
        keys_of(&v),
        [
            "limit",
            "lines",
            "nextOffset",
            "offset",
            "output",
            "raw",
            "sessionId",
            "status",
            "stream",
            "totalChars",
            "totalLines",
            "truncated"
        ]
    );
    assert_eq!(v["lines"], 200);
    assert_eq!(v["limit"], 200);
    assert_eq!(v["offset"], 0);
    assert_eq!(v["totalLines"], 501);
    assert_eq!(v["totalChars"], total_chars);
    assert_eq!(v["nextOffset"], 200);
    assert_eq!(v["truncated"], false);
    assert_eq!(v["stream"], "combined");
    // stderr's line may land anywhere in the combined view (two pipes, arrival
    // order); the stdout view has the lines in order.
    assert_eq!(str_of(&v, "output").lines().count(), 200);
    let v = node
        .process_ok(json!({"action": "log", "sessionId": id, "stream": "stdout"}))
        .await;
    let output = str_of(&v, "output");
    assert!(
        output.starts_with("1\n2\n") && output.ends_with("\n200"),
        "{output}"
    );
    assert_eq!(v["totalLines"], 500);

    let v = node
        .process_ok(json!({"action": "log", "sessionId": id, "offset": 450, "limit": 100}))
        .await;
    assert_eq!(v["lines"], 51);
    assert_eq!(v["nextOffset"], json!(null));
    let v = node
        .process_ok(json!({"action": "log", "sessionId": id, "stream": "stdout", "offset": 450, "limit": 100}))
        .await;
    assert_eq!(v["lines"], 50);
    assert!(str_of(&v, "output").ends_with("499\n500"));

    let v = node
        .process_ok(json!({"action": "log", "sessionId": id, "offset": 9999}))
        .await;
    assert_eq!(
        (v["lines"].as_u64(), v["output"].as_str()),
        (Some(0), Some(""))
    );

    let v = node
        .process_ok(json!({"action": "log", "sessionId": id, "stream": "stderr"}))
        .await;
    assert_eq!(
        (v["output"].as_str(), v["totalLines"].as_u64()),
        (Some("problem"), Some(1))
    );
    let v = node
        .process_ok(json!({"action": "log", "sessionId": id, "stream": "stdout", "offset": 499}))
        .await;
    assert_eq!(v["output"], "500");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_forgets_finished_sessions_only() {
    let node = Node::new();
    let id = node.start("sleep 1000").await;
    let err = node
        .process_err(json!({"action": "remove", "sessionId": id}))
        .await;
    assert!(err.contains("still running"), "{err}");
    node.process_ok(json!({"action": "kill", "sessionId": id}))
        .await;
    let v = node
        .process_ok(json!({"action": "remove", "sessionId": id}))
        .await;
    assert_eq!(v, json!({"sessionId": id, "removed": true}));
    let err = node
        .process_err(json!({"action": "poll", "sessionId": id}))
        .await;
    assert!(err.contains("no session"), "{err}");
    assert_eq!(node.process_ok(json!({"action": "list"})).await["count"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_condition() {
    let node = Node::new();
    for action in [
        "poll",
        "log",
        "write",
        "submit",
        "send-keys",
        "kill",
        "remove",
    ] {
        let err = node.process_err(json!({"action": action})).await;
        assert!(err.contains("needs \"sessionId\""), "{action}: {err}");
        let err = node
            .process_err(json!({"action": action, "sessionId": "nope", "keys": ["Enter"]}))
            .await;
        assert!(err.contains("no session \"nope\""), "{action}: {err}");
    }
    let err = node.process_err(json!({"action": "explode"})).await;
    assert!(err.contains("unknown action"), "{err}");

    let id = node.start("sleep 1000").await;
    let err = node
        .process_err(json!({"action": "send-keys", "sessionId": id, "keys": ["C-c"]}))
        .await;
    assert!(err.contains("not started with pty: true"), "{err}");
    let err = node
        .process_err(json!({"action": "send-keys", "sessionId": id, "keys": ["Hyper"]}))
        .await;
    assert!(err.contains("unknown key"), "{err}");
    node.process_ok(json!({"action": "kill", "sessionId": id}))
        .await;

    // A synchronous command's session is not managed by Process.
    let node2 = Node::new();
    let ctx = node2.ctx();
    let call = tokio::spawn({
        let bash = gsv_node::tools::bash::Bash::new(std::sync::Arc::clone(&node2.sessions));
        async move {
            use gsv_node::Tool;
            bash.execute(json!({"command": "sleep 1000"}), ctx).await
        }
    });
    let mut sync_id = None;
    for _ in 0..200 {
        if let Some(session) = node2.sessions.all().first() {
            sync_id = Some(session.id().to_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sync_id = sync_id.expect("the synchronous session appears");
    let err = node2
        .process_err(json!({"action": "poll", "sessionId": sync_id}))
        .await;
    assert!(err.contains("not a background session"), "{err}");
    call.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_refuse_new_jobs_clearly() {
    let node = Node::with_limits(Limits {
        max_running: 2,
        ..Limits::default()
    });
    let a = node.start("sleep 1000").await;
    let b = node.start("sleep 1000").await;
    let r = node
        .bash(json!({"command": "echo no", "background": true}))
        .await;
    assert!(r.is_error);
    assert!(
        r.joined_text().contains("too many running sessions (2)"),
        "{}",
        r.joined_text()
    );
    let r = node.bash(json!({"command": "echo no"})).await;
    assert!(r.is_error);
    node.process_ok(json!({"action": "kill", "sessionId": a}))
        .await;
    let v = node.bash_ok(json!({"command": "echo yes"})).await;
    assert_eq!(v["output"], "yes\n");
    node.process_ok(json!({"action": "kill", "sessionId": b}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exits_are_queued_while_detached_and_flushed_in_order() {
    let node = Node::new();
    let first = node.start("echo one").await;
    node.wait_done(&first).await;
    // The end is queued just after the session reads as done: wait for it, so the
    // two events are queued in the order the sessions ended.
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.events.queued() < 1 {
        assert!(Instant::now() < deadline, "the first event was not queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = node.start("exit 4").await;
    node.wait_done(&second).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.events.queued() < 2 {
        assert!(Instant::now() < deadline, "events were not queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!node.events.is_connected());

    let (tx, mut rx) = mpsc::channel(8);
    node.events.attach(tx.clone());
    let mut payloads = Vec::new();
    let mut seqs = Vec::new();
    for _ in 0..2 {
        let text = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        match Frame::decode(&text).unwrap() {
            Frame::Event {
                event,
                payload,
                seq,
            } => {
                assert_eq!(event, EventName::ProcessExited);
                seqs.push(seq);
                payloads.push(serde_json::from_str::<Value>(payload.unwrap().get()).unwrap());
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(seqs[0] < seqs[1], "{seqs:?}");
    let p = &payloads[0];
    assert_eq!(
        keys_of(p),
        [
            "command",
            "durationMs",
            "endedAt",
            "exitCode",
            "owner",
            "sessionId",
            "signal",
            "startedAt",
            "status",
            "tail",
            "timedOut",
            "truncated"
        ]
    );
    assert_eq!(p["sessionId"], first.as_str());
    assert_eq!(p["status"], "completed");
    assert_eq!(p["tail"], "one\n");
    assert_eq!(p["command"], "echo one");
    assert_eq!(payloads[1]["sessionId"], second.as_str());
    assert_eq!(payloads[1]["exitCode"], 4);
    assert_eq!(payloads[1]["status"], "failed");

    // Connected: the next exit goes straight out.
    let third = node.start("true").await;
    let text = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(text.contains(&third), "{text}");
    node.events.detach(&tx);
}
