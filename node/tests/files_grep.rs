//! Grep against a temporary workspace: result fields and order, `include` with braces,
//! the 100-match cap, the 200-character cut, binary files, symlinks (followed, loops
//! terminate), ignore rules (the count of files they hid, `noIgnore`), cancellation
//! and errors.

use gsv_node::tools::grep::{Grep, MAX_LINE_CHARS, MAX_MATCHES};
use gsv_node::{Tool, ToolContext};
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

async fn grep(ws: &Path, args: Value) -> ToolResult {
    Grep::new().execute(args, ToolContext::new(ws, "t")).await
}

fn structured(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "unexpected error: {}", r.joined_text());
    r.structured_content.as_ref().expect("structured content")
}

/// `(path relative to base, line)` of every match, in result order.
fn hits(r: &ToolResult, base: &Path) -> Vec<(String, u64)> {
    structured(r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let path = Path::new(m["path"].as_str().unwrap());
            (
                path.strip_prefix(base).unwrap().display().to_string(),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn put(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

#[tokio::test]
async fn fields_and_deterministic_order() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), "b.txt", "needle one\nhay\nneedle two\n");
    put(ws.path(), "a/z.txt", "hay\r\nthe needle\r\n");
    put(ws.path(), "c.txt", "nothing here\n");
    let r = grep(ws.path(), json!({"pattern": "needle"})).await;
    let s = structured(&r);
    assert_eq!(s["pattern"], json!("needle"));
    assert_eq!(s["basePath"], json!(ws.path().display().to_string()));
    assert_eq!(s["count"], json!(3));
    assert!(s.get("truncated").is_none());
    assert_eq!(
        hits(&r, ws.path()),
        [
            ("a/z.txt".to_owned(), 2),
            ("b.txt".to_owned(), 1),
            ("b.txt".to_owned(), 3)
        ]
    );
    assert_eq!(
        s["matches"][0],
        json!({
            "path": ws.path().join("a/z.txt").display().to_string(),
            "line": 2,
            "content": "the needle"
        })
    );
    assert_eq!(
        r.joined_text().lines().next().unwrap(),
        format!("{}:2: the needle", ws.path().join("a/z.txt").display())
    );
    // Anchors work per line; inline flags work.
    let r = grep(ws.path(), json!({"pattern": "^needle"})).await;
    assert_eq!(structured(&r)["count"], json!(2));
    let r = grep(ws.path(), json!({"pattern": "(?i)NEEDLE TWO$"})).await;
    assert_eq!(hits(&r, ws.path()), [("b.txt".to_owned(), 3)]);
    // No match: an empty list, not an error.
    let r = grep(ws.path(), json!({"pattern": "absent"})).await;
    assert_eq!(structured(&r)["count"], json!(0));
    assert!(r.joined_text().starts_with("No matches for \"absent\""));
}

#[tokio::test]
async fn include_filters_file_names_with_braces() {
    let ws = tempfile::tempdir().unwrap();
    for name in ["a.rs", "src/b.ts", "c.js", "d.rs.bak", "deep/er/e.rs"] {
        put(ws.path(), name, "token\n");
    }
    let r = grep(
        ws.path(),
        json!({"pattern": "token", "include": "*.{rs,ts}"}),
    )
    .await;
    let mut files: Vec<String> = hits(&r, ws.path()).into_iter().map(|h| h.0).collect();
    files.sort();
    assert_eq!(files, ["a.rs", "deep/er/e.rs", "src/b.ts"]);
    let r = grep(ws.path(), json!({"pattern": "token", "include": "*.js"})).await;
    assert_eq!(structured(&r)["count"], json!(1));
    let r = grep(
        ws.path(),
        json!({"pattern": "token", "include": "src/*.ts"}),
    )
    .await;
    assert!(r.is_error);
    assert!(r.joined_text().contains("file names only"));
}

#[tokio::test]
async fn more_than_100_matches_are_truncated() {
    let ws = tempfile::tempdir().unwrap();
    let body: String = (0..150).map(|i| format!("match {i}\n")).collect();
    put(ws.path(), "many.txt", &body);
    put(ws.path(), "more.txt", &body);
    let r = grep(ws.path(), json!({"pattern": "match"})).await;
    let s = structured(&r);
    assert_eq!(s["truncated"], json!(true));
    assert!(s.get("count").is_none(), "{s}");
    assert_eq!(s["matches"].as_array().unwrap().len(), MAX_MATCHES);
    assert!(r.joined_text().contains("More than 100 matching lines"));
    // Exactly 100 is not truncated.
    let ws = tempfile::tempdir().unwrap();
    let body: String = (0..MAX_MATCHES).map(|i| format!("match {i}\n")).collect();
    put(ws.path(), "hundred.txt", &body);
    let r = grep(ws.path(), json!({"pattern": "match"})).await;
    assert_eq!(structured(&r)["count"], json!(MAX_MATCHES));
    assert!(structured(&r).get("truncated").is_none());
    let lines: Vec<u64> = hits(&r, ws.path()).into_iter().map(|h| h.1).collect();
    assert_eq!(lines, (1..=MAX_MATCHES as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn long_lines_are_cut_on_a_character_boundary() {
    let ws = tempfile::tempdir().unwrap();
    let line = format!("key {}", "ü€".repeat(300));
    put(ws.path(), "wide.txt", format!("{line}\n"));
    let r = grep(ws.path(), json!({"pattern": "key"})).await;
    let content = structured(&r)["matches"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(content.chars().count(), MAX_LINE_CHARS);
    assert!(line.starts_with(&content));
}

#[tokio::test]
async fn binary_files_are_skipped() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), "blob.bin", b"needle\0\x01\x02needle\n");
    put(ws.path(), "text.txt", "needle\n");
    put(ws.path(), "latin1.txt", b"caf\xe9 needle\n");
    let r = grep(ws.path(), json!({"pattern": "needle"})).await;
    let mut files: Vec<String> = hits(&r, ws.path()).into_iter().map(|h| h.0).collect();
    files.sort();
    assert_eq!(files, ["latin1.txt", "text.txt"]);
    let latin = structured(&r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str().unwrap().ends_with("latin1.txt"))
        .unwrap()["content"]
        .clone();
    assert_eq!(latin, json!("caf\u{fffd} needle"));
}

#[tokio::test]
async fn symlinks_are_followed_and_loops_terminate() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    put(&ws, "dir/file.txt", "needle\n");
    put(tmp.path(), "elsewhere/other.txt", "needle\n");
    // A directory symlink to its own parent, and one to a sibling tree.
    std::os::unix::fs::symlink(&ws, ws.join("dir/loop")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("elsewhere"), ws.join("linked")).unwrap();
    let started = Instant::now();
    let r = grep(&ws, json!({"pattern": "needle"})).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    let files: Vec<String> = hits(&r, &ws).into_iter().map(|h| h.0).collect();
    assert_eq!(files, ["dir/file.txt", "linked/other.txt"]);
}

#[tokio::test]
async fn ignore_rules_hidden_files_and_single_files() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), ".gitignore", "build/\n");
    put(ws.path(), "build/out.txt", "needle\n");
    put(ws.path(), ".hidden/h.txt", "needle\n");
    put(ws.path(), "src/keep.txt", "needle\n");
    let r = grep(ws.path(), json!({"pattern": "needle"})).await;
    let files: Vec<String> = hits(&r, ws.path()).into_iter().map(|h| h.0).collect();
    assert_eq!(files, ["src/keep.txt"]);
    // `path` may name one file, even an ignored one.
    let r = grep(
        ws.path(),
        json!({"pattern": "needle", "path": "build/out.txt"}),
    )
    .await;
    assert_eq!(structured(&r)["count"], json!(1));
    let r = grep(ws.path(), json!({"pattern": "needle", "path": "src"})).await;
    assert_eq!(
        structured(&r)["basePath"],
        json!(ws.path().join("src").display().to_string())
    );
}

#[tokio::test]
async fn ignored_files_are_counted_and_no_ignore_searches_them() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), ".gitignore", "build/\n");
    put(ws.path(), "build/out.txt", "needle\n");
    put(ws.path(), "build/out.md", "needle\n");
    put(ws.path(), "secret/planted.txt", "needle\n");
    put(ws.path(), "secret/.ignore", "*\n");
    put(ws.path(), ".hidden/h.txt", "needle\n");
    put(ws.path(), "src/keep.txt", "needle\n");
    put(ws.path(), "src/none.txt", "hay\n");

    let r = grep(ws.path(), json!({"pattern": "needle"})).await;
    let files: Vec<String> = hits(&r, ws.path()).into_iter().map(|h| h.0).collect();
    assert_eq!(files, ["src/keep.txt"]);
    // Every file the rules hid counts, matching or not reading them.
    assert_eq!(structured(&r)["ignoredSkipped"], json!(3));
    assert!(structured(&r).get("ignoredSkippedAtLeast").is_none());
    assert!(
        r.joined_text().ends_with(
            "\n\n[3 files hidden by .gitignore/.ignore rules were not searched; pass \
             noIgnore: true to include them.]"
        ),
        "{}",
        r.joined_text()
    );
    // Only files passing `include` count.
    let r = grep(ws.path(), json!({"pattern": "needle", "include": "*.md"})).await;
    assert_eq!(structured(&r)["count"], json!(0));
    assert_eq!(structured(&r)["ignoredSkipped"], json!(1));
    assert!(r.joined_text().starts_with("No matches"));
    assert!(
        r.joined_text().contains("1 file hidden"),
        "{}",
        r.joined_text()
    );
    // A scope without ignored files says nothing.
    let r = grep(ws.path(), json!({"pattern": "needle", "path": "src"})).await;
    assert_eq!(structured(&r)["ignoredSkipped"], json!(0));
    assert!(!r.joined_text().contains("noIgnore"));

    // noIgnore searches them; hidden files stay out.
    let r = grep(ws.path(), json!({"pattern": "needle", "noIgnore": true})).await;
    let files: Vec<String> = hits(&r, ws.path()).into_iter().map(|h| h.0).collect();
    assert_eq!(
        files,
        [
            "build/out.md",
            "build/out.txt",
            "secret/planted.txt",
            "src/keep.txt"
        ]
    );
    assert_eq!(structured(&r)["ignoredSkipped"], json!(0));
    assert!(!r.joined_text().contains("noIgnore"));
}

#[tokio::test]
async fn a_search_cut_short_says_ignored_files_were_not_counted() {
    let ws = tempfile::tempdir().unwrap();
    for i in 0..150 {
        put(ws.path(), &format!("many/{i}.txt"), "match\n");
    }
    for i in 0..7 {
        put(ws.path(), &format!("hidden-by-rule/{i}.txt"), "match\n");
    }
    put(ws.path(), "hidden-by-rule/.ignore", "*.txt\n");
    let r = grep(ws.path(), json!({"pattern": "match"})).await;
    let s = structured(&r);
    assert_eq!(s["truncated"], json!(true));
    // Cut short: not counted (the agent narrows the search, which then counts).
    assert_eq!(s["ignoredSkipped"], json!(0), "{s}");
    assert_eq!(s["ignoredSkippedAtLeast"], json!(true), "{s}");
    assert!(r.joined_text().contains("were not counted"));
    let r = grep(
        ws.path(),
        json!({"pattern": "match", "path": "hidden-by-rule"}),
    )
    .await;
    assert_eq!(structured(&r)["ignoredSkipped"], json!(7));
    assert!(r.joined_text().contains("7 files hidden"));
    let r = grep(ws.path(), json!({"pattern": "match", "noIgnore": true})).await;
    assert_eq!(structured(&r)["truncated"], json!(true));
    assert_eq!(structured(&r)["ignoredSkipped"], json!(0));
}

#[tokio::test]
async fn the_schema_offers_no_ignore() {
    let def = Grep::new().def();
    assert_eq!(
        def.input_schema["properties"]["noIgnore"]["type"],
        json!("boolean")
    );
    // Said once, by the property (schema facts are not repeated in the prose).
    let said = def.input_schema["properties"]["noIgnore"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(said.contains("ignore rules"), "{said}");
}

#[tokio::test]
async fn errors_and_cancellation() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), "a.txt", "x\n");
    for (args, expect) in [
        (json!({"pattern": "("}), "Invalid regex \"(\": "),
        (json!({"pattern": "x", "path": "nope"}), "Path not found: "),
        (
            json!({"pattern": "x", "include": "*.{rs"}),
            "Invalid include glob",
        ),
        (json!({"pattern": ""}), "Grep: "),
        (json!({"pattern": "x", "include": ""}), "Grep: "),
        (json!({"pattern": "x", "glob": "*"}), "Grep: "),
        (
            json!({"pattern": "x", "noIgnore": "yes"}),
            "Grep: \"noIgnore\" must be true or false, got a string",
        ),
    ] {
        let r = grep(ws.path(), args.clone()).await;
        assert!(r.is_error, "{args}");
        assert!(
            r.joined_text().starts_with(expect),
            "{args}: {}",
            r.joined_text()
        );
    }
    let ctx = ToolContext::new(ws.path(), "t");
    ctx.cancel.cancel();
    let r = Grep::new().execute(json!({"pattern": "x"}), ctx).await;
    assert!(r.is_error);
    assert_eq!(r.joined_text(), "Grep was cancelled");
}
