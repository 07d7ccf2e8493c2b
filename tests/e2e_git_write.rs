//! End to end: the mutating git tools (`git_clone`, `git_commit`, `git_push`,
//! `git_pull`) through a real gateway and a real `gsv node` on loopback, on
//! repositories made here with the `git` CLI (issue 19, structured operations): what
//! they do, checked on disk with the `git` CLI; that a dry run changes nothing; that a
//! call needs an operator unless the node's owner waived it; that a repository's
//! planted programs never run; and that arguments never become options or transports.

mod common;

use common::{next_approval_request, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const WAIVE_ALL: &[&str] = &[
    "--confine",
    "--no-approval",
    "git_clone",
    "--no-approval",
    "git_commit",
    "--no-approval",
    "git_push",
    "--no-approval",
    "git_pull",
];

async fn call(agent: &AgentClient, name: &str, args: Value) -> ToolResult {
    agent
        .call(name, args.clone(), Some(60_000))
        .await
        .unwrap_or_else(|e| panic!("{name} {args}: {e:?}"))
}

fn ok(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "{}", r.joined_text());
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {}", r.joined_text()))
}

fn refused(r: &ToolResult, needle: &str) {
    assert!(r.is_error, "not refused: {}", r.joined_text());
    assert!(
        r.joined_text().contains(needle),
        "{needle:?} not in {}",
        r.joined_text()
    );
}

/// The `git` CLI in `dir`, with no user or system configuration; panics on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Other Person")
        .env("GIT_AUTHOR_EMAIL", "other@example.com")
        .env("GIT_COMMITTER_NAME", "Other Person")
        .env("GIT_COMMITTER_EMAIL", "other@example.com")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

/// A bare `origin.git` in `ws` with one commit on `main`, and a `seed` clone of it.
fn origin(ws: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let origin = ws.join("origin.git");
    let seed = ws.join("seed");
    git(
        ws,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            origin.to_str().unwrap(),
        ],
    );
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    write(&seed.join("README"), "hello\n");
    git(&seed, &["add", "."]);
    git(&seed, &["commit", "-q", "-m", "first"]);
    git(
        &seed,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    git(&seed, &["push", "-q", "-u", "origin", "main"]);
    (origin, seed)
}

/// A commit by someone else, pushed to origin from `seed`.
fn someone_pushes(seed: &Path, file: &str) -> String {
    git(seed, &["pull", "-q", "--ff-only"]);
    write(&seed.join(file), "theirs\n");
    git(seed, &["add", "."]);
    git(seed, &["commit", "-q", "-m", &format!("add {file}")]);
    // Not through the bare repository's hooks (some tests plant them).
    git(
        seed,
        &[
            "push",
            "-q",
            "--receive-pack=git -c core.hooksPath=/dev/null receive-pack",
        ],
    );
    git(seed, &["rev-parse", "HEAD"])
}

fn head(repo: &Path, rev: &str) -> String {
    git(repo, &["rev-parse", rev])
}

#[tokio::test]
async fn clone_commit_push_pull_and_their_dry_runs() {
    let ws = TempDir::new("gitw-ws");
    let (origin, seed) = origin(ws.path());
    let first = head(&origin, "main");
    let gw = Gateway::start().await;
    let _node = gw.spawn_node("w", &gw.node_token("w"), ws.path(), WAIVE_ALL);
    gw.wait_online("w").await;
    let agent = gw.agent().await;
    let work = ws.path().join("work");

    // Clone: the dry run lists the remote and writes nothing.
    let r = call(
        &agent,
        "w__git_clone",
        json!({"url": "origin.git", "path": "work", "dryRun": true}),
    )
    .await;
    let plan = ok(&r);
    assert_eq!(plan["dryRun"], true);
    assert_eq!(plan["branch"], "main");
    assert_eq!(plan["head"].as_str(), Some(first.as_str()));
    assert_eq!(plan["branches"], 1);
    assert!(
        r.joined_text().contains("would clone"),
        "{}",
        r.joined_text()
    );
    assert!(!work.exists(), "a dry run created the destination");
    let r = call(
        &agent,
        "w__git_clone",
        json!({"url": "origin.git", "path": "work"}),
    )
    .await;
    let out = ok(&r);
    assert_eq!(out["branch"], "main");
    assert_eq!(out["head"].as_str(), Some(first.as_str()));
    assert_eq!(head(&work, "HEAD"), first);
    assert_eq!(
        std::fs::read_to_string(work.join("README")).unwrap(),
        "hello\n"
    );
    // Not into a directory that has files.
    let r = call(
        &agent,
        "w__git_clone",
        json!({"url": "origin.git", "path": "work"}),
    )
    .await;
    refused(&r, "not empty");

    // Commit: the dry run says what would be committed; index and HEAD unchanged.
    write(&work.join("new.txt"), "new\n");
    write(&work.join("README"), "hello\nagain\n");
    let status_before = git(&work, &["status", "--porcelain"]);
    let r = call(
        &agent,
        "w__git_commit",
        json!({"path": "work", "message": "add new", "files": ["new.txt"], "all": true, "dryRun": true}),
    )
    .await;
    let plan = ok(&r);
    let files: Vec<&str> = plan["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"new.txt") && files.contains(&"README"),
        "{plan}"
    );
    assert_eq!(plan["author"], "gsv node <gsv-node@localhost>");
    assert!(
        r.joined_text().contains("would commit 2 file(s)"),
        "{}",
        r.joined_text()
    );
    assert_eq!(git(&work, &["status", "--porcelain"]), status_before);
    assert_eq!(head(&work, "HEAD"), first);
    // Nothing staged and no files: refused, nothing committed.
    let r = call(
        &agent,
        "w__git_commit",
        json!({"path": "work", "message": "empty"}),
    )
    .await;
    refused(&r, "nothing to commit");
    let r = call(
        &agent,
        "w__git_commit",
        json!({"path": "work", "message": "add new\n\nbody", "files": ["new.txt"], "all": true}),
    )
    .await;
    let out = ok(&r);
    let mine = head(&work, "HEAD");
    assert_eq!(out["hash"].as_str(), Some(mine.as_str()));
    assert_eq!(out["summary"], "add new");
    assert_eq!(out["branch"], "main");
    assert_eq!(out["files"].as_array().unwrap().len(), 2, "{out}");
    assert_eq!(
        git(&work, &["log", "-1", "--format=%an <%ae>|%B"]),
        "gsv node <gsv-node@localhost>|add new\n\nbody"
    );
    assert_eq!(git(&work, &["status", "--porcelain"]), "");

    // Push: the dry run asks the remote; the bare repository is unchanged.
    let r = call(
        &agent,
        "w__git_push",
        json!({"path": "work", "dryRun": true}),
    )
    .await;
    let plan = ok(&r);
    assert_eq!(plan["refs"][0]["status"], "fastForward", "{plan}");
    assert!(
        r.joined_text().contains("would push main"),
        "{}",
        r.joined_text()
    );
    assert_eq!(head(&origin, "main"), first);
    let r = call(&agent, "w__git_push", json!({"path": "work"})).await;
    let out = ok(&r);
    assert_eq!(out["ok"], true);
    assert_eq!(out["refs"][0]["to"], "refs/heads/main");
    assert_eq!(head(&origin, "main"), mine);
    // Up to date the second time.
    let r = call(&agent, "w__git_push", json!({"path": "work"})).await;
    assert_eq!(ok(&r)["refs"][0]["status"], "upToDate");

    // Pull: someone else pushes; the dry run fetches nothing.
    let theirs = someone_pushes(&seed, "theirs.txt");
    let tracking = head(&work, "refs/remotes/origin/main");
    let r = call(
        &agent,
        "w__git_pull",
        json!({"path": "work", "dryRun": true}),
    )
    .await;
    let plan = ok(&r);
    assert_eq!(plan["state"], "notFetched", "{plan}");
    assert_eq!(plan["newHead"].as_str(), Some(theirs.as_str()));
    assert!(
        r.joined_text().contains("would fetch"),
        "{}",
        r.joined_text()
    );
    assert_eq!(head(&work, "HEAD"), mine);
    assert_eq!(head(&work, "refs/remotes/origin/main"), tracking);
    let exists = Command::new("git")
        .args(["cat-file", "-e", &theirs])
        .current_dir(&work)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(!exists.success(), "a dry run fetched objects");
    let r = call(&agent, "w__git_pull", json!({"path": "work"})).await;
    let out = ok(&r);
    assert_eq!(out["state"], "fastForward", "{out}");
    assert_eq!(out["oldHead"].as_str(), Some(mine.as_str()));
    assert_eq!(out["newHead"].as_str(), Some(theirs.as_str()));
    assert_eq!(out["commits"][0]["subject"], "add theirs.txt");
    assert_eq!(out["files"][0]["path"], "theirs.txt");
    assert_eq!(head(&work, "HEAD"), theirs);
    assert!(work.join("theirs.txt").exists());

    // Once fetched (by the CLI), the dry run counts the commits it would bring.
    let next = someone_pushes(&seed, "more.txt");
    git(&work, &["fetch", "-q"]);
    let r = call(
        &agent,
        "w__git_pull",
        json!({"path": "work", "dryRun": true}),
    )
    .await;
    let plan = ok(&r);
    assert_eq!(plan["state"], "fastForward", "{plan}");
    assert_eq!(plan["commits"].as_array().unwrap().len(), 1);
    assert_eq!(head(&work, "HEAD"), theirs);
    let r = call(&agent, "w__git_pull", json!({"path": "work"})).await;
    assert_eq!(ok(&r)["newHead"].as_str(), Some(next.as_str()));

    // Diverged: ffOnly (the default) refuses and merges nothing.
    someone_pushes(&seed, "diverge.txt");
    write(&work.join("local.txt"), "local\n");
    call(
        &agent,
        "w__git_commit",
        json!({"path": "work", "message": "local", "files": ["local.txt"]}),
    )
    .await;
    let local = head(&work, "HEAD");
    let r = call(&agent, "w__git_pull", json!({"path": "work"})).await;
    refused(&r, "diverged");
    assert_eq!(head(&work, "HEAD"), local);
    // A push of the diverged branch is rejected, and says so.
    let r = call(&agent, "w__git_push", json!({"path": "work"})).await;
    refused(&r, "rejected");
    assert_eq!(ok_or_error_result(&r)["refs"][0]["status"], "rejected");
    // forceWithLease does not overwrite a commit this clone has not seen.
    let late = someone_pushes(&seed, "late.txt");
    let r = call(
        &agent,
        "w__git_push",
        json!({"path": "work", "forceWithLease": true}),
    )
    .await;
    refused(&r, "stale info");
    assert_eq!(head(&origin, "main"), late);

    // ffOnly: false merges, unless the repository names a merge driver (a program).
    git(&work, &["config", "merge.mine.driver", "touch MERGED %A"]);
    let r = call(
        &agent,
        "w__git_pull",
        json!({"path": "work", "ffOnly": false}),
    )
    .await;
    refused(&r, "merge drivers");
    assert_eq!(head(&work, "HEAD"), local);
    git(&work, &["config", "--unset", "merge.mine.driver"]);
    let r = call(
        &agent,
        "w__git_pull",
        json!({"path": "work", "ffOnly": false}),
    )
    .await;
    let out = ok(&r);
    assert_eq!(out["state"], "merged", "{out}");
    let merge = head(&work, "HEAD");
    let parents = git(&work, &["rev-list", "--parents", "-n1", "HEAD"]);
    assert_eq!(parents.split(' ').count(), 3, "{parents}");
    assert!(!work.join("MERGED").exists());
    let r = call(&agent, "w__git_push", json!({"path": "work"})).await;
    assert_eq!(ok(&r)["ok"], true);
    assert_eq!(head(&origin, "main"), merge);
}

/// The structured content of a result, error or not.
fn ok_or_error_result(r: &ToolResult) -> &Value {
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {}", r.joined_text()))
}

#[tokio::test]
async fn mutating_git_tools_run_only_with_an_operator_or_a_waiver() {
    let ws = TempDir::new("gitw-appr");
    let (origin, _seed) = origin(ws.path());
    let first = head(&origin, "main");
    let work = ws.path().join("work");
    git(
        ws.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    write(&work.join("a.txt"), "a\n");
    let gw = Gateway::start().await;
    let _gated = gw.spawn_node("g", &gw.node_token("g"), ws.path(), &["--confine"]);
    let _waived = gw.spawn_node(
        "p",
        &gw.node_token("p"),
        ws.path(),
        &["--confine", "--no-approval", "git_push"],
    );
    gw.wait_online("g").await;
    gw.wait_online("p").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);

    let tools = agent.list_tools().await.unwrap();
    for name in ["git_clone", "git_commit", "git_push", "git_pull"] {
        let t = tools
            .iter()
            .find(|t| t.node == "g" && t.tool == name)
            .unwrap_or_else(|| panic!("{name} not offered"));
        assert!(t.requires_approval, "{name}");
        assert!(t.description.starts_with("[needs approval] "), "{name}");
    }

    // A dry run needs nobody: it answers at once with the plan and changes nothing.
    for (tool, args) in [
        (
            "g__git_commit",
            json!({"path": "work", "message": "a", "files": ["a.txt"], "dryRun": true}),
        ),
        ("g__git_push", json!({"path": "work", "dryRun": true})),
        ("g__git_pull", json!({"path": "work", "dryRun": true})),
    ] {
        let r = agent
            .call(tool, args.clone(), Some(20_000))
            .await
            .unwrap_or_else(|e| panic!("{tool} dry run waited or failed: {e:?}"));
        assert_eq!(ok(&r)["dryRun"], true, "{tool}: {}", r.joined_text());
    }
    assert_eq!(head(&work, "HEAD"), first);
    assert_eq!(git(&work, &["status", "--porcelain"]), "?? a.txt");

    // A dry run that would contact a network remote asks an operator first, and the
    // plan of a real call does not contact it either (its host is loopback here, so
    // even a mistake would stay on this machine).
    for (args, needle) in [
        (
            json!({"url": "https://127.0.0.1:9/x.git", "path": "net", "dryRun": true}),
            "a network address",
        ),
        (
            json!({"url": "https://127.0.0.1:9/x.git", "path": "net"}),
            "calls of git_clone need",
        ),
    ] {
        let a = agent.clone();
        let sent = args.clone();
        let pending = tokio::spawn(async move { a.call("g__git_clone", sent, Some(60_000)).await });
        let req = next_approval_request(&operator).await;
        assert_eq!(req["tool"], "git_clone", "{req}");
        assert!(req["reason"].as_str().unwrap().contains(needle), "{req}");
        if args.get("dryRun").is_none() {
            assert!(
                req["plan"]
                    .as_str()
                    .is_some_and(|p| p.contains("not looked up")),
                "{req}"
            );
        }
        let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(pending.await.unwrap().is_err(), "{args}");
    }
    assert!(!ws.path().join("net").exists());

    // Denied: nothing is committed. The operator saw the plan.
    let commit = json!({"path": "work", "message": "a", "files": ["a.txt"]});
    let a = agent.clone();
    let args = commit.clone();
    let pending = tokio::spawn(async move { a.call("g__git_commit", args, Some(60_000)).await });
    let req = next_approval_request(&operator).await;
    assert_eq!(req["tool"], "git_commit", "{req}");
    assert!(
        req["plan"].as_str().is_some_and(|p| p.contains("a.txt")),
        "the request shows the plan: {req}"
    );
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(pending.await.unwrap().is_err());
    assert_eq!(head(&work, "HEAD"), first);
    assert_eq!(git(&work, &["status", "--porcelain"]), "?? a.txt");

    // Approved: committed.
    let a = agent.clone();
    let args = commit.clone();
    let pending = tokio::spawn(async move { a.call("g__git_commit", args, Some(60_000)).await });
    let req = next_approval_request(&operator).await;
    let (code, _, err) = gw.cli(&["approvals", "approve", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let r = pending.await.unwrap().expect("approved commit runs");
    let mine = ok(&r)["hash"].as_str().unwrap().to_owned();
    assert_eq!(head(&work, "HEAD"), mine);

    // A push without an operator: denied, the bare repository is unchanged.
    let a = agent.clone();
    let pending = tokio::spawn(async move {
        a.call("g__git_push", json!({"path": "work"}), Some(60_000))
            .await
    });
    let req = next_approval_request(&operator).await;
    assert_eq!(req["tool"], "git_push", "{req}");
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(pending.await.unwrap().is_err());
    assert_eq!(head(&origin, "main"), first);

    // On the node whose owner waived git_push, it runs at once.
    let r = call(&agent, "p__git_push", json!({"path": "work"})).await;
    assert_eq!(ok(&r)["ok"], true);
    assert_eq!(head(&origin, "main"), mine);
    // Clone and pull without an operator: the call ends unanswered and nothing is
    // cloned or pulled.
    let r = agent
        .call(
            "g__git_clone",
            json!({"url": "origin.git", "path": "unasked"}),
            Some(2_000),
        )
        .await;
    assert!(r.is_err(), "{r:?}");
    let other = ws.path().join("other");
    git(
        ws.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    git(&other, &["reset", "-q", "--hard", &first]);
    let r = agent
        .call("g__git_pull", json!({"path": "other"}), Some(2_000))
        .await;
    assert!(r.is_err(), "{r:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !ws.path().join("unasked").exists(),
        "cloned without an operator"
    );
    assert_eq!(head(&other, "HEAD"), first, "pulled without an operator");
    // ... and its other mutating tools still wait (no operator here: no effect).
    write(&work.join("b.txt"), "b\n");
    let r = agent
        .call(
            "p__git_commit",
            json!({"path": "work", "message": "b", "files": ["b.txt"]}),
            Some(2_000),
        )
        .await;
    assert!(r.is_err(), "{r:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(head(&work, "HEAD"), mine);
}

fn plant(path: &Path, marker: &Path) {
    write(
        path,
        &format!(
            "#!/bin/sh\ntouch '{}/'\"$(basename \"$0\")\"\ncat >/dev/null 2>&1\nexit 1\n",
            marker.display()
        ),
    );
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn markers(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn planted_programs_never_run_and_bad_arguments_are_refused() {
    let ws = TempDir::new("gitw-plant");
    let marks = TempDir::new("gitw-marks");
    let bin = TempDir::new("gitw-bin");
    let (origin, seed) = origin(ws.path());
    let work = ws.path().join("work");
    git(
        ws.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    // Every program a repository (or the node's environment) can name.
    let names = [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "pre-push",
        "post-merge",
        "post-checkout",
        "reference-transaction",
        "pre-receive",
        "update",
        "post-receive",
        "post-update",
    ];
    let hooks = bin.path().join("hooks");
    for name in names {
        plant(&work.join(".git/hooks").join(name), marks.path());
        plant(&origin.join("hooks").join(name), marks.path());
        plant(&hooks.join(name), marks.path());
    }
    let templates = bin.path().join("templates");
    plant(&templates.join("hooks/post-checkout"), marks.path());
    for prog in [
        "fsmonitor",
        "sshcmd",
        "askpass",
        "credhelper",
        "uploadpack",
        "receivepack",
        "clean",
        "smudge",
        "textconv",
        "gpg",
        "editor",
        "proxy",
    ] {
        plant(&bin.path().join(prog), marks.path());
    }
    let p = |name: &str| bin.path().join(name).display().to_string();
    for (key, value) in [
        ("core.hooksPath", hooks.display().to_string()),
        ("core.fsmonitor", p("fsmonitor")),
        ("core.sshCommand", p("sshcmd")),
        ("core.askPass", p("askpass")),
        ("core.gitProxy", p("proxy")),
        ("core.editor", p("editor")),
        ("credential.helper", format!("!{}", p("credhelper"))),
        ("remote.origin.uploadpack", p("uploadpack")),
        ("remote.origin.receivepack", p("receivepack")),
        ("filter.evil.clean", p("clean")),
        ("filter.evil.smudge", p("smudge")),
        ("filter.evil.required", "true".to_owned()),
        ("diff.evil.textconv", p("textconv")),
        ("commit.gpgSign", "true".to_owned()),
        ("gpg.program", p("gpg")),
    ] {
        git(&work, &["config", key, &value]);
    }
    git(
        &origin,
        &["config", "core.hooksPath", &hooks.display().to_string()],
    );
    write(
        &work.join(".gitattributes"),
        "*.txt filter=evil diff=evil\n",
    );
    write(&work.join("x.txt"), "x\n");

    let vault = ws.path().join("vault");
    std::fs::create_dir(&vault).unwrap();
    // A repository holding a protected file, and a protected path not made yet.
    let guarded = ws.path().join("guarded");
    git(
        ws.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            guarded.to_str().unwrap(),
        ],
    );
    let secret = guarded.join("secret.txt");
    write(&secret, "the node's secret\n");
    let future = ws.path().join("future/data");
    let mut flags = WAIVE_ALL.to_vec();
    flags.extend(["--protect", vault.to_str().unwrap()]);
    flags.extend(["--protect", secret.to_str().unwrap()]);
    flags.extend(["--protect", future.to_str().unwrap()]);
    let gw = Gateway::start().await;
    let _node = gw.spawn_node_with_env(
        "h",
        &gw.node_token("h"),
        ws.path(),
        &flags,
        &[
            ("GIT_TEMPLATE_DIR", templates.as_path()),
            ("GIT_SSH_COMMAND", Path::new(&p("sshcmd"))),
            ("GIT_ASKPASS", Path::new(&p("askpass"))),
        ],
        &[],
    );
    gw.wait_online("h").await;
    let agent = gw.agent().await;

    let r = call(
        &agent,
        "h__git_commit",
        json!({"path": "work", "message": "planted", "files": [".gitattributes", "x.txt"]}),
    )
    .await;
    let mine = ok(&r)["hash"].as_str().unwrap().to_owned();
    let r = call(
        &agent,
        "h__git_push",
        json!({"path": "work", "dryRun": true}),
    )
    .await;
    ok(&r);
    let r = call(&agent, "h__git_push", json!({"path": "work"})).await;
    ok(&r);
    assert_eq!(head(&origin, "main"), mine);
    let theirs = someone_pushes(&seed, "y.txt");
    let r = call(
        &agent,
        "h__git_pull",
        json!({"path": "work", "dryRun": true}),
    )
    .await;
    ok(&r);
    let r = call(&agent, "h__git_pull", json!({"path": "work"})).await;
    assert_eq!(ok(&r)["newHead"].as_str(), Some(theirs.as_str()));
    let r = call(
        &agent,
        "h__git_clone",
        json!({"url": "origin.git", "path": "copy"}),
    )
    .await;
    ok(&r);
    assert!(ws.path().join("copy/x.txt").exists());
    assert!(
        !ws.path().join("copy/.git/hooks/post-checkout").exists(),
        "template hooks were copied"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        markers(marks.path()),
        Vec::<String>::new(),
        "planted programs ran"
    );

    // Bad inputs: clear tool errors, nothing run or written.
    let outside = TempDir::new("gitw-outside");
    git(outside.path(), &["init", "-q", "--bare", "o.git"]);
    let o = outside.path().join("o.git").display().to_string();
    let mark = marks.path().join("ext");
    // Inside the workspace by name, but its git directory is outside.
    write(&ws.path().join("pointer/.git"), &format!("gitdir: {o}\n"));
    for (tool, args, needle) in [
        (
            "h__git_clone",
            json!({"url": format!("--upload-pack=touch {}", mark.display()), "path": "c1"}),
            "starts with '-'",
        ),
        (
            "h__git_clone",
            json!({"url": format!("ext::sh -c touch% {}", mark.display()), "path": "c2"}),
            "transport helpers",
        ),
        (
            "h__git_clone",
            json!({"url": "fd::3", "path": "c3"}),
            "transport helpers",
        ),
        (
            "h__git_clone",
            json!({"url": "ftp://example.com/x", "path": "c4"}),
            "only https",
        ),
        (
            "h__git_clone",
            json!({"url": o, "path": "c5"}),
            "outside the workspace",
        ),
        (
            "h__git_clone",
            json!({"url": format!("file://{o}"), "path": "c6"}),
            "outside the workspace",
        ),
        (
            "h__git_clone",
            json!({"url": "pointer", "path": "c8"}),
            "outside the workspace",
        ),
        (
            "h__git_clone",
            json!({"url": "origin.git", "path": "vault/c9"}),
            "is protected",
        ),
        (
            "h__git_clone",
            json!({"url": "origin.git", "path": "c7", "branch": "--upload-pack=x"}),
            "starts with '-'",
        ),
        (
            "h__git_push",
            json!({"path": "work", "branch": "-f"}),
            "starts with '-'",
        ),
        (
            "h__git_push",
            json!({"path": "work", "remote": "--receive-pack=x"}),
            "starts with '-'",
        ),
        (
            "h__git_push",
            json!({"path": "work", "remote": "https://example.com/x"}),
            "URLs are not accepted",
        ),
        (
            "h__git_push",
            json!({"path": "work", "force": true}),
            "forceWithLease",
        ),
        (
            "h__git_pull",
            json!({"path": "work", "branch": "-x"}),
            "starts with '-'",
        ),
        (
            "h__git_commit",
            json!({"path": "work", "message": "a\u{0}b", "allowEmpty": true}),
            "without NUL",
        ),
    ] {
        let r = call(&agent, tool, args.clone()).await;
        assert!(r.is_error, "{tool} {args}: {}", r.joined_text());
        assert!(
            r.joined_text().contains(needle),
            "{tool} {args}: {needle:?} not in {}",
            r.joined_text()
        );
    }
    for dir in ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"] {
        assert!(!ws.path().join(dir).exists(), "{dir} was created");
    }
    // A remote pointing outside the workspace is refused before git reaches it.
    git(&work, &["remote", "add", "out", &o]);
    let r = call(
        &agent,
        "h__git_push",
        json!({"path": "work", "remote": "out"}),
    )
    .await;
    refused(&r, "outside the workspace");
    assert!(!vault.join("c9").exists());
    assert_eq!(
        git(outside.path().join("o.git").as_path(), &["for-each-ref"]),
        ""
    );
    git(
        &work,
        &[
            "config",
            "url.ext::sh -c touch% /tmp/x.insteadOf",
            "nowhere:",
        ],
    );
    git(&work, &["remote", "add", "rewritten", "nowhere:repo"]);
    let r = call(
        &agent,
        "h__git_pull",
        json!({"path": "work", "remote": "rewritten", "dryRun": true}),
    )
    .await;
    refused(&r, "transport helpers");

    // A remote that names a transport helper (`remote.<name>.vcs`) is refused.
    git(&work, &["remote", "add", "helper", "../origin.git"]);
    git(&work, &["config", "remote.helper.vcs", "ext"]);
    let r = call(
        &agent,
        "h__git_push",
        json!({"path": "work", "remote": "helper"}),
    )
    .await;
    refused(&r, "transport helper");

    // A protected file is never staged (a push could carry it off), nor written by
    // a checkout (a pull into its work tree, a clone around a protected path).
    std::fs::hard_link(&secret, guarded.join("hardlink.txt")).unwrap();
    for args in [
        json!({"path": "guarded", "message": "s", "files": ["secret.txt"]}),
        json!({"path": "guarded", "message": "s", "files": ["."]}),
        json!({"path": "guarded", "message": "s", "files": ["./x/../secret.txt"]}),
        json!({"path": "guarded", "message": "s", "files": ["hardlink.txt"]}),
    ] {
        let r = call(&agent, "h__git_commit", args.clone()).await;
        assert!(r.is_error, "{args}: {}", r.joined_text());
        assert!(
            r.joined_text().contains("is protected"),
            "{}",
            r.joined_text()
        );
    }
    let r = call(
        &agent,
        "h__git_commit",
        json!({"path": "guarded", "message": "s", "all": true}),
    )
    .await;
    refused(&r, "holds a protected path");
    assert_eq!(git(&guarded, &["diff", "--cached", "--name-only"]), "");
    assert!(git(&guarded, &["ls-files", "secret.txt"]).is_empty());
    let before = head(&guarded, "HEAD");
    let r = call(&agent, "h__git_pull", json!({"path": "guarded"})).await;
    refused(&r, "holds the protected path");
    assert_eq!(head(&guarded, "HEAD"), before);
    let r = call(
        &agent,
        "h__git_clone",
        json!({"url": "origin.git", "path": "future"}),
    )
    .await;
    refused(&r, "holds the protected path");
    assert!(!ws.path().join("future").exists());
    assert_eq!(
        markers(marks.path()),
        Vec::<String>::new(),
        "planted programs ran"
    );

    // The planted programs are real: plain git runs them.
    let _ = Command::new("git")
        .args(["commit", "--allow-empty", "-m", "plain"])
        .current_dir(&work)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        !markers(marks.path()).is_empty(),
        "the planted programs do not run even with plain git"
    );
}
