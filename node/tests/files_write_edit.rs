//! Write and Edit against a temporary workspace: result fields, every error of the
//! reference, atomicity (no temporary files left, the original intact on failure),
//! parent creation and permission keeping.

use gsv_node::tools::edit::Edit;
use gsv_node::tools::write::Write;
use gsv_node::{Tool, ToolContext};
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

async fn write(ws: &Path, args: Value) -> ToolResult {
    Write::new().execute(args, ToolContext::new(ws, "t")).await
}

async fn edit(ws: &Path, args: Value) -> ToolResult {
    Edit::new().execute(args, ToolContext::new(ws, "t")).await
}

fn structured(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "unexpected error: {}", r.joined_text());
    r.structured_content.as_ref().expect("structured content")
}

fn error_text(r: &ToolResult) -> String {
    assert!(
        r.is_error,
        "expected an error, got {:?}",
        r.structured_content
    );
    assert!(r.structured_content.is_none());
    r.joined_text()
}

/// Temporary files left anywhere under `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains(".gsv-tmp-") {
            out.push(name);
        }
        if entry.file_type().unwrap().is_dir() {
            out.extend(leftovers(&entry.path()));
        }
    }
    out
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[tokio::test]
async fn write_creates_parents_and_reports_bytes() {
    let ws = tempfile::tempdir().unwrap();
    let r = write(
        ws.path(),
        json!({"path": "a/b/c.txt", "content": "héllo\n"}),
    )
    .await;
    let s = structured(&r);
    let target = ws.path().join("a/b/c.txt");
    assert_eq!(
        s,
        &json!({"path": target.display().to_string(), "bytes": 7})
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "héllo\n");
    assert_eq!(
        r.joined_text(),
        format!("Wrote 7 bytes to {}", target.display())
    );
    assert!(leftovers(ws.path()).is_empty());
    // Absolute paths are used as given; empty content makes an empty file.
    let abs = ws.path().join("empty.txt");
    let r = write(
        ws.path(),
        json!({"path": abs.display().to_string(), "content": ""}),
    )
    .await;
    assert_eq!(structured(&r)["bytes"], json!(0));
    assert_eq!(fs::read(&abs).unwrap(), b"");
}

#[tokio::test]
async fn write_overwrites_and_keeps_permissions() {
    let ws = tempfile::tempdir().unwrap();
    let target = ws.path().join("script.sh");
    fs::write(&target, "old content that is longer").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
    let r = write(ws.path(), json!({"path": "script.sh", "content": "new"})).await;
    assert_eq!(structured(&r)["bytes"], json!(3));
    assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    assert_eq!(mode(&target), 0o751);
    assert!(leftovers(ws.path()).is_empty());
}

#[tokio::test]
async fn write_refuses_directories_and_reports_parent_failures() {
    let ws = tempfile::tempdir().unwrap();
    fs::create_dir(ws.path().join("dir")).unwrap();
    let text = error_text(&write(ws.path(), json!({"path": "dir", "content": "x"})).await);
    assert!(text.starts_with("Is a directory, not a file: "), "{text}");
    // A parent that is a file cannot become a directory.
    fs::write(ws.path().join("file"), "f").unwrap();
    let text = error_text(&write(ws.path(), json!({"path": "file/x.txt", "content": "x"})).await);
    assert!(text.starts_with("Cannot create the directory "), "{text}");
    assert_eq!(fs::read_to_string(ws.path().join("file")).unwrap(), "f");
    assert!(leftovers(ws.path()).is_empty());
}

#[tokio::test]
async fn write_into_a_read_only_directory_leaves_the_original() {
    let ws = tempfile::tempdir().unwrap();
    let dir = ws.path().join("ro");
    fs::create_dir(&dir).unwrap();
    let target = dir.join("keep.txt");
    fs::write(&target, "original").unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
    // root ignores directory permissions: then there is no failure to observe (the
    // injected-failure unit test in write.rs covers that case).
    let privileged = fs::write(dir.join("probe"), "p").is_ok();
    let _ = fs::remove_file(dir.join("probe"));
    let r = write(ws.path(), json!({"path": "ro/keep.txt", "content": "new"})).await;
    if !privileged {
        let text = error_text(&r);
        assert!(text.starts_with("Permission denied: "), "{text}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "original");
    }
    assert!(leftovers(ws.path()).is_empty());
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn write_argument_errors() {
    let ws = tempfile::tempdir().unwrap();
    for args in [
        json!({"path": "a"}),
        json!({"content": "x"}),
        json!({"path": "", "content": "x"}),
        json!({"path": "a", "content": 3}),
        json!({"path": "a", "content": "x", "mode": 1}),
    ] {
        let text = error_text(&write(ws.path(), args.clone()).await);
        assert!(text.starts_with("Write: "), "{args}: {text}");
    }
}

#[tokio::test]
async fn edit_replaces_exactly_one_match() {
    let ws = tempfile::tempdir().unwrap();
    let target = ws.path().join("f.rs");
    fs::write(&target, "fn a() {}\nfn b() {}\n").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
    let r = edit(
        ws.path(),
        json!({"path": "f.rs", "oldString": "fn b() {}", "newString": "fn b() { é }"}),
    )
    .await;
    assert_eq!(
        structured(&r),
        &json!({"path": target.display().to_string(), "replacements": 1})
    );
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "fn a() {}\nfn b() { é }\n"
    );
    assert_eq!(mode(&target), 0o600);
    assert!(r.joined_text().starts_with("Replaced 1 occurrence in "));
    assert!(leftovers(ws.path()).is_empty());
}

#[tokio::test]
async fn edit_with_several_matches_needs_replace_all() {
    let ws = tempfile::tempdir().unwrap();
    let target = ws.path().join("f.txt");
    fs::write(&target, "x = 1; x = 2; x = 3;").unwrap();
    let text = error_text(
        &edit(
            ws.path(),
            json!({"path": "f.txt", "oldString": "x =", "newString": "y ="}),
        )
        .await,
    );
    assert!(text.starts_with("Found 3 matches of oldString"), "{text}");
    assert!(text.contains("replaceAll: true"), "{text}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "x = 1; x = 2; x = 3;");

    let r = edit(
        ws.path(),
        json!({"path": "f.txt", "oldString": "x =", "newString": "y =", "replaceAll": true}),
    )
    .await;
    assert_eq!(structured(&r)["replacements"], json!(3));
    assert_eq!(fs::read_to_string(&target).unwrap(), "y = 1; y = 2; y = 3;");
    assert!(r.joined_text().starts_with("Replaced 3 occurrences in "));
    // replaceAll with a single match is fine; newString may be empty (deletion).
    let r = edit(
        ws.path(),
        json!({"path": "f.txt", "oldString": " y = 2;", "newString": "", "replaceAll": true}),
    )
    .await;
    assert_eq!(structured(&r)["replacements"], json!(1));
    assert_eq!(fs::read_to_string(&target).unwrap(), "y = 1; y = 3;");
    assert!(leftovers(ws.path()).is_empty());
}

#[tokio::test]
async fn edit_matches_are_exact_and_non_overlapping() {
    let ws = tempfile::tempdir().unwrap();
    let target = ws.path().join("f.txt");
    fs::write(&target, "aaaa\r\nb").unwrap();
    let r = edit(
        ws.path(),
        json!({"path": "f.txt", "oldString": "aa", "newString": "c", "replaceAll": true}),
    )
    .await;
    assert_eq!(structured(&r)["replacements"], json!(2));
    assert_eq!(fs::read_to_string(&target).unwrap(), "cc\r\nb");
    // No line-ending normalisation, but a hint.
    let text = error_text(
        &edit(
            ws.path(),
            json!({"path": "f.txt", "oldString": "cc\nb", "newString": "d"}),
        )
        .await,
    );
    assert!(text.starts_with("oldString not found in "), "{text}");
    assert!(text.contains("CRLF"), "{text}");
}

#[tokio::test]
async fn edit_errors() {
    let ws = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("f.txt"), "hello").unwrap();
    fs::create_dir(ws.path().join("d")).unwrap();
    let text = error_text(
        &edit(
            ws.path(),
            json!({"path": "f.txt", "oldString": "bye", "newString": "x"}),
        )
        .await,
    );
    assert_eq!(
        text,
        format!(
            "oldString not found in {} (the file was not changed)",
            ws.path().join("f.txt").display()
        )
    );
    let text = error_text(
        &edit(
            ws.path(),
            json!({"path": "nope.txt", "oldString": "a", "newString": "b"}),
        )
        .await,
    );
    assert_eq!(
        text,
        format!("File not found: {}", ws.path().join("nope.txt").display())
    );
    let text = error_text(
        &edit(
            ws.path(),
            json!({"path": "d", "oldString": "a", "newString": "b"}),
        )
        .await,
    );
    assert!(text.starts_with("Is a directory, not a file: "), "{text}");
    for (args, expect) in [
        (
            json!({"path": "f.txt", "oldString": "", "newString": "b"}),
            "must not be empty",
        ),
        (
            json!({"path": "f.txt", "oldString": "hello", "newString": "hello"}),
            "identical",
        ),
        (
            json!({"path": "f.txt", "oldString": "hello"}),
            "missing required argument \"newString\"",
        ),
        (
            json!({"path": "f.txt", "oldString": "h", "newString": "j", "replaceAll": "yes"}),
            "must be true or false",
        ),
    ] {
        let text = error_text(&edit(ws.path(), args.clone()).await);
        assert!(text.starts_with("Edit: "), "{text}");
        assert!(text.contains(expect), "{args}: {text}");
    }
    assert_eq!(
        fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "hello"
    );
}

#[tokio::test]
async fn edit_permission_denied() {
    let ws = tempfile::tempdir().unwrap();
    let target = ws.path().join("locked.txt");
    fs::write(&target, "secret").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o000)).unwrap();
    let privileged = fs::read(&target).is_ok();
    let r = edit(
        ws.path(),
        json!({"path": "locked.txt", "oldString": "secret", "newString": "x"}),
    )
    .await;
    if !privileged {
        assert!(error_text(&r).starts_with("Permission denied: "));
    }
    fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
}
