//! End to end: TLS on the gateway's port, and how nodes and the CLI trust it.
//!
//! A self-signed gateway with pinned nodes and agents, a wrong pin (fatal, clearly
//! reported), `--ca` with the gateway's own certificate, `gsv up --tls-self-signed`
//! followed by a flagless `gsv call`, plain HTTP on the TLS port, and the refusal of a
//! plain `ws://` gateway off loopback (decided before any connection is attempted).
//! Everything runs on loopback; the one non-loopback address is never dialled.

mod common;

use common::{die_with_parent, eventually, gsv_bin, http_get, Gateway, Proc, TempDir};
use gsv_client::{AgentClient, ClientError, TlsOptions};
use serde_json::json;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

async fn tls_gateway() -> (Gateway, String) {
    let gw = Gateway::start_with(&["--tls-self-signed"]).await;
    assert!(gw.tls, "gateway.addr should say https://");
    assert!(gw.url().starts_with("https://"), "{}", gw.url());
    let pin = gw.tls_options().pin.expect("tls-cert.pem in the data dir");
    (gw, pin)
}

/// `gsv node` against `gateway` with stderr captured.
fn node_cmd(gw: &Gateway, gateway: &str, id: &str, ws: &Path, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(gsv_bin());
    cmd.arg("node")
        .args(["--gateway", gateway, "--id", id])
        .arg("--token")
        .arg(gw.node_token(id))
        .arg("--workspace")
        .arg(ws)
        .arg("--data")
        .arg(gw.node_data.path())
        .arg("--echo-tool")
        .args(extra)
        .env("RUST_LOG", "warn")
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_TOKEN")
        .env_remove("GSV_CA")
        .env_remove("GSV_PIN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Proc(die_with_parent(&mut cmd).spawn().expect("spawn gsv node"))
}

/// Waits for the process to exit; returns its exit code and stderr.
async fn exit_of(proc: &mut Proc, limit: Duration) -> (i32, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = proc.0.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            start.elapsed() < limit,
            "the process did not exit within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let mut err = String::new();
    if let Some(mut stderr) = proc.0.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    (status.code().unwrap_or(-1), err)
}

async fn echo(agent: &AgentClient, name: &str, text: &str) {
    let r = agent
        .call(name, json!({ "text": text }), None)
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.joined_text(), text);
}

#[tokio::test]
async fn self_signed_gateway_with_pinned_node_and_agent() {
    let (gw, pin) = tls_gateway().await;
    assert_eq!(pin.len(), 64);
    let ws = TempDir::new("ws");
    // The pin in its other spelling: upper case with colons.
    let colons = pin
        .as_bytes()
        .chunks(2)
        .map(|p| String::from_utf8_lossy(p).to_uppercase())
        .collect::<Vec<_>>()
        .join(":");
    let _node = node_cmd(&gw, &gw.url(), "pinned", ws.path(), &["--pin", &colons]);
    gw.wait_online("pinned").await;
    let agent = gw.agent().await;
    echo(&agent, "pinned__Echo", "over tls").await;

    // The same certificate is reused on restart, so the pin stays valid.
    let mut gw = gw;
    gw.restart().await;
    assert_eq!(gw.tls_options().pin.as_deref(), Some(pin.as_str()));
    gw.wait_online("pinned").await;
    echo(&gw.agent().await, "pinned__Echo", "after restart").await;
}

#[tokio::test]
async fn a_wrong_pin_is_fatal_for_the_node_and_refused_by_the_client() {
    let (gw, pin) = tls_gateway().await;
    let ws = TempDir::new("ws");
    let wrong = "00".repeat(32);
    let mut node = node_cmd(&gw, &gw.url(), "wrongpin", ws.path(), &["--pin", &wrong]);
    let (code, err) = exit_of(&mut node, Duration::from_secs(30)).await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("certificate fingerprint mismatch"), "{err}");
    assert!(err.contains(&pin), "names the presented fingerprint: {err}");

    let tls = TlsOptions {
        ca: None,
        pin: Some(wrong.clone()),
    };
    match AgentClient::connect_with(&gw.url(), &gw.admin_token(), &tls).await {
        Err(ClientError::Certificate { reason, .. }) => {
            assert!(
                reason.contains("certificate fingerprint mismatch"),
                "{reason}"
            )
        }
        Err(e) => panic!("expected a certificate error, got {e}"),
        Ok(_) => panic!("a wrong pin must not connect"),
    }
    let (code, _, err) = gw.cli(&["nodes", "--pin", &wrong]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("certificate fingerprint mismatch"), "{err}");
    let (code, _, err) = gw.cli(&["nodes", "--pin", "not-a-fingerprint"]);
    assert_eq!(code, 2, "{err}");

    // Without --ca or --pin the system roots do not know a self-signed certificate.
    let mut node = node_cmd(&gw, &gw.url(), "noroots", ws.path(), &[]);
    let (code, err) = exit_of(&mut node, Duration::from_secs(30)).await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not trusted"), "{err}");
}

#[tokio::test]
async fn the_gateway_certificate_works_as_ca() {
    let (gw, _) = tls_gateway().await;
    let ca = gw.data.path().join("tls-cert.pem");
    let ca_arg = ca.to_str().expect("utf-8 path");
    let ws = TempDir::new("ws");
    let _node = node_cmd(&gw, &gw.url(), "viaca", ws.path(), &["--ca", ca_arg]);
    gw.wait_online("viaca").await;
    let tls = TlsOptions {
        ca: Some(ca.clone()),
        pin: None,
    };
    let agent = AgentClient::connect_with(&gw.url(), &gw.agent_token(), &tls)
        .await
        .expect("agent trusts the CA");
    echo(&agent, "viaca__Echo", "ca").await;
    // `localhost` is among the certificate's names too; wss:// is the same thing.
    let localhost = format!("wss://localhost:{}", gw.addr.rsplit(':').next().unwrap());
    let agent = AgentClient::connect_with(&localhost, &gw.agent_token(), &tls)
        .await
        .expect("localhost is a certificate name");
    echo(&agent, "viaca__Echo", "localhost").await;
    // --ca and --pin together are a usage error.
    let (code, _, err) = gw.cli(&["nodes", "--ca", ca_arg, "--pin", &"ab".repeat(32)]);
    assert_eq!(code, 2, "{err}");
}

#[tokio::test]
async fn up_with_self_signed_tls_then_call_without_flags() {
    let data = TempDir::new("up");
    let ws = TempDir::new("ws");
    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    let mut cmd = Command::new(gsv_bin());
    cmd.arg("up")
        .arg("--data")
        .arg(data.path())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--node-id",
            "local",
            "--echo-tool",
        ])
        .arg("--tls-self-signed")
        .arg("--workspace")
        .arg(ws.path())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let _up = Proc(die_with_parent(&mut cmd).spawn().expect("spawn gsv up"));
    let addr_file = data.path().join("gateway.addr");
    let addr = eventually("gateway.addr", Duration::from_secs(20), || {
        let f = addr_file.clone();
        async move { std::fs::read_to_string(f).ok().filter(|s| !s.is_empty()) }
    })
    .await;
    assert!(addr.trim().starts_with("https://127.0.0.1:"), "{addr}");
    // The local node pins the gateway it started; the CLI pins tls-cert.pem by itself.
    let call = || {
        Command::new(gsv_bin())
            .args(["call", "local__Echo", r#"{"text":"no flags"}"#])
            .arg("--data")
            .arg(data.path())
            .env_remove("GSV_GATEWAY")
            .env_remove("GSV_AGENT_TOKEN")
            .env_remove("GSV_CA")
            .env_remove("GSV_PIN")
            .output()
            .expect("run gsv call")
    };
    let out = eventually("gsv call to succeed", Duration::from_secs(30), || {
        let out = call();
        async move { out.status.success().then_some(out) }
    })
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no flags\n");
}

#[tokio::test]
async fn plain_http_to_the_tls_port_fails_and_https_works() {
    let (gw, pin) = tls_gateway().await;
    let (status, body) = http_get(&gw.addr, "/healthz", None).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("this port speaks TLS"), "{body}");

    // The same endpoint over TLS.
    let config = gsv_transport::tls::client_config(None, Some(&pin)).unwrap();
    let connector = tokio_rustls::TlsConnector::from(config);
    let tcp = tokio::net::TcpStream::connect(&gw.addr).await.unwrap();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: gsv\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("ok\n"), "{response}");

    // A plain-HTTP gateway URL for a TLS port does not get through either.
    let (code, _, err) = gw.cli(&["nodes", "--gateway", &format!("http://{}", gw.addr)]);
    assert_eq!(code, 4, "{err}");
}

#[tokio::test]
async fn plain_ws_off_loopback_is_refused_before_dialling() {
    let data = TempDir::new("far");
    for url in ["ws://10.255.255.1:9", "http://10.255.255.1:9"] {
        let mut cmd = Command::new(gsv_bin());
        cmd.arg("node")
            .args(["--gateway", url, "--id", "far", "--token", "unused"])
            .arg("--workspace")
            .arg(data.path())
            .arg("--data")
            .arg(data.path())
            .env_remove("GSV_CA")
            .env_remove("GSV_PIN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut node = Proc(die_with_parent(&mut cmd).spawn().expect("spawn gsv node"));
        // A dial would take the 10 s connect timeout; the refusal is immediate.
        let (code, err) = exit_of(&mut node, Duration::from_secs(5)).await;
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("refusing to connect"), "{err}");
        assert!(err.contains("--insecure"), "{err}");
    }
}
