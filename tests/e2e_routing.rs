//! End to end: a real gateway and real nodes on loopback, driven as an agent would.

mod common;

use common::fake::{tool, Raw};
use common::{eventually, Gateway, TempDir};
use gsv_protocol::{ErrorCode, EventName, Frame, Method};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn register_list_call_result() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    std::fs::write(ws.path().join("hello.txt"), "first\nsecond\n").unwrap();
    let _node = gw.node("alpha", ws.path()).await;
    let agent = gw.agent().await;

    let tools = agent.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"alpha__Read"), "{names:?}");
    assert!(names.contains(&"alpha__Echo"), "{names:?}");
    let read = tools.iter().find(|t| t.name == "alpha__Read").unwrap();
    assert_eq!(read.capability, "filesystem.read");
    assert!(read.online);

    let r = agent
        .call("alpha__Read", json!({"path": "hello.txt"}), None)
        .await
        .unwrap();
    assert!(!r.is_error);
    assert_eq!(r.joined_text(), "1\tfirst\n2\tsecond");
    let sc = r.structured_content.unwrap();
    assert_eq!(sc["lines"], 2);

    let nodes = agent.list_nodes().await.unwrap();
    let alpha = nodes.iter().find(|n| n.id == "alpha").unwrap();
    assert!(alpha.online);
    assert_eq!(alpha.runtime.host_os, "linux");
    assert!(alpha
        .runtime
        .host_bin_status
        .get("sh")
        .copied()
        .unwrap_or(false));
    assert!(alpha.runtime.host_env.iter().any(|e| e == "PATH"));
}

#[tokio::test]
async fn same_tool_on_two_nodes_is_routed_by_prefix() {
    let gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("wa"), TempDir::new("wb"));
    std::fs::write(wa.path().join("id.txt"), "I am A").unwrap();
    std::fs::write(wb.path().join("id.txt"), "I am B").unwrap();
    let _a = gw.node("node-a", wa.path()).await;
    let _b = gw.node("node-b", wb.path()).await;
    let agent = gw.agent().await;
    for _ in 0..3 {
        let a = agent
            .call("node-a__Read", json!({"path": "id.txt"}), None)
            .await
            .unwrap();
        let b = agent
            .call("node-b__Read", json!({"path": "id.txt"}), None)
            .await
            .unwrap();
        assert_eq!(a.joined_text(), "1\tI am A");
        assert_eq!(b.joined_text(), "1\tI am B");
    }
    // Concurrent calls on one connection each get their own answer.
    let calls = (0..20).map(|i| {
        let agent = &agent;
        async move {
            let r = agent
                .call("node-a__Echo", json!({"text": format!("m{i}")}), None)
                .await
                .unwrap();
            assert_eq!(r.joined_text(), format!("m{i}"));
        }
    });
    futures_util::future::join_all(calls).await;
}

#[tokio::test]
async fn killing_a_node_mid_call_fails_the_call_after_the_grace_period() {
    // The gateway holds the caller for the grace period (here 1 s) in case the same
    // node process comes back; a killed one never does.
    let gw = Gateway::start_with(&["--grace-ms", "1000"]).await;
    let ws = TempDir::new("ws");
    let mut node = gw.node("victim", ws.path()).await;
    let agent = gw.agent().await;
    let call = agent.call("victim__Echo", json!({"text": "x", "delayMs": 60000}), None);
    let killer = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        node.kill();
        Instant::now()
    };
    let (result, killed_at) = tokio::join!(call, killer);
    let waited = killed_at.elapsed();
    let err = result.unwrap_err();
    let e = err.remote().expect("a gateway error");
    assert_eq!(e.code, ErrorCode::NodeDisconnected, "{e:?}");
    assert_eq!(e.details.as_ref().unwrap()["dispatched"], true);
    assert!(e.retryable);
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(6),
        "took {waited:?} after the kill"
    );

    // The node is now listed as offline, and calling it says so.
    let e = agent
        .call("victim__Echo", json!({"text": "x"}), None)
        .await
        .unwrap_err();
    let e = e.remote().unwrap();
    assert_eq!(e.code, ErrorCode::NodeOffline);
    assert!(e.message.contains("offline since"), "{}", e.message);
}

#[tokio::test]
async fn nodes_come_back_after_a_gateway_restart() {
    let mut gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    std::fs::write(ws.path().join("f.txt"), "still here").unwrap();
    let _node = gw.node("phoenix", ws.path()).await;
    gw.restart().await;
    gw.wait_online("phoenix").await;
    let agent = gw.agent().await;
    let r = agent
        .call("phoenix__Read", json!({"path": "f.txt"}), None)
        .await
        .unwrap();
    assert_eq!(r.joined_text(), "1\tstill here");
}

#[tokio::test]
async fn a_second_connection_replaces_the_first_and_its_calls_fail_fast() {
    let gw = Gateway::start().await;
    let token = gw.node_token("twin");
    let (mut first, r) = Raw::node(
        &gw.addr,
        "twin",
        &token,
        json!([tool("Slow", "diagnostics.echo")]),
    )
    .await;
    // The join token was exchanged for the node's credential; the node reconnects
    // with that.
    let credential = r.unwrap()["credential"].as_str().unwrap().to_owned();
    let agent = gw.agent().await;
    let call = tokio::spawn({
        let url = gw.url();
        let tok = gw.agent_token();
        async move {
            let a = gsv_client::AgentClient::connect(&url, &tok).await.unwrap();
            a.call("twin__Slow", json!({"text": "t"}), None).await
        }
    });
    // The first connection receives the call and never answers.
    let Frame::Req { method, .. } = first.frame().await else {
        panic!("expected the call")
    };
    assert_eq!(method, Method::ToolInvoke);
    let (_second, r) = Raw::node(
        &gw.addr,
        "twin",
        &credential,
        json!([tool("Slow", "diagnostics.echo")]),
    )
    .await;
    r.unwrap();
    let started = Instant::now();
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.remote().unwrap().code, ErrorCode::NodeDisconnected);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The first connection was closed by the gateway.
    let close = first.closed().await;
    assert!(close.is_some(), "expected a close frame");
    // The node is still online through the second connection.
    let nodes = agent.list_nodes().await.unwrap();
    assert!(nodes.iter().any(|n| n.id == "twin" && n.online));
}

#[tokio::test]
async fn deadline_and_cancel_reach_the_node() {
    let gw = Gateway::start().await;
    let token = gw.node_token("fake");
    let (mut node, r) = Raw::node(
        &gw.addr,
        "fake",
        &token,
        json!([tool("Wait", "diagnostics.echo")]),
    )
    .await;
    r.unwrap();
    let agent = std::sync::Arc::new(gw.agent().await);

    // The caller's deadline is what the node receives.
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call_with_id("call-1", "fake__Wait", json!({"text": "x"}), Some(45_000))
            .await
    });
    let Frame::Req {
        id, method, params, ..
    } = node.frame().await
    else {
        panic!("expected tool.invoke")
    };
    assert_eq!(method, Method::ToolInvoke);
    let params: serde_json::Value = serde_json::from_str(params.unwrap().get()).unwrap();
    // What is left of the caller's 45 s deadline when the call is dispatched.
    let carried = params["timeoutMs"].as_u64().unwrap();
    assert!((44_000..=45_000).contains(&carried), "{carried}");
    assert_eq!(params["tool"], "Wait");
    assert_eq!(params["args"], json!({"text": "x"}));

    // Cancelling on the agent side sends `cancel` with the node-side id.
    agent.cancel("call-1").await.unwrap();
    let Frame::Cancel { id: cancelled } = node.frame().await else {
        panic!("expected cancel")
    };
    assert_eq!(cancelled, id);
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.remote().unwrap().code, ErrorCode::Cancelled);

    // A deadline that passes without an answer gives `timeout` and a cancel.
    let a = agent.clone();
    let call =
        tokio::spawn(async move { a.call("fake__Wait", json!({"text": "y"}), Some(300)).await });
    let Frame::Req { id, .. } = node.frame().await else {
        panic!()
    };
    let Frame::Cancel { id: cancelled } = node.frame().await else {
        panic!("expected cancel")
    };
    assert_eq!(cancelled, id);
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.remote().unwrap().code, ErrorCode::Timeout);
}

#[tokio::test]
async fn real_node_honours_cancel_and_deadline() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("real", ws.path()).await;
    let agent = std::sync::Arc::new(gw.agent().await);
    let a = agent.clone();
    let started = Instant::now();
    let call = tokio::spawn(async move {
        a.call_with_id(
            "long",
            "real__Echo",
            json!({"text": "x", "delayMs": 60000}),
            None,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.cancel("long").await.unwrap();
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.remote().unwrap().code, ErrorCode::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));

    let err = agent
        .call(
            "real__Echo",
            json!({"text": "x", "delayMs": 60000}),
            Some(400),
        )
        .await
        .unwrap_err();
    assert_eq!(err.remote().unwrap().code, ErrorCode::Timeout);
    // The node is still healthy afterwards.
    let r = agent
        .call("real__Echo", json!({"text": "ok"}), None)
        .await
        .unwrap();
    assert_eq!(r.joined_text(), "ok");
}

#[tokio::test]
async fn agents_hear_tools_changed() {
    let gw = Gateway::start().await;
    let agent = gw.agent().await;
    let ws = TempDir::new("ws");
    let mut node = gw.node("comer", ws.path()).await;
    let ev = eventually(
        "tools.changed connected",
        Duration::from_secs(10),
        || async {
            let e = agent.next_event(Duration::from_millis(100)).await?;
            (e.event == EventName::ToolsChanged && e.payload["change"] == "connected").then_some(e)
        },
    )
    .await;
    assert_eq!(ev.payload["node"], "comer");
    node.kill();
    eventually(
        "tools.changed disconnected",
        Duration::from_secs(10),
        || async {
            let e = agent.next_event(Duration::from_millis(100)).await?;
            (e.event == EventName::ToolsChanged && e.payload["change"] == "disconnected")
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn cli_call_nodes_tools_and_exit_codes() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    std::fs::write(ws.path().join("README.md"), "# hi\n").unwrap();
    let _node = gw.node("cli", ws.path()).await;
    std::fs::write(gw.data.path().join("agent.token"), gw.agent_token()).unwrap();

    let (code, out, err) = gw.cli(&["call", "cli__Read", r#"{"path":"README.md"}"#]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1\t# hi\n");
    let (code, out, _) = gw.cli(&["call", "--json", "cli__Echo", r#"{"text":"j"}"#]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["structuredContent"]["text"], "j");
    // Tool error → 1; usage → 2; bad token → 3; node offline/unknown gateway → 4.
    let (code, _, err) = gw.cli(&["call", "cli__Read", r#"{"path":"missing.txt"}"#]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = gw.cli(&["call", "cli__Read", "not json"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: invalid_args:"), "{err}");
    let (code, _, err) = gw.cli(&["call", "cli__Read", r#"{"path": 1}"#]);
    assert_eq!(code, 2);
    assert!(err.contains("/path"), "{err}");
    let (code, _, err) = gw.cli(&[
        "call",
        "--token",
        "gsv_agent_000000000000_nope",
        "cli__Read",
        "{}",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.starts_with("error: unauthorized:"), "{err}");
    let (code, _, _) = gw.cli(&["call", "--gateway", "http://127.0.0.1:1", "cli__Read", "{}"]);
    assert_eq!(code, 4);
    let (code, out, _) = gw.cli(&["nodes"]);
    assert_eq!(code, 0);
    assert!(out.contains("cli") && out.contains("online"), "{out}");
    let (code, out, _) = gw.cli(&["tools", "--json"]);
    assert_eq!(code, 0);
    let tools: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(tools
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "cli__Read"));
}

/// `gsv call NAME -` reads the arguments from stdin and `@FILE` from a file, so they
/// may be larger than a command line holds (128 KiB on Linux).
#[tokio::test]
async fn cli_call_reads_large_arguments_from_stdin_and_files() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("cli", ws.path()).await;
    std::fs::write(gw.data.path().join("agent.token"), gw.agent_token()).unwrap();
    let content = "0123456789abcdef\n".repeat(200_000 / 17);
    let args = json!({"path": "big.txt", "content": content}).to_string();
    assert!(args.len() > 128 * 1024);

    let mut child = Command::new(common::gsv_bin())
        .args(["call", "cli__Write", "-", "--data"])
        .arg(gw.data.path())
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(args.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("big.txt")).unwrap(),
        content
    );

    let file = ws.path().join("args.json");
    let args = json!({"path": "big2.txt", "content": content}).to_string();
    std::fs::write(&file, args).unwrap();
    let (code, _, err) = gw.cli(&["call", "cli__Write", &format!("@{}", file.display())]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("big2.txt")).unwrap(),
        content
    );
    let (code, _, err) = gw.cli(&["call", "cli__Write", "@/nonexistent/args.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("error: invalid_args:"), "{err}");
}

#[tokio::test]
async fn policy_hides_and_forbids() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("pol", ws.path()).await;
    let token = gw.token(&["agent", "reader", "--allow", "*__Read", "--deny", "*__Echo"]);
    let agent = gw.agent_with(&token).await;
    let names: Vec<String> = agent
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["pol__Read".to_owned()]);
    let e = agent
        .call("pol__Echo", json!({"text": "x"}), None)
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Forbidden);
    // Default deny: a token with no --allow sees nothing.
    let nothing = gw.token(&["agent", "nothing"]);
    let agent = gw.agent_with(&nothing).await;
    assert!(agent.list_tools().await.unwrap().is_empty());
    assert!(agent.list_nodes().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_silent_node_is_dropped_after_two_heartbeats() {
    // The test gateway pings every second; a peer that never reads never answers.
    let gw = Gateway::start().await;
    let token = gw.node_token("mute");
    let (node, r) = Raw::node(
        &gw.addr,
        "mute",
        &token,
        json!([tool("T", "diagnostics.echo")]),
    )
    .await;
    r.unwrap();
    let agent = gw.agent().await;
    assert!(agent
        .list_nodes()
        .await
        .unwrap()
        .iter()
        .any(|n| n.id == "mute" && n.online));
    // Hold the socket open without reading (so no pong is ever sent).
    let started = Instant::now();
    eventually(
        "the silent node to be dropped",
        Duration::from_secs(15),
        || async {
            let nodes = agent.list_nodes().await.ok()?;
            nodes
                .iter()
                .any(|n| n.id == "mute" && !n.online)
                .then_some(())
        },
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "dropped too early"
    );
    drop(node);
}

#[tokio::test]
async fn an_in_process_node_with_a_custom_tool() {
    use gsv_node::{async_trait, NodeConfig, Registry, Tool, ToolContext};
    use gsv_protocol::{NodeId, ToolDef, ToolResult};

    struct Reverse;
    #[async_trait]
    impl Tool for Reverse {
        fn def(&self) -> ToolDef {
            serde_json::from_value(json!({
                "name": "Reverse",
                "description": "Reverse a string",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                "capability": "diagnostics.echo"
            }))
            .unwrap()
        }
        async fn execute(&self, args: serde_json::Value, _ctx: ToolContext) -> ToolResult {
            ToolResult::text(
                args["text"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .rev()
                    .collect::<String>(),
            )
        }
    }

    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let config = NodeConfig::new(
        gw.url(),
        NodeId::parse("inproc").unwrap(),
        gw.node_token("inproc"),
        ws.path().to_path_buf(),
    );
    let mut registry = Registry::standard(&config).unwrap();
    registry.register(Reverse).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(gsv_node::run_with_registry(config, registry, stop.clone()));
    gw.wait_online("inproc").await;
    let agent = gw.agent().await;
    let r = agent
        .call("inproc__Reverse", json!({"text": "gsv"}), None)
        .await
        .unwrap();
    assert_eq!(r.joined_text(), "vsg");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("node stops when asked")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_node_replaced_by_another_process_with_its_id_stops() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let token = gw.node_token("dup");
    let mut first = gw.spawn_node("dup", &token, ws.path(), &[]);
    gw.wait_online("dup").await;
    let _second = gw.spawn_node("dup", &token, ws.path(), &[]);
    let status = eventually("the replaced node to exit", Duration::from_secs(20), || {
        let s = first.0.try_wait().ok().flatten();
        async move { s }
    })
    .await;
    assert_eq!(status.code(), Some(3), "{status:?}");
    // The newer one stays online and serves calls.
    gw.wait_online("dup").await;
    let agent = gw.agent().await;
    let r = agent
        .call("dup__Echo", json!({"text": "still"}), None)
        .await
        .unwrap();
    assert_eq!(r.joined_text(), "still");
}
