//! End to end: `gsv gateway --approval-webhook URL` (issue 21, approval notifications
//! for an operator away from the page). A call that needs approval is POSTed to a
//! receiver on loopback, signed with the key in the gateway's data directory; a
//! failed delivery (HTTP 500) is retried; the call itself never waits for it. The
//! body links the request's page in the operator console.

mod common;

use common::{eventually, Gateway, TempDir};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request the receiver got: its headers (lower-cased names) and body.
#[derive(Debug, Clone)]
struct Got {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A minimal HTTP/1.1 receiver on loopback: answers 500 to the first request, 200
/// after; records every request.
async fn receiver() -> (String, Arc<Mutex<Vec<Got>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head_end, length) = loop {
                let Ok(n) = tcp.read(&mut chunk).await else {
                    break (0, 0);
                };
                if n == 0 {
                    break (0, 0);
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (i + 4, length);
                }
                if buf.len() > 1 << 20 {
                    break (0, 0);
                }
            };
            if head_end == 0 {
                continue;
            }
            while buf.len() < head_end + length {
                let Ok(n) = tcp.read(&mut chunk).await else {
                    break;
                };
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let headers = head
                .lines()
                .skip(1)
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_owned()))
                .collect();
            let body = buf[head_end..(head_end + length).min(buf.len())].to_vec();
            let first = {
                let mut g = seen.lock().expect("lock");
                g.push(Got { headers, body });
                g.len() == 1
            };
            let status = if first {
                "500 Internal Server Error"
            } else {
                "200 OK"
            };
            let _ = tcp
                .write_all(
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await;
        }
    });
    (url, got)
}

#[tokio::test]
async fn each_approval_request_is_posted_signed_and_retried() {
    let (url, got) = receiver().await;
    let gw = Gateway::start_with(&["--approval-webhook", &url]).await;
    let ws = TempDir::new("webhook-ws");
    let _node = gw.node("lab", ws.path()).await;
    let token = gw.token(&["agent", "careful", "--allow", "*", "--confirm", "lab__Echo"]);
    let agent = gw.agent_with(&token).await;
    // The call waits for an operator (a job, so this test does not wait with it).
    let job = agent
        .call_async(
            "lab__Echo",
            json!({"text": "<script>x</script>\u{202E}gnp.exe\u{200B}"}),
            None,
        )
        .await
        .expect("started");

    // Delivered: once refused with 500, then again after a backoff.
    let posts = eventually("two deliveries", Duration::from_secs(20), || {
        let posts = got.lock().expect("lock").clone();
        async move { (posts.len() >= 2).then_some(posts) }
    })
    .await;
    let key = std::fs::read_to_string(gw.data.path().join("webhook.key")).expect("the key");
    for post in &posts[..2] {
        assert_eq!(post.header("content-type"), Some("application/json"));
        assert_eq!(post.header("x-gsv-event"), Some("approval.requested"));
        let expected = format!(
            "sha256={}",
            gsv_gateway::webhook::signature(key.trim().as_bytes(), &post.body)
        );
        assert_eq!(post.header("x-gsv-signature"), Some(expected.as_str()));
    }
    assert_eq!(
        posts[0].body, posts[1].body,
        "the same notification, retried"
    );
    let body: Value = serde_json::from_slice(&posts[1].body).expect("JSON");
    assert_eq!(body["event"], "approval.requested");
    assert_eq!(body["agent"], "careful");
    assert_eq!(body["node"], "lab");
    assert_eq!(body["tool"], "Echo");
    // A person reads the body (a chat bridge): hidden and bidi characters escaped.
    let summary = body["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("\\u{202e}gnp.exe\\u{200b}") && !summary.contains('\u{202E}'),
        "{summary}"
    );
    let id = body["id"].as_str().expect("the request id").to_owned();
    assert!(
        body["decide"].as_str().is_some_and(|d| d.contains(&id)),
        "{body}"
    );
    // The request's page in the operator console.
    assert_eq!(
        body["console"],
        format!("{}/ui/#/approvals/{id}", gw.url()),
        "{body}"
    );

    // The request is the real one: approving it by its id finishes the job.
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let done = eventually("the job to finish", Duration::from_secs(20), || {
        let agent = &agent;
        let job = job.clone();
        async move {
            let j = agent.job(&job).await.ok()?;
            (j.summary.state != gsv_protocol::job::JobState::Running).then_some(j)
        }
    })
    .await;
    assert_eq!(done.summary.state, gsv_protocol::job::JobState::Done);
    // The key is private to the gateway's user.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(gw.data.path().join("webhook.key"))
        .expect("key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn a_bad_webhook_url_stops_the_gateway_at_start() {
    let data = TempDir::new("webhook-bad");
    let out = std::process::Command::new(common::gsv_bin())
        .args([
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--approval-webhook",
            "ftp://x/",
        ])
        .arg("--data")
        .arg(data.path())
        .output()
        .expect("run gsv gateway");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("http or https"), "{err}");
}
