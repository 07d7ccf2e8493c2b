//! End to end: the operator console at `/ui/` (issue 21), against a real gateway and
//! real nodes on loopback.
//!
//! The first tests speak HTTP by hand: one-time login codes (a second use refused),
//! the session cookie's flags, 401 without a session, 403 for a change without the
//! session's CSRF token or from another origin, the security headers, and text from
//! agents and nodes (`<script>`, `<img onerror>`) returned as plain JSON strings, and
//! the live-update stream telling a page that a request opened.
//! The last drives the page itself in headless Chromium with Selenium
//! (`tests/console/browser.py`): log in, look at a node's tools, approve and deny
//! calls that wait, kill a background session, revoke a token, and check that
//! hostile strings show as text. It skips (with a note) when Chromium, chromedriver
//! or the Python `selenium` package is missing, unless `CI` is set.

mod common;

use common::fake::{tool, Raw};
use common::{eventually, gsv_bin, Gateway, TempDir};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Text a hostile agent or node might send, meant to run in an operator's browser.
const XSS: &str = "<script>alert('xss-script')</script><img src=x onerror=alert('xss-img')>";

/// An HTTP answer: status, headers (lower-cased names), body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    /// The `error.code` of a JSON error body.
    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// One HTTP/1.1 request on loopback with the given extra headers.
async fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    req.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("an answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A login link from `gsv ui` (the admin token in the gateway's data directory).
fn login_link(gw: &Gateway) -> String {
    let (code, out, err) = gw.cli(&["ui"]);
    assert_eq!(code, 0, "gsv ui: {err}");
    let link = out.trim().to_owned();
    assert!(
        link.starts_with(&format!("{}/ui/login?code=", gw.url())),
        "{link}"
    );
    link
}

/// The path and query of a link on the gateway.
fn path_of(link: &str) -> &str {
    link.find("/ui/").map(|i| &link[i..]).unwrap_or(link)
}

/// Logs in with a fresh code; returns the cookie header value and the CSRF token.
async fn sign_in(gw: &Gateway) -> (String, String) {
    let link = login_link(gw);
    let r = request(&gw.addr, "GET", path_of(&link), &[], None).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let set = r.header("set-cookie").expect("a session cookie").to_owned();
    let cookie = set.split(';').next().unwrap_or_default().to_owned();
    let me = request(&gw.addr, "GET", "/ui/api/me", &[("Cookie", &cookie)], None).await;
    assert_eq!(me.status, 200, "{}", me.body);
    let csrf = me.json()["csrf"].as_str().expect("csrf").to_owned();
    (cookie, csrf)
}

/// Logs in as the holder of `token` (an operator's) through `POST /v1/ui/login-codes`;
/// returns the cookie header value, the CSRF token and `/ui/api/me`.
async fn sign_in_with(gw: &Gateway, token: &str) -> (String, String, Value) {
    let bearer = format!("Bearer {token}");
    let r = request(
        &gw.addr,
        "POST",
        "/v1/ui/login-codes",
        &[("Authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let link = r.json()["url"].as_str().expect("url").to_owned();
    let r = request(&gw.addr, "GET", path_of(&link), &[], None).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let set = r.header("set-cookie").expect("a session cookie").to_owned();
    let cookie = set.split(';').next().unwrap_or_default().to_owned();
    let me = request(&gw.addr, "GET", "/ui/api/me", &[("Cookie", &cookie)], None).await;
    assert_eq!(me.status, 200, "{}", me.body);
    let me = me.json();
    let csrf = me["csrf"].as_str().expect("csrf").to_owned();
    (cookie, csrf, me)
}

/// A fake node `id` whose one tool's description is [`XSS`], kept connected (and
/// answering pings) until the test ends.
async fn xss_node(gw: &Gateway, id: &str) {
    let token = gw.node_token(id);
    let mut t = tool("Hostile", "diagnostics.echo");
    t["description"] = json!(format!("hostile tool {XSS}"));
    let (mut raw, hello) = Raw::node(&gw.addr, id, &token, json!([t])).await;
    hello.expect("the fake node connects");
    tokio::spawn(async move { while raw.recv().await.is_some() {} });
    gw.wait_online(id).await;
}

#[tokio::test]
async fn login_codes_work_once_and_changes_need_the_csrf_token_and_origin() {
    let gw = Gateway::start().await;
    let link = login_link(&gw);
    let path = path_of(&link).to_owned();

    // First use: a session cookie, with its flags, and a redirect to the app.
    let first = request(&gw.addr, "GET", &path, &[], None).await;
    assert_eq!(first.status, 303, "{}", first.body);
    assert_eq!(first.header("location"), Some("/ui/"));
    let set = first.header("set-cookie").expect("cookie").to_owned();
    for flag in ["gsv_console=", "HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains("Secure"), "plain http: {set}");
    let cookie = set.split(';').next().unwrap_or_default().to_owned();

    // Second use, and a code never minted: refused, no cookie.
    let again = request(&gw.addr, "GET", &path, &[], None).await;
    assert_eq!(again.status, 401, "{}", again.body);
    assert!(again.header("set-cookie").is_none());
    assert!(again.body.contains("already used"), "{}", again.body);
    let unknown = request(&gw.addr, "GET", "/ui/login?code=AAAA", &[], None).await;
    assert_eq!(unknown.status, 401);
    assert!(unknown.header("set-cookie").is_none());
    let none = request(&gw.addr, "GET", "/ui/login", &[], None).await;
    assert_eq!(none.status, 401);

    // Without a session: the API answers 401 JSON, the page says how to sign in.
    let api = request(&gw.addr, "GET", "/ui/api/nodes", &[], None).await;
    assert_eq!((api.status, api.code().as_str()), (401, "unauthorized"));
    let forged = request(
        &gw.addr,
        "GET",
        "/ui/api/nodes",
        &[("Cookie", "gsv_console=forged")],
        None,
    )
    .await;
    assert_eq!(forged.status, 401);
    let page = request(&gw.addr, "GET", "/ui/", &[], None).await;
    assert_eq!(page.status, 401);
    assert!(page.body.contains("gsv ui"), "{}", page.body);

    // With it: the app, its script, and the API, each with the security headers.
    for p in [
        "/ui/",
        "/ui/app.js",
        "/ui/app.css",
        "/ui/api/me",
        "/ui/api/nodes",
    ] {
        let r = request(&gw.addr, "GET", p, &[("Cookie", &cookie)], None).await;
        assert_eq!(r.status, 200, "{p}: {}", r.body);
        let csp = r.header("content-security-policy").unwrap_or_default();
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(directive), "{p}: {csp}");
        }
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{p}");
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{p}");
        assert_eq!(r.header("cache-control"), Some("no-store"), "{p}");
    }
    let page = request(&gw.addr, "GET", "/ui/", &[("Cookie", &cookie)], None).await;
    assert!(
        !page.body.contains("<script>") && !page.body.contains("style="),
        "no inline script or style: {}",
        page.body
    );
    let me = request(&gw.addr, "GET", "/ui/api/me", &[("Cookie", &cookie)], None).await;
    let me = me.json();
    assert_eq!(me["role"], "admin");
    assert_eq!(me["canManage"], true);
    let csrf = me["csrf"].as_str().expect("csrf").to_owned();

    // A change needs the session's CSRF token, and the gateway's own origin.
    let body = r#"{"name":"made-in-console","allow":["*__Read"]}"#;
    let origin = gw.url();
    let cases: [(&str, Vec<(&str, &str)>); 4] = [
        ("no CSRF token", vec![("Cookie", &cookie)]),
        (
            "a wrong CSRF token",
            vec![("Cookie", &cookie), ("x-csrf-token", "not-the-token")],
        ),
        (
            "another site's Origin",
            vec![
                ("Cookie", &cookie),
                ("x-csrf-token", &csrf),
                ("Origin", "http://evil.example"),
            ],
        ),
        (
            "the CSRF token without the cookie",
            vec![("x-csrf-token", &csrf)],
        ),
    ];
    for (what, headers) in cases {
        let r = request(&gw.addr, "POST", "/ui/api/tokens", &headers, Some(body)).await;
        let expected = if what.contains("without the cookie") {
            (401, "unauthorized")
        } else {
            (403, "forbidden")
        };
        assert_eq!(
            (r.status, r.code().as_str()),
            expected,
            "{what}: {}",
            r.body
        );
    }
    let (code, out, _) = gw.cli(&["token", "list", "--json"]);
    assert_eq!(code, 0);
    assert!(!out.contains("made-in-console"), "nothing was created");
    let made = request(
        &gw.addr,
        "POST",
        "/ui/api/tokens",
        &[
            ("Cookie", &cookie),
            ("x-csrf-token", &csrf),
            ("Origin", &origin),
        ],
        Some(body),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.body);
    let made = made.json();
    let token = made["token"].as_str().expect("the token, shown once");
    let id = made["id"].as_str().expect("its id").to_owned();
    let (code, _, err) = gw.cli(&["nodes", "--gateway", &gw.url(), "--token", token]);
    assert_eq!(code, 0, "the new token works: {err}");
    let (_, out, _) = gw.cli(&["audit", "tail", "--lines", "50"]);
    assert!(out.contains("token_created"), "{out}");

    // Revoked from the console: its connections are refused like after `gsv token revoke`.
    let revoked = request(
        &gw.addr,
        "POST",
        &format!("/ui/api/tokens/{id}/revoke"),
        &[("Cookie", &cookie), ("x-csrf-token", &csrf)],
        None,
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let (code, _, _) = gw.cli(&["nodes", "--gateway", &gw.url(), "--token", token]);
    assert_eq!(code, 3, "a revoked token is refused");

    // The Bearer endpoint: the admin token mints, an agent token may not, none is 401.
    let agent = gw.agent_token();
    let r = request(
        &gw.addr,
        "POST",
        "/v1/ui/login-codes",
        &[("Authorization", &format!("Bearer {agent}"))],
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (403, "forbidden"),
        "{}",
        r.body
    );
    let r = request(&gw.addr, "POST", "/v1/ui/login-codes", &[], None).await;
    assert_eq!(r.status, 401);
    let r = request(
        &gw.addr,
        "POST",
        "/v1/ui/login-codes",
        &[("Authorization", &format!("Bearer {}", gw.admin_token()))],
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let link = r.json();
    assert!(link["url"]
        .as_str()
        .is_some_and(|u| u.starts_with(&format!("{}/ui/login?code=", gw.url()))));
    assert!(link["expiresAt"].as_u64().is_some());

    // Signing out ends the session.
    let out = request(
        &gw.addr,
        "POST",
        "/ui/logout",
        &[("Cookie", &cookie), ("x-csrf-token", &csrf)],
        None,
    )
    .await;
    assert_eq!(out.status, 204);
    let after = request(&gw.addr, "GET", "/ui/api/me", &[("Cookie", &cookie)], None).await;
    assert_eq!(after.status, 401);
}

/// Opens `GET /ui/api/events` with `cookie`; the stream.
async fn events(gw: &Gateway, cookie: &str) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(&gw.addr)
        .await
        .expect("connect");
    s.write_all(
        format!(
            "GET /ui/api/events HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n",
            gw.addr
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    s
}

/// Reads the event stream until a `changed` notice naming `topic` (≤ 10 s); what was
/// read.
async fn notice(s: &mut tokio::net::TcpStream, topic: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let wanted = format!("event: changed\ndata: \"{topic}\"");
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let n = s.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return false;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains(&wanted) {
                return true;
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert_eq!(got, Ok(true), "no {topic:?} notice: {text}");
    text
}

#[tokio::test]
async fn an_expired_login_code_is_refused() {
    // Codes last 5 minutes; this gateway's last 300 ms (a hidden flag).
    let gw = Gateway::start_with(&["--console-code-ttl-ms", "300"]).await;
    let link = login_link(&gw);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = request(&gw.addr, "GET", path_of(&link), &[], None).await;
    assert_eq!(r.status, 410, "{}", r.body);
    assert!(r.header("set-cookie").is_none());
    assert!(r.body.contains("expired"), "{}", r.body);
    // Expired is spent: the same code again is unknown.
    let again = request(&gw.addr, "GET", path_of(&link), &[], None).await;
    assert_eq!(again.status, 401);
}

#[tokio::test]
async fn agent_and_node_text_comes_back_as_json_strings_and_decisions_reach_the_call() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("console-ws");
    let _lab = gw.node("lab", ws.path()).await;
    xss_node(&gw, "xss").await;
    let (cookie, csrf) = sign_in(&gw).await;
    let cookie_h = ("Cookie", cookie.as_str());

    // The node's tool description, verbatim, as a JSON string; with its input schema.
    let r = request(&gw.addr, "GET", "/ui/api/nodes/xss", &[cookie_h], None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let detail = r.json();
    let tool = &detail["tools"][0];
    assert_eq!(tool["description"], format!("hostile tool {XSS}"));
    assert_eq!(tool["inputSchema"]["properties"]["text"]["type"], "string");
    // The list, filtered.
    let r = request(&gw.addr, "GET", "/ui/api/nodes?q=xs", &[cookie_h], None).await;
    let page = r.json();
    assert_eq!(page["total"], 1, "{page}");
    assert_eq!(page["nodes"][0]["id"], "xss");

    // An agent's call with hostile text waits for approval; the console lists it with
    // the text as it is, and its decision reaches the call.
    // A live-update stream: the page hears of the request as it opens.
    let mut stream = events(&gw, &cookie).await;
    let first = notice(&mut stream, "sessions").await;
    assert!(
        first
            .to_lowercase()
            .contains("content-type: text/event-stream"),
        "{first}"
    );
    let token = gw.token(&["agent", "careful", "--allow", "*", "--confirm", "lab__Echo"]);
    let agent = gw.agent_with(&token).await;
    let job = agent
        .call_async("lab__Echo", json!({ "text": XSS }), None)
        .await
        .expect("started");
    let pending = eventually("the approval request", Duration::from_secs(20), || {
        let addr = gw.addr.clone();
        let cookie = cookie.clone();
        async move {
            let r = request(
                &addr,
                "GET",
                "/ui/api/approvals",
                &[("Cookie", &cookie)],
                None,
            )
            .await;
            let v = r.json();
            let first = v["approvals"].get(0)?.clone();
            Some(first)
        }
    })
    .await;
    assert!(
        pending["summary"].as_str().is_some_and(|s| s.contains(XSS)),
        "{pending}"
    );
    // Every argument, as the canonical JSON the hash is taken of, still as text.
    assert_eq!(
        pending["args"],
        json!({ "text": XSS }).to_string(),
        "{pending}"
    );
    notice(&mut stream, "approvals").await;
    assert_eq!(pending["agent"], "careful");
    let id = pending["id"].as_str().expect("id").to_owned();
    let path = format!("/ui/api/approvals/{id}");
    let no_csrf = request(
        &gw.addr,
        "POST",
        &path,
        &[cookie_h],
        Some(r#"{"decision":"approve"}"#),
    )
    .await;
    assert_eq!(no_csrf.status, 403);
    let ok = request(
        &gw.addr,
        "POST",
        &path,
        &[cookie_h, ("x-csrf-token", &csrf)],
        Some(r#"{"decision":"approve"}"#),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["decidedBy"], "console:admin");
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

    // Jobs, audit (filtered, verified) and sessions read through the same functions.
    let jobs = request(&gw.addr, "GET", "/ui/api/jobs", &[cookie_h], None).await;
    assert!(jobs.body.contains(&job), "{}", jobs.body);
    let audit = request(
        &gw.addr,
        "GET",
        "/ui/api/audit?q=APPROVED&verify=true",
        &[cookie_h],
        None,
    )
    .await;
    let audit = audit.json();
    assert_eq!(audit["verify"]["ok"], true, "{audit}");
    let rows = audit["rows"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{audit}");
    assert!(rows
        .iter()
        .all(|r| r.to_string().to_lowercase().contains("approved")));
    let sessions = request(&gw.addr, "GET", "/ui/api/sessions", &[cookie_h], None).await;
    assert_eq!(sessions.status, 200, "{}", sessions.body);
    assert!(sessions.json()["sessions"].is_array());
}

#[tokio::test]
async fn operator_sessions_have_their_tokens_role() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("console-ws");
    let _lab = gw.node("lab", ws.path()).await;
    let viewer = gw.token(&["operator", "vera", "--role", "viewer"]);
    let approver = gw.token(&["operator", "alice", "--role", "approver"]);
    let (v_cookie, v_csrf, v_me) = sign_in_with(&gw, &viewer).await;
    assert_eq!(v_me["role"], "viewer", "{v_me}");
    let (a_cookie, a_csrf, a_me) = sign_in_with(&gw, &approver).await;
    assert_eq!(a_me["role"], "approver", "{a_me}");

    let token = gw.token(&["agent", "careful", "--allow", "*", "--confirm", "lab__Echo"]);
    let agent = gw.agent_with(&token).await;
    let job = agent
        .call_async("lab__Echo", json!({ "text": "waits" }), None)
        .await
        .expect("started");
    let id = eventually("the approval request", Duration::from_secs(20), || {
        let addr = gw.addr.clone();
        let cookie = v_cookie.clone();
        async move {
            let r = request(
                &addr,
                "GET",
                "/ui/api/approvals",
                &[("Cookie", &cookie)],
                None,
            )
            .await;
            r.json()["approvals"].get(0)?["id"]
                .as_str()
                .map(str::to_owned)
        }
    })
    .await;
    let path = format!("/ui/api/approvals/{id}");
    let approve = Some(r#"{"decision":"approve"}"#);

    // A viewer reads every page but decides nothing, kills nothing, makes no token.
    for page in ["nodes", "sessions", "audit", "tokens", "jobs"] {
        let r = request(
            &gw.addr,
            "GET",
            &format!("/ui/api/{page}"),
            &[("Cookie", &v_cookie)],
            None,
        )
        .await;
        assert_eq!(r.status, 200, "{page}: {}", r.body);
    }
    let viewer_h = [
        ("Cookie", v_cookie.as_str()),
        ("x-csrf-token", v_csrf.as_str()),
    ];
    let r = request(&gw.addr, "POST", &path, &viewer_h, approve).await;
    assert_eq!(r.status, 403, "a viewer's approve: {}", r.body);
    assert_eq!(r.code(), "forbidden");
    let r = request(
        &gw.addr,
        "POST",
        "/ui/api/tokens",
        &viewer_h,
        Some(r#"{"name":"sneaky","allow":["*"]}"#),
    )
    .await;
    assert_eq!(r.status, 403, "a viewer's new token: {}", r.body);

    // An approver decides, recorded under its name; it still manages nothing.
    let approver_h = [
        ("Cookie", a_cookie.as_str()),
        ("x-csrf-token", a_csrf.as_str()),
    ];
    let r = request(
        &gw.addr,
        "POST",
        "/ui/api/sessions/lab/nope/kill",
        &approver_h,
        None,
    )
    .await;
    assert_eq!(r.status, 403, "an approver's kill: {}", r.body);
    let r = request(&gw.addr, "POST", &path, &approver_h, approve).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["decidedBy"], "console:alice");
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

    // The viewer's token revoked: its console session ends with it.
    let (code, out, err) = gw.cli(&["token", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: Vec<Value> = serde_json::from_str(&out).expect("json");
    let vera = list
        .iter()
        .find(|t| t["subject"] == "vera")
        .and_then(|t| t["id"].as_str())
        .expect("the viewer's token id")
        .to_owned();
    let (code, _, err) = gw.cli(&["token", "revoke", &vera]);
    assert_eq!(code, 0, "{err}");
    let r = request(
        &gw.addr,
        "GET",
        "/ui/api/nodes",
        &[("Cookie", &v_cookie)],
        None,
    )
    .await;
    assert_eq!(r.status, 401, "a revoked operator's session: {}", r.body);
}

/// The Python interpreter with `selenium`, and Chromium with its driver; `None`
/// (after saying why) when one is missing outside CI.
fn browser_tools() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let has_selenium = Command::new(&venv)
        .args(["-c", "import selenium"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let chromium = Path::new("/usr/bin/chromium").exists();
    let driver = Path::new("/usr/bin/chromedriver").exists();
    if has_selenium && chromium && driver {
        return Some(venv);
    }
    let missing = format!(
        "{} with the `selenium` package: {has_selenium}, /usr/bin/chromium: {chromium}, /usr/bin/chromedriver: {driver}",
        venv.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("the console's browser test needs all of these in CI (.ci/run installs them): {missing}");
    }
    eprintln!("skipping the console's browser test: {missing} (apt-get install chromium chromium-driver; .venv/bin/pip install selenium)");
    None
}

/// A process and its process group, killed together on drop (the browser script
/// with chromedriver and Chromium under it).
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test made; no memory is involved.
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// Runs `gsv call` as an agent would, in the background: (process, stdout file,
/// stderr file).
fn spawn_call(
    gw: &Gateway,
    token: &str,
    name: &str,
    args: &Value,
    dir: &Path,
    tag: &str,
) -> (common::Proc, PathBuf, PathBuf) {
    let out = dir.join(format!("{tag}.out"));
    let err = dir.join(format!("{tag}.err"));
    let mut cmd = Command::new(gsv_bin());
    cmd.args(["call", "--gateway", &gw.url(), "--token", token, name])
        .arg(args.to_string())
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"));
    let proc = common::Proc(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn gsv call"),
    );
    (proc, out, err)
}

/// Waits (≤ 20 s) for a `gsv call` to end; its exit code.
async fn exit_of(proc: &mut common::Proc) -> i32 {
    eventually("gsv call to end", Duration::from_secs(20), || {
        let status = proc.0.try_wait().ok().flatten();
        async move { status.map(|s| s.code().unwrap_or(-1)) }
    })
    .await
}

#[tokio::test]
async fn the_console_page_in_a_browser() {
    let Some(python) = browser_tools() else {
        return;
    };
    let gw = Gateway::start().await;
    let ws = TempDir::new("console-browser-ws");
    let _lab = gw.node("lab", ws.path()).await;
    xss_node(&gw, "xss").await;
    let work = TempDir::new("console-browser");
    let shots = work.path().join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");

    // A job to list, a background session to kill, a token to revoke.
    let all = gw.agent_token();
    let agent = gw.agent_with(&all).await;
    agent
        .call_async(
            "lab__Echo",
            json!({"text": "a job for the jobs page"}),
            None,
        )
        .await
        .expect("a job");
    let started = agent
        .call(
            "lab__Bash",
            json!({"command": "sleep 120 # console-kill-me", "background": true}),
            None,
        )
        .await
        .expect("a background session");
    assert!(!started.is_error, "{started:?}");
    let doomed = gw.token(&["agent", "doomed", "--allow", "*__Read"]);
    let (code, _, err) = gw.cli(&["nodes", "--gateway", &gw.url(), "--token", &doomed]);
    assert_eq!(code, 0, "{err}");
    let (_, list, _) = gw.cli(&["token", "list", "--json"]);
    let doomed_id = serde_json::from_str::<Value>(&list)
        .expect("token list")
        .as_array()
        .and_then(|a| a.iter().find(|t| t["subject"] == "doomed").cloned())
        .and_then(|t| t["id"].as_str().map(str::to_owned))
        .expect("the doomed token's id");

    // Two calls that wait for an operator: one to approve, one to deny, in the page.
    let careful = gw.token(&["agent", "careful", "--allow", "*", "--confirm", "*__Bash"]);
    let approve_cmd = format!("echo console-approve-ok # {XSS}");
    let (mut approve, approve_out, _) = spawn_call(
        &gw,
        &careful,
        "lab__Bash",
        &json!({ "command": approve_cmd }),
        work.path(),
        "approve",
    );
    let (mut deny, _, deny_err) = spawn_call(
        &gw,
        &careful,
        "lab__Bash",
        &json!({"command": "echo console-deny-me"}),
        work.path(),
        "deny",
    );

    let config = json!({
        "login": login_link(&gw),
        "base": gw.url(),
        "screenshots": shots,
        "xss": XSS,
        "xssNode": "xss",
        "node": "lab",
        "approveMarker": "console-approve-ok",
        "denyMarker": "console-deny-me",
        "killMarker": "console-kill-me",
        "revokeId": doomed_id,
    });
    let config_path = work.path().join("config.json");
    std::fs::write(&config_path, config.to_string()).expect("config");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/browser.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script)
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    // Its own process group, so chromedriver and Chromium go with it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut run = Group(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("run the browser script"),
    );
    let code = eventually("the browser script", Duration::from_secs(60), || {
        let status = run.0.try_wait().ok().flatten();
        async move { status.map(|s| s.code().unwrap_or(-1)) }
    })
    .await;
    assert_eq!(
        code, 0,
        "tests/console/browser.py failed (its output is above)"
    );

    // What the page did reached the agents.
    assert_eq!(exit_of(&mut approve).await, 0, "the approved call ran");
    let out = std::fs::read_to_string(&approve_out).unwrap_or_default();
    assert!(out.contains("console-approve-ok"), "{out}");
    assert_eq!(exit_of(&mut deny).await, 5, "the denied call exits 5");
    let err = std::fs::read_to_string(&deny_err).unwrap_or_default();
    assert!(err.contains("denied"), "{err}");
    let (code, _, _) = gw.cli(&["nodes", "--gateway", &gw.url(), "--token", &doomed]);
    assert_eq!(code, 3, "the token revoked in the page is refused");
    let sessions = agent
        .call("lab__Process", json!({"action": "list"}), None)
        .await
        .expect("list");
    let listed = serde_json::to_string(&sessions.structured_content).unwrap_or_default();
    assert!(
        !listed.contains("\"status\":\"running\""),
        "the session killed in the page is not running: {listed}"
    );

    // The screenshots: kept in docs/console/ when asked.
    if std::env::var("GSV_UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console");
        std::fs::create_dir_all(&docs).expect("docs/console");
        for entry in std::fs::read_dir(&shots).expect("screenshots") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), docs.join(entry.file_name())).expect("copy");
        }
        eprintln!("screenshots written to {}", docs.display());
    }
}
