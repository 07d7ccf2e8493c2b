//! End to end: unauthenticated floods (issue 14, items 3 and 4).
//!
//! Thousands of half-open connections (TCP connected, request headers never finished)
//! from several loopback addresses must neither lock out nodes and agents nor stay
//! open: the caps on unauthenticated connections close the excess at accept, and the
//! header deadline closes the rest. A flood of bad tokens must cost a bounded number
//! of audit rows that still account for every refusal. Every connection here goes to
//! 127.0.0.0/8; every loop has a fixed count and a deadline.

mod common;

use common::{eventually, http_get, Gateway, TempDir};
use serde_json::json;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The start of a request whose headers never end.
const PARTIAL_HEAD: &[u8] = b"GET /v1/agent HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

/// One flood connection: a non-blocking std socket (read without the runtime) and
/// when its connect returned.
struct HalfOpen {
    stream: std::net::TcpStream,
    opened: Instant,
}

impl HalfOpen {
    /// Whether the gateway closed it (EOF, reset, or an answer it will close after).
    fn closed(&mut self) -> bool {
        let mut buf = [0u8; 512];
        match self.stream.read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == ErrorKind::Interrupted => false,
            _ => true,
        }
    }
}

/// Opens `per_source` connections from each of `sources` to `addr`, each sending
/// `head` and nothing more.
async fn open_flood(
    addr: &str,
    sources: &[Ipv4Addr],
    per_source: usize,
    head: &[u8],
) -> Vec<HalfOpen> {
    let target: SocketAddr = addr.parse().expect("gateway address");
    let mut out = Vec::with_capacity(sources.len() * per_source);
    for i in 0..per_source {
        for src in sources {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket
                .bind(SocketAddr::from((*src, 0)))
                .expect("bind a loopback source address");
            let stream = tokio::time::timeout(Duration::from_secs(10), socket.connect(target))
                .await
                .unwrap_or_else(|_| panic!("connect #{i} from {src} hung"))
                .unwrap_or_else(|e| panic!("connect #{i} from {src}: {e}"));
            let opened = Instant::now();
            let mut stream = stream.into_std().expect("into_std");
            // A connection shed at accept may already be reset: that is fine.
            let _ = stream.write(head);
            out.push(HalfOpen { stream, opened });
        }
    }
    out
}

/// Loopback source addresses 127.0.1.1 ..= 127.0.1.n.
fn sources(n: u8) -> Vec<Ipv4Addr> {
    (1..=n).map(|i| Ipv4Addr::new(127, 0, 1, i)).collect()
}

/// Takes the closed connections out of `conns`; returns when each was seen closed,
/// relative to its connect.
fn reap(conns: &mut Vec<HalfOpen>) -> Vec<Duration> {
    let mut ages = Vec::new();
    conns.retain_mut(|c| {
        if c.closed() {
            ages.push(c.opened.elapsed());
            false
        } else {
            true
        }
    });
    ages
}

/// A metric's value from an exposition (0 when the series is absent).
fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn metrics_text(addr: &str) -> String {
    let (status, body) = http_get(addr, "/metrics", None).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn free_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    format!("127.0.0.1:{}", l.local_addr().expect("addr").port())
}

async fn echo(agent: &gsv_client::AgentClient, node: &str, text: &str) {
    let r = agent
        .call(
            &format!("{node}__Echo"),
            json!({ "text": text }),
            Some(20_000),
        )
        .await
        .unwrap_or_else(|e| panic!("call {node}__Echo: {e}"));
    assert!(!r.is_error, "{}", r.joined_text());
    assert!(r.joined_text().contains(text), "{}", r.joined_text());
}

/// 3,000 half-open connections from 40 loopback addresses (75 each). The per-source
/// cap (64) closes 11 of each address's at accept; the other 2,560 stay open until the
/// header deadline closes them, never sooner. Meanwhile an existing agent's calls
/// succeed, a new node connects and serves calls, and the HTTP API answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_flood_is_capped_per_source_and_timed_out_while_the_fleet_works() {
    const HEADER_TIMEOUT: Duration = Duration::from_secs(15);
    const SOURCES: u8 = 40;
    const PER_SOURCE: usize = 75;
    const CAP: usize = 64;
    let gw = Gateway::start_with(&[
        "--header-timeout-ms",
        &HEADER_TIMEOUT.as_millis().to_string(),
        "--unauth-timeout-ms",
        "300000",
        "--max-unauth-conns",
        "4096",
        "--max-unauth-conns-per-source",
        &CAP.to_string(),
    ])
    .await;
    let ws = TempDir::new("flood-ws");
    let _a = gw.node("fa", ws.path()).await;
    let agent = gw.agent().await;
    echo(&agent, "fa", "before").await;

    let mut conns = open_flood(&gw.addr, &sources(SOURCES), PER_SOURCE, PARTIAL_HEAD).await;
    let total = conns.len();
    let shed_expected = SOURCES as usize * (PER_SOURCE - CAP);
    let held_expected = total - shed_expected;
    // The gateway counted every shed connection; they were closed at accept.
    eventually(
        "the shed connections counted",
        Duration::from_secs(20),
        || {
            let addr = gw.addr.clone();
            async move {
                let m = metrics_text(&addr).await;
                (metric(&m, r#"gsv_connections_shed_total{reason="per_source"}"#)
                    == shed_expected as u64)
                    .then_some(())
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shed = reap(&mut conns);
    assert_eq!(shed.len(), shed_expected, "closed at accept");
    assert!(
        shed.iter().all(|age| *age < HEADER_TIMEOUT),
        "shed ones are closed at once"
    );
    assert_eq!(conns.len(), held_expected, "held open, waiting for headers");
    let m = metrics_text(&gw.addr).await;
    assert!(
        metric(&m, "gsv_unauthenticated_connections") >= held_expected as u64,
        "{m}"
    );

    // While the flood holds its connections: the agent's calls go through, a new node
    // connects (from 127.0.0.1, not a flooding address) and serves calls, the HTTP
    // API answers a valid token.
    echo(&agent, "fa", "during").await;
    let _b = gw.node("fb", ws.path()).await;
    echo(&agent, "fb", "new node during the flood").await;
    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&gw.admin_token())).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"fb\""), "{body}");

    // Then the header deadline closes every half-open connection, not before it.
    let deadline = Instant::now() + HEADER_TIMEOUT + Duration::from_secs(30);
    let mut timed_out = Vec::new();
    while !conns.is_empty() && Instant::now() < deadline {
        timed_out.extend(reap(&mut conns));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        conns.is_empty(),
        "{} half-open connections still open {:?} after the header deadline",
        conns.len(),
        HEADER_TIMEOUT + Duration::from_secs(30)
    );
    assert_eq!(timed_out.len(), held_expected);
    let early = timed_out
        .iter()
        .filter(|age| **age + Duration::from_millis(500) < HEADER_TIMEOUT)
        .count();
    assert_eq!(early, 0, "closed before the header deadline");
    let m = metrics_text(&gw.addr).await;
    assert!(metric(&m, "gsv_unauthenticated_connections") <= 1, "{m}");
    echo(&agent, "fa", "after").await;
}

/// The global cap: 256 half-open connections from 4 addresses against a cap of 200.
/// The excess, and then any new connection, is closed at accept — but the node and
/// agent that had authenticated keep working, and a node started during the flood
/// connects once the header deadline has cleared it. The separate metrics port stays
/// readable throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_cap_keeps_authenticated_connections_working() {
    const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
    let maddr = free_port();
    let gw = Gateway::start_with(&[
        "--header-timeout-ms",
        &HEADER_TIMEOUT.as_millis().to_string(),
        "--max-unauth-conns",
        "200",
        "--max-unauth-conns-per-source",
        "64",
        "--metrics-listen",
        &maddr,
    ])
    .await;
    let ws = TempDir::new("flood-ws");
    let _a = gw.node("ga", ws.path()).await;
    let agent = gw.agent().await;

    let mut conns = open_flood(&gw.addr, &sources(4), 64, PARTIAL_HEAD).await;
    eventually(
        "the shed connections counted",
        Duration::from_secs(20),
        || {
            let maddr = maddr.clone();
            async move {
                let m = metrics_text(&maddr).await;
                (metric(&m, r#"gsv_connections_shed_total{reason="global"}"#) == 56).then_some(())
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(reap(&mut conns).len(), 56);
    assert_eq!(conns.len(), 200);

    // Full: the authenticated node and agent still work...
    echo(&agent, "ga", "while full").await;
    // ...and a new connection, even with a valid token, is closed at accept.
    let refused =
        gsv_client::AgentClient::connect_with(&gw.url(), &gw.admin_token(), &gw.tls_options())
            .await;
    assert!(refused.is_err(), "a new connection while the cap is full");
    let m = metrics_text(&maddr).await;
    assert!(
        metric(&m, r#"gsv_connections_shed_total{reason="global"}"#) >= 57,
        "{m}"
    );

    // A node started now is shed too, retries with its backoff, and gets in once the
    // header deadline has cleared the flood.
    let _b = gw.spawn_node("gb", &gw.node_token("gb"), ws.path(), &[]);
    let deadline = Instant::now() + HEADER_TIMEOUT + Duration::from_secs(30);
    while !conns.is_empty() && Instant::now() < deadline {
        reap(&mut conns);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(conns.is_empty(), "{} still open", conns.len());
    gw.wait_online("gb").await;
    echo(&agent, "gb", "after the flood").await;
}

/// The TLS handshake, the metrics port's request head and a slowly sent request body
/// are all under a deadline too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_metrics_port_and_slow_bodies_are_timed_out() {
    const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
    const UNAUTH_TIMEOUT: Duration = Duration::from_secs(3);
    let maddr = free_port();
    let gw = Gateway::start_with(&[
        "--tls-self-signed",
        "--header-timeout-ms",
        &HEADER_TIMEOUT.as_millis().to_string(),
        "--unauth-timeout-ms",
        &UNAUTH_TIMEOUT.as_millis().to_string(),
        "--metrics-listen",
        &maddr,
    ])
    .await;
    // TCP connected, no ClientHello.
    let mut silent_tls = open_flood(&gw.addr, &sources(2), 10, b"").await;
    // Half a request head on the metrics port.
    let mut metrics_half = open_flood(&maddr, &sources(1), 8, b"GET /metrics HTTP/1.1\r\n").await;
    for (what, conns, timeout) in [
        ("silent TLS", &mut silent_tls, HEADER_TIMEOUT),
        ("metrics head", &mut metrics_half, HEADER_TIMEOUT),
    ] {
        let n = conns.len();
        let deadline = Instant::now() + timeout + Duration::from_secs(20);
        let mut ages = Vec::new();
        while !conns.is_empty() && Instant::now() < deadline {
            ages.extend(reap(conns));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(conns.is_empty(), "{what}: {} still open", conns.len());
        assert_eq!(ages.len(), n);
        assert!(
            ages.iter()
                .all(|a| *a + Duration::from_millis(300) >= timeout),
            "{what}: closed before the deadline: {ages:?}"
        );
    }

    // A complete head over plain HTTP on a plain gateway, then a body that never
    // comes: closed when the connection has been unauthenticated too long.
    let plain = Gateway::start_with(&[
        "--header-timeout-ms",
        &HEADER_TIMEOUT.as_millis().to_string(),
        "--unauth-timeout-ms",
        &UNAUTH_TIMEOUT.as_millis().to_string(),
    ])
    .await;
    let head =
        b"POST /v1/approvals/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{\"deci";
    let mut slow = open_flood(&plain.addr, &sources(1), 1, head).await;
    let deadline = Instant::now() + UNAUTH_TIMEOUT + Duration::from_secs(20);
    let mut ages = Vec::new();
    while !slow.is_empty() && Instant::now() < deadline {
        ages.extend(reap(&mut slow));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(slow.is_empty(), "a slow body is cut off");
    assert!(
        ages[0] + Duration::from_millis(300) >= UNAUTH_TIMEOUT,
        "not before the unauthenticated deadline: {ages:?}"
    );
}

/// Reads one HTTP/1.1 response (status line, headers, `Content-Length` body); returns
/// the status line.
async fn read_response<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> String {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut status = String::new();
    r.read_line(&mut status).await.expect("status line");
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).await.expect("header");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().expect("content-length");
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.expect("body");
    status
}

/// A connection that has made an HTTP request with a valid token no longer counts as
/// unauthenticated: with a per-address cap of 2, two kept-alive connections that
/// authenticated leave room for two unauthenticated ones from the same address (the
/// third is closed at accept), and still serve requests afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_request_with_a_valid_token_takes_its_connection_out_of_the_cap() {
    use tokio::io::{AsyncWriteExt, BufReader};
    let gw = Gateway::start_with(&["--max-unauth-conns-per-source", "2"]).await;
    let src = Ipv4Addr::new(127, 0, 1, 1);
    let target: SocketAddr = gw.addr.parse().expect("addr");
    let req = format!(
        "GET /v1/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
        gw.admin_token()
    );
    let mut authenticated = Vec::new();
    for _ in 0..2 {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(SocketAddr::from((src, 0))).expect("bind");
        let stream = socket.connect(target).await.expect("connect");
        let (r, mut w) = stream.into_split();
        let mut r = BufReader::new(r);
        w.write_all(req.as_bytes()).await.expect("write");
        let status = read_response(&mut r).await;
        assert!(status.contains(" 200 "), "{status}");
        authenticated.push((r, w));
    }
    let mut half = open_flood(&gw.addr, &[src], 3, PARTIAL_HEAD).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        reap(&mut half).len(),
        1,
        "the third unauthenticated one is shed"
    );
    assert_eq!(half.len(), 2);
    for (r, w) in &mut authenticated {
        w.write_all(req.as_bytes()).await.expect("write");
        let status = read_response(r).await;
        assert!(status.contains(" 200 "), "{status}");
    }
    let m = metrics_text(&gw.addr).await;
    assert_eq!(
        metric(&m, r#"gsv_connections_shed_total{reason="per_source"}"#),
        1,
        "{m}"
    );
}

/// One HTTP/1.1 keep-alive connection sending `n` requests with a bad token; returns
/// how many answers it read (401 or 429 each).
async fn bad_token_requests(addr: &str, n: usize) -> usize {
    use tokio::io::{AsyncWriteExt, BufReader};
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut answered = 0;
    for _ in 0..n {
        let req = "GET /v1/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer gsv_agent_not-a-real-token\r\n\r\n";
        w.write_all(req.as_bytes()).await.expect("write");
        let status = read_response(&mut r).await;
        assert!(
            status.contains(" 401 ") || status.contains(" 429 "),
            "{status}"
        );
        answered += 1;
    }
    answered
}

/// Refusal rows added since `after`: (rows, sum of the refusals they stand for).
fn refusal_rows(gw: &Gateway, after: i64) -> (Vec<gsv_gateway::audit::AuditRow>, u64) {
    let store = gsv_gateway::Store::open(gw.data.path()).expect("store");
    let rows = store
        .with_conn(|c| gsv_gateway::audit::rows_after(c, after, 100_000))
        .expect("audit rows");
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|r| r.entry.kind == "refused")
        .collect();
    let total = rows
        .iter()
        .map(|r| {
            let d: serde_json::Value =
                serde_json::from_str(r.entry.detail.as_deref().unwrap_or("{}")).expect("detail");
            d["count"].as_u64().unwrap_or(1)
        })
        .sum();
    (rows, total)
}

/// 2,000 bad-token HTTP requests and 200 bad-token WebSocket connects from one
/// address add a handful of audit rows, not 2,200: the first refusal per source,
/// role and code per window, then one row per key with the count. The counts add up
/// to every refusal, and `gsv audit verify` still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_flood_costs_bounded_audit_rows_with_counts() {
    const INTERVAL: Duration = Duration::from_secs(2);
    const HTTP: usize = 2_000;
    const WS: usize = 200;
    let gw = Gateway::start_with(&[
        "--audit-refusal-interval-ms",
        &INTERVAL.as_millis().to_string(),
    ])
    .await;
    let before = {
        let store = gsv_gateway::Store::open(gw.data.path()).expect("store");
        store
            .with_conn(|c| gsv_gateway::audit::last_seq(c))
            .expect("last seq")
    };
    let started = Instant::now();
    let mut answered = 0;
    for _ in 0..4 {
        answered += bad_token_requests(&gw.addr, HTTP / 4).await;
    }
    assert_eq!(answered, HTTP);
    for _ in 0..WS {
        let r = gsv_client::AgentClient::connect_with(
            &gw.url(),
            "gsv_agent_not-a-real-token",
            &gw.tls_options(),
        )
        .await;
        assert!(r.is_err(), "a bad token must be refused");
    }
    let flood = started.elapsed();
    // Wait for the window in progress to end and its counts to be written.
    let sent = (HTTP + WS) as u64;
    let (rows, total) = eventually(
        "every refusal accounted for in the audit log",
        INTERVAL * 3 + Duration::from_secs(20),
        || async {
            let (rows, total) = refusal_rows(&gw, before);
            (total == sent).then_some((rows, total))
        },
    )
    .await;
    assert_eq!(total, sent);
    // Four keys at most (http and agent, each unauthorized then rate_limited), two
    // rows per key per window.
    let windows = (flood.as_millis() / INTERVAL.as_millis()) as usize + 2;
    assert!(
        rows.len() <= 8 * windows && rows.len() < 100,
        "{} rows for {sent} refusals over {flood:?}",
        rows.len()
    );
    assert!(
        rows.iter().any(|r| r
            .entry
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("\"repeated\":true"))),
        "a row carries the count of the repeated ones"
    );
    let (code, out, err) = gw.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// docs/security.md, "Rate limiting of failed authentication": after 20 bad tokens in
/// the window an address's bad tokens get `rate_limited` (HTTP 429) instead of
/// `unauthorized`, on HTTP and WebSocket alike, while a valid token from the same
/// address still gets in on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_throttles_bad_tokens_and_never_a_valid_one() {
    let gw = Gateway::start().await;
    let bad = "gsv_agent_0123456789ab_not-a-token";
    let mut statuses = Vec::new();
    for _ in 0..25 {
        statuses.push(http_get(&gw.addr, "/v1/nodes", Some(bad)).await.0);
    }
    assert_eq!(&statuses[..20], &[401; 20], "{statuses:?}");
    assert_eq!(&statuses[20..], &[429; 5], "{statuses:?}");
    let e = gsv_client::AgentClient::connect_with(&gw.url(), bad, &gw.tls_options())
        .await
        .err()
        .expect("a bad token is refused");
    assert_eq!(
        e.remote().map(|r| r.code),
        Some(gsv_protocol::ErrorCode::RateLimited),
        "{e}"
    );
    // The same address, limited, with valid tokens: HTTP and WebSocket get in.
    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&gw.admin_token())).await;
    assert_eq!(status, 200, "{body}");
    let agent = gw.agent().await;
    agent
        .list_nodes()
        .await
        .expect("a valid token works while limited");
}
