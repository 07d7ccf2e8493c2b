//! The Bash tool against a real shell: modes, exit codes, timeouts of whole process
//! trees, cancellation, output capture and caps, pty sessions, PATH.

mod sessions_support;

use gsv_node::sessions::{MAX_OUTPUT_CHARS, RAW_RING_BYTES, TAIL_CHARS};
use gsv_node::Tool;
use serde_json::json;
use sessions_support::{pids_in, str_of, wait_gone, Node};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_command_returns_the_reference_shape() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "echo hello; echo oops >&2; printf 'é€😀'"}))
        .await;
    assert_eq!(v["status"], "completed");
    assert_eq!(v["exitCode"], 0);
    assert_eq!(v["signal"], json!(null));
    assert_eq!(v["timedOut"], false);
    assert_eq!(v["truncated"], false);
    let output = str_of(&v, "output");
    assert!(
        output.contains("hello\n") && output.contains("oops\n"),
        "{output}"
    );
    // Two pipes, interleaved in arrival order: stderr's line may come anywhere.
    assert!(output.contains("é€😀"), "{output}");
    assert_eq!(output.len(), "hello\noops\né€😀".len(), "{output}");
    assert_eq!(v["tail"], v["output"]);
    assert_eq!(str_of(&v, "workdir"), node.dir.path().display().to_string());
    let (started, ended) = (
        v["startedAt"].as_u64().unwrap(),
        v["endedAt"].as_u64().unwrap(),
    );
    assert!(ended >= started);
    assert!(v["durationMs"].is_u64());
    assert!(uuid::Uuid::parse_str(str_of(&v, "sessionId")).is_ok());
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = [
        "status",
        "sessionId",
        "exitCode",
        "signal",
        "timedOut",
        "startedAt",
        "endedAt",
        "durationMs",
        "output",
        "tail",
        "truncated",
        "workdir",
    ];
    expected.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, expected);
    // A synchronous session is not kept once its result is out.
    assert!(node.sessions.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_signals() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "echo before; exit 3"}))
        .await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exitCode"], 3);
    assert_eq!(v["timedOut"], false);
    let r = node.bash(json!({"command": "exit 3"})).await;
    assert!(
        !r.is_error,
        "a failing command is a result, not a tool error"
    );
    assert!(
        r.joined_text().contains("exit code 3"),
        "{}",
        r.joined_text()
    );

    let v = node.bash_ok(json!({"command": "kill -TERM $$"})).await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exitCode"], json!(null));
    assert_eq!(v["signal"], "SIGTERM");

    let v = node.bash_ok(json!({"command": "true"})).await;
    assert_eq!(
        (v["status"].as_str(), v["output"].as_str()),
        (Some("completed"), Some(""))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workdir_resolves_against_the_workspace() {
    let node = Node::new();
    std::fs::create_dir(node.dir.path().join("sub")).unwrap();
    let v = node
        .bash_ok(json!({"command": "pwd", "workdir": "sub"}))
        .await;
    let expected = node.dir.path().join("sub").canonicalize().unwrap();
    assert_eq!(str_of(&v, "output").trim(), expected.display().to_string());
    assert_eq!(
        str_of(&v, "workdir"),
        node.dir.path().join("sub").display().to_string()
    );

    let r = node
        .bash(json!({"command": "pwd", "workdir": "missing"}))
        .await;
    assert!(r.is_error);
    assert!(
        r.joined_text().contains("does not exist"),
        "{}",
        r.joined_text()
    );
    std::fs::write(node.dir.path().join("file"), "x").unwrap();
    let r = node
        .bash(json!({"command": "pwd", "workdir": "file"}))
        .await;
    assert!(
        r.joined_text().contains("is not a directory"),
        "{}",
        r.joined_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_tool_errors() {
    let node = Node::new();
    for (args, needle) in [
        (json!({"command": ""}), "must not be empty"),
        (json!({"command": "   "}), "must not be empty"),
        (json!({}), "missing required argument \"command\""),
        (json!({"command": "true", "timeout": 0}), "\"timeout\""),
        (
            json!({"command": "true", "bogus": 1}),
            "unknown argument \"bogus\"",
        ),
    ] {
        let r = node.bash(args.clone()).await;
        assert!(r.is_error, "{args}");
        let text = r.joined_text();
        assert!(
            text.starts_with("Bash: ") && text.contains(needle),
            "{args}: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_timeout_kills_the_whole_tree() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({
            "command": "echo $$; sleep 1000 & echo $!; sleep 1000",
            "timeout": 500
        }))
        .await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["timedOut"], true);
    assert!(v["signal"].is_string(), "{v}");
    let pids = pids_in(str_of(&v, "output"));
    assert_eq!(pids.len(), 2, "{v}");
    wait_gone(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_kills_its_command() {
    let node = Node::new();
    let ctx = node.ctx();
    let cancel = ctx.cancel.clone();
    let marker = node.dir.path().join("pids");
    let command = format!(
        "echo $$ > {m}; sleep 1000 & echo $! >> {m}; wait",
        m = marker.display()
    );
    let call = tokio::spawn({
        let sessions = std::sync::Arc::clone(&node.sessions);
        async move {
            gsv_node::tools::bash::Bash::new(sessions)
                .execute(json!({"command": command}), ctx)
                .await
        }
    });
    let pids = read_pids(&marker, 2).await;
    cancel.cancel();
    let r = call.await.unwrap();
    assert!(r.is_error);
    assert!(r.joined_text().contains("cancelled"), "{}", r.joined_text());
    wait_gone(&pids).await;

    // Dropping the call's future (what the runner does at a deadline) kills too.
    let marker = node.dir.path().join("pids2");
    let command = format!(
        "echo $$ > {m}; sleep 1000 & echo $! >> {m}; wait",
        m = marker.display()
    );
    let call = node.bash(json!({"command": command}));
    let pids = tokio::select! {
        _ = call => panic!("the command should not finish"),
        pids = read_pids(&marker, 2) => pids,
    };
    wait_gone(&pids).await;
}

async fn read_pids(path: &std::path::Path, n: usize) -> Vec<u32> {
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(path) {
            let pids = pids_in(&text);
            if pids.len() == n {
                return pids;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never listed {n} pids", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_keeps_the_tail_within_bounds() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "head -c 5000000 /dev/zero | tr '\\0' a; echo; echo END"}))
        .await;
    assert_eq!(v["status"], "completed");
    assert_eq!(v["truncated"], true);
    let output = str_of(&v, "output");
    assert_eq!(output.chars().count(), MAX_OUTPUT_CHARS);
    assert!(output.ends_with("aaaa\nEND\n"));
    assert_eq!(str_of(&v, "tail").chars().count(), TAIL_CHARS);

    // In the background, what the session holds stays bounded too.
    let id = node
        .start("yes 'é€ line' | head -c 5000000; echo; echo LAST")
        .await;
    let poll = node.wait_done(&id).await;
    assert_eq!(poll["truncated"], true);
    assert!(poll["tail"].as_str().unwrap().ends_with("\nLAST\n"));
    let held = node.sessions.retained_bytes();
    assert!(
        held <= MAX_OUTPUT_CHARS * 4 + 2 * RAW_RING_BYTES,
        "{held} bytes retained"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_lines_are_never_lost() {
    let node = Node::new();
    for _ in 0..5 {
        let v = node
            .bash_ok(json!({"command": "i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo line$i; done; printf tail-no-newline"}))
            .await;
        let output = str_of(&v, "output");
        assert!(output.ends_with("line300\ntail-no-newline"), "{output}");
        assert_eq!(output.lines().count(), 301);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_commands_read_no_stdin() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "cat; echo done", "timeout": 5000}))
        .await;
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"], "done\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_then_poll() {
    let node = Node::new();
    let r = node
        .bash(json!({"command": "echo start; sleep 0.3; echo done", "background": true}))
        .await;
    assert!(!r.is_error);
    assert!(r.joined_text().contains("Running in the background"));
    let v = r.structured_content.unwrap();
    assert_eq!(v["status"], "running");
    assert!(v["pid"].as_u64().unwrap() > 1);
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["pid", "sessionId", "startedAt", "status", "tail", "workdir"]
    );
    let id = str_of(&v, "sessionId");
    let done = node.wait_done(id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["exitCode"], 0);
    assert_eq!(done["tail"], "start\ndone\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yield_returns_the_result_when_done_in_time() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "echo quick", "yieldMs": 10_000}))
        .await;
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"], "quick\n");
    assert!(node.sessions.list().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yield_backgrounds_a_slow_command() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "echo first; sleep 1; echo second", "yieldMs": 300}))
        .await;
    assert_eq!(v["status"], "running");
    assert_eq!(v["tail"], "first\n");
    assert!(v["pid"].is_u64());
    let id = str_of(&v, "sessionId");
    let done = node.wait_done(id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["tail"], "first\nsecond\n");
    // A backgrounded job is announced when it ends.
    for _ in 0..200 {
        if node.events.queued() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(node.events.queued(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_keep_an_explicit_timeout_only() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "sleep 1000", "background": true, "timeout": 300}))
        .await;
    let done = node.wait_done(str_of(&v, "sessionId")).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["timedOut"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_sessions_have_a_terminal() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "tty; printf '\\033[31mred\\033[0m\\n'", "pty": true}))
        .await;
    assert_eq!(v["status"], "completed", "{v}");
    let output = str_of(&v, "output");
    let mut lines = output.lines();
    let tty = lines.next().unwrap();
    assert!(
        tty.starts_with("/dev/pts/") && tty["/dev/pts/".len()..].parse::<u32>().is_ok(),
        "{output:?}"
    );
    assert_eq!(lines.next(), Some("red"), "{output:?}");
    assert!(
        !output.contains('\u{1b}') && !output.contains('\r'),
        "{output:?}"
    );

    // Without a pty there is no terminal.
    let v = node.bash_ok(json!({"command": "tty"})).await;
    assert_eq!(v["status"], "failed");
    assert!(str_of(&v, "output").contains("not a tty"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_get_the_login_path_plus_the_nodes_own() {
    let node = Node::new();
    let v = node
        .bash_ok(json!({"command": "printf %s \"$PATH\""}))
        .await;
    let path = str_of(&v, "output");
    let entries: Vec<&str> = path.split(':').collect();
    let own = std::env::var("PATH").unwrap_or_default();
    for entry in own.split(':').filter(|e| !e.is_empty()) {
        assert!(entries.contains(&entry), "{entry} missing from {path}");
    }
    assert_eq!(path, gsv_node::probe::login_path().await.to_str().unwrap());
}
