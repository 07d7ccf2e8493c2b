//! End to end: a write into a closed pipe is a tool error, never the end of the process
//! (issue 15, item 1). A Process `write` to a session whose reader has gone — it closed
//! its stdin and went on running, or it was killed — used to end the whole `gsv up`
//! (gateway and node) or `gsv node` process through `SIGPIPE`. Both are tried here on a
//! plain node and on `gsv up`, and the process must answer the next call.

mod common;

use common::{die_with_parent, eventually, sc, Gateway, Proc, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

async fn call(agent: &AgentClient, name: &str, args: Value) -> ToolResult {
    agent
        .call(name, args, Some(30_000))
        .await
        .expect("call answered")
}

/// Starts a background Bash session and waits until it printed `ready`.
async fn started(agent: &AgentClient, node: &str, command: &str) -> String {
    let r = call(
        agent,
        &format!("{node}__Bash"),
        json!({"command": command, "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().expect("sessionId").to_owned();
    eventually("session ready", Duration::from_secs(10), || async {
        let log = call(
            agent,
            &format!("{node}__Process"),
            json!({"action": "log", "sessionId": id}),
        )
        .await;
        sc(&log)["output"].as_str()?.contains("ready").then_some(())
    })
    .await;
    id
}

/// Both broken-pipe cases against `node`, driven by `agent`; then `bystander`, another
/// token's agent on the same node, must still be served. The caller checks the process
/// survived.
async fn broken_pipes_are_tool_errors(agent: &AgentClient, bystander: &AgentClient, node: &str) {
    let process = format!("{node}__Process");
    // 1. The program closes its stdin and keeps running.
    let id = started(agent, node, "exec 0<&-; echo ready; sleep 30").await;
    let w = call(
        agent,
        &process,
        json!({"action": "write", "sessionId": id, "data": "hello\n"}),
    )
    .await;
    assert!(w.is_error, "write into a closed stdin: {}", w.joined_text());
    assert!(w.joined_text().contains("EPIPE"), "{}", w.joined_text());
    let p = call(agent, &process, json!({"action": "poll", "sessionId": id})).await;
    assert_eq!(
        sc(&p)["status"],
        "running",
        "the session's state is still reported"
    );
    call(agent, &process, json!({"action": "kill", "sessionId": id})).await;

    // 2. The reader is killed while the session goes on. The pipe goes to the reader
    //    through fd 3: a POSIX shell (dash, when $SHELL is unset) gives a background
    //    command /dev/null as its stdin before any `<&0` would take effect.
    let id = started(
        agent,
        node,
        "exec 3<&0; cat >/dev/null <&3 & echo $! > reader.pid; exec 0<&- 3<&-; echo ready; wait; sleep 30",
    )
    .await;
    let w = call(
        agent,
        &process,
        json!({"action": "write", "sessionId": id, "data": "x"}),
    )
    .await;
    assert!(!w.is_error, "the reader is alive: {}", w.joined_text());
    let k = call(
        agent,
        &format!("{node}__Bash"),
        json!({"command": "kill -9 $(cat reader.pid)"}),
    )
    .await;
    assert!(!k.is_error, "{}", k.joined_text());
    let w = eventually(
        "write fails once the reader is gone",
        Duration::from_secs(10),
        || async {
            let w = call(
                agent,
                &process,
                json!({"action": "write", "sessionId": id, "data": "y"}),
            )
            .await;
            w.is_error.then_some(w)
        },
    )
    .await;
    assert!(w.joined_text().contains("EPIPE"), "{}", w.joined_text());
    call(agent, &process, json!({"action": "kill", "sessionId": id})).await;

    // The node still answers, the writer and another agent alike.
    for who in [agent, bystander] {
        let r = call(
            who,
            &format!("{node}__Bash"),
            json!({"command": "echo alive"}),
        )
        .await;
        assert!(r.joined_text().contains("alive"), "{}", r.joined_text());
    }
}

#[tokio::test]
async fn a_plain_node_survives_writes_into_closed_pipes() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("pipe-ws");
    let mut node = gw.node("piper", ws.path()).await;
    let writer = gw
        .agent_with(&gw.token(&[
            "agent",
            "writer",
            "--allow",
            "piper__Bash",
            "--allow",
            "piper__Process",
        ]))
        .await;
    let bystander = gw.agent().await;
    broken_pipes_are_tool_errors(&writer, &bystander, "piper").await;
    assert!(node.0.try_wait().expect("wait").is_none(), "gsv node died");
}

#[tokio::test]
async fn gsv_up_survives_writes_into_closed_pipes() {
    let data = TempDir::new("pipe-up");
    let ws = TempDir::new("pipe-upws");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let mut up = Proc(
        die_with_parent(&mut Command::new(common::gsv_bin()))
            .args([
                "up",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--node-id",
                "uplap",
            ])
            .env("GSV_DATA", data.path())
            .env("RUST_LOG", "warn")
            .current_dir(ws.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn gsv up"),
    );
    let url = format!("http://127.0.0.1:{port}");
    let token_file = data.path().join("agent.token");
    let agent = eventually(
        "gsv up serving its node",
        Duration::from_secs(30),
        || async {
            let token = std::fs::read_to_string(&token_file).ok()?;
            let a = AgentClient::connect(&url, token.trim()).await.ok()?;
            let nodes = a.list_nodes().await.ok()?;
            nodes
                .iter()
                .any(|n| n.id == "uplap" && n.online)
                .then_some(a)
        },
    )
    .await;
    let admin = std::fs::read_to_string(data.path().join("admin.token")).expect("admin.token");
    let bystander = AgentClient::connect(&url, admin.trim())
        .await
        .expect("the admin connects");
    broken_pipes_are_tool_errors(&agent, &bystander, "uplap").await;
    assert!(up.0.try_wait().expect("wait").is_none(), "gsv up died");
}
