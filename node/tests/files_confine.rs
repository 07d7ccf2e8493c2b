//! `--confine`: every file tool refuses paths outside the workspace — `..`, absolute
//! paths, symlinks to /etc, symlinked directories pointing outside, new files under
//! them — and walks skip symlinks that lead out. Without it the same calls work.

use gsv_node::tools::{edit::Edit, glob::Glob, grep::Grep, read::Read, write::Write};
use gsv_node::{Tool, ToolContext};
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

/// ws/ with a file, `out` → the sibling `outside/` dir, `etc` → /etc, `secret.txt` →
/// outside/secret.txt; and outside/secret.txt itself.
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(ws.join("sub")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(ws.join("sub/in.txt"), "needle inside\n").unwrap();
    fs::write(outside.join("secret.txt"), "needle outside\n").unwrap();
    symlink(&outside, ws.join("out")).unwrap();
    symlink("/etc", ws.join("etc")).unwrap();
    symlink(outside.join("secret.txt"), ws.join("secret.txt")).unwrap();
    Fixture {
        _tmp: tmp,
        ws,
        outside,
    }
}

fn ctx(ws: &Path, confine: bool) -> ToolContext {
    let mut ctx = ToolContext::new(ws, "t");
    ctx.confine = confine;
    ctx
}

async fn call(tool: &dyn Tool, ws: &Path, confine: bool, args: Value) -> ToolResult {
    tool.execute(args, ctx(ws, confine)).await
}

fn refused(r: &ToolResult) {
    assert!(
        r.is_error,
        "expected a refusal, got {:?}",
        r.structured_content
    );
    let text = r.joined_text();
    assert!(text.starts_with("Refused: "), "{text}");
    assert!(text.contains("confined to its workspace"), "{text}");
}

#[tokio::test]
async fn escapes_are_refused_by_every_file_tool() {
    let f = fixture();
    let outside_file = f.outside.join("secret.txt").display().to_string();
    let escapes = [
        "../outside/secret.txt".to_owned(),
        outside_file.clone(),
        "etc/hostname".to_owned(),
        "out/secret.txt".to_owned(),
        "secret.txt".to_owned(),
    ];
    for path in &escapes {
        refused(&call(&Read::new(), &f.ws, true, json!({ "path": path })).await);
        refused(
            &call(
                &Edit::new(),
                &f.ws,
                true,
                json!({"path": path, "oldString": "needle", "newString": "x"}),
            )
            .await,
        );
        refused(
            &call(
                &Write::new(),
                &f.ws,
                true,
                json!({"path": path, "content": "x"}),
            )
            .await,
        );
        refused(
            &call(
                &Grep::new(),
                &f.ws,
                true,
                json!({"pattern": "needle", "path": path}),
            )
            .await,
        );
    }
    // New files: beside an escape, under a symlinked dir, under `..`.
    for path in [
        "../new.txt",
        "out/new.txt",
        "out/deeper/new.txt",
        "etc/new.conf",
    ] {
        refused(
            &call(
                &Write::new(),
                &f.ws,
                true,
                json!({"path": path, "content": "x"}),
            )
            .await,
        );
    }
    assert!(!f.outside.join("new.txt").exists());
    assert!(!f.outside.join("deeper").exists());
    assert_eq!(
        fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "needle outside\n"
    );
    for path in ["..", "out", "/etc", "etc"] {
        refused(
            &call(
                &Glob::new(),
                &f.ws,
                true,
                json!({"pattern": "*", "path": path}),
            )
            .await,
        );
    }
    refused(&call(&Glob::new(), &f.ws, true, json!({"pattern": "/etc/*.conf"})).await);
    refused(&call(&Glob::new(), &f.ws, true, json!({"pattern": "out/*.txt"})).await);
    refused(
        &call(
            &Glob::new(),
            &f.ws,
            true,
            json!({"pattern": "../outside/*.txt"}),
        )
        .await,
    );
}

#[tokio::test]
async fn inside_the_workspace_everything_works() {
    let f = fixture();
    let real = fs::canonicalize(&f.ws).unwrap();
    let r = call(&Read::new(), &f.ws, true, json!({"path": "sub/in.txt"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    let r = call(
        &Write::new(),
        &f.ws,
        true,
        json!({"path": "new/dir/n.txt", "content": "needle new\n"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(
        r.structured_content.unwrap()["path"],
        json!(real.join("new/dir/n.txt").display().to_string())
    );
    let r = call(
        &Edit::new(),
        &f.ws,
        true,
        json!({"path": "sub/../new/dir/n.txt", "oldString": "new", "newString": "newer"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let abs = f.ws.join("sub/in.txt").display().to_string();
    let r = call(&Read::new(), &f.ws, true, json!({ "path": abs })).await;
    assert!(!r.is_error, "{}", r.joined_text());
}

#[tokio::test]
async fn walks_do_not_leave_the_workspace() {
    let f = fixture();
    let r = call(&Grep::new(), &f.ws, true, json!({"pattern": "needle"})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    let s = r.structured_content.unwrap();
    let paths: Vec<&str> = s["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(paths[0].ends_with("sub/in.txt"));
    let r = call(&Glob::new(), &f.ws, true, json!({"pattern": "**/*.txt"})).await;
    let s = r.structured_content.unwrap();
    assert_eq!(s["count"], json!(1), "{s}");

    // Not confined (the default): the same symlinks are followed.
    let r = call(
        &Grep::new(),
        &f.ws,
        false,
        json!({"pattern": "needle outside"}),
    )
    .await;
    assert!(r.structured_content.unwrap()["count"].as_u64().unwrap() >= 1);
    let r = call(&Glob::new(), &f.ws, false, json!({"pattern": "**/*.txt"})).await;
    assert_eq!(r.structured_content.unwrap()["count"], json!(2));
    let r = call(
        &Read::new(),
        &f.ws,
        false,
        json!({"path": "out/secret.txt"}),
    )
    .await;
    assert!(!r.is_error);
}
