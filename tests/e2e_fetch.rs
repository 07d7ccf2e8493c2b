//! End to end: `fetch_url` through a real gateway and a real `gsv node`, against an
//! HTTP server on loopback that this test runs (issue 19, structured operations): what
//! it returns (status, headers, text and binary bodies, limits, redirects), and the
//! address guardrails: link-local, metadata, non-unicast and public targets are
//! refused before any connection, redirects are checked hop by hop, and credentials
//! do not follow a redirect to another origin.

mod common;

use common::{Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A tiny HTTP/1.1 server on 127.0.0.1: one request per connection, answers by path,
/// and remembers every request it got (request line and headers).
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    log.lock().unwrap().push(head.clone());
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    let (status, extra, body) = answer(&path, port, &head);
                    let mut out = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n",
                        body.len()
                    )
                    .into_bytes();
                    if !head.starts_with("HEAD ") {
                        out.extend_from_slice(&body);
                    }
                    let _ = sock.write_all(&out).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Server { port, seen, task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn paths(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|h| h.split(' ').nth(1).unwrap_or("").to_owned())
            .collect()
    }
}

fn answer(path: &str, port: u16, head: &str) -> (&'static str, String, Vec<u8>) {
    match path {
        "/hello" => (
            "200 OK",
            "Content-Type: text/plain; charset=utf-8\r\nX-Test: one\r\nX-Test: two\r\n".into(),
            "hello from the node's side\n".into(),
        ),
        "/bin" => (
            "200 OK",
            "Content-Type: application/octet-stream\r\n".into(),
            vec![0, 159, 146, 150, 255],
        ),
        "/big" => ("200 OK", String::new(), vec![b'x'; 3000]),
        "/missing" => ("404 Not Found", String::new(), b"nope".to_vec()),
        "/redirect" => ("302 Found", "Location: /hello\r\n".into(), Vec::new()),
        "/loop" => ("302 Found", "Location: /loop\r\n".into(), Vec::new()),
        "/to-metadata" => (
            "302 Found",
            "Location: http://169.254.169.254/latest/meta-data/\r\n".into(),
            Vec::new(),
        ),
        "/to-file" => (
            "302 Found",
            "Location: file:///etc/passwd\r\n".into(),
            Vec::new(),
        ),
        "/cross" => (
            "302 Found",
            format!("Location: http://localhost:{port}/headers\r\n"),
            Vec::new(),
        ),
        "/headers" => ("200 OK", String::new(), head.as_bytes().to_vec()),
        _ => ("404 Not Found", String::new(), Vec::new()),
    }
}

async fn fetch(agent: &AgentClient, node: &str, args: Value) -> ToolResult {
    agent
        .call(&format!("{node}__fetch_url"), args.clone(), Some(60_000))
        .await
        .unwrap_or_else(|e| panic!("fetch_url {args}: {e:?}"))
}

fn ok(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "{}", r.joined_text());
    r.structured_content.as_ref().expect("structured content")
}

#[tokio::test]
async fn fetch_url_returns_status_headers_and_bodies_and_follows_redirects() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("fetch-ws");
    let server = Server::start().await;
    // A read-only node offers it: it only reads.
    let _node = gw.spawn_node("web", &gw.node_token("web"), ws.path(), &["--read-only"]);
    gw.wait_online("web").await;
    let agent = gw.agent().await;

    let r = fetch(&agent, "web", json!({"url": server.url("/hello")})).await;
    let out = ok(&r);
    assert_eq!(out["status"], 200);
    assert_eq!(out["statusText"], "OK");
    assert_eq!(out["encoding"], "text");
    assert_eq!(out["body"], "hello from the node's side\n");
    assert_eq!(out["address"], format!("127.0.0.1:{}", server.port));
    let tests: Vec<&str> = out["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["name"] == "x-test")
        .filter_map(|h| h["value"].as_str())
        .collect();
    assert_eq!(tests, ["one", "two"]);
    assert!(
        r.joined_text().starts_with("HTTP 200 OK from"),
        "{}",
        r.joined_text()
    );
    assert!(r.joined_text().contains("hello from the node's side"));

    // Binary bodies come back as base64, byte for byte.
    let out = fetch(&agent, "web", json!({"url": server.url("/bin")})).await;
    let out = ok(&out);
    assert_eq!(out["encoding"], "base64");
    assert_eq!(out["body"], "AJ+Slv8=");
    assert_eq!(out["bytes"], 5);

    // maxBytes cuts the body and says so; HEAD gets no body; an error status is a
    // result, not a tool error.
    let r = fetch(
        &agent,
        "web",
        json!({"url": server.url("/big"), "maxBytes": 100}),
    )
    .await;
    let out = ok(&r);
    assert_eq!(
        (out["bytes"].as_u64(), out["truncated"].as_bool()),
        (Some(100), Some(true))
    );
    let r = fetch(
        &agent,
        "web",
        json!({"url": server.url("/hello"), "method": "HEAD"}),
    )
    .await;
    assert_eq!(ok(&r)["bytes"], 0);
    let r = fetch(&agent, "web", json!({"url": server.url("/missing")})).await;
    assert_eq!(ok(&r)["status"], 404);

    // Redirects are followed and listed, or not when asked.
    let r = fetch(&agent, "web", json!({"url": server.url("/redirect")})).await;
    let out = ok(&r);
    assert_eq!(out["status"], 200);
    assert_eq!(out["url"], server.url("/hello"));
    assert_eq!(out["redirects"], json!([server.url("/hello")]));
    let r = fetch(
        &agent,
        "web",
        json!({"url": server.url("/redirect"), "followRedirects": false}),
    )
    .await;
    assert_eq!(ok(&r)["status"], 302);
    let r = fetch(&agent, "web", json!({"url": server.url("/loop")})).await;
    assert!(r.is_error);
    assert!(
        r.joined_text().contains("more than 5 redirects"),
        "{}",
        r.joined_text()
    );

    // The caller's headers are sent; credentials stay with their origin.
    let r = fetch(
        &agent,
        "web",
        json!({"url": server.url("/headers"), "headers": {"Authorization": "Bearer s3cret", "X-Trace": "t1"}}),
    )
    .await;
    let seen = ok(&r)["body"].as_str().unwrap().to_ascii_lowercase();
    assert!(seen.contains("authorization: bearer s3cret"), "{seen}");
    assert!(seen.contains("x-trace: t1"), "{seen}");
    assert!(seen.contains("accept-encoding: identity"), "{seen}");
    assert!(seen.contains("user-agent: gsv-node/"), "{seen}");
    let r = fetch(
        &agent,
        "web",
        json!({"url": server.url("/cross"), "headers": {"Authorization": "Bearer s3cret", "X-Trace": "t2"}}),
    )
    .await;
    let seen = ok(&r)["body"].as_str().unwrap().to_ascii_lowercase();
    assert!(seen.starts_with("get /headers "), "{seen}");
    assert!(seen.contains("host: localhost:"), "{seen}");
    assert!(
        !seen.contains("s3cret"),
        "credentials crossed origins: {seen}"
    );
    assert!(seen.contains("x-trace: t2"), "{seen}");
}

#[tokio::test]
async fn fetch_url_refuses_metadata_link_local_and_public_targets_before_connecting() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("fetch-ws");
    let server = Server::start().await;
    let _node = gw.spawn_node("web", &gw.node_token("web"), ws.path(), &[]);
    gw.wait_online("web").await;
    let agent = gw.agent().await;

    // Every one of these is refused by the node before it opens a connection (no
    // packet leaves for them: the refusals name the rule, not a network error).
    for (url, needle) in [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://[fd00:ec2::254]/", "cloud-metadata"),
        ("http://100.100.100.200/", "cloud-metadata"),
        ("http://168.63.129.16/", "cloud-metadata"),
        ("http://0.0.0.0:9/", "not a unicast address"),
        ("http://93.184.216.34/", "--fetch-allow"),
        ("http://[2001:db8::1]/", "--fetch-allow"),
        ("file:///etc/passwd", "only http and https"),
        ("http://user:pw@127.0.0.1/", "credentials"),
    ] {
        let r = fetch(&agent, "web", json!({ "url": url })).await;
        assert!(r.is_error, "{url} was fetched: {}", r.joined_text());
        assert!(
            r.joined_text().contains(needle),
            "{url}: {}",
            r.joined_text()
        );
    }

    // A redirect is checked like the first URL: the server's hop to the metadata
    // address (or to a file) is refused, and nothing but the first request arrives.
    for path in ["/to-metadata", "/to-file"] {
        let r = fetch(&agent, "web", json!({"url": server.url(path)})).await;
        assert!(r.is_error, "{path}: {}", r.joined_text());
        assert!(
            r.joined_text().contains("link-local") || r.joined_text().contains("redirect"),
            "{path}: {}",
            r.joined_text()
        );
    }
    assert_eq!(server.paths(), ["/to-metadata", "/to-file"]);

    // Only GET and HEAD; the node's framing headers are its own.
    for args in [
        json!({"url": server.url("/hello"), "method": "POST"}),
        json!({"url": server.url("/hello"), "headers": {"Host": "evil"}}),
        json!({"url": server.url("/hello"), "headers": {"X-A": "a\r\nX-B: b"}}),
    ] {
        // Refused by the gateway's schema check or by the node's own.
        match agent
            .call("web__fetch_url", args.clone(), Some(60_000))
            .await
        {
            Ok(r) => assert!(r.is_error, "{args}: {}", r.joined_text()),
            Err(e) => assert_eq!(
                e.remote().map(|s| s.code),
                Some(gsv_protocol::ErrorCode::InvalidArgs),
                "{args}: {e:?}"
            ),
        }
    }
    assert_eq!(server.paths().len(), 2, "refused calls sent nothing");
}

#[tokio::test]
async fn a_bad_fetch_allow_glob_is_a_usage_error() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("fetch-ws");
    let mut cmd = gw.node_command("web", &gw.node_token("web"), ws.path());
    cmd.args(["--fetch-allow", "bad glob"])
        .stderr(std::process::Stdio::piped());
    let mut node = common::Proc(common::die_with_parent(&mut cmd).spawn().unwrap());
    let status = common::eventually(
        "the node with a bad glob to exit",
        std::time::Duration::from_secs(20),
        || {
            let s = node.0.try_wait().ok().flatten();
            async move { s }
        },
    )
    .await;
    assert_eq!(status.code(), Some(2), "{status:?}");
    let mut err = String::new();
    use std::io::Read;
    node.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("--fetch-allow"), "{err}");
}
