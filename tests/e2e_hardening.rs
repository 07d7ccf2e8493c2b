//! End to end: the smaller holes of issue 14, item 9 — each tried the way a hostile
//! agent (or a careless local user) would, against a real gateway and a real node on
//! loopback: what a one-tool token learns from the node list, metric series made up by
//! callers, another token's MCP session, the node's data directory mode, and a node
//! credential in the process list.

mod common;

use common::{die_with_parent, eventually, http_get, Gateway, Proc, TempDir};
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a_one_tool_token_sees_only_that_tool_of_a_node() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("hard-ws");
    let _node = gw.node("lab", ws.path()).await;
    let token = gw.token(&["agent", "reader", "--allow", "lab__Read"]);

    let agent = gw.agent_with(&token).await;
    let nodes = agent.list_nodes().await.expect("nodes.list");
    let lab = nodes.iter().find(|n| n.id == "lab").expect("lab listed");
    assert_eq!(lab.tools, vec!["Read".to_owned()]);
    assert_eq!(
        lab.capabilities,
        vec!["filesystem.read".to_owned()],
        "{:?}",
        lab.capabilities
    );

    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let lab = &v["nodes"][0];
    assert_eq!(lab["tools"], serde_json::json!(["Read"]), "{body}");
    assert_eq!(
        lab["capabilities"],
        serde_json::json!(["filesystem.read"]),
        "{body}"
    );

    // The admin still sees everything.
    let admin = gw.agent_with(&gw.admin_token()).await;
    let all = admin.list_nodes().await.expect("nodes.list");
    assert!(all[0].tools.len() > 5, "{:?}", all[0].tools);
}

#[tokio::test]
async fn tool_names_made_up_by_callers_create_no_metric_series() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("hard-ws");
    let _node = gw.node("lab", ws.path()).await;
    let agent = gw.agent_with(&gw.agent_token()).await;
    for i in 0..20 {
        let r = agent
            .call(&format!("lab__Invented{i}"), serde_json::json!({}), None)
            .await;
        assert!(r.is_err());
        let r = agent
            .call(
                &format!("ghost{i}__Invented{i}"),
                serde_json::json!({}),
                None,
            )
            .await;
        assert!(r.is_err());
    }
    agent
        .call("lab__Echo", serde_json::json!({"text": "x"}), None)
        .await
        .expect("echo");
    let (_, metrics) = http_get(&gw.addr, "/metrics", None).await;
    assert!(
        !metrics.contains("Invented"),
        "made-up names became series:\n{metrics}"
    );
    assert!(metrics.contains("tool=\"_unknown\""), "{metrics}");
    assert!(metrics.contains("tool=\"Echo\""), "{metrics}");
}

/// Sends `request`, returns the response head (the body may be a stream left open).
async fn head_of(addr: &str, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(10), async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut chunk).await.expect("read");
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("response head in time");
    String::from_utf8_lossy(&buf).into_owned()
}

fn mcp_request(addr: &str, method: &str, token: &str, session: Option<&str>, body: &str) -> String {
    let mut r = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    );
    if let Some(s) = session {
        r.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
    }
    if !body.is_empty() {
        r.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    r.push_str("Connection: close\r\n\r\n");
    r.push_str(body);
    r
}

#[tokio::test]
async fn another_token_cannot_use_or_close_an_mcp_session() {
    let gw = Gateway::start().await;
    let owner = gw.token(&["agent", "owner", "--allow", "*"]);
    let intruder = gw.token(&["agent", "intruder", "--allow", "*"]);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#;
    let head = head_of(&gw.addr, &mcp_request(&gw.addr, "POST", &owner, None, init)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let session = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"));

    // The intruder can neither close it, nor read its stream, nor post into it.
    let del = head_of(
        &gw.addr,
        &mcp_request(&gw.addr, "DELETE", &intruder, Some(&session), ""),
    )
    .await;
    assert!(del.starts_with("HTTP/1.1 404"), "{del}");
    let get = head_of(
        &gw.addr,
        &mcp_request(&gw.addr, "GET", &intruder, Some(&session), ""),
    )
    .await;
    assert!(get.starts_with("HTTP/1.1 404"), "{get}");
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;
    let post = head_of(
        &gw.addr,
        &mcp_request(&gw.addr, "POST", &intruder, Some(&session), list),
    )
    .await;
    assert!(post.starts_with("HTTP/1.1 404"), "{post}");

    // The owner's session is intact, and the owner may close it.
    let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let ok = head_of(
        &gw.addr,
        &mcp_request(&gw.addr, "POST", &owner, Some(&session), done),
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 202"), "{ok}");
    let (status, _) = {
        let req = mcp_request(&gw.addr, "DELETE", &owner, Some(&session), "");
        let h = head_of(&gw.addr, &req).await;
        (h.split_whitespace().nth(1).unwrap_or("").to_owned(), h)
    };
    assert_eq!(status, "204");
}

fn node_cmd(gw: &Gateway, id: &str, data: &std::path::Path, ws: &std::path::Path) -> Command {
    let mut cmd = Command::new(common::gsv_bin());
    cmd.arg("node")
        .args(["--gateway", &gw.url(), "--id", id])
        .arg("--workspace")
        .arg(ws)
        .arg("--data")
        .arg(data)
        .env("RUST_LOG", "warn")
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_TOKEN")
        .env_remove("GSV_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    cmd
}

#[tokio::test]
async fn node_keeps_its_credential_out_of_the_process_list_and_its_data_dir_private() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("hard-ws");
    let base = TempDir::new("hard-node");
    let data = base.path().join("fresh").join("data");
    let join = gw.node_token("quiet");
    let file = base.path().join("quiet.token");
    std::fs::write(&file, format!("{join}\n")).expect("write token file");

    // Under a permissive umask the data directory is still created 0700.
    let mut cmd = node_cmd(&gw, "quiet", &data, ws.path());
    cmd.arg("--token-file").arg(&file);
    let shell = "umask 000; exec \"$@\"";
    let mut wrapped = Command::new("sh");
    wrapped
        .arg("-c")
        .arg(shell)
        .arg("sh")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let node = Proc(die_with_parent(&mut wrapped).spawn().expect("spawn node"));
    gw.wait_online("quiet").await;

    let cmdline = std::fs::read(format!("/proc/{}/cmdline", node.0.id())).expect("cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(
        !cmdline.contains(&join),
        "token in the process list: {cmdline}"
    );
    assert!(cmdline.contains("--token-file"), "{cmdline}");

    use std::os::unix::fs::PermissionsExt;
    for dir in [&data, &data.parent().expect("parent").to_path_buf()] {
        let mode = std::fs::metadata(dir)
            .expect("data dir")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700, "{} is {:o}", dir.display(), mode);
    }
    let cred = eventually("credential stored", Duration::from_secs(10), || async {
        std::fs::read_dir(&data)
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".credential"))
    })
    .await;
    let mode = cred.metadata().expect("credential").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // A missing token file is a usage error, not a hang or a panic.
    let out = node_cmd(&gw, "other", &data, ws.path())
        .arg("--token-file")
        .arg(base.path().join("absent"))
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid_args"),
        "{out:?}"
    );

    // $GSV_TOKEN works too, and also stays out of the command line.
    let mut env_node = node_cmd(&gw, "envnode", &base.path().join("d2"), ws.path());
    env_node.env("GSV_TOKEN", gw.node_token("envnode"));
    let _env_node = Proc(die_with_parent(&mut env_node).spawn().expect("spawn"));
    gw.wait_online("envnode").await;
}

/// Opens an MCP session with `token`; returns the response head.
async fn initialize(gw: &Gateway, token: &str) -> String {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#;
    head_of(&gw.addr, &mcp_request(&gw.addr, "POST", token, None, init)).await
}

fn session_of(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
}

#[tokio::test]
async fn one_token_cannot_hold_every_mcp_session() {
    let gw =
        Gateway::start_with(&["--mcp-sessions-per-token", "3", "--mcp-sessions-max", "5"]).await;
    let hog = gw.token(&["agent", "hog", "--allow", "*"]);
    let other = gw.token(&["agent", "other", "--allow", "*"]);
    let third = gw.token(&["agent", "third", "--allow", "*"]);
    let mut mine = Vec::new();
    for _ in 0..3 {
        let head = initialize(&gw, &hog).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        mine.push(session_of(&head));
    }
    // Past its share the token is refused, with the limit named…
    let refused = initialize(&gw, &hog).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    // …while another token still opens sessions, up to the total.
    for _ in 0..2 {
        let head = initialize(&gw, &other).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let full = initialize(&gw, &third).await;
    assert!(full.starts_with("HTTP/1.1 429"), "{full}");
    // Closing one makes room again.
    let del = head_of(
        &gw.addr,
        &mcp_request(&gw.addr, "DELETE", &hog, Some(&mine[0]), ""),
    )
    .await;
    assert!(del.starts_with("HTTP/1.1 204"), "{del}");
    let again = initialize(&gw, &third).await;
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
}

#[tokio::test]
async fn token_create_warns_about_globs_that_match_only_in_another_case() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("hard-ws");
    let _node = gw.node("lab", ws.path()).await;
    let (code, token, err) = gw.cli(&[
        "token",
        "create",
        "agent",
        "careless",
        "--allow",
        "lab__*",
        "--deny",
        "*__bash",
        "--confirm",
        "lab__Nonexistent",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("--deny \"*__bash\"") && err.contains("only Bash in another case"),
        "{err}"
    );
    assert!(
        err.contains("--confirm \"lab__Nonexistent\" matches no tool"),
        "{err}"
    );
    assert!(
        !err.contains("lab__*"),
        "a glob that matches was warned about: {err}"
    );
    // Why it matters: the misspelled deny denies nothing.
    let agent = gw.agent_with(token.trim()).await;
    let r = agent
        .call(
            "lab__Bash",
            serde_json::json!({"command": "echo not-denied"}),
            None,
        )
        .await
        .expect("the case-mismatched deny did not apply");
    assert!(r.joined_text().contains("not-denied"));
    // A correct policy creates no warning.
    let (_, _, err) = gw.cli(&[
        "token",
        "create",
        "agent",
        "careful",
        "--allow",
        "lab__*",
        "--deny",
        "class:run",
    ]);
    assert!(!err.contains("warning"), "{err}");
    // Denying Bash by name leaves exec open: said (issue 42).
    let (_, _, err) = gw.cli(&[
        "token", "create", "agent", "half", "--allow", "lab__*", "--deny", "*__Bash",
    ]);
    assert!(err.contains("exec") && err.contains("class:run"), "{err}");
}
