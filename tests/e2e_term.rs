//! End to end: term_send and term_capture (issue 19) on a tmux server the test starts
//! itself (a private `-L` socket name, killed on drop even when the test fails),
//! through a real gateway and a real `gsv node` on loopback. Typing reaches the pane
//! and its output is read back; bad targets and socket paths are refused; on a node
//! in approve-shell mode nothing is typed without an operator.

mod common;

use common::{eventually, next_approval_request, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, ToolResult};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A tmux server on a socket name of its own, running `sh` in session `t`; killed
/// (`kill-server`) on drop.
struct Tmux {
    socket: String,
    /// The socket file, removed on drop too (kill-server leaves it).
    path: Option<String>,
}

impl Tmux {
    fn start(tag: &str) -> Tmux {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let socket = format!("gsv-test-{}-{tag}-{nanos}", std::process::id());
        let mut tmux = Tmux { socket, path: None };
        let status = tmux
            .command()
            .args(["new-session", "-d", "-s", "t", "-x", "120", "-y", "30"])
            .args(["env", "PS1=$ ", "sh"])
            .status()
            .expect("run tmux (tests need it installed: .ci/run installs it)");
        assert!(status.success(), "tmux new-session failed");
        let out = tmux
            .command()
            .args(["display-message", "-p", "#{socket_path}"])
            .output()
            .expect("tmux display-message");
        tmux.path = Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|p| p.contains("gsv-test-"));
        tmux
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        // No configuration: a user's ~/.tmux.conf (base-index…) must not change the panes.
        cmd.args(["-f", "/dev/null", "-L"])
            .arg(&self.socket)
            .env_remove("TMUX");
        cmd
    }

    /// The pane's text, read directly (not through the node).
    fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "t"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(tool, args, Some(30_000))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Waits until term_capture on `target` shows `needle`; returns the text.
async fn captured(agent: &AgentClient, tool: &str, socket: &str, needle: &str) -> String {
    eventually(
        &format!("{needle:?} in the pane"),
        Duration::from_secs(15),
        || async {
            let r = call(agent, tool, json!({"target": "t:0.0", "socket": socket})).await;
            assert!(!r.is_error, "{}", r.joined_text());
            let text = sc(&r)["text"].as_str().unwrap_or_default().to_owned();
            text.contains(needle).then_some(text)
        },
    )
    .await
}

#[tokio::test]
async fn term_send_types_into_a_pane_and_term_capture_reads_it_back() {
    let tmux = Tmux::start("io");
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("tx", ws.path()).await;
    let agent = gw.agent().await;
    let socket = tmux.socket.as_str();

    // Text then Enter: the shell runs it. What is looked for is the output, which
    // differs from what was typed (`gsv-42` against `gsv-$((6*7))`); it may share a
    // line with the prompt when the typing outruns the shell.
    let r = call(
        &agent,
        "tx__term_send",
        json!({"target": "t:0.0", "socket": socket, "text": "echo gsv-$((6*7))", "enter": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["sent"], json!(["text:echo gsv-$((6*7))", "Enter"]));
    let text = captured(&agent, "tx__term_capture", socket, "gsv-42").await;
    assert!(text.contains("echo gsv-$((6*7))"), "{text}");
    assert!(tmux.screen().contains("gsv-42"));

    // tmux's own syntax in the text is typed as it is: a trailing `;` (a command
    // separator to tmux), a leading `-`.
    let r = call(
        &agent,
        "tx__term_send",
        json!({"target": "t", "socket": socket, "text": "echo semi-$((1+1));", "enter": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let text = captured(&agent, "tx__term_capture", socket, "semi-2").await;
    assert!(text.contains("echo semi-$((1+1));"), "{text}");

    // Keys: C-u (the terminal's line kill) drops a half-typed line.
    call(
        &agent,
        "tx__term_send",
        json!({"target": "t", "socket": socket, "text": "echo never-$((2+2))"}),
    )
    .await;
    call(
        &agent,
        "tx__term_send",
        json!({"target": "t", "socket": socket, "keys": ["C-u"], "enter": true}),
    )
    .await;
    call(
        &agent,
        "tx__term_send",
        json!({"target": "t", "socket": socket, "text": "echo done-$((3+3))", "enter": true}),
    )
    .await;
    let text = captured(&agent, "tx__term_capture", socket, "done-6").await;
    assert!(!text.contains("never-4"), "{text}");

    // Bounded scrollback; escapes only when asked.
    let r = call(
        &agent,
        "tx__term_capture",
        json!({"target": "t", "socket": socket, "lines": 100, "escapes": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["truncated"], false);

    // Refused: bad targets, socket paths, unknown keys, control characters, a pane
    // or server that does not exist. Nothing of it reaches the pane.
    for bad in [
        json!({"target": "-t", "socket": socket, "text": "echo bad-1", "enter": true}),
        json!({"target": "t;kill-server", "socket": socket, "enter": true}),
        json!({"target": "t:0.0.0", "socket": socket, "enter": true}),
        json!({"target": "t", "socket": "/tmp/tmux-0/default", "enter": true}),
        json!({"target": "t", "socket": "-S", "enter": true}),
        json!({"target": "t", "socket": socket, "keys": ["kill-server"]}),
        json!({"target": "t", "socket": socket, "text": "echo bad-2\u{1b}[A"}),
        json!({"target": "nosuch", "socket": socket, "text": "echo bad-3", "enter": true}),
        json!({"target": "t", "socket": format!("{socket}-none"), "enter": true}),
        json!({"target": "t", "socket": socket}),
    ] {
        let r = agent.call("tx__term_send", bad.clone(), Some(30_000)).await;
        assert!(r.is_err() || r.unwrap().is_error, "{bad}");
    }
    for bad in [
        json!({"target": "-t", "socket": socket}),
        json!({"target": "t", "socket": "../x"}),
        json!({"target": "t", "socket": socket, "lines": 100_000}),
    ] {
        let r = agent
            .call("tx__term_capture", bad.clone(), Some(30_000))
            .await;
        assert!(r.is_err() || r.unwrap().is_error, "{bad}");
    }
    let screen = tmux.screen();
    assert!(!screen.contains("bad-"), "{screen}");

    // Names match exactly: "work" is not the session "workbench" (tmux alone would
    // take the prefix).
    let status = tmux
        .command()
        .args(["new-session", "-d", "-s", "workbench", "cat"])
        .status()
        .unwrap();
    assert!(status.success());
    let r = call(
        &agent,
        "tx__term_send",
        json!({"target": "work", "socket": socket, "text": "prefix-typed", "enter": true}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    let r = call(
        &agent,
        "tx__term_capture",
        json!({"target": "work", "socket": socket}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    let out = tmux
        .command()
        .args(["capture-pane", "-p", "-t", "workbench"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("prefix-typed"));
    // The server is still there.
    assert!(tmux
        .command()
        .args(["has-session", "-t", "t"])
        .status()
        .unwrap()
        .success());
}

#[tokio::test]
async fn term_send_is_guarded_like_bash() {
    let tmux = Tmux::start("guard");
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _plain = gw.node("plain", ws.path()).await;
    let _strict = gw.spawn_node(
        "strict",
        &gw.node_token("strict"),
        ws.path(),
        &["--approve-shell", "echo .*"],
    );
    gw.wait_online("strict").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);
    let socket = tmux.socket.clone();

    // The shell blocklist applies to typed text: denied at once, nothing typed.
    let e = agent
        .call(
            "plain__term_send",
            json!({"target": "t", "socket": socket, "text": "rm -rf /", "enter": true}),
            Some(10_000),
        )
        .await
        .expect_err("blocked");
    assert_eq!(e.remote().map(|s| s.code), Some(ErrorCode::Denied), "{e:?}");
    assert!(!tmux.screen().contains("rm -rf"), "{}", tmux.screen());

    // Approve-shell mode: even text an auto-approve pattern matches waits for an
    // operator; denied, nothing is typed.
    for args in [
        json!({"target": "t", "socket": socket, "text": "echo strict-$((5*5))", "enter": true}),
        json!({"target": "t", "socket": socket, "keys": ["C-c"]}),
    ] {
        let a = agent.clone();
        let sent = args.clone();
        let pending =
            tokio::spawn(async move { a.call("strict__term_send", sent, Some(60_000)).await });
        let req = next_approval_request(&operator).await;
        assert_eq!(req["tool"], "term_send", "{req}");
        assert!(
            req["reason"].as_str().unwrap().contains("approve-shell"),
            "{req}"
        );
        let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(pending.await.unwrap().is_err(), "{args}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!tmux.screen().contains("strict-"), "{}", tmux.screen());

    // Approved: typed and run.
    let a = agent.clone();
    let s = socket.clone();
    let pending = tokio::spawn(async move {
        a.call(
            "strict__term_send",
            json!({"target": "t", "socket": s, "text": "echo strict-$((5*5))", "enter": true}),
            Some(60_000),
        )
        .await
    });
    let req = next_approval_request(&operator).await;
    let (code, _, err) = gw.cli(&["approvals", "approve", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let r = pending.await.unwrap().expect("approved");
    assert!(!r.is_error, "{}", r.joined_text());
    captured(&agent, "strict__term_capture", &socket, "strict-25").await;
}

#[tokio::test]
async fn a_token_is_judged_for_term_send_as_for_bash() {
    let tmux = Tmux::start("policy");
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("plain", ws.path()).await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let socket = tmux.socket.clone();
    let args =
        json!({"target": "t", "socket": socket, "text": "echo typed-$((6*7))", "enter": true});

    // A token that may not run Bash may not type into a terminal either, even though
    // its policy lets term_send through: refused at the gateway, nothing typed.
    let no_bash = gw.token(&["agent", "no-bash", "--allow", "*", "--deny", "*__Bash"]);
    let agent = gw.agent_with(&no_bash).await;
    let e = agent
        .call("plain__term_send", args.clone(), Some(10_000))
        .await
        .expect_err("refused");
    let shape = e.remote().expect("a gateway error");
    assert_eq!(shape.code, ErrorCode::Forbidden, "{e:?}");
    assert!(shape.message.contains("plain__Bash"), "{}", shape.message);
    // Reading the pane is not typing: allowed.
    let r = call(
        &agent,
        "plain__term_capture",
        json!({"target": "t", "socket": socket}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());

    // A token whose Bash calls need approval needs it for typed text too; denied,
    // nothing is typed.
    let careful = gw.token(&["agent", "careful", "--allow", "*", "--confirm", "*__Bash"]);
    let agent = Arc::new(gw.agent_with(&careful).await);
    let a = agent.clone();
    let sent = args.clone();
    let pending = tokio::spawn(async move { a.call("plain__term_send", sent, Some(60_000)).await });
    let req = next_approval_request(&operator).await;
    assert_eq!(req["tool"], "term_send", "{req}");
    assert!(
        req["reason"].as_str().unwrap().contains("plain__Bash"),
        "{req}"
    );
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(pending.await.unwrap().is_err());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!tmux.screen().contains("typed-"), "{}", tmux.screen());
}
