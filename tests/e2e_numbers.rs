//! End to end: whole-number counts given with a fraction (issue 44).
//!
//! A model writes `"timeout": 1500.5`; JSON has one number type. Through a real
//! gateway and a real node on loopback: a count of milliseconds or lines with a
//! fraction is rounded down for every tool (the router's one rule,
//! `gateway/src/toolset/counts.rs`) and the call runs with the rounded value, while an
//! identifier (`pid`) with a fraction is still refused, never rounded to another
//! process.

mod common;

use common::{Gateway, TempDir};
use gsv_protocol::ErrorCode;
use serde_json::json;

fn text(r: &gsv_protocol::ToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| match c {
            gsv_protocol::tool::ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn counts_with_a_fraction_are_rounded_down_and_identifiers_refused() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("numbers");
    std::fs::write(ws.path().join("f.txt"), "one\ntwo\nthree\n").expect("write");
    let _node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;

    let r = agent
        .call(
            "box__Bash",
            json!({"command": "echo hi", "timeout": 1500.5}),
            None,
        )
        .await
        .expect("Bash with a fractional timeout runs");
    assert!(!r.is_error && text(&r).contains("hi"), "{}", text(&r));

    let r = agent
        .call(
            "box__Read",
            json!({"path": "f.txt", "offset": 1.5, "limit": 1.9}),
            None,
        )
        .await
        .expect("Read with fractional offset and limit");
    let t = text(&r);
    assert!(!r.is_error, "{t}");
    assert!(
        t.contains("two") && !t.contains("one") && !t.contains("three"),
        "{t}"
    );

    // Still bounded by the schema after rounding: 0.5 is 0, under `limit`'s minimum 1.
    let e = agent
        .call("box__Read", json!({"path": "f.txt", "limit": 0.5}), None)
        .await
        .expect_err("limit 0");
    assert_eq!(
        e.remote().map(|s| s.code),
        Some(ErrorCode::InvalidArgs),
        "{e}"
    );

    // An identifier is never rounded: pid 4242.5 is refused as written.
    let e = agent
        .call(
            "box__proc_kill",
            json!({"pid": 4242.5, "dryRun": true}),
            None,
        )
        .await
        .expect_err("a fractional pid");
    assert_eq!(
        e.remote().map(|s| s.code),
        Some(ErrorCode::InvalidArgs),
        "{e}"
    );
    assert!(e.to_string().contains("/pid"), "{e}");
}
