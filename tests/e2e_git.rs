//! End to end: the git tools (`git_status`, `git_log`, `git_diff`, `git_show`) through
//! a real gateway and a real `gsv node` on loopback, on repositories made here with
//! the `git` CLI (issue 19, structured operations): the structure they report, that a
//! repository's planted programs never run, and that arguments never become options.

mod common;

use common::{Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

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

/// The `git` CLI in `dir`, with no user or system configuration; panics on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Ann Author")
        .env("GIT_AUTHOR_EMAIL", "ann@example.com")
        .env("GIT_COMMITTER_NAME", "Cid Committer")
        .env("GIT_COMMITTER_EMAIL", "cid@example.com")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    cmd
}

fn write(path: &Path, content: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

fn init(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
}

fn file<'a>(files: &'a Value, path: &str) -> &'a Value {
    files
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} not in {files}"))
}

#[tokio::test]
async fn git_tools_report_branch_files_commits_and_diffs() {
    let ws = TempDir::new("git-ws");
    let origin = ws.path().join("origin.git");
    let work = ws.path().join("work");
    let other = ws.path().join("other");
    git(
        ws.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            origin.to_str().unwrap(),
        ],
    );
    init(&work);
    write(&work.join("a.txt"), "a\n");
    write(&work.join("b.txt"), "b\n");
    write(
        &work.join("old.txt"),
        "a file that will be renamed\nwith lines\n",
    );
    write(&work.join("gone.txt"), "gone\n");
    write(&work.join("bin.dat"), [0u8, 1, 2, 3, 0, 255]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "base"]);
    git(
        &work,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    git(&work, &["push", "-q", "-u", "origin", "main"]);
    // Behind by one: someone else pushes.
    git(
        ws.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    write(&other.join("theirs.txt"), "theirs\n");
    git(&other, &["add", "."]);
    git(&other, &["commit", "-q", "-m", "theirs"]);
    git(&other, &["push", "-q"]);
    git(&work, &["fetch", "-q"]);
    // Ahead by two: a text commit and a binary one with a body.
    write(&work.join("b.txt"), "b\nmore\n");
    git(&work, &["commit", "-q", "-am", "grow b"]);
    write(&work.join("bin.dat"), [0u8, 9, 9, 9, 0, 1, 2]);
    git(
        &work,
        &["commit", "-q", "-am", "binary change\n\nwhy: testing"],
    );
    // Working state: staged, unstaged, untracked, renamed, deleted.
    write(&work.join("a.txt"), "a staged\n");
    git(&work, &["add", "a.txt"]);
    write(&work.join("b.txt"), "b\nmore\nunstaged\n");
    write(&work.join("new.txt"), "new\n");
    git(&work, &["mv", "old.txt", "renamed.txt"]);
    git(&work, &["rm", "-q", "gone.txt"]);

    let gw = Gateway::start().await;
    let _node = gw.spawn_node("g", &gw.node_token("g"), ws.path(), &["--confine"]);
    gw.wait_online("g").await;
    let agent = gw.agent().await;

    // Status: branch, upstream, ahead/behind, each file's state.
    let r = call(&agent, "g__git_status", json!({"path": "work"})).await;
    let s = ok(&r);
    assert_eq!(s["branch"]["head"], "main", "{s}");
    assert_eq!(s["branch"]["upstream"], "origin/main");
    assert_eq!(
        (
            s["branch"]["ahead"].as_u64(),
            s["branch"]["behind"].as_u64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(s["branch"]["detached"], false);
    assert_eq!(s["clean"], false);
    let files = &s["files"];
    assert_eq!(
        (
            file(files, "a.txt")["index"].as_str(),
            file(files, "a.txt")["worktree"].as_str()
        ),
        (Some("modified"), Some("unmodified"))
    );
    assert_eq!(
        (
            file(files, "b.txt")["index"].as_str(),
            file(files, "b.txt")["worktree"].as_str()
        ),
        (Some("unmodified"), Some("modified"))
    );
    assert_eq!(file(files, "new.txt")["untracked"], true);
    let renamed = file(files, "renamed.txt");
    assert_eq!(
        (renamed["index"].as_str(), renamed["origPath"].as_str()),
        (Some("renamed"), Some("old.txt"))
    );
    assert_eq!(file(files, "gone.txt")["index"], "deleted");
    assert_eq!(files.as_array().unwrap().len(), 5, "{files}");

    // Log: newest first, typed; maxCount, ranges and a file.
    let r = call(&agent, "g__git_log", json!({"path": "work", "maxCount": 2})).await;
    let commits = ok(&r)["commits"].as_array().unwrap().clone();
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[0]["subject"], "binary change");
    assert_eq!(commits[0]["body"], "why: testing");
    assert_eq!(commits[0]["author"]["name"], "Ann Author");
    assert_eq!(commits[0]["committer"]["email"], "cid@example.com");
    assert_eq!(commits[0]["parents"][0], commits[1]["hash"]);
    assert!(
        chrono::DateTime::parse_from_rfc3339(commits[0]["author"]["date"].as_str().unwrap())
            .is_ok()
    );
    let r = call(
        &agent,
        "g__git_log",
        json!({"path": "work", "rev": "origin/main..HEAD"}),
    )
    .await;
    let subjects: Vec<&str> = ok(&r)["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, ["binary change", "grow b"]);
    let r = call(
        &agent,
        "g__git_log",
        json!({"path": "work", "file": "b.txt"}),
    )
    .await;
    let subjects: Vec<&str> = ok(&r)["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, ["grow b", "base"]);

    // Diff: work tree vs index, index vs HEAD, commit vs commit (binary).
    let r = call(&agent, "g__git_diff", json!({"path": "work"})).await;
    let files = &ok(&r)["files"];
    assert_eq!(files.as_array().unwrap().len(), 1, "{files}");
    let b = file(files, "b.txt");
    assert_eq!(
        (
            b["status"].as_str(),
            b["additions"].as_u64(),
            b["deletions"].as_u64()
        ),
        (Some("modified"), Some(1), Some(0))
    );
    assert!(
        b["patch"].as_str().unwrap().contains("\n+unstaged\n"),
        "{b}"
    );
    let r = call(
        &agent,
        "g__git_diff",
        json!({"path": "work", "staged": true, "contextLines": 0}),
    )
    .await;
    let files = &ok(&r)["files"];
    assert_eq!(files.as_array().unwrap().len(), 3, "{files}");
    assert_eq!(file(files, "a.txt")["status"], "modified");
    assert_eq!(file(files, "gone.txt")["status"], "deleted");
    let renamed = file(files, "renamed.txt");
    assert_eq!(
        (
            renamed["status"].as_str(),
            renamed["oldPath"].as_str(),
            renamed["similarity"].as_u64()
        ),
        (Some("renamed"), Some("old.txt"), Some(100))
    );
    let r = call(
        &agent,
        "g__git_diff",
        json!({"path": "work", "rev": "HEAD~1", "revTo": "HEAD"}),
    )
    .await;
    let files = &ok(&r)["files"];
    let bin = file(files, "bin.dat");
    assert_eq!(bin["binary"], true, "{bin}");
    assert!(bin["additions"].is_null());
    assert!(
        bin["patch"].as_str().unwrap().contains("Binary files"),
        "{bin}"
    );
    let r = call(
        &agent,
        "g__git_diff",
        json!({"path": "work", "rev": "origin/main", "file": "theirs.txt"}),
    )
    .await;
    assert_eq!(file(&ok(&r)["files"], "theirs.txt")["status"], "deleted");

    // Show: the commit and its files.
    let r = call(
        &agent,
        "g__git_show",
        json!({"path": "work", "rev": "HEAD~1"}),
    )
    .await;
    let s = ok(&r);
    assert_eq!(s["commit"]["subject"], "grow b");
    let b = file(&s["files"], "b.txt");
    assert_eq!(b["additions"], 1);
    assert!(b["patch"].as_str().unwrap().contains("+more"), "{b}");
    let r = call(
        &agent,
        "g__git_show",
        json!({"path": "work", "rev": "main", "file": "bin.dat"}),
    )
    .await;
    assert_eq!(file(&ok(&r)["files"], "bin.dat")["binary"], true);
    // The root commit shows its files as added.
    let root = git(&work, &["rev-list", "--max-parents=0", "HEAD"]);
    let r = call(
        &agent,
        "g__git_show",
        json!({"path": "work", "rev": root.trim()}),
    )
    .await;
    assert_eq!(file(&ok(&r)["files"], "gone.txt")["status"], "added");

    // A directory that is no repository, and a missing commit: errors.
    std::fs::create_dir_all(ws.path().join("plain")).unwrap();
    let r = call(&agent, "g__git_status", json!({"path": "plain"})).await;
    assert!(
        r.is_error && r.joined_text().contains("Not inside a git work tree"),
        "{}",
        r.joined_text()
    );
    let r = call(
        &agent,
        "g__git_show",
        json!({"path": "work", "rev": "nosuchrev"}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
}

/// A script that creates `marker/<name>` when run.
fn planted(bin: &Path, marker: &Path, name: &str, extra: &str) -> String {
    let path = bin.join(name);
    write(
        &path,
        format!(
            "#!/bin/sh\ntouch '{}'\n{extra}\n",
            marker.join(name).display()
        ),
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn markers(marker: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(marker)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_planted_repository_runs_nothing() {
    let ws = TempDir::new("git-planted");
    let tools = TempDir::new("git-planted-bin");
    let marker = TempDir::new("git-planted-marker");
    let repo = ws.path().join("repo");
    init(&repo);
    write(&repo.join("a.txt"), "aaaa\n");
    write(&repo.join("p.txt"), "pppp\n");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    write(&repo.join("a.txt"), "aaab\n");
    git(&repo, &["commit", "-q", "-am", "two"]);
    // Planted after the commits: every program git could be told to run.
    let (bin, m) = (tools.path(), marker.path());
    let fsmonitor = planted(bin, m, "fsmonitor", "exit 1");
    let pager = planted(bin, m, "pager", "cat");
    let external = planted(bin, m, "external", "exit 0");
    let textconv = planted(bin, m, "textconv", "cat \"$1\"");
    let clean = planted(bin, m, "clean", "cat");
    let smudge = planted(bin, m, "smudge", "cat");
    let process = planted(bin, m, "process", "exit 1");
    let hooks = repo.join(".git/hooks");
    for hook in [
        "post-index-change",
        "pre-commit",
        "post-checkout",
        "reference-transaction",
        "pre-auto-gc",
    ] {
        planted(&hooks, m, hook, "exit 0");
    }
    for (key, value) in [
        ("core.fsmonitor", fsmonitor.as_str()),
        ("core.pager", pager.as_str()),
        ("pager.log", pager.as_str()),
        ("diff.external", external.as_str()),
        ("diff.tc.textconv", textconv.as_str()),
        ("filter.evil.clean", clean.as_str()),
        ("filter.evil.smudge", smudge.as_str()),
        ("filter.evil.required", "true"),
        ("filter.proc.process", process.as_str()),
        ("core.sshCommand", pager.as_str()),
    ] {
        git(&repo, &["config", key, value]);
    }
    write(&repo.join(".gitattributes"), "a.txt filter=evil diff=tc\n");
    write(&repo.join(".git/info/attributes"), "p.txt filter=proc\n");
    // Same-size edits: git must read the files (through their clean filter) to tell.
    write(&repo.join("a.txt"), "aaac\n");
    write(&repo.join("p.txt"), "pppq\n");

    // Control: the plain git CLI does run them, so the markers can appear.
    let control = |args: &[&str]| {
        let _ = git_cmd(&repo, args).output().expect("run git");
    };
    control(&["status"]);
    // (p.txt's failing process filter would end a whole-tree diff first.)
    control(&["diff", "--", "a.txt"]);
    control(&["diff", "--no-ext-diff", "--", "a.txt"]);
    let seen = markers(m);
    for name in ["clean", "external", "fsmonitor", "process", "textconv"] {
        assert!(
            seen.iter().any(|s| s == name),
            "the CLI did not run {name}: {seen:?}"
        );
    }
    for name in seen {
        std::fs::remove_file(m.join(name)).unwrap();
    }

    let gw = Gateway::start().await;
    let _node = gw.spawn_node("p", &gw.node_token("p"), ws.path(), &["--confine"]);
    gw.wait_online("p").await;
    let agent = gw.agent().await;
    let r = call(&agent, "p__git_status", json!({"path": "repo"})).await;
    let files = &ok(&r)["files"];
    assert_eq!(file(files, "a.txt")["worktree"], "modified", "{files}");
    let r = call(&agent, "p__git_diff", json!({"path": "repo"})).await;
    let a = file(&ok(&r)["files"], "a.txt");
    assert!(a["patch"].as_str().unwrap().contains("+aaac"), "{a}");
    ok(&call(
        &agent,
        "p__git_diff",
        json!({"path": "repo", "rev": "HEAD~1"}),
    )
    .await);
    ok(&call(&agent, "p__git_log", json!({"path": "repo"})).await);
    ok(&call(
        &agent,
        "p__git_log",
        json!({"path": "repo", "file": "a.txt"}),
    )
    .await);
    let r = call(
        &agent,
        "p__git_show",
        json!({"path": "repo", "rev": "HEAD"}),
    )
    .await;
    let a = file(&ok(&r)["files"], "a.txt");
    assert!(a["patch"].as_str().unwrap().contains("+aaab"), "{a}");
    assert_eq!(markers(m), Vec::<String>::new(), "a planted program ran");
}

#[tokio::test]
async fn arguments_never_become_options_and_paths_keep_the_rules() {
    let ws = TempDir::new("git-args");
    let outside = TempDir::new("git-args-out");
    let repo = ws.path().join("repo");
    init(&repo);
    write(&repo.join("a.txt"), "a\n");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    init(&outside.path().join("r"));
    // A repository inside the workspace whose git directory is outside it.
    write(
        &ws.path().join("linked/.git"),
        format!("gitdir: {}\n", outside.path().join("r/.git").display()),
    );
    let out = outside.path().join("written");
    let out_arg = format!("--output={}", out.display());

    let gw = Gateway::start().await;
    let _node = gw.spawn_node("a", &gw.node_token("a"), ws.path(), &["--confine"]);
    gw.wait_online("a").await;
    let agent = gw.agent().await;

    let pager = format!("core.pager=touch {}", out.display());
    for (tool, args) in [
        ("a__git_log", json!({"path": "repo", "rev": out_arg})),
        ("a__git_log", json!({"path": "repo", "rev": "-c"})),
        ("a__git_diff", json!({"path": "repo", "rev": out_arg})),
        (
            "a__git_diff",
            json!({"path": "repo", "rev": "HEAD", "revTo": "--output=x"}),
        ),
        ("a__git_show", json!({"path": "repo", "rev": "-p"})),
        ("a__git_show", json!({"path": "repo", "rev": out_arg})),
    ] {
        let r = call(&agent, tool, args.clone()).await;
        assert!(
            r.is_error && r.joined_text().contains("not an option"),
            "{tool} {args}: {}",
            r.joined_text()
        );
    }
    // Unknown arguments (`-c` as a key) are refused; option-like text where a path
    // goes is a literal path after `--`; a revision with spaces is one revision.
    let r = agent
        .call(
            "a__git_log",
            json!({"path": "repo", "-c": pager}),
            Some(60_000),
        )
        .await;
    assert!(r.as_ref().map_or(true, |r| r.is_error), "{r:?}");
    let r = call(
        &agent,
        "a__git_log",
        json!({"path": "repo", "file": out_arg}),
    )
    .await;
    assert_eq!(ok(&r)["commits"].as_array().map(Vec::len), Some(0));
    let r = call(
        &agent,
        "a__git_diff",
        json!({"path": "repo", "file": out_arg}),
    )
    .await;
    assert_eq!(ok(&r)["files"].as_array().map(Vec::len), Some(0));
    let r = call(
        &agent,
        "a__git_show",
        json!({"path": "repo", "rev": "HEAD", "file": "-p"}),
    )
    .await;
    assert_eq!(ok(&r)["files"].as_array().map(Vec::len), Some(0));
    let r = call(
        &agent,
        "a__git_log",
        json!({"path": "repo", "rev": format!("HEAD {out_arg}")}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    assert!(!out.exists(), "an argument became an option");

    // Path rules: outside the workspace, or a git directory outside it, is refused.
    let far = outside.path().join("r");
    for path in [far.to_str().unwrap(), "../", "linked"] {
        let r = call(&agent, "a__git_status", json!({"path": path})).await;
        assert!(r.is_error, "{path}: {}", r.joined_text());
        assert_eq!(
            r.structured_content.as_ref().map(|v| v["code"].clone()),
            Some(json!("denied")),
            "{path}: {}",
            r.joined_text()
        );
    }
}
