//! End to end: one risky-option table for every path that runs a program without an
//! operator (issue 42). The docs' own `--approve-exec 'git log **'` example ran
//! `git log --output=FILE` at once, writing a file outside `--confine` with no Write
//! permission and no operator, and an auto-approved `git log` ran a program planted
//! through the repository's configuration (`log.showSignature` + `gpg.program`). Now
//! an exec argv an entry matches still goes to an operator when an option writes files
//! or runs programs, and auto-approved git runs with those settings pinned.
//! Real gateway, real node, the operator played through `gsv approvals`.

mod common;

use common::{sc, Gateway, TempDir};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository whose HEAD is a commit carrying a (fake) signature, so `git log` with
/// `log.showSignature` runs `gpg.program` to check it.
fn signed_repo(dir: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    let tree = git(dir, &["rev-parse", "HEAD^{tree}"]);
    let object = format!(
        "tree {tree}\nauthor t <t@example.invalid> 1700000000 +0000\ncommitter t <t@example.invalid> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\nsigned\n"
    );
    let path = dir.join("commit.obj");
    std::fs::write(&path, object).unwrap();
    let id = git(dir, &["hash-object", "-t", "commit", "-w", "commit.obj"]);
    std::fs::remove_file(path).unwrap();
    git(dir, &["update-ref", "HEAD", &id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_exec_entries_never_approve_options_that_write_or_run() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("risky-ws");
    let outside = TempDir::new("risky-outside");
    signed_repo(ws.path());
    // The planted program, named by the repository's own configuration.
    let marker = outside.path().join("GPG_RAN");
    let evil = outside.path().join("evil-gpg");
    std::fs::write(
        &evil,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(ws.path(), &["config", "log.showSignature", "true"]);
    git(
        ws.path(),
        &["config", "gpg.program", evil.to_str().unwrap()],
    );
    // Planted as it is, the program runs for a plain `git log` outside gsv.
    let _ = Command::new("git")
        .args(["log", "-1"])
        .current_dir(ws.path())
        .output();
    assert!(marker.exists(), "the fixture must run the planted program");
    std::fs::remove_file(&marker).unwrap();

    let _node = gw.spawn_node(
        "ax",
        &gw.node_token("ax"),
        ws.path(),
        &["--confine", "--approve-exec", "git log **"],
    );
    gw.wait_online("ax").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let token = gw.token(&["agent", "runner", "--allow", "ax__exec"]);
    let agent = Arc::new(gw.agent_with(&token).await);

    // Matching and harmless: runs at once, and the planted gpg.program does not run.
    let r = agent
        .call(
            "ax__exec",
            json!({"argv": ["git", "log", "-1"]}),
            Some(30_000),
        )
        .await
        .expect("auto-approved git log");
    assert!(!r.is_error, "{}", r.joined_text());
    assert!(
        sc(&r)["stdout"].as_str().unwrap_or("").contains("signed"),
        "{}",
        r.joined_text()
    );
    assert!(
        !marker.exists(),
        "an auto-approved git log ran the planted gpg.program"
    );

    // Matching, but an option writes a file (outside the workspace, at that): the
    // node asks an operator; denied, nothing is written.
    let target = outside.path().join("written.txt");
    for argv in [
        json!(["git", "log", format!("--output={}", target.display())]),
        json!(["git", "log", "--output", target.to_str().unwrap()]),
        json!(["git", "log", format!("--ou={}", target.display())]),
        json!(["git", "log", "--ext-diff", "-p"]),
    ] {
        let a = agent.clone();
        let sent = json!({"argv": argv});
        let call = tokio::spawn(async move { a.call("ax__exec", sent, Some(60_000)).await });
        let req = common::next_approval_request(&operator).await;
        assert_eq!(req["tool"], "exec", "{argv}");
        let reason = req["reason"].as_str().unwrap_or("");
        assert!(
            reason.contains("write files or run programs"),
            "{argv}: {req}"
        );
        let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(call.await.unwrap().is_err(), "{argv}");
        assert!(!target.exists(), "{argv} wrote {}", target.display());
    }
    assert!(!marker.exists());
}
