//! Glob against a temporary workspace: braces, `*` vs `**`, .gitignore, hidden files,
//! the count of files ignore rules hid and `noIgnore`, newest-first order, the cap,
//! and its errors.

use gsv_node::tools::glob::{Glob, MAX_MATCHES};
use gsv_node::{Tool, ToolContext};
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

async fn glob(ws: &Path, args: Value) -> ToolResult {
    Glob::new().execute(args, ToolContext::new(ws, "t")).await
}

fn structured(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "unexpected error: {}", r.joined_text());
    r.structured_content.as_ref().expect("structured content")
}

/// The matches relative to `base`, sorted (for order-independent checks).
fn names(r: &ToolResult, base: &Path) -> Vec<String> {
    let mut out: Vec<String> = structured(r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            Path::new(m.as_str().unwrap())
                .strip_prefix(base)
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    out.sort();
    out
}

fn touch(root: &Path, rel: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, rel).unwrap();
}

fn tree() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    for rel in [
        "top.rs",
        "src/a.rs",
        "src/sub/b.rs",
        "src/c.toml",
        "docs/x.md",
        "web/app.ts",
    ] {
        touch(ws.path(), rel);
    }
    ws
}

#[tokio::test]
async fn braces_stars_and_double_stars() {
    let ws = tree();
    let r = glob(ws.path(), json!({"pattern": "**/*.{rs,toml}"})).await;
    let s = structured(&r);
    assert_eq!(s["pattern"], json!("**/*.{rs,toml}"));
    assert_eq!(s["basePath"], json!(ws.path().display().to_string()));
    assert_eq!(s["count"], json!(4));
    assert!(s.get("truncated").is_none());
    assert_eq!(
        names(&r, ws.path()),
        ["src/a.rs", "src/c.toml", "src/sub/b.rs", "top.rs"]
    );
    // Every match is absolute and exists.
    for m in s["matches"].as_array().unwrap() {
        assert!(Path::new(m.as_str().unwrap()).is_file(), "{m}");
    }
    // `*` does not cross `/`.
    let r = glob(ws.path(), json!({"pattern": "*.rs"})).await;
    assert_eq!(names(&r, ws.path()), ["top.rs"]);
    let r = glob(ws.path(), json!({"pattern": "src/**/*.rs"})).await;
    assert_eq!(names(&r, ws.path()), ["src/a.rs", "src/sub/b.rs"]);
    let r = glob(ws.path(), json!({"pattern": "./src/*"})).await;
    assert_eq!(names(&r, ws.path()), ["src/a.rs", "src/c.toml"]);
    let r = glob(ws.path(), json!({"pattern": "*/*.{md,ts}"})).await;
    assert_eq!(names(&r, ws.path()), ["docs/x.md", "web/app.ts"]);
    // A literal path finds that file; directories are not listed.
    let r = glob(ws.path(), json!({"pattern": "src/sub/b.rs"})).await;
    assert_eq!(names(&r, ws.path()), ["src/sub/b.rs"]);
    let r = glob(ws.path(), json!({"pattern": "src/*"})).await;
    assert!(!names(&r, ws.path()).contains(&"src/sub".to_owned()));
}

#[tokio::test]
async fn path_and_absolute_patterns() {
    let ws = tree();
    let r = glob(ws.path(), json!({"pattern": "**/*.rs", "path": "src"})).await;
    let base = ws.path().join("src");
    assert_eq!(
        structured(&r)["basePath"],
        json!(base.display().to_string())
    );
    assert_eq!(names(&r, &base), ["a.rs", "sub/b.rs"]);
    let pattern = format!("{}/src/*.rs", ws.path().display());
    let r = glob(ws.path(), json!({ "pattern": pattern })).await;
    assert_eq!(names(&r, ws.path()), ["src/a.rs"]);
    assert_eq!(
        structured(&r)["basePath"],
        json!(base.display().to_string())
    );
}

#[tokio::test]
async fn no_matches_is_not_an_error() {
    let ws = tree();
    let r = glob(ws.path(), json!({"pattern": "**/*.zig"})).await;
    assert_eq!(structured(&r)["count"], json!(0));
    assert_eq!(structured(&r)["matches"], json!([]));
    assert!(r.joined_text().starts_with("No files match"));
    let r = glob(ws.path(), json!({"pattern": "missing/**/*.rs"})).await;
    assert_eq!(structured(&r)["count"], json!(0));
}

#[tokio::test]
async fn gitignore_and_hidden_files() {
    let ws = tree();
    fs::write(ws.path().join(".gitignore"), "target/\n*.log\n").unwrap();
    touch(ws.path(), "target/debug/gen.rs");
    touch(ws.path(), "run.log");
    touch(ws.path(), ".hidden/h.rs");
    touch(ws.path(), ".env");
    touch(ws.path(), ".git/config");
    let r = glob(ws.path(), json!({"pattern": "**/*.rs"})).await;
    assert_eq!(names(&r, ws.path()), ["src/a.rs", "src/sub/b.rs", "top.rs"]);
    assert_eq!(
        structured(&glob(ws.path(), json!({"pattern": "*.log"})).await)["count"],
        json!(0)
    );
    // Naming a hidden entry includes hidden ones, but not .git.
    let r = glob(ws.path(), json!({"pattern": "**/.*"})).await;
    assert_eq!(names(&r, ws.path()), [".env", ".gitignore"]);
    let r = glob(ws.path(), json!({"pattern": ".hidden/*.rs"})).await;
    assert_eq!(names(&r, ws.path()), [".hidden/h.rs"]);
    let r = glob(ws.path(), json!({"pattern": ".git/*"})).await;
    assert_eq!(names(&r, ws.path()), [".git/config"]);
}

#[tokio::test]
async fn ignored_files_are_counted_and_no_ignore_lists_them() {
    let ws = tree();
    fs::write(ws.path().join(".gitignore"), "target/\n").unwrap();
    touch(ws.path(), "target/debug/gen.rs");
    // A rule planted next to a file, and one in .git/info/exclude.
    touch(ws.path(), "secret/planted.txt");
    fs::write(ws.path().join("secret/.ignore"), "planted.txt\n").unwrap();
    touch(ws.path(), "excluded.rs");
    touch(ws.path(), ".git/info/exclude");
    fs::write(ws.path().join(".git/info/exclude"), "excluded.rs\n").unwrap();
    touch(ws.path(), ".hidden/h.txt");

    let r = glob(ws.path(), json!({"pattern": "**/*.rs"})).await;
    assert_eq!(names(&r, ws.path()), ["src/a.rs", "src/sub/b.rs", "top.rs"]);
    assert_eq!(structured(&r)["ignoredSkipped"], json!(2));
    assert!(structured(&r).get("ignoredSkippedAtLeast").is_none());
    assert!(
        r.joined_text().ends_with(
            "\n\n[2 files hidden by .gitignore/.ignore rules were not listed; pass noIgnore: \
             true to include them.]"
        ),
        "{}",
        r.joined_text()
    );
    // The planted file: not listed, but counted.
    let r = glob(ws.path(), json!({"pattern": "**/*.txt"})).await;
    assert_eq!(structured(&r)["matches"], json!([]));
    assert_eq!(structured(&r)["ignoredSkipped"], json!(1));
    assert!(r.joined_text().starts_with("No files match"));
    assert!(
        r.joined_text().contains("1 file hidden"),
        "{}",
        r.joined_text()
    );
    // Only files matching the pattern count; none hidden says nothing.
    let r = glob(ws.path(), json!({"pattern": "**/*.md"})).await;
    assert_eq!(structured(&r)["ignoredSkipped"], json!(0));
    assert!(!r.joined_text().contains("noIgnore"));

    // noIgnore lists them (hidden files stay out); nothing is then skipped.
    let r = glob(ws.path(), json!({"pattern": "**/*.txt", "noIgnore": true})).await;
    assert_eq!(names(&r, ws.path()), ["secret/planted.txt"]);
    assert_eq!(structured(&r)["ignoredSkipped"], json!(0));
    let r = glob(ws.path(), json!({"pattern": "**/*.rs", "noIgnore": true})).await;
    assert_eq!(
        names(&r, ws.path()),
        [
            "excluded.rs",
            "src/a.rs",
            "src/sub/b.rs",
            "target/debug/gen.rs",
            "top.rs"
        ]
    );
    let r = glob(ws.path(), json!({"pattern": "**/*.rs", "noIgnore": false})).await;
    assert_eq!(structured(&r)["count"], json!(3));
    let r = glob(ws.path(), json!({"pattern": "**/*.txt", "noIgnore": null})).await;
    assert_eq!(structured(&r)["ignoredSkipped"], json!(1));
    // A pattern naming hidden entries: hidden ones are listed, the ignored still counted.
    let r = glob(ws.path(), json!({"pattern": "**/.*/*.txt"})).await;
    assert_eq!(names(&r, ws.path()), [".hidden/h.txt"]);
    assert_eq!(structured(&r)["ignoredSkipped"], json!(0));
}

#[tokio::test]
async fn the_schema_offers_no_ignore() {
    let def = Glob::new().def();
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
async fn newest_first() {
    let ws = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    for (name, age) in [("old.txt", 300), ("new.txt", 0), ("mid.txt", 100)] {
        touch(ws.path(), name);
        let file = fs::File::options()
            .write(true)
            .open(ws.path().join(name))
            .unwrap();
        file.set_modified(now - Duration::from_secs(age)).unwrap();
    }
    let r = glob(ws.path(), json!({"pattern": "*.txt"})).await;
    let order: Vec<String> = structured(&r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            Path::new(m.as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(order, ["new.txt", "mid.txt", "old.txt"]);
}

#[tokio::test]
async fn results_are_capped() {
    let ws = tempfile::tempdir().unwrap();
    for i in 0..MAX_MATCHES + 5 {
        fs::write(ws.path().join(format!("f{i}.txt")), "").unwrap();
    }
    let r = glob(ws.path(), json!({"pattern": "*.txt"})).await;
    let s = structured(&r);
    assert_eq!(s["truncated"], json!(true));
    assert_eq!(s["count"], json!(MAX_MATCHES));
    assert_eq!(s["matches"].as_array().unwrap().len(), MAX_MATCHES);
    assert!(r
        .joined_text()
        .contains("1005 files match; showing the newest 1000"));
}

#[tokio::test]
async fn errors() {
    let ws = tree();
    for (args, expect) in [
        (
            json!({"pattern": "a/{b"}),
            "Invalid glob pattern \"a/{b\": ",
        ),
        (
            json!({"pattern": "*", "path": "nope"}),
            "Directory not found: ",
        ),
        (
            json!({"pattern": "*", "path": "top.rs"}),
            "Not a directory: ",
        ),
        (json!({"pattern": ""}), "Glob: "),
        (json!({"pattern": "*", "path": ""}), "Glob: "),
        (json!({"pattern": "*", "depth": 2}), "Glob: "),
        (
            json!({"pattern": "*", "noIgnore": "yes"}),
            "Glob: \"noIgnore\" must be true or false, got a string",
        ),
        (
            json!({"pattern": "*", "noIgnore": 1}),
            "Glob: \"noIgnore\" must be true or false, got a number",
        ),
    ] {
        let r = glob(ws.path(), args.clone()).await;
        assert!(r.is_error, "{args}");
        assert!(
            r.joined_text().starts_with(expect),
            "{args}: {}",
            r.joined_text()
        );
    }
}

#[tokio::test]
async fn symlinks_are_listed_not_followed() {
    let ws = tree();
    std::os::unix::fs::symlink(ws.path().join("src/a.rs"), ws.path().join("link.rs")).unwrap();
    std::os::unix::fs::symlink(ws.path().join("src"), ws.path().join("srclink")).unwrap();
    let r = glob(ws.path(), json!({"pattern": "**/*.rs"})).await;
    assert_eq!(
        names(&r, ws.path()),
        ["link.rs", "src/a.rs", "src/sub/b.rs", "top.rs"]
    );
}
