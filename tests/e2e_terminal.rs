//! End to end: text that agents and nodes control reaches the operator's terminal with
//! every control and bidi character made visible, and an approval request shows every
//! argument that changes what runs (issue 14, item 5). Real gateway, real node and a
//! fake node on loopback; the CLI is the real `gsv` binary.

mod common;

use common::fake::Raw;
use common::{eventually, Gateway, TempDir};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Characters that must never reach a terminal raw from agent or node text.
fn assert_no_hidden(what: &str, out: &str) {
    for (i, c) in out.chars().enumerate() {
        let hidden = (c.is_control() && c != '\n')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200B}'..='\u{200F}');
        assert!(!hidden, "{what}: raw {c:?} at char {i} in {out:?}");
    }
}

#[tokio::test]
async fn approvals_list_escapes_the_command_and_shows_every_option() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("term-ws");
    let _node = gw.node("lab", ws.path()).await;
    let token = gw.token(&[
        "agent",
        "sly",
        "--allow",
        "lab__*",
        "--confirm",
        "lab__Bash",
    ]);
    let agent = Arc::new(gw.agent_with(&token).await);
    // The terminal would show only "echo tidy-up": CR, erase line, cursor up.
    let command = "rm -rf ~/precious\r\x1b[2K\x1b[1Aecho tidy-up \u{202E}pu-ydit";
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call(
            "lab__Bash",
            json!({"command": command, "workdir": "/tmp", "background": true, "pty": true, "timeout": 5000}),
            Some(60_000),
        )
        .await
    });
    let listed = eventually("request listed", Duration::from_secs(15), || async {
        let (code, out, _) = gw.cli(&["approvals", "list"]);
        (code == 0 && out.contains("lab__Bash")).then_some(out)
    })
    .await;
    assert_no_hidden("gsv approvals list", &listed);
    assert!(
        listed.contains("rm -rf ~/precious\\r\\x1b[2K\\x1b[1Aecho tidy-up \\u{202e}"),
        "{listed}"
    );
    for part in [
        "workdir=\"/tmp\"",
        "background=true",
        "pty=true",
        "timeout=5000",
    ] {
        assert!(listed.contains(part), "{part} not shown: {listed}");
    }
    let id = listed
        .lines()
        .find(|l| l.contains("lab__Bash"))
        .and_then(|l| l.split_whitespace().next())
        .expect("an id")
        .to_owned();
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    assert_no_hidden("gsv approvals deny", &err);
    assert!(err.contains("\\x1b[2K"), "{err}");
    let r = call.await.expect("join");
    assert!(r.is_err(), "denied call ran: {r:?}");
}

// Two workers: the fake node answers on one while the test blocks on the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_nodes_errors_and_audit_tail_escape_node_and_agent_text() {
    let gw = Gateway::start().await;
    let mut tool = common::fake::tool("Trick", "diagnostics.echo");
    tool["description"] = json!("looks fine\x1b[2K\rALL CLEAR \u{2066}x\u{2069}");
    let mut connect = |nonce: String| {
        let mut p = common::fake::node_connect(
            "trickster",
            &gw.node_token("trickster"),
            &nonce,
            json!([tool.clone()]),
        );
        p["node"]["runtime"]["hostOs"] = json!("linux\x1b]0;owned\x07");
        p["node"]["runtime"]["loginProfile"] =
            json!({"changed": ["~/.profile\r\x1b[2Kall good"], "since": 1});
        p["client"]["version"] = json!("9\x1b[1A\u{202e}");
        p
    };
    let mut raw = Raw::open(&gw.addr, "/v1/node").await;
    raw.handshake(&mut connect)
        .await
        .expect("fake node connects");
    // The fake node answers every call with a tool error whose text rewrites the line.
    let answer = tokio::spawn(async move {
        loop {
            let Some(common::fake::Incoming::Text(t)) = raw.recv().await else {
                return;
            };
            let v: Value = serde_json::from_str(&t).expect("json");
            if v["method"] == "tool.invoke" {
                let res = json!({"type": "res", "id": v["id"], "ok": true, "result": {
                    "content": [{"type": "text", "text": "fine\r\x1b[2Kdisk wiped"}], "isError": true}});
                raw.send(&res.to_string()).await;
            }
        }
    });
    let sly = gw.token(&["agent", "sly\x1b[2Kroot", "--allow", "*"]);

    let (code, out, _) = gw.cli(&["tools", "--token", &sly]);
    assert_eq!(code, 0);
    assert_no_hidden("gsv tools", &out);
    assert!(
        out.contains("looks fine\\x1b[2K\\rALL CLEAR \\u{2066}x\\u{2069}"),
        "{out}"
    );

    let (code, out, err) = gw.cli(&["nodes", "--token", &sly]);
    assert_eq!(code, 0);
    assert_no_hidden("gsv nodes", &out);
    assert!(out.contains("linux\\x1b]0;owned\\x07"), "{out}");
    // The login-profile warning names what the node sent, escaped.
    assert_no_hidden("gsv nodes warning", &err);
    assert!(
        err.contains(
            "! trickster: login profile changed since enrollment: ~/.profile\\r\\x1b[2Kall good"
        ),
        "{err}"
    );

    // Its version (differing from the gateway's) and `gsv nodes show` likewise.
    assert!(out.contains("9\\x1b[1A\\u{202e} (gateway "), "{out}");
    assert!(
        err.contains("! trickster: runs gsv 9\\x1b[1A\\u{202e}, the gateway runs"),
        "{err}"
    );
    let (code, out, err) = gw.cli(&["nodes", "show", "trickster", "--token", &sly]);
    assert_eq!(code, 0, "{err}");
    assert_no_hidden("gsv nodes show", &out);
    assert_no_hidden("gsv nodes show warnings", &err);
    assert!(
        out.contains("Trick            diagnostics.echo   looks fine\\x1b[2K\\rALL CLEAR \\u{2066}x\\u{2069}"),
        "{out}"
    );
    assert!(out.contains("linux\\x1b]0;owned\\x07"), "{out}");

    let (code, _, err) = gw.cli(&[
        "call",
        "--token",
        &sly,
        "trickster__Trick",
        r#"{"text":"x"}"#,
    ]);
    assert_ne!(code, 0);
    assert_no_hidden("gsv call error", &err);
    assert!(err.contains("fine\\r\\x1b[2Kdisk wiped"), "{err}");

    let tail = eventually("audit rows written", Duration::from_secs(10), || async {
        let (_, out, _) = gw.cli(&["audit", "tail", "--lines", "50"]);
        out.contains("agent:sly").then_some(out)
    })
    .await;
    assert_no_hidden("gsv audit tail", &tail);
    assert!(tail.contains("agent:sly\\x1b[2Kroot"), "{tail}");
    answer.abort();
}
