//! End to end: a node that works on another host over SSH (`gsv node --ssh`), against
//! a throwaway `sshd` on 127.0.0.1 that the test starts (key auth, its own
//! known_hosts), through a real gateway: Bash, binary Read/Write, Edit, `--confine`,
//! fs_list, fs_stat and the git tools, a killed master connection, and a changed host
//! key refused.

mod common;

use base64::Engine;
use common::{eventually, Gateway, Proc, TempDir};
use gsv_bench::sshd::{SshBins, Sshd};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, ToolResult};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The sshd, the known_hosts file that trusts it, and the node's ssh flags.
struct Host {
    sshd: Sshd,
    known: PathBuf,
}

impl Host {
    async fn start(dir: &Path) -> Host {
        let bins = SshBins::find().expect("OpenSSH installed (.ci/run installs it)");
        let sshd = Sshd::start(&bins, dir).await.expect("sshd starts");
        let known = dir.join("known_hosts");
        std::fs::write(&known, sshd.known_hosts_line().expect("host key")).unwrap();
        Host { sshd, known }
    }

    /// `--ssh USER@127.0.0.1:PORT` and the options that make ssh use only this test's
    /// key and known_hosts.
    fn flags(&self, known: &Path) -> Vec<String> {
        let mut f = vec![
            "--ssh".to_owned(),
            format!("{}@127.0.0.1:{}", self.sshd.user, self.sshd.port),
        ];
        for o in [
            format!("UserKnownHostsFile={}", known.display()),
            "GlobalKnownHostsFile=/dev/null".to_owned(),
            format!("IdentityFile={}", self.sshd.client_key.display()),
            "IdentitiesOnly=yes".to_owned(),
            "IdentityAgent=none".to_owned(),
        ] {
            f.push("--ssh-option".to_owned());
            f.push(o);
        }
        f
    }
}

async fn far_node(gw: &Gateway, host: &Host, ws: &Path, extra: &[&str]) -> Proc {
    node_named(gw, "far", host, ws, extra).await
}

async fn node_named(gw: &Gateway, id: &str, host: &Host, ws: &Path, extra: &[&str]) -> Proc {
    let mut args: Vec<String> = host.flags(&host.known);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = gw.spawn_node(id, &gw.node_token(id), ws, &args);
    gw.wait_online(id).await;
    node
}

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(&format!("far__{tool}"), args, None)
        .await
        .expect("call answered")
}

fn sc(r: &ToolResult) -> &Value {
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structuredContent: {}", r.joined_text()))
}

#[tokio::test]
async fn bash_and_the_file_tools_work_on_the_far_host() {
    let dir = TempDir::new("ssh-backend");
    let host = Host::start(dir.path()).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let gw = Gateway::start().await;
    let _node = far_node(&gw, &host, &ws, &[]).await;
    let agent = gw.agent().await;

    // Bash, waiting: combined output, exit code, the workspace as working directory.
    let r = call(
        &agent,
        "Bash",
        json!({"command": "pwd; echo out; echo err >&2; exit 3"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let s = sc(&r);
    assert_eq!(s["status"], "failed");
    assert_eq!(s["exitCode"], 3);
    let out = s["output"].as_str().unwrap();
    assert!(out.contains(ws.to_str().unwrap()), "{out}");
    assert!(out.contains("out") && out.contains("err"), "{out}");
    let r = call(&agent, "Bash", json!({"command": "true"})).await;
    assert_eq!(sc(&r)["status"], "completed");
    assert_eq!(sc(&r)["exitCode"], 0);

    // The node's guards hold before anything reaches the host.
    let marker = ws.join("ran");
    let e = agent
        .call(
            "far__Bash",
            json!({"command": format!("touch {}; rm -rf /", marker.display())}),
            None,
        )
        .await
        .expect_err("blocklisted");
    assert_eq!(e.remote().map(|s| s.code), Some(ErrorCode::Denied), "{e}");
    assert!(!marker.exists());
    let r = call(&agent, "Bash", json!({"command": "true", "pty": true})).await;
    assert!(
        r.is_error && r.joined_text().contains("pty"),
        "{}",
        r.joined_text()
    );

    // A timeout kills the command's whole process group, children included.
    let pidfile = ws.join("child.pid");
    let r = call(
        &agent,
        "Bash",
        json!({"command": format!("sleep 300 & echo $! > {}; wait", pidfile.display()), "timeout": 1000}),
    )
    .await;
    assert_eq!(sc(&r)["timedOut"], true, "{}", r.joined_text());
    assert_eq!(sc(&r)["status"], "failed");
    let child: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually(
        "the timed-out command's child is killed",
        Duration::from_secs(10),
        || async { (!Path::new(&format!("/proc/{child}")).exists()).then_some(()) },
    )
    .await;

    // Binary Write and Read, inline and through an upload (over 32 KiB).
    for size in [300usize, 100_000] {
        let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 256) as u8).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let r = call(
            &agent,
            "Write",
            json!({"path": "bin/blob.dat", "content": b64, "encoding": "base64"}),
        )
        .await;
        assert!(!r.is_error, "{}", r.joined_text());
        assert_eq!(sc(&r)["bytes"], size);
        assert_eq!(std::fs::read(ws.join("bin/blob.dat")).unwrap(), bytes);
        let r = call(
            &agent,
            "Read",
            json!({"path": "bin/blob.dat", "encoding": "base64"}),
        )
        .await;
        assert!(!r.is_error, "{}", r.joined_text());
        assert_eq!(sc(&r)["data"], b64.as_str());
        assert_eq!(sc(&r)["size"], size);
    }
    // Text: pages by line, the same shapes as a local node.
    let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    let r = call(
        &agent,
        "Write",
        json!({"path": "notes.txt", "content": text}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let r = call(
        &agent,
        "Read",
        json!({"path": "notes.txt", "offset": 10, "limit": 2}),
    )
    .await;
    assert_eq!(sc(&r)["content"], "11\tline 11\n12\tline 12");
    assert_eq!(sc(&r)["lines"], 2);
    let r = call(&agent, "Read", json!({"path": "notes.txt", "offset": 80})).await;
    assert!(
        r.joined_text().contains("the file has 50 lines"),
        "{}",
        r.joined_text()
    );
    let r = call(&agent, "Read", json!({"path": "missing.txt"})).await;
    assert!(
        r.is_error && r.joined_text().contains("File not found"),
        "{}",
        r.joined_text()
    );
    let r = call(&agent, "Read", json!({"path": "bin/blob.dat"})).await;
    assert!(
        r.is_error && r.joined_text().contains("Binary file"),
        "{}",
        r.joined_text()
    );

    // Edit: exactly one match unless replaceAll, made atomically.
    let r = call(
        &agent,
        "Edit",
        json!({"path": "notes.txt", "oldString": "line 2\n", "newString": "second\n"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["replacements"], 1);
    let now = std::fs::read_to_string(ws.join("notes.txt")).unwrap();
    assert!(now.starts_with("line 1\nsecond\nline 3\n"), "{now}");
    let r = call(
        &agent,
        "Edit",
        json!({"path": "notes.txt", "oldString": "line", "newString": "row"}),
    )
    .await;
    assert!(
        r.is_error && r.joined_text().contains("Found"),
        "{}",
        r.joined_text()
    );

    // Glob and Grep through the host's rg: ignore rules, hidden files, the same shapes.
    std::fs::create_dir_all(ws.join("src/.hidden")).unwrap();
    std::fs::write(ws.join("src/alpha.rs"), "fn alpha() {}\nfn beta() {}\n").unwrap();
    std::fs::write(ws.join("src/skipped.rs"), "fn alpha_too() {}\n").unwrap();
    std::fs::write(ws.join("src/.hidden/h.rs"), "fn alpha_hidden() {}\n").unwrap();
    std::fs::write(ws.join(".gitignore"), "skipped.rs\n").unwrap();
    let r = call(&agent, "Glob", json!({"pattern": "src/**/*.rs"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    let alpha = ws.join("src/alpha.rs").display().to_string();
    assert_eq!(sc(&r)["matches"], json!([alpha]), "{}", r.joined_text());
    assert_eq!(sc(&r)["ignoredSkipped"], 1, "{}", r.joined_text());
    let r = call(
        &agent,
        "Glob",
        json!({"pattern": "src/**/*.rs", "noIgnore": true}),
    )
    .await;
    assert_eq!(sc(&r)["count"], 2, "{}", r.joined_text());
    let r = call(
        &agent,
        "Grep",
        json!({"pattern": "fn alpha", "path": "src"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["count"], 1, "{}", r.joined_text());
    assert_eq!(sc(&r)["matches"][0]["path"], alpha.as_str());
    assert_eq!(sc(&r)["matches"][0]["line"], 1);
    assert_eq!(sc(&r)["matches"][0]["content"], "fn alpha() {}");
    assert_eq!(sc(&r)["ignoredSkipped"], 1, "{}", r.joined_text());
    let r = call(&agent, "Grep", json!({"pattern": "fn (", "path": "src"})).await;
    assert!(r.is_error, "{}", r.joined_text());

    // The host's clock, in the local tool's shape.
    let r = call(&agent, "time", json!({})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let unix_ms = sc(&r)["unixMs"].as_i64().unwrap();
    assert!((unix_ms - now_ms).abs() < 60_000, "{}", r.joined_text());
    assert!(
        sc(&r)["uptimeSeconds"].as_f64().unwrap() > 0.0,
        "{}",
        r.joined_text()
    );
    assert!(
        sc(&r)["utc"].as_str().unwrap().ends_with('Z'),
        "{}",
        r.joined_text()
    );

    // The node's own directory on the host is out of the file tools' reach.
    let own = format!("{}/.local/state/gsv/far/jobs", home());
    let r = call(&agent, "Read", json!({"path": format!("{own}/x")})).await;
    assert!(r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["reason"], "protected", "{}", r.joined_text());
}

fn home() -> String {
    std::env::var("HOME").unwrap_or_else(|_| "/root".into())
}

#[tokio::test]
async fn confine_refuses_escapes_on_the_far_host() {
    let dir = TempDir::new("ssh-confine");
    let host = Host::start(dir.path()).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let outside = dir.path().join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
    std::os::unix::fs::symlink(dir.path(), ws.join("sub/up")).unwrap();
    let gw = Gateway::start().await;
    let _node = far_node(&gw, &host, &ws, &["--confine"]).await;
    let agent = gw.agent().await;

    let denied = |r: &ToolResult| {
        assert!(r.is_error, "not refused: {}", r.joined_text());
        assert_eq!(sc(r)["code"], "denied", "{}", r.joined_text());
        assert_eq!(sc(r)["reason"], "outside_workspace", "{}", r.joined_text());
    };
    denied(&call(&agent, "Read", json!({"path": outside.to_str().unwrap()})).await);
    denied(&call(&agent, "Read", json!({"path": "../secret.txt"})).await);
    denied(&call(&agent, "Read", json!({"path": "link"})).await);
    denied(&call(&agent, "Read", json!({"path": "sub/up/secret.txt"})).await);
    denied(
        &call(
            &agent,
            "Write",
            json!({"path": "sub/up/new.txt", "content": "x"}),
        )
        .await,
    );
    denied(
        &call(
            &agent,
            "Write",
            json!({"path": "nope/../../x.txt", "content": "x"}),
        )
        .await,
    );
    denied(
        &call(
            &agent,
            "Edit",
            json!({"path": "link", "oldString": "secret", "newString": "gone"}),
        )
        .await,
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
    assert!(!dir.path().join("new.txt").exists() && !dir.path().join("x.txt").exists());
    // Inside is fine.
    let r = call(
        &agent,
        "Write",
        json!({"path": "sub/ok.txt", "content": "ok"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let r = call(&agent, "Read", json!({"path": "sub/ok.txt"})).await;
    assert_eq!(sc(&r)["content"], "1\tok");

    // --read-only offers no writing tool on an SSH-backed node either.
    let _ro = node_named(&gw, "ro", &host, &ws, &["--read-only"]).await;
    let r = call_on(&agent, "ro", "Read", json!({"path": "sub/ok.txt"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    for tool in ["Write", "Edit", "Bash"] {
        let e = agent
            .call(
                &format!("ro__{tool}"),
                json!({"path": "x", "content": "x", "command": "true"}),
                None,
            )
            .await
            .expect_err("not offered");
        assert_eq!(
            e.remote().map(|s| s.code),
            Some(ErrorCode::NotFound),
            "{tool}: {e}"
        );
    }
}

async fn call_on(agent: &AgentClient, node: &str, tool: &str, args: Value) -> ToolResult {
    agent
        .call(&format!("{node}__{tool}"), args, None)
        .await
        .expect("call answered")
}

#[tokio::test]
async fn a_killed_master_connection_is_made_again() {
    let dir = TempDir::new("ssh-master");
    let host = Host::start(dir.path()).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let gw = Gateway::start().await;
    let node = far_node(&gw, &host, &ws, &[]).await;
    let agent = gw.agent().await;
    let r = call(&agent, "Bash", json!({"command": "echo before"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["status"], "completed", "{}", r.joined_text());

    // The master is the node's `ssh -M -N` child.
    let master = std::process::Command::new("pgrep")
        .args(["-P", &node.0.id().to_string(), "-f", "ControlMaster=yes"])
        .stdout(Stdio::piped())
        .output()
        .expect("pgrep");
    let pid = String::from_utf8_lossy(&master.stdout).trim().to_owned();
    assert!(
        !pid.is_empty(),
        "the node's master connection is a child of it"
    );
    let st = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(st.success());

    eventually(
        "calls work again after the master was killed",
        Duration::from_secs(30),
        || async {
            let r = agent
                .call("far__Bash", json!({"command": "echo after"}), None)
                .await
                .ok()?;
            // A call that met the old master's last moments may fail; the next one works.
            (sc_opt(&r)?["status"] == "completed").then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_changed_host_key_is_refused() {
    let dir = TempDir::new("ssh-hostkey");
    let host = Host::start(dir.path()).await;
    // known_hosts names the server with another key: a changed host key.
    let bins = SshBins::find().unwrap();
    let other = dir.path().join("other_key");
    gsv_bench::sshd::keygen(&bins, &other).unwrap();
    let public = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let mut parts = public.split_whitespace();
    let (kind, key) = (parts.next().unwrap(), parts.next().unwrap());
    let wrong = dir.path().join("wrong_known_hosts");
    std::fs::write(
        &wrong,
        format!("[127.0.0.1]:{} {kind} {key}\n", host.sshd.port),
    )
    .unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let gw = Gateway::start().await;

    for known in [wrong.clone(), dir.path().join("empty_known_hosts")] {
        let mut cmd = gw.node_command("far", &gw.node_token("far"), &ws);
        cmd.args(host.flags(&known))
            .stderr(Stdio::piped())
            .stdout(Stdio::null());
        let child = common::die_with_parent(&mut cmd).spawn().unwrap();
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::task::spawn_blocking(move || child.wait_with_output()),
        )
        .await
        .expect("the node stops by itself")
        .unwrap()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains("host key"), "{stderr}");
    }
}

/// Polls the job until it is no longer running (at most `limit`).
async fn until_ended(agent: &AgentClient, node: &str, id: &str, limit: Duration) -> Value {
    eventually("the remote job ends", limit, || async {
        let r = call_on(
            agent,
            node,
            "Process",
            json!({"action": "poll", "sessionId": id, "waitMs": 1000}),
        )
        .await;
        let s = r.structured_content.clone()?;
        (s["status"] != "running").then_some(s)
    })
    .await
}

#[tokio::test]
async fn background_jobs_are_managed_with_process_and_kept_from_other_tokens() {
    let dir = TempDir::new("ssh-jobs");
    let host = Host::start(dir.path()).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let gw = Gateway::start().await;
    let _node = far_node(&gw, &host, &ws, &[]).await;
    let agent = gw.agent().await;
    let other = gw.agent().await;

    // yieldMs: a quick command is answered as finished; a slow one goes on.
    let r = call(
        &agent,
        "Bash",
        json!({"command": "echo quick", "yieldMs": 5000}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "completed", "{}", r.joined_text());
    assert!(sc(&r)["output"].as_str().unwrap().contains("quick"));
    let r = call(
        &agent,
        "Bash",
        json!({"command": "echo slow; sleep 2; echo done", "yieldMs": 200}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "running", "{}", r.joined_text());
    let slow = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let s = until_ended(&agent, "far", &slow, Duration::from_secs(20)).await;
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["exitCode"], 0);
    let r = call(
        &agent,
        "Process",
        json!({"action": "log", "sessionId": slow}),
    )
    .await;
    assert_eq!(sc(&r)["output"], "slow\ndone", "{}", r.joined_text());
    assert_eq!(sc(&r)["totalLines"], 2);

    // Background with stdin: submit a line, read the answer.
    let r = call(
        &agent,
        "Bash",
        json!({"command": "read line; echo \"got $line\"", "background": true}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "running", "{}", r.joined_text());
    let reader = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let r = call(
        &agent,
        "Process",
        json!({"action": "submit", "sessionId": reader, "data": "hello"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["bytes"], 6);
    let s = until_ended(&agent, "far", &reader, Duration::from_secs(20)).await;
    assert!(s["tail"].as_str().unwrap().contains("got hello"), "{s}");

    // Another token sees none of it: not listed, and its id is an unknown session.
    let mine = call(&agent, "Process", json!({"action": "list"})).await;
    assert!(
        sc(&mine)["count"].as_u64().unwrap() >= 2,
        "{}",
        mine.joined_text()
    );
    let theirs = call_on(&other, "far", "Process", json!({"action": "list"})).await;
    assert_eq!(sc(&theirs)["count"], 0, "{}", theirs.joined_text());
    for action in ["poll", "log", "kill", "remove"] {
        let r = call_on(
            &other,
            "far",
            "Process",
            json!({"action": action, "sessionId": slow}),
        )
        .await;
        assert!(
            r.is_error && r.joined_text().contains("no session"),
            "{action}: {}",
            r.joined_text()
        );
    }
    let r = call_on(
        &other,
        "far",
        "Process",
        json!({"action": "submit", "sessionId": reader, "data": "x"}),
    )
    .await;
    assert!(
        r.is_error && r.joined_text().contains("no session"),
        "{}",
        r.joined_text()
    );

    // kill ends the whole group and says how.
    let pidfile = ws.join("bg-child.pid");
    let r = call(
        &agent,
        "Bash",
        json!({"command": format!("sleep 300 & echo $! > {}; wait", pidfile.display()), "background": true}),
    )
    .await;
    let long = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    eventually(
        "the job wrote its child's pid",
        Duration::from_secs(10),
        || async { pidfile.exists().then_some(()) },
    )
    .await;
    let r = call(
        &agent,
        "Process",
        json!({"action": "kill", "sessionId": long}),
    )
    .await;
    assert_eq!(sc(&r)["killed"], true, "{}", r.joined_text());
    assert_eq!(sc(&r)["status"], "failed", "{}", r.joined_text());
    assert_eq!(sc(&r)["signal"], "SIGTERM", "{}", r.joined_text());
    let child: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually(
        "the killed job's child is gone",
        Duration::from_secs(10),
        || async { (!Path::new(&format!("/proc/{child}")).exists()).then_some(()) },
    )
    .await;
    // A finished job can be removed, then it is gone.
    let r = call(
        &agent,
        "Process",
        json!({"action": "remove", "sessionId": long}),
    )
    .await;
    assert_eq!(sc(&r)["removed"], true, "{}", r.joined_text());
    let r = call(
        &agent,
        "Process",
        json!({"action": "poll", "sessionId": long}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
}

#[tokio::test]
async fn a_background_job_survives_a_dropped_link_and_a_node_restart() {
    let dir = TempDir::new("ssh-survive");
    let host = Host::start(dir.path()).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let gw = Gateway::start().await;
    let mut node = node_named(&gw, "far", &host, &ws, &[]).await;
    let agent = gw.agent().await;
    let r = call(
        &agent,
        "Bash",
        json!({"command": "i=0; while [ $i -lt 60 ]; do echo tick $i; i=$((i+1)); sleep 0.1; done", "background": true}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "running", "{}", r.joined_text());
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();

    // The SSH master is killed: the job goes on, and Process still reaches it.
    let master = std::process::Command::new("pgrep")
        .args(["-P", &node.0.id().to_string(), "-f", "ControlMaster=yes"])
        .output()
        .expect("pgrep");
    let pid = String::from_utf8_lossy(&master.stdout).trim().to_owned();
    assert!(!pid.is_empty());
    assert!(std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap()
        .success());
    let seen = eventually(
        "Process reaches the job again",
        Duration::from_secs(30),
        || async {
            let r = agent
                .call(
                    "far__Process",
                    json!({"action": "poll", "sessionId": id}),
                    None,
                )
                .await
                .ok()?;
            r.structured_content
                .clone()
                .filter(|s| s["sessionId"] == id.as_str())
        },
    )
    .await;
    assert_eq!(seen["status"], "running", "{seen}");

    // The node process itself is killed and started again: the job is still there.
    node.kill();
    let _node = node_named(&gw, "far", &host, &ws, &[]).await;
    let r = call(&agent, "Process", json!({"action": "list"})).await;
    assert!(r.joined_text().contains(&id), "{}", r.joined_text());
    let s = until_ended(&agent, "far", &id, Duration::from_secs(30)).await;
    assert_eq!(s["status"], "completed", "{s}");
    let r = call(
        &agent,
        "Process",
        json!({"action": "log", "sessionId": id, "limit": 100}),
    )
    .await;
    assert_eq!(sc(&r)["totalLines"], 60, "{}", r.joined_text());
    assert!(sc(&r)["output"].as_str().unwrap().ends_with("tick 59"));
}

#[tokio::test]
async fn tmux_runs_commands_in_a_window_of_their_own_an_operator_can_watch() {
    let dir = TempDir::new("ssh-tmux");
    let host = Host::start(dir.path()).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // A tmux server of this test's own (TMUX_TMPDIR, sent through ssh's SetEnv).
    let tmux_dir = dir.path().join("tmux");
    std::fs::create_dir_all(&tmux_dir).unwrap();
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .env("TMUX_TMPDIR", &tmux_dir)
            .env_remove("TMUX")
            .args(args)
            .output()
            .expect("tmux")
    };
    // The operator's own session, with a secret exported into the server's
    // environment and a half-typed line in their pane (issue 42).
    assert!(
        tmux(&["new-session", "-d", "-s", "work", "-x", "120", "-y", "40"])
            .status
            .success()
    );
    assert!(
        tmux(&["set-environment", "-g", "GSV_TEST_SECRET", "s3cr3t"])
            .status
            .success()
    );
    assert!(
        tmux(&["send-keys", "-t", "=work:0", "-l", "echo half-typed"])
            .status
            .success()
    );
    let set_env = format!("SetEnv=TMUX_TMPDIR={}", tmux_dir.display());
    let gw = Gateway::start().await;
    let _node = node_named(
        &gw,
        "far",
        &host,
        &ws,
        &["--tmux", "work", "--ssh-option", &set_env],
    )
    .await;
    let agent = gw.agent().await;

    let r = call(
        &agent,
        "Bash",
        json!({"command": "echo hello-from-pane; echo \"secret=${GSV_TEST_SECRET:-none}\"; exit 3"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["exitCode"], 3, "{}", r.joined_text());
    assert_eq!(
        sc(&r)["output"],
        "hello-from-pane\nsecret=none\n",
        "the command saw the server's environment: {}",
        r.joined_text()
    );
    // The operator's view: the command line and its output, in gsv's window.
    let r = call(
        &agent,
        "term_capture",
        json!({"target": "work:gsv", "lines": 50}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let screen = sc(&r)["text"].as_str().unwrap().to_owned();
    assert!(screen.contains("$ echo hello-from-pane"), "{screen}");
    assert!(screen.contains("hello-from-pane"), "{screen}");
    // The operator's pane: nothing typed into it, the half-typed line not sent.
    let r = call(
        &agent,
        "term_capture",
        json!({"target": "work:0", "lines": 50}),
    )
    .await;
    let theirs = sc(&r)["text"].as_str().unwrap().to_owned();
    assert!(theirs.contains("echo half-typed"), "{theirs}");
    assert!(
        !theirs.contains("hello-from-pane"),
        "typed into the operator's pane: {theirs}"
    );
    assert!(
        !theirs.contains("run'"),
        "typed into the operator's pane: {theirs}"
    );

    // A timeout ends the command in the window, which then takes the next one.
    let r = call(
        &agent,
        "Bash",
        json!({"command": "sleep 30", "timeout": 1000}),
    )
    .await;
    assert_eq!(sc(&r)["timedOut"], true, "{}", r.joined_text());
    let r = call(&agent, "Bash", json!({"command": "echo again"})).await;
    assert_eq!(sc(&r)["output"], "again\n", "{}", r.joined_text());

    // One token's long command in the window does not hold up another's: that one
    // runs outside the window meanwhile.
    let other = gw.agent().await;
    let long = call(&agent, "Bash", json!({"command": "sleep 4; echo long"}));
    let quick = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let started = std::time::Instant::now();
        let r = call_on(&other, "far", "Bash", json!({"command": "echo quick"})).await;
        (r, started.elapsed())
    };
    let (long, (quick, took)) = tokio::join!(long, quick);
    assert_eq!(sc(&long)["output"], "long\n", "{}", long.joined_text());
    assert_eq!(sc(&quick)["output"], "quick\n", "{}", quick.joined_text());
    assert!(
        took < Duration::from_secs(3),
        "waited {took:?} behind the window"
    );

    // The operator's pane busy with a program changes nothing for gsv's window.
    let r = call(
        &agent,
        "term_send",
        json!({"target": "work:0", "keys": ["C-u"]}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let r = call(
        &agent,
        "term_send",
        json!({"target": "work:0", "text": "cat", "enter": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let r = call(&agent, "Bash", json!({"command": "echo still-mine"})).await;
    assert_eq!(sc(&r)["output"], "still-mine\n", "{}", r.joined_text());
    let _ = tmux(&["kill-server"]);
}

fn sc_opt(r: &ToolResult) -> Option<&Value> {
    r.structured_content.as_ref()
}

/// The `git` CLI in `dir` with no user or system configuration; panics on failure.
fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Ann")
        .env("GIT_AUTHOR_EMAIL", "ann@example.com")
        .env("GIT_COMMITTER_NAME", "Ann")
        .env("GIT_COMMITTER_EMAIL", "ann@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn listed(r: &ToolResult) -> Vec<String> {
    sc(r)["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("entries: {}", r.joined_text()))
        .iter()
        .map(|e| e["path"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn fs_list_fs_stat_and_git_work_on_the_far_host() {
    let dir = TempDir::new("ssh-structured");
    let host = Host::start(dir.path()).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::create_dir_all(ws.join("build")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(ws.join("src/deep/lib.rs"), "// lib\n").unwrap();
    std::fs::write(ws.join("src/deep/keep.log"), "kept\n").unwrap();
    std::fs::write(ws.join("src/deep/.gitignore"), "!keep.log\n").unwrap();
    std::fs::write(ws.join("build/out.o"), [0u8, 1, 2]).unwrap();
    std::fs::write(ws.join("app.log"), "log\n").unwrap();
    std::fs::write(ws.join(".gitignore"), "*.log\nbuild/\n").unwrap();
    std::fs::write(ws.join(".env"), "X=1\n").unwrap();
    let png = [
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
    ];
    std::fs::write(ws.join("logo.png"), png).unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("out")).unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "src/main.rs", ".gitignore"]);
    git(&ws, &["commit", "-q", "-m", "first"]);
    std::fs::write(ws.join("src/main.rs"), "fn main() { run(); }\n").unwrap();
    let gw = Gateway::start().await;
    let _node = far_node(&gw, &host, &ws, &["--confine"]).await;
    let agent = gw.agent().await;

    // fs_list: one level, hidden and ignored entries left out (and counted), the link
    // listed as a link and never entered.
    let r = call(&agent, "fs_list", json!({})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(
        listed(&r),
        ["logo.png", "out", "src"],
        "{}",
        r.joined_text()
    );
    assert_eq!(sc(&r)["ignoredSkipped"], 2, "{}", r.joined_text());
    let out = &sc(&r)["entries"][1];
    assert_eq!(out["kind"], "symlink");
    assert_eq!(out["linkTarget"], outside.to_str().unwrap());
    let r = call(&agent, "fs_list", json!({"depth": 5})).await;
    assert_eq!(
        listed(&r),
        [
            "logo.png",
            "out",
            "src",
            "src/deep",
            "src/deep/keep.log",
            "src/deep/lib.rs",
            "src/main.rs"
        ],
        "a deeper .gitignore's negation keeps keep.log; build/ is left out whole"
    );
    assert_eq!(sc(&r)["ignoredSkipped"], 3, "{}", r.joined_text());
    let r = call(
        &agent,
        "fs_list",
        json!({"depth": 5, "hidden": true, "ignored": true, "glob": "**/*.{o,log}"}),
    )
    .await;
    assert_eq!(listed(&r), ["app.log", "build/out.o", "src/deep/keep.log"]);
    let r = call(&agent, "fs_list", json!({"hidden": true})).await;
    assert!(
        listed(&r).contains(&".env".to_owned()),
        "{}",
        r.joined_text()
    );

    // fs_stat: magic bytes, text, a link as a link (even one pointing out), owner.
    let r = call(&agent, "fs_stat", json!({"path": "logo.png"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["mime"], "image/png");
    assert_eq!(sc(&r)["size"], png.len());
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(ws.join("logo.png")).unwrap());
    assert_eq!(sc(&r)["owner"]["uid"].as_u64(), Some(u64::from(uid)));
    let r = call(&agent, "fs_stat", json!({"path": "src/main.rs"})).await;
    assert_eq!(sc(&r)["mime"], "text/plain");
    assert_eq!(sc(&r)["mode"].as_str().map(str::len), Some(4));
    let r = call(&agent, "fs_stat", json!({"path": "out"})).await;
    assert_eq!(
        (sc(&r)["kind"].as_str(), sc(&r)["linkTarget"].as_str()),
        (Some("symlink"), outside.to_str())
    );
    let r = call(&agent, "fs_stat", json!({"path": "src"})).await;
    assert_eq!(sc(&r)["mime"], "inode/directory");
    let r = call(&agent, "fs_stat", json!({"path": "missing"})).await;
    assert!(
        r.is_error && r.joined_text().starts_with("Not found"),
        "{}",
        r.joined_text()
    );

    // Confined: outside the workspace and the node's own directory on the host are
    // refused, whichever way they are named.
    let state = format!("{}/.local/state/gsv/open", home());
    for (tool, args) in [
        ("fs_stat", json!({"path": "out/secret.txt"})),
        ("fs_stat", json!({"path": "../outside"})),
        ("fs_list", json!({"path": "out"})),
        ("fs_list", json!({"path": ".."})),
        ("fs_list", json!({"path": outside.to_str().unwrap()})),
        ("git_status", json!({"path": "out"})),
        ("git_log", json!({"path": ".."})),
    ] {
        let r = call(&agent, tool, args.clone()).await;
        assert!(r.is_error, "{tool} {args}: {}", r.joined_text());
        assert_eq!(
            sc(&r)["code"],
            "denied",
            "{tool} {args}: {}",
            r.joined_text()
        );
    }
    let _open = node_named(&gw, "open", &host, &ws, &[]).await;
    for (tool, args) in [
        ("fs_stat", json!({"path": state})),
        ("fs_list", json!({"path": state})),
    ] {
        let r = call_on(&agent, "open", tool, args.clone()).await;
        assert!(r.is_error, "{tool} {args}: {}", r.joined_text());
        assert_eq!(
            sc(&r)["reason"],
            "protected",
            "{tool} {args}: {}",
            r.joined_text()
        );
    }

    // git: status, log, diff and show answer from the host's git.
    let r = call(&agent, "git_status", json!({})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["branch"]["head"], "main");
    let files: Vec<&str> = sc(&r)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"src/main.rs") && files.contains(&"logo.png"),
        "{files:?}"
    );
    let r = call(&agent, "git_log", json!({})).await;
    assert_eq!(
        sc(&r)["commits"][0]["subject"],
        "first",
        "{}",
        r.joined_text()
    );
    let r = call(&agent, "git_diff", json!({})).await;
    assert!(r.joined_text().contains("run();"), "{}", r.joined_text());
    let r = call(&agent, "git_show", json!({"rev": "HEAD"})).await;
    assert!(
        r.joined_text().contains("fn main() {}"),
        "{}",
        r.joined_text()
    );
}

/// Issue 42: `gsv cp` to and from an SSH-backed node read and wrote the node
/// process's own machine, not the host the node stands for (an agent copied the node
/// machine's SSH key). Until copies go through the SSH backend they are refused with
/// a clear error, both ways and for trees, and nothing is read or written locally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_to_an_ssh_node_are_refused_not_made_on_the_wrong_machine() {
    let dir = TempDir::new("ssh-cp");
    let host = Host::start(dir.path()).await;
    let gw = Gateway::start().await;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let _node = far_node(&gw, &host, &ws, &[]).await;
    let token = gw.agent_token();
    // A file the node machine has at the path the far host's copy would name.
    let local = dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let key = host.sshd.client_key.display().to_string();
    let cp = |args: &[&str]| {
        let mut all = vec!["cp"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--token", &token]);
        tokio::task::block_in_place(|| gw.cli(&all))
    };
    let stolen = local.join("stolen");
    let (code, out, err) = cp(&[&format!("far:{key}"), stolen.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("over SSH") && err.contains("not supported"),
        "{err}"
    );
    assert!(!stolen.exists(), "nothing copied from the node's machine");
    let src = local.join("up.txt");
    std::fs::write(&src, "x").unwrap();
    let planted = dir.path().join("planted.txt");
    let (code, _, err) = cp(&[src.to_str().unwrap(), &format!("far:{}", planted.display())]);
    assert_ne!(code, 0);
    assert!(err.contains("not supported"), "{err}");
    assert!(!planted.exists());
    let (code, _, err) = cp(&[
        "-r",
        &format!("far:{}", ws.display()),
        local.join("t").to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("not supported"), "{err}");
}

/// Issue 42: the docs said `--ssh-option` cannot run local commands, but
/// `ProxyCommand` and `KnownHostsCommand` did. Now the node refuses them at start
/// (usage error, exit 2), and the command never runs.
#[test]
fn ssh_options_that_run_local_commands_are_refused_at_start() {
    let dir = TempDir::new("ssh-option");
    let marker = dir.path().join("RAN");
    for option in [
        format!("ProxyCommand=touch {}", marker.display()),
        format!("KnownHostsCommand=/bin/sh -c 'touch {}'", marker.display()),
        "LocalForward=18080 127.0.0.1:80".to_owned(),
    ] {
        let out = std::process::Command::new(common::gsv_bin())
            .args(["node", "--gateway", "http://127.0.0.1:9", "--id", "far"])
            .args(["--token", "gsv_join_x_y", "--ssh", "u@127.0.0.1:9"])
            .args(["--ssh-option", &option])
            .arg("--data")
            .arg(dir.path())
            .output()
            .expect("gsv node");
        assert_eq!(out.status.code(), Some(2), "{option}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--ssh-option"), "{option}: {err}");
        assert!(!marker.exists(), "{option} ran");
    }
}
