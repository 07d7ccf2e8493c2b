//! A node crash loses nothing: a real `gsv node` process killed with SIGKILL (only the
//! node; its commands live on in their own process groups) and started again with the
//! same data directory re-adopts its sessions, answers the calls it had begun with
//! their results, and reports what it cannot recover as `lost:`. The gateway is a
//! scripted stand-in on loopback, so the `resume: true` frames are exactly the test's.

mod common;

use common::{die_with_parent, gsv_bin, Proc, TempDir};
use futures_util::{SinkExt, StreamExt};
use gsv_protocol::frame::{encode_event, encode_ok};
use gsv_protocol::{EventName, HelloOk, Limits, PROTOCOL_VERSION};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const WAIT: Duration = Duration::from_secs(20);
const NODE: &str = "crashy";

struct FakeGateway {
    listener: TcpListener,
}

impl FakeGateway {
    async fn start() -> FakeGateway {
        FakeGateway {
            listener: TcpListener::bind("127.0.0.1:0").await.expect("bind"),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.listener.local_addr().expect("addr"))
    }

    /// Accepts the node's next connection and registers it; returns the link and
    /// whether the node said it keeps a journal.
    async fn accept(&self) -> (Link, bool) {
        let (tcp, _) = tokio::time::timeout(WAIT, self.listener.accept())
            .await
            .expect("the node connects")
            .expect("accept");
        let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
        let challenge = encode_event(EventName::Challenge, &json!({"nonce": "n-1"}), 0);
        ws.send(Message::text(challenge)).await.expect("send");
        let mut link = Link { ws };
        let connect = link.next_json().await;
        assert_eq!(connect["method"], "connect", "{connect}");
        let journal = connect["params"]["node"]["journal"] == true;
        let hello = HelloOk::new(
            PROTOCOL_VERSION,
            "conn".into(),
            Limits::standard(64, 60_000),
        );
        link.send(encode_ok("connect", &hello)).await;
        (link, journal)
    }
}

struct Link {
    ws: WebSocketStream<TcpStream>,
}

impl Link {
    async fn send(&mut self, text: String) {
        self.ws.send(Message::text(text)).await.expect("send");
    }

    async fn next_json(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a frame from the node")
                .expect("the connection is open")
                .expect("a frame");
            if let Message::Text(text) = message {
                return serde_json::from_str(&text).expect("JSON");
            }
        }
    }

    async fn invoke(&mut self, id: &str, tool: &str, args: Value, caller: &str, resume: bool) {
        let mut params = json!({
            "tool": tool, "args": args, "timeoutMs": 60_000,
            "caller": {"tokenId": caller},
        });
        if resume {
            params["resume"] = json!(true);
        }
        let req = json!({"type": "req", "id": id, "method": "tool.invoke", "params": params});
        self.send(req.to_string()).await;
    }

    /// The response to request `id` (events are skipped).
    async fn response(&mut self, id: &str) -> Value {
        loop {
            let frame = self.next_json().await;
            if frame["type"] == "res" && frame["id"] == id {
                return frame;
            }
        }
    }

    async fn call(&mut self, id: &str, tool: &str, args: Value, caller: &str) -> Value {
        self.invoke(id, tool, args, caller, false).await;
        let res = self.response(id).await;
        assert_eq!(res["ok"], true, "{res}");
        res["result"].clone()
    }
}

fn spawn_node(gateway: &str, data: &Path, workspace: &Path) -> Proc {
    let mut cmd = Command::new(gsv_bin());
    cmd.arg("node")
        .args(["--gateway", gateway, "--id", NODE, "--token", "tok"])
        .arg("--workspace")
        .arg(workspace)
        .arg("--data")
        .arg(data)
        .args(["--heartbeat-ms", "60000"])
        .env("RUST_LOG", "warn")
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    die_with_parent(&mut cmd);
    Proc(cmd.spawn().expect("spawn gsv node"))
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn journal(data: &Path) -> PathBuf {
    data.join("journal").join(NODE)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
        .permissions()
        .mode()
        & 0o777
}

/// Waits (bounded) until `f` holds.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_session_outlives_a_node_sigkill_and_is_readopted() {
    let (data, workspace) = (TempDir::new("journal-data"), TempDir::new("journal-ws"));
    let gateway = FakeGateway::start().await;
    let mut node = spawn_node(&gateway.url(), data.path(), workspace.path());
    let (mut link, journaled) = gateway.accept().await;
    assert!(journaled, "a node with a data dir says it keeps a journal");

    let started = link
        .call(
            "bg-1",
            "Bash",
            json!({"command": "sleep 2; echo done", "background": true}),
            "tok-a",
        )
        .await;
    let session = started["structuredContent"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned();

    // Private: 0700 directories, 0600 files.
    let root = journal(data.path());
    let dir = root.join("sessions").join(&session);
    for d in [
        data.path().join("journal"),
        root.clone(),
        root.join("sessions"),
        root.join("calls"),
        dir.clone(),
    ] {
        assert_eq!(mode(&d), 0o700, "{d:?}");
    }
    for f in ["record.json", "stdout", "stderr"] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }
    for entry in std::fs::read_dir(root.join("calls")).expect("calls dir") {
        let path = entry.expect("entry").path();
        assert_eq!(mode(&path), 0o600, "{path:?}");
    }

    // Only the node dies; the session's process group lives on.
    node.kill();
    drop(link);
    let mut node = spawn_node(&gateway.url(), data.path(), workspace.path());
    let (mut link, _) = gateway.accept().await;

    // Another token still cannot see it.
    let other = link
        .call(
            "peek",
            "Process",
            json!({"action": "poll", "sessionId": session}),
            "tok-b",
        )
        .await;
    assert_eq!(other["isError"], true, "{other}");
    let listed = link
        .call("list-b", "Process", json!({"action": "list"}), "tok-b")
        .await;
    assert!(!text(&listed).contains(&session), "{listed}");

    // Its owner polls it to its end.
    let start = Instant::now();
    let finished = loop {
        let id = format!("poll-{}", start.elapsed().as_millis());
        let poll = link
            .call(
                &id,
                "Process",
                json!({"action": "poll", "sessionId": session}),
                "tok-a",
            )
            .await;
        assert_eq!(poll["isError"], false, "{poll}");
        if poll["structuredContent"]["status"] != "running" {
            break poll;
        }
        assert!(start.elapsed() < WAIT, "the session never finished: {poll}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let s = &finished["structuredContent"];
    assert_eq!(s["status"], "completed", "{finished}");
    assert_eq!(s["exitCode"], 0, "{finished}");
    assert!(text(&finished).contains("done"), "{finished}");

    // Its log pages work too.
    let log = link
        .call(
            "log",
            "Process",
            json!({"action": "log", "sessionId": session}),
            "tok-a",
        )
        .await;
    assert!(text(&log).contains("done"), "{log}");
    node.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_running_when_the_node_is_sigkilled_are_answered_after_the_restart() {
    let (data, workspace) = (TempDir::new("journal-data"), TempDir::new("journal-ws"));
    let gateway = FakeGateway::start().await;
    let mut node = spawn_node(&gateway.url(), data.path(), workspace.path());
    let (mut link, _) = gateway.accept().await;

    // A read-only tool's call leaves nothing in the journal (running it again after a
    // crash changes nothing): it stays as fast as without a journal.
    link.invoke("echo-1", "Glob", json!({"pattern": "*"}), "tok-a", false)
        .await;
    let res = link.response("echo-1").await;
    assert_eq!(res["ok"], true, "{res}");
    let hex: String = "echo-1".bytes().map(|b| format!("{b:02x}")).collect();
    let calls_dir = journal(data.path()).join("calls");
    for ext in ["call", "done"] {
        assert!(
            !calls_dir.join(format!("{hex}.{ext}")).exists(),
            "no .{ext} for a read-only call"
        );
    }

    // A foreground Bash command (re-adoptable) and an exec one (not: reported lost).
    link.invoke(
        "fg-1",
        "Bash",
        json!({"command": "sleep 3; echo fg-done; exit 3"}),
        "tok-a",
        false,
    )
    .await;
    link.invoke(
        "ex-1",
        "exec",
        json!({"argv": ["/bin/sleep", "30"]}),
        "tok-a",
        false,
    )
    .await;
    let sessions = journal(data.path()).join("sessions");
    let records = || -> Vec<Value> {
        std::fs::read_dir(&sessions)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| std::fs::read(e.path().join("record.json")).ok())
                    .filter_map(|b| serde_json::from_slice(&b).ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    until("both commands journaled", || records().len() == 2).await;
    let exec_pid = records()
        .iter()
        .find(|r| r["supervised"] == false)
        .and_then(|r| r["pid"].as_i64())
        .expect("the exec session's pid") as i32;

    node.kill();
    drop(link);
    assert!(alive(exec_pid), "the exec command outlived the node");
    // A call of another tool that was running when the node died (written as the node
    // writes it before a tool runs).
    let hex: String = "ghost".bytes().map(|b| format!("{b:02x}")).collect();
    let calls = journal(data.path()).join("calls");
    std::fs::write(
        calls.join(format!("{hex}.call")),
        json!({"id": "ghost", "tool": "Read", "caller": "tok-a", "begun_at": 1}).to_string(),
    )
    .expect("write a journaled call");
    let mut node = spawn_node(&gateway.url(), data.path(), workspace.path());
    let (mut link, _) = gateway.accept().await;

    // The exec command could not be re-adopted: lost, and its group ended.
    link.invoke(
        "ex-1",
        "exec",
        json!({"argv": ["/bin/sleep", "30"]}),
        "tok-a",
        true,
    )
    .await;
    let res = link.response("ex-1").await;
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(res["error"]["code"], "node_disconnected", "{res}");
    let message = res["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("lost:"), "{res}");
    until("the orphaned exec command ended", || !alive(exec_pid)).await;

    // The Read call cannot be recovered: lost, saying why.
    link.invoke("ghost", "Read", json!({"path": "x"}), "tok-a", true)
        .await;
    let res = link.response("ghost").await;
    assert_eq!(res["error"]["code"], "node_disconnected", "{res}");
    let message = res["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("lost:") && message.contains("Read"),
        "{res}"
    );

    // The Bash command was re-adopted: its call gets the complete result.
    link.invoke(
        "fg-1",
        "Bash",
        json!({"command": "ignored on resume"}),
        "tok-a",
        true,
    )
    .await;
    let res = link.response("fg-1").await;
    assert_eq!(res["ok"], true, "{res}");
    let result = &res["result"];
    assert!(text(result).contains("fg-done"), "{res}");
    assert_eq!(result["structuredContent"]["exitCode"], 3, "{res}");

    // Asked again: the same kept result.
    link.invoke("fg-1", "Bash", json!({"command": "x"}), "tok-a", true)
        .await;
    let again = link.response("fg-1").await;
    assert_eq!(again["result"], res["result"]);

    // A resume for an id no process ever saw still runs.
    link.invoke(
        "new-1",
        "Bash",
        json!({"command": "echo fresh"}),
        "tok-a",
        true,
    )
    .await;
    let fresh = link.response("new-1").await;
    assert!(text(&fresh["result"]).contains("fresh"), "{fresh}");
    node.kill();
}
