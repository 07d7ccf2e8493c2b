//! End to end: the node-side guards (shell blocklist, `--read-only`, `--approve-shell`)
//! through a real gateway and a real node on loopback.
//!
//! The blocklisted commands sent here are written so that they would do no harm even
//! if a guard failed: the destructive part sits behind `false &&` (never reached), and
//! a `touch MARKER` after it shows whether anything ran at all.

mod common;

use common::{next_approval_request, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, EventName};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test]
async fn blocklisted_commands_are_refused_with_the_gateway_wide_open() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("box", ws.path()).await;
    // Allowed "*", no confirm: only the node stands in the way.
    let agent = gw.agent().await;
    let cases = [
        (json!({"command": "false && reboot; touch M0"}), "power"),
        (
            json!({"command": "false && sudo shutdown -h now; touch M1"}),
            "power",
        ),
        (
            json!({"command": "false && systemctl poweroff\ntouch M2"}),
            "power",
        ),
        (json!({"command": "false && rm -rf /; touch M3"}), "rm-root"),
        (
            json!({"command": "false && r\\m -r -f /*; touch M4"}),
            "rm-root",
        ),
        (
            json!({"command": "false && 'rm' --recursive --force ~; touch M5"}),
            "rm-root",
        ),
        (
            json!({"command": "false && mkfs.ext4 /dev/sda1; touch M6"}),
            "disk-format",
        ),
        (
            json!({"command": "false && dd if=/dev/zero of=/dev/sda; touch M7"}),
            "raw-disk-write",
        ),
        (
            json!({"command": "false && cat x > /dev/nvme0n1; touch M8"}),
            "raw-disk-write",
        ),
        (
            json!({"command": "echo $(false && halt); touch M9"}),
            "power",
        ),
        (
            json!({"command": "bash -c 'false && reboot'; touch M10"}),
            "power",
        ),
        (
            json!({"command": "false && reboot; touch M11", "pty": true}),
            "power",
        ),
        (
            json!({"command": "false && reboot; touch M12", "background": true}),
            "power",
        ),
        (
            json!({"command": "false && reboot; touch M13", "yieldMs": 10}),
            "power",
        ),
    ];
    for (args, rule) in &cases {
        let e = agent
            .call("box__Bash", args.clone(), Some(30_000))
            .await
            .expect_err("a blocklisted command must be refused");
        let shape = e.remote().unwrap_or_else(|| panic!("{args}: {e:?}"));
        assert_eq!(shape.code, ErrorCode::Denied, "{args}: {shape:?}");
        assert!(
            shape.message.contains(&format!("shell blocklist ({rule})"))
                && shape.message.contains("not a sandbox"),
            "{args}: {}",
            shape.message
        );
    }
    // The CLI reports it as a denial (exit 5).
    let (code, _, err) = gw.cli(&[
        "call",
        "box__Bash",
        r#"{"command":"false && reboot; touch CLI"}"#,
    ]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("error: denied:"), "{err}");
    // Ordinary commands still run.
    let r = agent
        .call(
            "box__Bash",
            json!({"command": "echo reboot; rm -rf ./build; touch OK"}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(r.joined_text().trim(), "reboot");
    // Nothing refused ran (the background one had time to, had it started).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let left: Vec<String> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["OK"]);
}

/// Issue 14 item 9: brace and glob spellings of root paths, `find -L`, wrappers,
/// partitioners and `kill 1` used to slip past the blocklist.
#[tokio::test]
async fn second_pass_spellings_are_refused_and_nothing_runs() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("box2", ws.path()).await;
    let agent = gw.agent().await;
    let cases = [
        ("false && rm -rf /{etc,usr}; touch M0", "rm-root"),
        ("false && rm -rf /[e]tc; touch M1", "rm-root"),
        ("false && rm -rf /e*; touch M2", "rm-root"),
        ("false && find -L / -delete; touch M3", "find-delete-root"),
        ("false && chroot / rm -rf /; touch M4", "rm-root"),
        ("false && nsenter -t 1 -m reboot; touch M5", "power"),
        ("false && flock /tmp/l -c 'rm -rf /'; touch M6", "rm-root"),
        ("false && env -S 'rm -rf /'; touch M7", "rm-root"),
        ("false && script -q -c reboot /dev/null; touch M8", "power"),
        ("false && sgdisk -Z /dev/sda; touch M9", "disk-partition"),
        (
            "false && parted -s /dev/sda mklabel gpt; touch M10",
            "disk-partition",
        ),
        ("false && kill -9 1; touch M11", "kill-all"),
        ("false && killall5 -9; touch M12", "kill-all"),
    ];
    for (command, rule) in cases {
        let e = agent
            .call("box2__Bash", json!({ "command": command }), Some(30_000))
            .await
            .expect_err("a blocklisted command must be refused");
        let shape = e.remote().unwrap_or_else(|| panic!("{command}: {e:?}"));
        assert_eq!(shape.code, ErrorCode::Denied, "{command}: {shape:?}");
        assert!(
            shape.message.contains(&format!("shell blocklist ({rule})")),
            "{command}: {}",
            shape.message
        );
    }
    // Read-only spellings still run.
    let r = agent
        .call(
            "box2__Bash",
            json!({"command": "ls /e* >/dev/null; kill -l 1; touch OK"}),
            Some(30_000),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.joined_text());
    let left: Vec<String> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["OK"]);
}

#[tokio::test]
async fn a_read_only_node_offers_only_read_only_tools() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let _node = gw.spawn_node("ro", &gw.node_token("ro"), ws.path(), &["--read-only"]);
    gw.wait_online("ro").await;
    let agent = gw.agent().await;
    let tools: BTreeSet<String> = agent
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.node == "ro")
        .map(|t| t.tool)
        .collect();
    let expected: BTreeSet<String> = [
        "Echo",
        "Glob",
        "Grep",
        "Read",
        "container_list",
        "container_logs",
        "dns_lookup",
        "fetch_url",
        "fs_list",
        "fs_stat",
        "git_diff",
        "git_log",
        "git_show",
        "git_status",
        "net_diagnose",
        "net_discover",
        "net_services",
        "network_status",
        "pkg_search",
        "proc_list",
        "term_capture",
        "time",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(tools, expected);
    let e = agent
        .call("ro__Bash", json!({"command": "touch X"}), None)
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::NotFound);
    let e = agent
        .call("ro__Write", json!({"path": "b.txt", "content": "x"}), None)
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::NotFound);
    let r = agent
        .call("ro__Read", json!({"path": "a.txt"}), None)
        .await
        .unwrap();
    assert!(r.joined_text().contains("hello"), "{}", r.joined_text());
    assert!(!ws.path().join("X").exists() && !ws.path().join("b.txt").exists());
}

async fn approve_shell_setup(id: &str) -> (Gateway, TempDir, common::Proc, AgentClient) {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let node = gw.spawn_node(
        id,
        &gw.node_token(id),
        ws.path(),
        &["--approve-shell", "^echo .*", "--approve-shell", "ls( .*)?"],
    );
    gw.wait_online(id).await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    (gw, ws, node, operator)
}

#[tokio::test]
async fn approve_shell_runs_matches_and_asks_the_operator_for_the_rest() {
    let (gw, ws, _node, operator) = approve_shell_setup("ash").await;
    let agent = Arc::new(gw.agent().await);
    // A command every part of which matches runs at once.
    let r = agent
        .call(
            "ash__Bash",
            json!({"command": "echo hi | ls"}),
            Some(30_000),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.joined_text());

    // Anything else waits for an operator: approved, it runs.
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call(
            "ash__Bash",
            json!({"command": "echo hi; touch approved.txt"}),
            Some(60_000),
        )
        .await
    });
    let req = next_approval_request(&operator).await;
    assert_eq!(req["node"], "ash");
    assert_eq!(req["tool"], "Bash");
    assert!(
        req["summary"]
            .as_str()
            .unwrap()
            .contains("touch approved.txt"),
        "{req}"
    );
    assert!(
        req["reason"].as_str().unwrap().contains("approve-shell"),
        "{req}"
    );
    assert!(!ws.path().join("approved.txt").exists());
    assert!(!call.is_finished());
    let id = req["id"].as_str().unwrap().to_owned();
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let r = call.await.unwrap().unwrap();
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(r.joined_text().trim(), "hi");
    assert!(ws.path().join("approved.txt").exists());

    // Denied, it does not run.
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call(
            "ash__Bash",
            json!({"command": "touch denied.txt"}),
            Some(60_000),
        )
        .await
    });
    let id = next_approval_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Denied);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!ws.path().join("denied.txt").exists());

    // The blocklist is not something an approval can lift: refused at once.
    let e = agent
        .call(
            "ash__Bash",
            json!({"command": "false && reboot; touch M"}),
            Some(30_000),
        )
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Denied);
    let quiet_until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < quiet_until {
        if let Some(e) = operator.next_event(Duration::from_millis(50)).await {
            assert_ne!(e.event, EventName::ApprovalRequested, "{:?}", e.payload);
        }
    }
    assert!(!ws.path().join("M").exists());
}

/// Runs `git ARGS` in `dir` (test setup), panicking on failure.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.email=t@example.invalid", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 14 item 2: the pattern the docs recommended, `git (status|log|diff)( [^>]*)?`,
/// matched `git diff --output=FILE`, which overwrites any file. A matching command with
/// an option that writes or runs must still go to an operator.
#[tokio::test]
async fn an_auto_approved_pattern_does_not_approve_writing_options() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let elsewhere = TempDir::new("out");
    git(ws.path(), &["init", "-q"]);
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    git(ws.path(), &["add", "a.txt"]);
    git(ws.path(), &["commit", "-qm", "first"]);
    std::fs::write(ws.path().join("a.txt"), "two\n").unwrap();
    let _node = gw.spawn_node(
        "gitbox",
        &gw.node_token("gitbox"),
        ws.path(),
        &["--approve-shell", "git (status|log|diff)( [^>]*)?"],
    );
    gw.wait_online("gitbox").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);

    // What the pattern is for runs at once.
    let r = agent
        .call(
            "gitbox__Bash",
            json!({"command": "git status --short"}),
            Some(30_000),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.joined_text());
    assert!(r.joined_text().contains("a.txt"), "{}", r.joined_text());

    // `--output` writes a file: an operator decides, and denied, nothing is written.
    let target = elsewhere.path().join("x");
    let command = format!("git diff --output={}", target.display());
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call("gitbox__Bash", json!({ "command": command }), Some(60_000))
            .await
    });
    let req = next_approval_request(&operator).await;
    assert_eq!(req["node"], "gitbox");
    let reason = req["reason"].as_str().unwrap();
    assert!(
        reason.contains("--output") && reason.contains("matches an auto-approve pattern"),
        "{req}"
    );
    assert!(!target.exists());
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Denied);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!target.exists(), "git diff --output ran");
}

/// Issue 14 item 2: with Write, an agent plants `core.fsmonitor` (or `core.pager`) in
/// `.git/config`, and the next auto-approved `git status` runs its program. The node
/// runs auto-approved commands with those settings pinned from the environment.
#[tokio::test]
async fn an_auto_approved_git_command_ignores_program_settings_in_the_repository() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let markers = TempDir::new("markers");
    git(ws.path(), &["init", "-q"]);
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    git(ws.path(), &["add", "a.txt"]);
    git(ws.path(), &["commit", "-qm", "first"]);
    std::fs::write(ws.path().join("a.txt"), "two\n").unwrap();
    let fsmonitor = markers.path().join("FSMONITOR_RAN");
    let pager = markers.path().join("PAGER_RAN");
    // What a Write call could put there.
    let mut config = std::fs::read_to_string(ws.path().join(".git/config")).unwrap();
    config.push_str(&format!(
        "[core]\n\tfsmonitor = \"touch {}; false\"\n\tpager = \"touch {}; cat\"\n",
        fsmonitor.display(),
        pager.display()
    ));
    std::fs::write(ws.path().join(".git/config"), config).unwrap();
    // The plant is live: plain git runs it.
    git(ws.path(), &["status", "--short"]);
    assert!(
        fsmonitor.exists(),
        "the planted fsmonitor did not run under plain git"
    );
    std::fs::remove_file(&fsmonitor).unwrap();

    let _node = gw.spawn_node(
        "gitfs",
        &gw.node_token("gitfs"),
        ws.path(),
        &["--approve-shell", "git (status|log|diff)( [^>]*)?"],
    );
    gw.wait_online("gitfs").await;
    let agent = gw.agent().await;
    for args in [
        json!({"command": "git status --short"}),
        json!({"command": "git diff"}),
        json!({"command": "git log --oneline"}),
    ] {
        let r = agent
            .call("gitfs__Bash", args.clone(), Some(30_000))
            .await
            .unwrap();
        assert!(!r.is_error, "{args}: {}", r.joined_text());
    }
    // On a terminal (where git would start its pager) nothing is auto-approved: the
    // call waits for an operator, who does not come.
    let r = agent
        .call(
            "gitfs__Bash",
            json!({"command": "git log --oneline", "pty": true}),
            Some(1_500),
        )
        .await;
    assert_eq!(
        r.expect_err("a pty run waits for an operator")
            .remote()
            .map(|e| e.code),
        Some(gsv_protocol::ErrorCode::Timeout)
    );
    assert!(
        !fsmonitor.exists(),
        "an auto-approved git ran core.fsmonitor"
    );
    assert!(!pager.exists(), "an auto-approved git ran core.pager");
}

#[tokio::test]
async fn an_approval_for_the_policy_also_satisfies_the_node() {
    let (gw, ws, _node, operator) = approve_shell_setup("both").await;
    let token = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "both__Bash",
    ]);
    let agent = gw.agent_with(&token).await;
    let call = tokio::spawn(async move {
        agent
            .call(
                "both__Bash",
                json!({"command": "touch once.txt"}),
                Some(60_000),
            )
            .await
    });
    let req = next_approval_request(&operator).await;
    assert!(req["reason"].as_str().unwrap().contains("policy"), "{req}");
    let (code, _, err) = gw.cli(&["approvals", "approve", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // One human decision per call: no second request, the call completes.
    let r = call.await.unwrap().unwrap();
    assert!(!r.is_error, "{}", r.joined_text());
    assert!(ws.path().join("once.txt").exists());
}

#[test]
fn a_bad_approve_shell_pattern_is_a_usage_error() {
    let out = std::process::Command::new(common::gsv_bin())
        .args([
            "node",
            "--gateway",
            "http://127.0.0.1:1",
            "--id",
            "bad",
            "--token",
            "t",
            "--approve-shell",
            "(unclosed",
        ])
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_TOKEN")
        .output()
        .expect("run gsv node");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--approve-shell"), "{err}");
}
