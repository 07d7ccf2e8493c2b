//! End to end: one agent cannot hide a file from another's Glob and Grep with ignore
//! rules (issue 15, item 5). A real gateway and node on loopback, two tokens: a
//! Write-only token plants a file with a marker and a `.ignore` (and a `.gitignore`)
//! that would hide it; a Glob/Grep token is told how many files the rules hid
//! (`ignoredSkipped`, and a line of text), and finds them with `noIgnore: true`. A
//! `noIgnore` that is not a boolean is refused with a message naming it.

mod common;

use common::{sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, ToolResult};
use serde_json::{json, Value};

const MARKER: &str = "PLANTED-7c1e";

async fn call(agent: &AgentClient, name: &str, args: Value) -> ToolResult {
    let r = agent
        .call(name, args.clone(), Some(30_000))
        .await
        .expect("call answered");
    assert!(!r.is_error, "{name} {args}: {}", r.joined_text());
    r
}

/// The paths a Glob listed or a Grep matched in, as strings.
fn paths(r: &ToolResult) -> Vec<String> {
    sc(r)["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| match m {
            Value::String(p) => p.clone(),
            other => other["path"].as_str().unwrap_or("").to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn a_peer_cannot_hide_a_file_from_glob_and_grep_with_ignore_rules() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ignore-ws");
    let _node = gw.node("lab", ws.path()).await;
    let writer = gw
        .agent_with(&gw.token(&["agent", "planter", "--allow", "lab__Write"]))
        .await;
    let reader = gw
        .agent_with(&gw.token(&[
            "agent",
            "auditor",
            "--allow",
            "lab__Glob",
            "--allow",
            "lab__Grep",
        ]))
        .await;

    // The Write-only token plants two files and the rules that would hide them.
    for (path, content) in [
        ("visible.txt", "nothing to see\n".to_owned()),
        ("secret/planted.txt", format!("{MARKER}\n")),
        ("secret/.ignore", "planted.txt\n".to_owned()),
        ("other/planted2.txt", format!("{MARKER} again\n")),
        ("other/.gitignore", "*\n".to_owned()),
    ] {
        call(
            &writer,
            "lab__Write",
            json!({"path": path, "content": content}),
        )
        .await;
    }
    let planted = ws.path().join("secret/planted.txt");
    let planted2 = ws.path().join("other/planted2.txt");
    assert!(planted.is_file() && planted2.is_file());
    let planted = planted.display().to_string();
    let planted2 = planted2.display().to_string();

    // Glob: the planted files are not listed, but the count and the text say so.
    let r = call(&reader, "lab__Glob", json!({"pattern": "**/*.txt"})).await;
    assert_eq!(
        paths(&r),
        [ws.path().join("visible.txt").display().to_string()],
        "{}",
        r.joined_text()
    );
    assert_eq!(sc(&r)["ignoredSkipped"], json!(2), "{}", r.joined_text());
    assert!(
        r.joined_text().contains(
            "2 files hidden by .gitignore/.ignore rules were not listed; pass noIgnore: true"
        ),
        "{}",
        r.joined_text()
    );
    // Grep: no match, and the same account.
    let r = call(&reader, "lab__Grep", json!({"pattern": MARKER})).await;
    assert_eq!(sc(&r)["matches"], json!([]), "{}", r.joined_text());
    assert_eq!(sc(&r)["ignoredSkipped"], json!(2), "{}", r.joined_text());
    assert!(
        r.joined_text().contains(
            "2 files hidden by .gitignore/.ignore rules were not searched; pass noIgnore: true"
        ),
        "{}",
        r.joined_text()
    );

    // noIgnore: true finds them both.
    let r = call(
        &reader,
        "lab__Glob",
        json!({"pattern": "**/*.txt", "noIgnore": true}),
    )
    .await;
    let listed = paths(&r);
    assert!(
        listed.contains(&planted) && listed.contains(&planted2),
        "{}",
        r.joined_text()
    );
    assert_eq!(sc(&r)["count"], json!(3));
    assert_eq!(sc(&r)["ignoredSkipped"], json!(0));
    let r = call(
        &reader,
        "lab__Grep",
        json!({"pattern": MARKER, "noIgnore": true}),
    )
    .await;
    let mut found = paths(&r);
    found.sort();
    assert_eq!(found, [planted2, planted], "{}", r.joined_text());
    assert_eq!(sc(&r)["ignoredSkipped"], json!(0));
    assert!(r.joined_text().contains(MARKER), "{}", r.joined_text());

    // A noIgnore that is not a boolean is refused, naming the argument; nothing runs.
    for tool in ["lab__Glob", "lab__Grep"] {
        let e = reader
            .call(
                tool,
                json!({"pattern": MARKER, "noIgnore": "yes"}),
                Some(30_000),
            )
            .await
            .expect_err("a string noIgnore is refused");
        let remote = e.remote().expect("a gateway error");
        assert_eq!(remote.code, ErrorCode::InvalidArgs, "{tool}: {remote:?}");
        assert!(
            remote.message.contains("/noIgnore") && remote.message.contains("boolean"),
            "{tool}: {}",
            remote.message
        );
    }
    // The Write-only token cannot look for itself.
    let e = writer
        .call("lab__Glob", json!({"pattern": "**/*"}), Some(30_000))
        .await
        .expect_err("Glob is not allowed to the writer");
    assert!(e.remote().is_some(), "{e:?}");
}
