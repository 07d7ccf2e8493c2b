//! What a node offers is remembered per node id, flagged when it grows, hidden under
//! `--pin-tools` until an operator accepts it; versions are reported and compared.
//!
//! A real gateway and real `gsv node` processes on loopback: the node first runs with
//! the standard tools only (its first registration is trusted as it is), then is
//! restarted with `--echo-tool`, which adds Echo.

mod common;

use common::fake::{agent_connect, tool, Raw};
use common::{eventually, http_get, http_request, Gateway, Proc, TempDir};
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::method::NodeSummary;
use gsv_protocol::offer::{AcceptToolsResult, NodeDetail, NodeIdParams};
use gsv_protocol::{ErrorCode, ErrorShape, EventName, Method};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const ID: &str = "lab";
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Starts `gsv node` as `ID`, with Echo or without.
fn start_node(gw: &Gateway, token: &str, ws: &Path, echo: bool) -> Proc {
    let mut cmd = gw.node_command(ID, token, ws);
    if echo {
        cmd.arg("--echo-tool");
    }
    Proc(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn gsv node"),
    )
}

/// The node as the admin token sees it, once `ready` holds for it (online).
async fn admin_view(gw: &Gateway, ready: impl Fn(&NodeSummary) -> bool) -> NodeSummary {
    let admin = gw.agent_with(&gw.admin_token()).await;
    eventually(
        "the node's registration",
        Duration::from_secs(30),
        || async {
            let nodes = admin.list_nodes().await.ok()?;
            nodes
                .into_iter()
                .find(|n| n.id == ID && n.online && ready(n))
        },
    )
    .await
}

/// Restarts the node (a crash, then a new process) and waits until `ready` holds.
async fn restart(
    gw: &Gateway,
    node: &mut Proc,
    token: &str,
    ws: &Path,
    echo: bool,
    ready: impl Fn(&NodeSummary) -> bool,
) -> NodeSummary {
    let before = admin_view(gw, |_| true).await.conn_id;
    node.kill();
    *node = start_node(gw, token, ws, echo);
    admin_view(gw, |n| n.conn_id != before && ready(n)).await
}

/// The audit rows (as JSON) once one has `outcome` and passes `matches`.
async fn audit_row(gw: &Gateway, outcome: &str, matches: impl Fn(&Value) -> bool) -> Value {
    eventually(
        &format!("an audit row {outcome}"),
        Duration::from_secs(10),
        || async {
            let (code, out, _) = gw.cli(&["audit", "tail", "-n", "500", "--json"]);
            assert_eq!(code, 0);
            out.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|r| r["outcome"] == outcome)
                .map(|mut r| {
                    // The detail is stored as JSON text.
                    let detail = r["detail"]
                        .as_str()
                        .and_then(|d| serde_json::from_str(d).ok());
                    r["detail"] = detail.unwrap_or(Value::Null);
                    r
                })
                .find(|r| matches(r))
        },
    )
    .await
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn echo(agent: &AgentClient) -> Result<String, ErrorShape> {
    match agent
        .call(&format!("{ID}__Echo"), json!({"text": "hi"}), Some(10_000))
        .await
    {
        Ok(r) => Ok(r.joined_text()),
        Err(ClientError::Remote(e)) => Err(e),
        Err(e) => panic!("call failed on the way: {e}"),
    }
}

/// A tool the node had from the start: it keeps working whatever happens to Echo.
async fn read_works(agent: &AgentClient) {
    let r = agent
        .call(
            &format!("{ID}__Read"),
            json!({"path": "note.txt"}),
            Some(10_000),
        )
        .await
        .expect("Read answers");
    assert!(
        !r.is_error && r.joined_text().contains("kept"),
        "{}",
        r.joined_text()
    );
}

#[tokio::test]
async fn a_node_restarted_with_a_new_tool_is_flagged_and_audited_until_accepted() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("offer-ws");
    std::fs::write(ws.path().join("note.txt"), "kept\n").expect("write");
    let token = gw.node_token(ID);
    let mut node = start_node(&gw, &token, ws.path(), false);
    let first = admin_view(&gw, |_| true).await;
    assert!(!first.tools.contains(&"Echo".to_owned()));
    assert_eq!(
        (first.version.as_str(), first.unaccepted.as_ref()),
        (VERSION, None)
    );
    // The first registration is trusted as it is, and that is audited.
    let row = audit_row(&gw, "node.tools_accepted", |_| true).await;
    assert_eq!(
        (row["actor"].as_str(), row["node"].as_str()),
        (Some("first-use"), Some(ID))
    );
    assert_eq!(row["detail"]["firstUse"], true);
    assert!(
        names(&row["detail"]["tools"]).contains(&"Read".to_owned()),
        "{row}"
    );
    let (code, out, err) = gw.cli(&["nodes"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('['), "nothing flagged: {out}");
    assert!(out.contains(&format!("  {VERSION}\n")), "{out}");
    assert!(!err.contains("! lab"), "{err}");

    // Restarted offering Echo: callable at once (no --pin-tools), but flagged.
    let seen = restart(&gw, &mut node, &token, ws.path(), true, |n| {
        n.unaccepted.is_some()
    })
    .await;
    let u = seen.unaccepted.expect("flagged");
    assert_eq!(
        (u.tools, u.capabilities, u.hidden),
        (
            vec!["Echo".to_owned()],
            vec!["diagnostics.echo".to_owned()],
            false
        )
    );
    assert!(seen.tools.contains(&"Echo".to_owned()));
    let agent = gw.agent().await;
    assert_eq!(echo(&agent).await.expect("Echo is callable"), "hi");
    read_works(&agent).await;

    let (code, out, err) = gw.cli(&["nodes"]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("lab "))
        .expect("lab listed");
    assert!(
        line.ends_with(&format!(
            "  {VERSION}  [new tools: Echo; new capabilities: diagnostics.echo]"
        )),
        "{line}"
    );
    assert!(
        err.contains("! lab: offers what was not accepted for it: new tools: Echo; new capabilities: diagnostics.echo (review: gsv nodes show lab; accept: gsv nodes accept-tools lab)"),
        "{err}"
    );
    let (code, out, _) = gw.cli(&["nodes", "--json"]);
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        listed[0]["unaccepted"]["tools"],
        json!(["Echo"]),
        "{listed}"
    );
    assert_eq!(listed[0]["version"], VERSION);

    let row = audit_row(&gw, "node.tools_changed", |_| true).await;
    assert_eq!(
        (
            row["kind"].as_str(),
            row["actor"].as_str(),
            row["node"].as_str()
        ),
        (Some("policy"), Some("node:lab"), Some(ID))
    );
    assert_eq!(names(&row["detail"]["addedTools"]), ["Echo"]);
    assert_eq!(
        names(&row["detail"]["addedCapabilities"]),
        ["diagnostics.echo"]
    );
    assert!(names(&row["detail"]["removedTools"]).is_empty());
    assert_eq!(row["detail"]["hidden"], false);

    // The flag survives a gateway restart: what was accepted is in the database.
    let mut gw = gw;
    gw.restart().await;
    let again = admin_view(&gw, |n| n.unaccepted.is_some()).await;
    assert_eq!(
        again.unaccepted.map(|u| u.tools),
        Some(vec!["Echo".to_owned()])
    );

    // An operator accepts: no flag any more, audited with what was accepted.
    let (code, _, err) = gw.cli(&["nodes", "accept-tools", ID]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("lab: accepted tools: Echo; capabilities: diagnostics.echo; it offers"),
        "{err}"
    );
    let row = audit_row(&gw, "node.tools_accepted", |r| r["actor"] == "operator").await;
    assert_eq!(names(&row["detail"]["tools"]), ["Echo"], "{row}");
    assert_eq!(row["node"], ID);
    let (_, out, err) = gw.cli(&["nodes"]);
    assert!(!out.contains('[') && !err.contains("! lab"), "{out}\n{err}");
    let (code, _, err) = gw.cli(&["nodes", "accept-tools", ID]);
    assert_eq!(code, 0);
    assert!(err.contains("lab: nothing new to accept"), "{err}");

    // Tools that disappear are simply gone, and named in the difference...
    restart(&gw, &mut node, &token, ws.path(), false, |n| {
        !n.tools.contains(&"Echo".to_owned())
    })
    .await;
    let row = audit_row(&gw, "node.tools_changed", |r| {
        !names(&r["detail"]["removedTools"]).is_empty()
    })
    .await;
    assert_eq!(names(&row["detail"]["removedTools"]), ["Echo"]);
    assert!(names(&row["detail"]["addedTools"]).is_empty());
    let (_, out, _) = gw.cli(&["nodes"]);
    assert!(!out.contains('['), "removing is not flagged: {out}");
    // ... so offering it again makes it new again.
    let back = restart(&gw, &mut node, &token, ws.path(), true, |n| {
        n.unaccepted.is_some()
    })
    .await;
    assert_eq!(
        back.unaccepted.map(|u| u.tools),
        Some(vec!["Echo".to_owned()])
    );
    // An unknown node cannot be accepted.
    let (code, _, err) = gw.cli(&["nodes", "accept-tools", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("error: not_found: no node named nope is known"),
        "{err}"
    );
}

/// One MCP exchange on `/mcp` (2025-11-25, session `session`): the JSON-RPC answer.
async fn mcp(
    gw: &Gateway,
    token: &str,
    session: Option<&str>,
    body: &str,
) -> (Option<String>, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut req = format!(
        "POST /mcp?view=flat HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        gw.addr,
        body.len()
    );
    if let Some(s) = session {
        req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut s = tokio::net::TcpStream::connect(&gw.addr)
        .await
        .expect("connect");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("MCP answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let session = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_owned())
    });
    // The answer is a JSON body or the `data:` line of an event stream (possibly chunked).
    let answer = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data:").map(str::trim).or(Some(l.trim())))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("jsonrpc").is_some())
        .unwrap_or(Value::Null);
    (session, answer)
}

/// The namespaced names an MCP `tools/list` shows `token`, and what `tools/call` of
/// `name` answers.
async fn mcp_view(gw: &Gateway, token: &str, name: &str) -> (Vec<String>, Value) {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#;
    let (session, _) = mcp(gw, token, None, init).await;
    let session = session.expect("an MCP session");
    let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    mcp(gw, token, Some(&session), done).await;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;
    let (_, listed) = mcp(gw, token, Some(&session), list).await;
    let tools = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list: {listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": name, "arguments": {"text": "hi"}}})
    .to_string();
    let (_, called) = mcp(gw, token, Some(&session), &call).await;
    (tools, called)
}

/// What `--pin-tools` hides, every agent sees the same as for a tool that does not
/// exist, on every path; the tools the node had keep working; an operator's
/// acceptance (and only an operator's) makes the new tool visible and callable.
#[tokio::test]
async fn pinned_new_tools_are_hidden_and_not_found_until_an_operator_accepts_them() {
    let mut gw = Gateway::start_with(&["--pin-tools"]).await;
    let ws = TempDir::new("pin-ws");
    std::fs::write(ws.path().join("note.txt"), "kept\n").expect("write");
    let token = gw.node_token(ID);
    let mut node = start_node(&gw, &token, ws.path(), false);
    admin_view(&gw, |_| true).await;
    let full = gw.agent_token();
    let echo_only = gw.token(&["agent", "echo-only", "--allow", "lab__Echo"]);
    let agent = gw.agent_with(&full).await;
    read_works(&agent).await;
    // Connected while the node comes back with Echo: the full token hears of it, the
    // token allowed only Echo hears nothing.
    let watcher = gw.agent_with(&full).await;
    let narrow = gw.agent_with(&echo_only).await;

    let seen = restart(&gw, &mut node, &token, ws.path(), true, |n| {
        n.unaccepted.is_some()
    })
    .await;
    let event = watcher
        .next_event(Duration::from_secs(10))
        .await
        .expect("tools.changed for the full token");
    assert_eq!(event.event, EventName::ToolsChanged);
    assert_eq!(
        narrow
            .next_event(Duration::from_millis(500))
            .await
            .map(|e| e.event),
        None
    );
    // The operator sees it, hidden; it is not among the node's callable tools.
    let u = seen.unaccepted.expect("flagged");
    assert_eq!(
        (u.tools.as_slice(), u.hidden),
        (&["Echo".to_owned()][..], true)
    );
    assert!(!seen.tools.contains(&"Echo".to_owned()));
    let agent = gw.agent_with(&full).await;
    read_works(&agent).await;

    // Calling it is refused exactly as for a tool that does not exist.
    let hidden = echo(&agent).await.expect_err("hidden");
    let missing = match agent
        .call(&format!("{ID}__Nope"), json!({"text": "hi"}), Some(10_000))
        .await
    {
        Err(ClientError::Remote(e)) => e,
        other => panic!("a missing tool: {other:?}"),
    };
    assert_eq!(hidden.code, ErrorCode::NotFound);
    assert_eq!(
        serde_json::to_string(&hidden)
            .expect("json")
            .replace("Echo", "Nope"),
        serde_json::to_string(&missing).expect("json")
    );
    // Absent from every list, for every agent token.
    let tools = agent.list_tools().await.expect("tools.list");
    assert!(tools.iter().all(|t| t.tool != "Echo"));
    assert!(tools.iter().any(|t| t.name == "lab__Read"));
    let nodes = agent.list_nodes().await.expect("nodes.list");
    let lab = nodes.iter().find(|n| n.id == ID).expect("lab");
    assert!(!lab.tools.contains(&"Echo".to_owned()));
    assert!(!lab.capabilities.contains(&"diagnostics.echo".to_owned()));
    assert_eq!(lab.unaccepted, None);
    let (status, body) = http_get(&gw.addr, "/v1/tools", Some(&full)).await;
    assert_eq!(status, 200);
    assert!(
        !body.contains("lab__Echo") && body.contains("lab__Read"),
        "{body}"
    );
    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&full)).await;
    assert_eq!(status, 200);
    assert!(
        !body.contains("Echo") && !body.contains("diagnostics.echo"),
        "{body}"
    );
    let (mcp_tools, mcp_call) = mcp_view(&gw, &full, "lab__Echo").await;
    assert!(mcp_tools.contains(&"lab__Read".to_owned()), "{mcp_tools:?}");
    assert!(
        !mcp_tools.contains(&"lab__Echo".to_owned()),
        "{mcp_tools:?}"
    );
    assert!(
        mcp_call["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Echo")),
        "a JSON-RPC error naming the tool: {mcp_call}"
    );
    let (_, mcp_missing) = mcp_view(&gw, &full, "lab__Nope").await;
    assert_eq!(
        mcp_call.to_string().replace("Echo", "Nope"),
        mcp_missing.to_string(),
        "MCP tools/call of a hidden tool"
    );
    let shown = agent
        .request(Method::NodesShow, &NodeIdParams { id: ID.into() })
        .await
        .expect("nodes.show");
    let shown: NodeDetail = serde_json::from_str(shown.get()).expect("NodeDetail");
    assert!(shown.tools.iter().all(|t| t.name != "Echo"));
    assert!(shown.tools.iter().any(|t| t.name == "Read"));
    // A token allowed only the hidden tool sees no node at all.
    assert!(narrow.list_nodes().await.expect("nodes.list").is_empty());
    assert!(narrow.list_tools().await.expect("tools.list").is_empty());
    let (code, _, err) = gw.cli(&["nodes", "show", ID, "--token", &echo_only]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("error: not_found: no node named lab is known"),
        "{err}"
    );
    let (status, _) = http_get(&gw.addr, "/v1/nodes/lab", Some(&echo_only)).await;
    assert_eq!(status, 404);

    // The operator reviews it.
    let (code, out, err) = gw.cli(&["nodes", "show", ID]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("unaccepted    new tools, hidden: Echo; new capabilities: diagnostics.echo"),
        "{out}"
    );
    let echo_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("Echo "))
        .expect("Echo listed");
    assert!(
        echo_line.contains("diagnostics.echo") && echo_line.ends_with("[new, hidden]"),
        "{echo_line}"
    );
    assert!(out.contains(&format!("version       {VERSION}\n")), "{out}");
    let (code, out, _) = gw.cli(&["nodes", "show", ID, "--json"]);
    assert_eq!(code, 0);
    let detail: NodeDetail = serde_json::from_str(&out).expect("NodeDetail");
    let e = detail
        .tools
        .iter()
        .find(|t| t.name == "Echo")
        .expect("Echo");
    assert!(e.unaccepted && e.hidden && e.capability == "diagnostics.echo");
    let (_, out, _) = gw.cli(&["nodes"]);
    assert!(
        out.contains("[new tools, hidden: Echo; new capabilities: diagnostics.echo]"),
        "{out}"
    );
    let row = audit_row(&gw, "node.tools_changed", |_| true).await;
    assert_eq!(names(&row["detail"]["addedTools"]), ["Echo"]);
    assert_eq!(row["detail"]["hidden"], true);

    // Agents cannot accept; neither over the agent protocol nor over HTTP.
    let (code, _, err) = gw.cli(&["nodes", "accept-tools", ID, "--token", &full]);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("error: forbidden: accepting a node's tools needs the admin token"),
        "{err}"
    );
    let (status, _) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/lab/accept-tools",
        Some(&full),
        None,
    )
    .await;
    assert_eq!(status, 403);

    // Still hidden after a gateway restart (the node reconnects by itself).
    gw.restart().await;
    admin_view(&gw, |n| n.unaccepted.as_ref().is_some_and(|u| u.hidden)).await;
    let agent = gw.agent_with(&full).await;
    assert_eq!(
        echo(&agent).await.expect_err("hidden").code,
        ErrorCode::NotFound
    );
    read_works(&agent).await;

    // Accepted over HTTP this time: visible and callable at once, audited, and the
    // token allowed only Echo is told.
    let narrow = gw.agent_with(&echo_only).await;
    let (status, body) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/lab/accept-tools",
        Some(&gw.admin_token()),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let result: AcceptToolsResult = serde_json::from_str(&body).expect("result");
    assert_eq!(result.accepted.tools, ["Echo"]);
    assert!(result.accepted.hidden && result.tools.contains(&"Echo".to_owned()));
    assert_eq!(echo(&agent).await.expect("accepted"), "hi");
    read_works(&agent).await;
    assert!(agent
        .list_tools()
        .await
        .expect("tools")
        .iter()
        .any(|t| t.name == "lab__Echo"));
    let told = narrow
        .next_event(Duration::from_secs(10))
        .await
        .expect("tools.changed once accepted");
    assert_eq!(
        (told.event, told.payload["change"].as_str()),
        (EventName::ToolsChanged, Some("accepted"))
    );
    assert_eq!(narrow.list_nodes().await.expect("nodes").len(), 1);
    let (mcp_tools, mcp_call) = mcp_view(&gw, &full, "lab__Echo").await;
    assert!(mcp_tools.contains(&"lab__Echo".to_owned()), "{mcp_tools:?}");
    assert!(mcp_call.to_string().contains("hi"), "{mcp_call}");
    let row = audit_row(&gw, "node.tools_accepted", |r| r["actor"] == "admin-api").await;
    assert_eq!(names(&row["detail"]["tools"]), ["Echo"]);
    let (_, out, _) = gw.cli(&["nodes"]);
    assert!(!out.contains('['), "{out}");
}

/// Nodes report their version; the gateway says its own (in `hello-ok`, `nodes.list`
/// and `gsv --version`), and `gsv nodes` marks a node that runs another.
#[tokio::test]
async fn gsv_nodes_marks_a_node_that_runs_another_version() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ver-ws");
    let _real = gw.node("real", ws.path()).await;
    // A fake node whose connect says `client.version` "0".
    let (mut fake, hello) = Raw::node(
        &gw.addr,
        "old",
        &gw.node_token("old"),
        json!([tool("Echo", "diagnostics.echo")]),
    )
    .await;
    let hello = hello.expect("fake node connects");
    assert_eq!(hello["gatewayVersion"], VERSION, "{hello}");
    // Reading keeps it answering the gateway's pings.
    let reader = tokio::spawn(async move {
        use futures_util::StreamExt;
        while let Some(Ok(_)) = fake.ws.next().await {}
    });

    let (code, out, err) = gw.cli(&["nodes"]);
    assert_eq!(code, 0, "{err}");
    let line = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{id} listed: {out}"))
            .to_owned()
    };
    assert!(
        line("real").ends_with(&format!("Z  {VERSION}")),
        "{}",
        line("real")
    );
    assert!(
        line("old").ends_with(&format!("  0 (gateway {VERSION})")),
        "{}",
        line("old")
    );
    assert!(
        err.contains(&format!("! old: runs gsv 0, the gateway runs {VERSION}")),
        "{err}"
    );
    assert!(!err.contains("! real"), "{err}");
    let (_, out, _) = gw.cli(&["nodes", "show", "old"]);
    assert!(
        out.contains(&format!(
            "version       0 (differs from the gateway's {VERSION})"
        )),
        "{out}"
    );

    let agent = gw.agent().await;
    assert_eq!(agent.hello.gateway_version, VERSION);
    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&gw.admin_token())).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["gatewayVersion"], VERSION);
    let old = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["id"] == "old")
        .cloned();
    assert_eq!(old.map(|n| n["version"].clone()), Some(json!("0")));

    // A raw agent sees the version in hello-ok as well.
    let mut raw = Raw::open(&gw.addr, "/v1/agent").await;
    let hello = raw
        .handshake(|nonce| agent_connect(&gw.admin_token(), &nonce))
        .await
        .expect("agent connects");
    assert_eq!(hello["gatewayVersion"], VERSION);

    let out = std::process::Command::new(common::gsv_bin())
        .arg("--version")
        .output()
        .expect("gsv --version");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("gsv {VERSION}")
    );
    reader.abort();
}

/// Issue 42: a pinned tool's description and schema could change after acceptance.
/// A tool's definition (description, schema, annotations, approval posture) is now
/// part of what was accepted: the node restarted with `proc_kill`'s approval posture
/// waived (`--no-approval proc_kill`, which widens what it does without an operator)
/// offers it anew, and under `--pin-tools` it is hidden until accepted again.
#[tokio::test]
async fn a_pinned_tool_whose_definition_changed_is_hidden_until_accepted_again() {
    let gw = Gateway::start_with(&["--pin-tools"]).await;
    let ws = TempDir::new("pin-def-ws");
    let token = gw.node_token(ID);
    let mut node = start_node(&gw, &token, ws.path(), false);
    let first = admin_view(&gw, |n| n.tools.contains(&"proc_kill".to_owned())).await;
    assert_eq!(first.unaccepted, None);
    let before = first.conn_id.clone();
    node.kill();
    let mut cmd = gw.node_command(ID, &token, ws.path());
    cmd.args(["--no-approval", "proc_kill"]);
    node = Proc(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn gsv node"),
    );
    let seen = admin_view(&gw, |n| n.conn_id != before && n.unaccepted.is_some()).await;
    let u = seen.unaccepted.expect("flagged");
    assert_eq!(
        (u.tools.as_slice(), u.hidden),
        (&["proc_kill".to_owned()][..], true)
    );
    let agent = gw.agent().await;
    let tools = agent.list_tools().await.expect("tools.list");
    assert!(
        tools.iter().all(|t| t.tool != "proc_kill"),
        "a changed pinned tool is listed"
    );
    assert!(
        tools.iter().any(|t| t.tool == "Read"),
        "the unchanged tools stay"
    );
    let hidden = agent
        .call(&format!("{ID}__proc_kill"), json!({"pid": 1}), Some(10_000))
        .await;
    assert!(
        matches!(&hidden, Err(ClientError::Remote(e)) if e.code == ErrorCode::NotFound),
        "{hidden:?}"
    );
    // Accepted again: listed as it is now.
    let (code, _, err) = gw.cli(&["nodes", "accept-tools", ID]);
    assert_eq!(code, 0, "{err}");
    let accepted = admin_view(&gw, |n| n.unaccepted.is_none()).await;
    assert!(accepted.tools.contains(&"proc_kill".to_owned()));
    node.kill();
}
