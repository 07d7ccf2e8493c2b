//! End to end: the file tools (Read, Write, Edit, Glob, Grep) and `--confine`,
//! through a real gateway and node on loopback.

mod common;

use common::{sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ContentBlock, ErrorCode, ToolResult};
use serde_json::{json, Value};

async fn call(agent: &AgentClient, tool: &str, args: Value) -> ToolResult {
    agent
        .call(&format!("box__{tool}"), args, None)
        .await
        .expect("call")
}

#[tokio::test]
async fn write_edit_read_glob_grep() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;

    // Write creates parents and reports bytes; the path is absolute.
    let r = call(
        &agent,
        "Write",
        json!({"path": "src/deep/lib.rs", "content": "fn a() {}\nfn b() {}\n"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(sc(&r)["bytes"], 20);
    let abs = ws.path().join("src/deep/lib.rs");
    assert_eq!(
        std::fs::read_to_string(&abs).unwrap(),
        "fn a() {}\nfn b() {}\n"
    );
    assert_eq!(sc(&r)["path"], abs.to_str().unwrap());

    // Edit: exactly one match unless replaceAll; the error states the count.
    let r = call(
        &agent,
        "Edit",
        json!({"path": "src/deep/lib.rs", "oldString": "fn", "newString": "pub fn"}),
    )
    .await;
    assert!(r.is_error);
    assert!(r.joined_text().contains('2'), "{}", r.joined_text());
    let r = call(&agent, "Edit", json!({"path": "src/deep/lib.rs", "oldString": "fn", "newString": "pub fn", "replaceAll": true})).await;
    assert_eq!(sc(&r)["replacements"], 2);
    let r = call(
        &agent,
        "Edit",
        json!({"path": "src/deep/lib.rs", "oldString": "nothing like this", "newString": "x"}),
    )
    .await;
    assert!(r.is_error);

    // Read with offset/limit.
    let r = call(
        &agent,
        "Read",
        json!({"path": "src/deep/lib.rs", "offset": 1, "limit": 1}),
    )
    .await;
    assert_eq!(r.joined_text(), "2\tpub fn b() {}");

    // Glob with braces, newest first.
    call(
        &agent,
        "Write",
        json!({"path": "web/app.ts", "content": "const fn_name = 1;\n"}),
    )
    .await;
    let r = call(&agent, "Glob", json!({"pattern": "**/*.{rs,ts}"})).await;
    let matches: Vec<String> = sc(&r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(matches.len(), 2, "{matches:?}");
    assert!(
        matches[0].ends_with("web/app.ts"),
        "newest first: {matches:?}"
    );
    assert_eq!(sc(&r)["count"], 2);

    // Grep with an include glob with braces.
    let r = call(
        &agent,
        "Grep",
        json!({"pattern": "fn \\w+", "include": "*.{rs,ts}"}),
    )
    .await;
    let m = sc(&r)["matches"].as_array().unwrap();
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m[0]["line"], 1);
    let r = call(&agent, "Grep", json!({"pattern": "fn", "include": "*.ts"})).await;
    assert_eq!(sc(&r)["count"], 1);
    // Over 100 matches: truncated.
    let many: String = (0..150).map(|i| format!("needle {i}\n")).collect();
    call(
        &agent,
        "Write",
        json!({"path": "many.txt", "content": many}),
    )
    .await;
    let r = call(&agent, "Grep", json!({"pattern": "needle"})).await;
    assert_eq!(sc(&r)["truncated"], true);
    assert_eq!(sc(&r)["matches"].as_array().unwrap().len(), 100);
    // Bad regex: a clear tool error.
    let r = call(&agent, "Grep", json!({"pattern": "(unclosed"})).await;
    assert!(r.is_error);
}

#[tokio::test]
async fn read_images_and_refuse_other_binaries() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    // A 1x1 PNG.
    let png: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
        0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ];
    std::fs::write(ws.path().join("dot.png"), png).unwrap();
    std::fs::write(
        ws.path().join("blob.gz"),
        [0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 0, 0],
    )
    .unwrap();
    let _node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;
    let r = call(&agent, "Read", json!({"path": "dot.png"})).await;
    assert!(!r.is_error);
    assert!(r
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::Image { mime_type, .. } if mime_type == "image/png")));
    let r = call(&agent, "Read", json!({"path": "blob.gz"})).await;
    assert!(r.is_error);
    assert!(
        r.joined_text().contains("application/gzip"),
        "{}",
        r.joined_text()
    );
}

#[tokio::test]
async fn confined_node_refuses_paths_outside_its_workspace() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let outside = TempDir::new("outside");
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    std::fs::write(ws.path().join("ok.txt"), "fine").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), ws.path().join("escape")).unwrap();
    let _node = gw.spawn_node("box", &gw.node_token("box"), ws.path(), &["--confine"]);
    gw.wait_online("box").await;
    let agent = gw.agent().await;
    assert!(
        !call(&agent, "Read", json!({"path": "ok.txt"}))
            .await
            .is_error
    );
    let secret = outside.path().join("secret.txt");
    for args in [
        json!({"path": secret.to_str().unwrap()}),
        json!({"path": "../".to_owned() + outside.path().file_name().unwrap().to_str().unwrap() + "/secret.txt"}),
        json!({"path": "escape/secret.txt"}),
    ] {
        let r = call(&agent, "Read", args.clone()).await;
        assert!(r.is_error, "{args} must be refused");
        assert!(!r.joined_text().contains("top secret"));
    }
    let r = call(
        &agent,
        "Write",
        json!({"path": "escape/new.txt", "content": "x"}),
    )
    .await;
    assert!(r.is_error);
    assert!(!outside.path().join("new.txt").exists());
    let r = call(&agent, "Grep", json!({"pattern": "top secret"})).await;
    assert!(r
        .structured_content
        .map(|s| s["matches"]
            .as_array()
            .map(|m| m.is_empty())
            .unwrap_or(true))
        .unwrap_or(true));
    // The gateway still validates arguments before any of this.
    let e = agent
        .call("box__Write", json!({"path": "x"}), None)
        .await
        .unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::InvalidArgs);
}
