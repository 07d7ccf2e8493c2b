//! End to end: the HTTP side (health, metrics, admin API) and `gsv up`.

mod common;

use common::{eventually, gsv_bin, http_get, http_request, Gateway, Proc, TempDir};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test]
async fn health_nodes_tools_and_auth() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("web", ws.path()).await;

    let (status, body) = http_get(&gw.addr, "/healthz", None).await;
    assert_eq!((status, body.trim()), (200, "ok"));

    for path in ["/v1/nodes", "/v1/tools"] {
        let (status, _) = http_get(&gw.addr, path, None).await;
        assert_eq!(status, 401, "{path}");
        let (status, _) = http_get(&gw.addr, path, Some("gsv_agent_0123456789ab_bad")).await;
        assert_eq!(status, 401, "{path}");
    }
    let admin = gw.admin_token();
    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&admin)).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    let node = &v["nodes"][0];
    assert_eq!(node["id"], "web");
    assert_eq!(node["online"], true);
    assert!(node["runtime"]["hostBinStatusUpdatedAt"].as_u64().unwrap() > 0);

    // An agent sees only what its policy allows.
    let reader = gw.token(&["agent", "r", "--allow", "web__Read"]);
    let (status, body) = http_get(&gw.addr, "/v1/tools", Some(&reader)).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["web__Read"]);
    assert!(v["tools"][0]["inputSchema"]["properties"]["path"].is_object());
    // A node token cannot use the admin API.
    let node_token = gw.node_token("other");
    let (status, _) = http_get(&gw.addr, "/v1/nodes", Some(&node_token)).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn probe_and_metrics() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("probed", ws.path()).await;
    let admin = gw.admin_token();
    let (status, body) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/probed/probe",
        Some(&admin),
        Some(r#"{"bins":["sh","surely-not-a-binary-gsv"]}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["hostBinStatus"]["sh"], true);
    assert_eq!(v["hostBinStatus"]["surely-not-a-binary-gsv"], false);
    // The registry shows the new status.
    let (_, body) = http_get(&gw.addr, "/v1/nodes", Some(&admin)).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["nodes"][0]["runtime"]["hostBinStatus"]["surely-not-a-binary-gsv"],
        false
    );
    // Agents may not probe; unknown nodes are 404.
    let agent = gw.agent_token();
    let (status, _) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/probed/probe",
        Some(&agent),
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/ghost/probe",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, 404);

    let client = gw.agent().await;
    client
        .call("probed__Echo", json!({"text": "m"}), None)
        .await
        .unwrap();
    let _ = client
        .call("probed__Read", json!({"path": "missing"}), None)
        .await
        .unwrap();
    let (status, metrics) = http_get(&gw.addr, "/metrics", None).await;
    assert_eq!(status, 200);
    for needle in [
        "gsv_connected_nodes 1",
        r#"gsv_calls_total{tool="Echo",outcome="ok"} 1"#,
        r#"gsv_calls_total{tool="Read",outcome="tool_error"} 1"#,
        "gsv_call_latency_seconds_count 2",
        "gsv_pending_calls 0",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
}

#[tokio::test]
async fn metrics_can_move_to_another_address() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let maddr = format!("127.0.0.1:{port}");
    let gw = Gateway::start_with(&["--metrics-listen", &maddr]).await;
    let (status, _) = http_get(&gw.addr, "/metrics", None).await;
    assert_eq!(status, 404);
    let (status, body) = http_get(&maddr, "/metrics", None).await;
    assert_eq!(status, 200);
    assert!(body.contains("gsv_connected_nodes"));
}

#[tokio::test]
async fn gsv_up_then_gsv_call_with_no_flags() {
    let data = TempDir::new("up");
    let ws = TempDir::new("upws");
    std::fs::write(ws.path().join("README.md"), "hello from up\n").unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut up = Proc(
        common::die_with_parent(&mut Command::new(gsv_bin()))
            .args([
                "up",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--node-id",
                "laptop",
            ])
            .env("GSV_DATA", data.path())
            .env("RUST_LOG", "warn")
            .current_dir(ws.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let call = || {
        Command::new(gsv_bin())
            .args(["call", "laptop__Read", r#"{"path":"README.md"}"#])
            .env("GSV_DATA", data.path())
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_AGENT_TOKEN")
            .output()
            .unwrap()
    };
    let out = eventually(
        "gsv call to work against gsv up",
        Duration::from_secs(30),
        || {
            let out = call();
            async move { out.status.success().then_some(out) }
        },
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\thello from up\n");
    // Credentials are files only the owner can read.
    #[cfg(unix)]
    for f in ["agent.token", "admin.token", "node.token"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.path().join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
    up.kill();
    let mut stdout = String::new();
    use std::io::Read;
    up.0.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(stdout.contains("agent.token"), "{stdout}");
    assert!(stdout.contains("laptop__Read"), "{stdout}");
}
