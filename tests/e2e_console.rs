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

/// The code of a login link.
fn code_of(link: &str) -> &str {
    link.split_once("code=").map(|(_, c)| c).unwrap_or("")
}

/// `POST /ui/login` with the code of `link`, from the gateway's own origin (what the
/// link's page's "Sign in" button sends).
async fn redeem(gw: &Gateway, link: &str) -> Reply {
    let origin = gw.url();
    let body = format!("code={}", code_of(link));
    request(
        &gw.addr,
        "POST",
        "/ui/login",
        &[("Origin", &origin), ("Sec-Fetch-Site", "same-origin")],
        Some(&body),
    )
    .await
}

/// The page's CSRF token: in the app's HTML (`<meta name="gsv-csrf">`), which only
/// the gateway's own origin can read.
async fn csrf_of(gw: &Gateway, cookie: &str) -> String {
    let page = request(&gw.addr, "GET", "/ui/", &[("Cookie", cookie)], None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let at = page
        .body
        .find("name=\"gsv-csrf\" content=\"")
        .expect("the CSRF token in the page");
    let rest = &page.body[at + "name=\"gsv-csrf\" content=\"".len()..];
    rest.split('"').next().unwrap_or_default().to_owned()
}

/// Logs in with the code of `link`; returns the cookie header value and the CSRF token.
async fn sign_in_link(gw: &Gateway, link: &str) -> (String, String) {
    let r = redeem(gw, link).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let set = r.header("set-cookie").expect("a session cookie").to_owned();
    let cookie = set.split(';').next().unwrap_or_default().to_owned();
    let csrf = csrf_of(gw, &cookie).await;
    (cookie, csrf)
}

/// Logs in with a fresh code; returns the cookie header value and the CSRF token.
async fn sign_in(gw: &Gateway) -> (String, String) {
    let link = login_link(gw);
    sign_in_link(gw, &link).await
}

/// `GET /ui/api/{path}` as the console's page sends it: the cookie and the CSRF token.
async fn read(gw: &Gateway, cookie: &str, csrf: &str, path: &str) -> Reply {
    request(
        &gw.addr,
        "GET",
        &format!("/ui/api/{path}"),
        &[
            ("Cookie", cookie),
            ("x-csrf-token", csrf),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        None,
    )
    .await
}

/// A login link for the holder of `token` (an operator's), from
/// `POST /v1/ui/login-codes`.
async fn login_link_with(gw: &Gateway, token: &str) -> String {
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
    r.json()["url"].as_str().expect("url").to_owned()
}

/// Logs in as the holder of `token` (an operator's) through `POST /v1/ui/login-codes`;
/// returns the cookie header value, the CSRF token and `/ui/api/me`.
async fn sign_in_with(gw: &Gateway, token: &str) -> (String, String, Value) {
    let link = login_link_with(gw, token).await;
    let (cookie, csrf) = sign_in_link(gw, &link).await;
    let me = read(gw, &cookie, &csrf, "me").await;
    assert_eq!(me.status, 200, "{}", me.body);
    (cookie, csrf, me.json())
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

    // The link's page asks (a GET signs no one in); its button posts the code.
    let page = request(&gw.addr, "GET", &path, &[], None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.header("set-cookie").is_none());
    assert!(page.body.contains("id=\"sign-in\""), "{}", page.body);

    // First use: a session cookie, with its flags, and a redirect to the app.
    let first = redeem(&gw, &link).await;
    assert_eq!(first.status, 303, "{}", first.body);
    assert_eq!(first.header("location"), Some("/ui/"));
    let set = first.header("set-cookie").expect("cookie").to_owned();
    for flag in ["gsv_console_", "HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains("Secure"), "plain http: {set}");
    let cookie = set.split(';').next().unwrap_or_default().to_owned();

    // Second use, and a code never minted: refused, no cookie.
    let again = redeem(&gw, &link).await;
    assert_eq!(again.status, 401, "{}", again.body);
    assert!(again.header("set-cookie").is_none());
    assert!(again.body.contains("already used"), "{}", again.body);
    let shown = request(&gw.addr, "GET", &path, &[], None).await;
    assert_eq!(
        shown.status, 401,
        "a used link's page says so: {}",
        shown.body
    );
    assert!(shown.body.contains("already used"), "{}", shown.body);
    let unknown = redeem(&gw, "/ui/login?code=AAAA").await;
    assert_eq!(unknown.status, 401);
    assert!(unknown.header("set-cookie").is_none());
    let none = request(&gw.addr, "GET", "/ui/login", &[], None).await;
    assert_eq!(none.status, 401);

    // Without a session: the API answers 401 JSON, the page says how to sign in.
    let api = request(&gw.addr, "GET", "/ui/api/nodes", &[], None).await;
    assert_eq!((api.status, api.code().as_str()), (401, "unauthorized"));
    let forged = read(&gw, "gsv_console=forged", "x", "nodes").await;
    assert_eq!(forged.status, 401);
    let page = request(&gw.addr, "GET", "/ui/", &[], None).await;
    assert_eq!(page.status, 401);
    assert!(page.body.contains("gsv ui"), "{}", page.body);

    // With it: the app, its script, and the API, each with the security headers.
    let csrf = csrf_of(&gw, &cookie).await;
    for p in [
        "/ui/",
        "/ui/app.js",
        "/ui/app.css",
        "/ui/api/me",
        "/ui/api/nodes",
        "/ui/login?code=AAAA",
    ] {
        let headers = [("Cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str())];
        let r = request(&gw.addr, "GET", p, &headers, None).await;
        let status = if p.starts_with("/ui/login") { 401 } else { 200 };
        assert_eq!(r.status, status, "{p}: {}", r.body);
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
    let me = read(&gw, &cookie, &csrf, "me").await;
    let me = me.json();
    assert_eq!(me["role"], "admin");
    assert_eq!(me["canManage"], true);

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
    let after = read(&gw, &cookie, &csrf, "me").await;
    assert_eq!(after.status, 401);
}

/// Opens `GET /ui/api/events?csrf=CSRF` with `cookie`; the stream.
async fn events(gw: &Gateway, cookie: &str, csrf: &str) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(&gw.addr)
        .await
        .expect("connect");
    s.write_all(
        format!(
            "GET /ui/api/events?csrf={csrf} HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n",
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
    let page = request(&gw.addr, "GET", path_of(&link), &[], None).await;
    assert_eq!(page.status, 410, "the link's page says so: {}", page.body);
    let r = redeem(&gw, &link).await;
    assert_eq!(r.status, 410, "{}", r.body);
    assert!(r.header("set-cookie").is_none());
    assert!(r.body.contains("expired"), "{}", r.body);
    // Expired is spent: the same code again is unknown.
    let again = redeem(&gw, &link).await;
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
    let r = read(&gw, &cookie, &csrf, "nodes/xss").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let detail = r.json();
    let tool = &detail["tools"][0];
    assert_eq!(tool["description"], format!("hostile tool {XSS}"));
    assert_eq!(tool["inputSchema"]["properties"]["text"]["type"], "string");
    // The list, filtered.
    let r = read(&gw, &cookie, &csrf, "nodes?q=xs").await;
    let page = r.json();
    assert_eq!(page["total"], 1, "{page}");
    assert_eq!(page["nodes"][0]["id"], "xss");

    // An agent's call with hostile text waits for approval; the console lists it with
    // the text as it is, and its decision reaches the call.
    // A live-update stream: the page hears of the request as it opens.
    let mut stream = events(&gw, &cookie, &csrf).await;
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
        let (gw, cookie, csrf) = (&gw, cookie.clone(), csrf.clone());
        async move {
            let r = read(gw, &cookie, &csrf, "approvals").await;
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
    let jobs = read(&gw, &cookie, &csrf, "jobs").await;
    assert!(jobs.body.contains(&job), "{}", jobs.body);
    let audit = read(&gw, &cookie, &csrf, "audit?q=APPROVED&verify=true").await;
    let audit = audit.json();
    assert_eq!(audit["verify"]["ok"], true, "{audit}");
    let rows = audit["rows"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{audit}");
    assert!(rows
        .iter()
        .all(|r| r.to_string().to_lowercase().contains("approved")));
    let sessions = read(&gw, &cookie, &csrf, "sessions").await;
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
        let (gw, cookie, csrf) = (&gw, v_cookie.clone(), v_csrf.clone());
        async move {
            let r = read(gw, &cookie, &csrf, "approvals").await;
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
        let r = read(&gw, &v_cookie, &v_csrf, page).await;
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
    let r = read(&gw, &v_cookie, &v_csrf, "nodes").await;
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

/// Runs `tests/console/SCRIPT CONFIG` with `python` in its own process group (so
/// chromedriver and Chromium go with it), at most 90 s; its exit code.
async fn run_script(python: &Path, script: &str, config: &Path) -> i32 {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/console")
        .join(script);
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut run = Group(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("run the browser script"),
    );
    eventually("the browser script", Duration::from_secs(90), || {
        let status = run.0.try_wait().ok().flatten();
        async move { status.map(|s| s.code().unwrap_or(-1)) }
    })
    .await
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
    assert_eq!(
        run_script(&python, "browser.py", &config_path).await,
        0,
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

/// The audit actor of the admin's console sessions' calls.
const CONSOLE_ADMIN: &str = "agent:console:admin";

/// The rows of the gateway's audit log whose actor is `actor`.
fn rows_by(gw: &Gateway, actor: &str) -> Vec<Value> {
    let (code, out, err) = gw.cli(&["audit", "tail", "--lines", "2000", "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["actor"] == actor)
        .collect()
}

/// A background session on `lab` (a `sleep`); its id.
async fn background_session(agent: &gsv_client::AgentClient) -> String {
    let started = agent
        .call(
            "lab__Bash",
            json!({"command": "sleep 120 # console-attack", "background": true}),
            None,
        )
        .await
        .expect("a background session");
    assert!(!started.is_error, "{started:?}");
    let text = serde_json::to_string(&started).unwrap_or_default();
    let at = text.find("\"sessionId\":\"").expect("a session id") + "\"sessionId\":\"".len();
    text[at..].split('"').next().unwrap_or_default().to_owned()
}

/// After refused requests: one good read of every node's sessions (one `Process`
/// call, so one audit row of `actor`) lands, and it is the only row of `actor`: the
/// refused ones, sent before it, made none (rows are written in order).
async fn only_the_good_read_was_audited(gw: &Gateway, actor: &str) {
    let (cookie, csrf) = sign_in(gw).await;
    let r = read(gw, &cookie, &csrf, "sessions").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let rows = eventually("the good read's audit row", Duration::from_secs(20), || {
        let rows = rows_by(gw, actor);
        async move { (!rows.is_empty()).then_some(rows) }
    })
    .await;
    assert_eq!(
        rows.len(),
        1,
        "only the good read made a call as {actor}: {rows:#?}"
    );
}

#[tokio::test]
async fn every_console_request_carries_proof_of_origin_and_one_session_cookie() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("console-origin-ws");
    let _lab = gw.node("lab", ws.path()).await;
    let agent = gw.agent().await;
    let session = background_session(&agent).await;
    let (cookie, csrf) = sign_in(&gw).await;
    let name = cookie.split('=').next().unwrap_or_default().to_owned();
    assert!(
        name.starts_with("gsv_console_") && name.len() >= "gsv_console_".len() + 32,
        "a per-gateway cookie name no other page can guess: {name}"
    );
    let other = "http://127.0.0.1:1";
    let two = format!("{cookie}; gsv_console=planted");
    let twice = format!("gsv_console_x=planted; {cookie}");
    let reads = [
        "me".to_owned(),
        "sessions".to_owned(),
        format!("sessions/lab/{session}/log"),
        "approvals".to_owned(),
        "nodes".to_owned(),
        "audit".to_owned(),
        "tokens".to_owned(),
        "jobs".to_owned(),
        "events".to_owned(),
    ];
    for path in &reads {
        let cases: [Refusal; 7] = [
            ("no CSRF token", vec![("Cookie", &cookie)], "bad_csrf"),
            (
                "a wrong CSRF token",
                vec![("Cookie", &cookie), ("x-csrf-token", "nope")],
                "bad_csrf",
            ),
            (
                "Sec-Fetch-Site same-site (another port)",
                vec![
                    ("Cookie", &cookie),
                    ("x-csrf-token", &csrf),
                    ("Sec-Fetch-Site", "same-site"),
                ],
                "cross_site",
            ),
            (
                "Sec-Fetch-Site cross-site",
                vec![
                    ("Cookie", &cookie),
                    ("x-csrf-token", &csrf),
                    ("Sec-Fetch-Site", "cross-site"),
                ],
                "cross_site",
            ),
            (
                "another port's Origin",
                vec![
                    ("Cookie", &cookie),
                    ("x-csrf-token", &csrf),
                    ("Origin", other),
                ],
                "cross_site",
            ),
            (
                "a second console cookie",
                vec![("Cookie", &two), ("x-csrf-token", &csrf)],
                "two_cookies",
            ),
            (
                "a second console cookie before it",
                vec![("Cookie", &twice), ("x-csrf-token", &csrf)],
                "two_cookies",
            ),
        ];
        for (what, headers, rule) in cases {
            let r = request(&gw.addr, "GET", &format!("/ui/api/{path}"), &headers, None).await;
            assert_eq!(
                (r.status, r.code().as_str()),
                (403, "forbidden"),
                "{path}, {what}: {}",
                r.body
            );
            assert_eq!(
                r.json()["error"]["details"]["rule"],
                rule,
                "{path}, {what}: {}",
                r.body
            );
        }
    }
    // The event stream takes its token in the query (EventSource sends no headers).
    let r = request(
        &gw.addr,
        "GET",
        "/ui/api/events?csrf=nope",
        &[("Cookie", &cookie)],
        None,
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let mut stream = events(&gw, &cookie, &csrf).await;
    notice(&mut stream, "sessions").await;
    drop(stream);
    // The app's page itself, with two console cookies: refused too (not resolved).
    let page = request(&gw.addr, "GET", "/ui/", &[("Cookie", &two)], None).await;
    assert_ne!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("gsv-csrf"), "{}", page.body);

    // A change from another port, even with the token, does nothing.
    let r = request(
        &gw.addr,
        "POST",
        &format!("/ui/api/sessions/lab/{session}/kill"),
        &[
            ("Cookie", &cookie),
            ("x-csrf-token", &csrf),
            ("Sec-Fetch-Site", "same-site"),
        ],
        None,
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);

    // The login link: a GET shows a page and changes nothing; only a POST from the
    // gateway's own origin redeems it.
    let link = login_link(&gw);
    for _ in 0..2 {
        let page = request(&gw.addr, "GET", path_of(&link), &[], None).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.header("set-cookie").is_none(), "{:?}", page.headers);
        assert!(page.body.contains("method=\"post\""), "{}", page.body);
        assert!(!page.body.contains("<script>"), "no inline script");
    }
    let body = format!("code={}", code_of(&link));
    for (what, headers) in [
        ("another port's Origin", vec![("Origin", other)]),
        (
            "Sec-Fetch-Site same-site",
            vec![("Sec-Fetch-Site", "same-site")],
        ),
        ("Origin null", vec![("Origin", "null")]),
    ] {
        let r = request(&gw.addr, "POST", "/ui/login", &headers, Some(&body)).await;
        assert_eq!(r.status, 403, "{what}: {}", r.body);
        assert!(r.header("set-cookie").is_none(), "{what}");
    }
    let (fresh, fresh_csrf) = sign_in_link(&gw, &link).await;
    assert_eq!(
        read(&gw, &fresh, &fresh_csrf, "me").await.json()["role"],
        "admin"
    );

    // None of the refused requests made a call or an audit row.
    only_the_good_read_was_audited(&gw, CONSOLE_ADMIN).await;
}

/// A refused request: what it lacks, its headers, and the rule it breaks.
type Refusal<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);

/// A tiny web server on another loopback port: every request gets `html`.
async fn attacker_site(html: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let html = html.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/")
}

/// The attacker's page: many GETs at the console's API (img, script, fetch no-cors
/// with credentials, EventSource), form posts (a kill, the viewer's login code), and
/// console cookies planted with more specific paths (again once its requests are
/// answered: the gateway's refusals clear them).
fn attacker_html(gw: &str, session: &str, viewer_code: &str) -> String {
    format!(
        r#"<!doctype html><html><body><h1>cat pictures</h1>
<iframe name="sink" style="display:none"></iframe>
<form id="kill" method="post" target="sink" action="{gw}/ui/api/sessions/lab/{session}/kill"><input name="x" value="1"></form>
<form id="login" method="post" target="sink" action="{gw}/ui/login"><input name="code" value="{viewer_code}"></form>
<script>
window.attackFired = 0; window.attackDone = false;
function plant() {{
  document.cookie = "gsv_console=ATTACKER; path=/ui/api";
  document.cookie = "gsv_console=ATTACKER2; path=/ui/api/me";
  document.cookie = "gsv_console_guess=ATTACKER3; path=/ui/api/approvals";
}}
plant();
const gw = "{gw}";
const paths = ["/ui/api/sessions", "/ui/api/sessions/lab/{session}/log", "/ui/api/approvals", "/ui/api/me"];
const pending = [];
for (let i = 0; i < 20; i++) {{
  for (const p of paths) {{
    const u = gw + p + "?n=" + i;
    pending.push(new Promise((done) => {{ const img = new Image(); img.onload = img.onerror = done; img.src = u + "&img"; }}));
    pending.push(new Promise((done) => {{ const s = document.createElement("script"); s.onload = s.onerror = done; s.src = u + "&script"; document.body.appendChild(s); }}));
    pending.push(fetch(u + "&fetch", {{ mode: "no-cors", credentials: "include" }}).catch(() => null));
    window.attackFired += 3;
  }}
}}
try {{ new EventSource(gw + "/ui/api/events", {{ withCredentials: true }}); }} catch (_) {{}}
document.getElementById("kill").submit();
setTimeout(() => document.getElementById("login").submit(), 300);
const bound = new Promise((done) => setTimeout(done, 15000));
// Planted again at the end: the gateway clears them from its refusals' answers.
Promise.race([Promise.all(pending), bound]).then(() => setTimeout(() => {{ plant(); window.attackDone = true; }}, 1000));
</script></body></html>"#
    )
}

#[tokio::test]
async fn a_page_on_another_port_cannot_use_the_admins_console() {
    let Some(python) = browser_tools() else {
        return;
    };
    let gw = Gateway::start().await;
    let ws = TempDir::new("console-attack-ws");
    let _lab = gw.node("lab", ws.path()).await;
    let agent = gw.agent().await;
    let session = background_session(&agent).await;
    let viewer = gw.token(&["operator", "mallory", "--role", "viewer"]);
    let viewer_link = login_link_with(&gw, &viewer).await;
    let viewer_from_page = login_link_with(&gw, &viewer).await;
    let attacker = attacker_site(attacker_html(
        &gw.url(),
        &session,
        code_of(&viewer_from_page),
    ))
    .await;
    let work = TempDir::new("console-attack");
    let shots = work.path().join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let config = json!({
        "part": "another-port",
        "login": login_link(&gw),
        "viewerLogin": viewer_link,
        "attacker": attacker,
        "base": gw.url(),
        "screenshots": shots,
    });
    let config_path = work.path().join("config.json");
    std::fs::write(&config_path, config.to_string()).expect("config");
    assert_eq!(
        run_script(&python, "attack.py", &config_path).await,
        0,
        "tests/console/attack.py another-port failed (its output is above)"
    );
    // The session the attacker's page tried to kill still runs.
    let listed = agent
        .call("lab__Process", json!({"action": "list"}), None)
        .await
        .expect("list");
    let listed = serde_json::to_string(&listed.structured_content).unwrap_or_default();
    assert!(listed.contains("\"status\":\"running\""), "{listed}");
    // The viewer's codes were never redeemed: each still signs in (once).
    sign_in_link(&gw, &viewer_link).await;
    sign_in_link(&gw, &viewer_from_page).await;
    // No call and no audit row as the admin's console came of the attack.
    only_the_good_read_was_audited(&gw, CONSOLE_ADMIN).await;
}

#[tokio::test]
async fn hidden_characters_show_escaped_in_the_browser() {
    let Some(python) = browser_tools() else {
        return;
    };
    let gw = Gateway::start().await;
    let ws = TempDir::new("console-hidden-ws");
    let _lab = gw.node("lab", ws.path()).await;
    let work = TempDir::new("console-hidden");
    let careful = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "lab__Bash",
        "--confirm",
        "lab__Write",
        "--confirm",
        "lab__Echo",
    ]);
    // A command that reads as a harmless echo when drawn, and runs `touch` if approved.
    let command = "echo \"\u{202E} \" ; touch pwned_bidi ; echo \"\u{2066}#\u{2069}\"";
    let (mut bash, _, _) = spawn_call(
        &gw,
        &careful,
        "lab__Bash",
        &json!({ "command": command }),
        work.path(),
        "bash",
    );
    // A put whose agent-given source name reverses what follows it.
    let agent = std::sync::Arc::new(gw.agent_with(&careful).await);
    let src = work.path().join("report\u{202E}txt.exe");
    std::fs::write(&src, b"not wanted").expect("write");
    let a = agent.clone();
    let put = tokio::spawn(async move { a.put_file("lab", &src, "dest.bin", |_, _| {}).await });
    // A 200 000-character argument.
    let big_chars = 200_000;
    let big = format!(
        "BIGARG{}BIGEND",
        "x".repeat(big_chars - "BIGARG".len() - "BIGEND".len())
    );
    agent
        .call_async("lab__Echo", json!({ "text": big }), None)
        .await
        .expect("the long call waits");
    let shots = work.path().join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let config = json!({
        "part": "hidden",
        "login": login_link(&gw),
        "base": gw.url(),
        "screenshots": shots,
        "bashMarker": "pwned_bidi",
        "putMarker": "report",
        "bigMarker": "BIGARG",
        "bigEnd": "BIGEND",
        "bigChars": big_chars,
        "argMax": 4000,
    });
    let config_path = work.path().join("config.json");
    std::fs::write(&config_path, config.to_string()).expect("config");
    assert_eq!(
        run_script(&python, "attack.py", &config_path).await,
        0,
        "tests/console/attack.py hidden failed (its output is above)"
    );
    assert_eq!(exit_of(&mut bash).await, 5, "the denied Bash call exits 5");
    assert!(!ws.path().join("pwned_bidi").exists(), "touch never ran");
    put.abort();
}
