//! End to end: the structured-operations tools (fs_list, fs_stat, time, Read/Write
//! with base64), the node owner's choice of tools (`--tools`, `--without`,
//! `--read-only`), the approval posture (`requiresApproval`, `--no-approval`) and
//! third-party capability ids, through a real gateway and real `gsv node` processes on
//! loopback (issue 19, first part).

mod common;

use base64::Engine;
use common::fake::{tool, Raw};
use common::{eventually, next_approval_request, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, EventName, ToolResult};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The 4 MiB base64 cap of Read and Write (`gsv_node::tools::encoding`).
const CAP: usize = gsv_node::tools::encoding::MAX_BASE64_BYTES;

async fn call(agent: &AgentClient, name: &str, args: Value) -> ToolResult {
    agent
        .call(name, args.clone(), Some(60_000))
        .await
        .unwrap_or_else(|e| panic!("{name} {args}: {e:?}"))
}

fn structured(r: &ToolResult) -> &Value {
    r.structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {}", r.joined_text()))
}

fn listed(r: &ToolResult) -> Vec<String> {
    structured(r)["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["path"].as_str().expect("path").to_owned())
        .collect()
}

fn entry<'a>(r: &'a ToolResult, path: &str) -> &'a Value {
    structured(r)["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["path"] == path)
        .unwrap_or_else(|| panic!("{path} not listed: {}", r.joined_text()))
}

/// The PNG signature and the start of an IHDR chunk: what `infer` recognises.
const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R', 0, 0, 0,
    1, 0, 0, 0, 1, 8, 6, 0, 0, 0,
];

/// A tree with what fs_list and fs_stat must tell apart.
fn make_tree(ws: &Path, outside: &Path) {
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(ws.join("src/deep/lib.rs"), "// lib\n").unwrap();
    std::fs::write(ws.join(".env"), "TOKEN=x\n").unwrap();
    std::fs::write(ws.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(ws.join("build.log"), "noise\n").unwrap();
    std::fs::write(ws.join("logo.png"), PNG).unwrap();
    symlink("src/main.rs", ws.join("main-link")).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside\n").unwrap();
    symlink(outside, ws.join("out")).unwrap();
    std::fs::create_dir(ws.join("vault")).unwrap();
    std::fs::write(ws.join("vault/key"), "k").unwrap();
}

#[tokio::test]
async fn fs_list_and_fs_stat_describe_a_tree_within_the_path_rules() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let outside = TempDir::new("outside");
    make_tree(ws.path(), outside.path());
    let vault = ws.path().join("vault");
    let _node = gw.spawn_node(
        "fs",
        &gw.node_token("fs"),
        ws.path(),
        &["--confine", "--protect", vault.to_str().unwrap()],
    );
    gw.wait_online("fs").await;
    let agent = gw.agent().await;

    // Default: one level, directories included, hidden and gitignored entries left
    // out (and the ignored one counted), links listed as links, the protected
    // directory not listed.
    let r = call(&agent, "fs__fs_list", json!({})).await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(listed(&r), ["logo.png", "main-link", "out", "src"]);
    assert_eq!(structured(&r)["ignoredSkipped"], 1, "{}", r.joined_text());
    assert!(
        r.joined_text().contains("ignored: true"),
        "{}",
        r.joined_text()
    );
    let src = entry(&r, "src");
    assert_eq!(src["kind"], "dir");
    assert!(src["mode"].as_str().unwrap().len() == 4, "{src}");
    assert!(
        chrono::DateTime::parse_from_rfc3339(src["mtime"].as_str().unwrap()).is_ok(),
        "{src}"
    );
    let link = entry(&r, "main-link");
    assert_eq!(
        (link["kind"].as_str(), link["linkTarget"].as_str()),
        (Some("symlink"), Some("src/main.rs"))
    );
    let out = entry(&r, "out");
    assert_eq!(out["kind"], "symlink");
    assert_eq!(out["linkTarget"], outside.path().to_str().unwrap());
    let png = entry(&r, "logo.png");
    assert_eq!(
        (png["kind"].as_str(), png["size"].as_u64()),
        (Some("file"), Some(PNG.len() as u64))
    );

    // Hidden and ignored on request; depth and glob.
    let r = call(
        &agent,
        "fs__fs_list",
        json!({"hidden": true, "ignored": true}),
    )
    .await;
    assert_eq!(
        listed(&r),
        [
            ".env",
            ".gitignore",
            "build.log",
            "logo.png",
            "main-link",
            "out",
            "src"
        ]
    );
    assert_eq!(structured(&r)["ignoredSkipped"], 0);
    let r = call(&agent, "fs__fs_list", json!({"depth": 3})).await;
    assert_eq!(
        listed(&r),
        [
            "logo.png",
            "main-link",
            "out",
            "src",
            "src/deep",
            "src/deep/lib.rs",
            "src/main.rs"
        ],
        "links are never entered, the protected directory never listed"
    );
    let r = call(
        &agent,
        "fs__fs_list",
        json!({"depth": 3, "glob": "**/*.rs"}),
    )
    .await;
    assert_eq!(listed(&r), ["src/deep/lib.rs", "src/main.rs"]);

    // fs_stat: a binary file's MIME type from its magic bytes, text, a link as a
    // link, a directory, the owner.
    let r = call(&agent, "fs__fs_stat", json!({"path": "logo.png"})).await;
    let v = structured(&r);
    assert_eq!(v["mime"], "image/png", "{v}");
    assert_eq!(v["kind"], "file");
    let uid = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(ws.path().join("logo.png")).unwrap(),
    );
    assert_eq!(v["owner"]["uid"].as_u64(), Some(u64::from(uid)));
    let r = call(&agent, "fs__fs_stat", json!({"path": "src/main.rs"})).await;
    assert_eq!(structured(&r)["mime"], "text/plain");
    let r = call(&agent, "fs__fs_stat", json!({"path": "main-link"})).await;
    let v = structured(&r);
    assert_eq!(
        (
            v["kind"].as_str(),
            v["linkTarget"].as_str(),
            v["mime"].as_str()
        ),
        (Some("symlink"), Some("src/main.rs"), Some("inode/symlink"))
    );
    let r = call(&agent, "fs__fs_stat", json!({"path": "src"})).await;
    assert_eq!(structured(&r)["mime"], "inode/directory");

    // A limited token cannot use them to look past the path rules: outside the
    // workspace (by `..`, an absolute path, or through a link pointing out) and the
    // protected directory are refused, as Read refuses them.
    let outside_file = outside.path().join("secret.txt");
    for (tool, args) in [
        ("fs_stat", json!({"path": "../x"})),
        ("fs_stat", json!({"path": outside_file})),
        ("fs_stat", json!({"path": "out/secret.txt"})),
        ("fs_stat", json!({"path": "vault"})),
        ("fs_stat", json!({"path": "vault/key"})),
        ("fs_list", json!({"path": "out"})),
        ("fs_list", json!({"path": ".."})),
        ("fs_list", json!({"path": outside.path()})),
        ("fs_list", json!({"path": "vault"})),
        ("Read", json!({"path": "out/secret.txt"})),
    ] {
        let r = call(&agent, &format!("fs__{tool}"), args.clone()).await;
        assert!(r.is_error, "{tool} {args}: {}", r.joined_text());
        assert_eq!(
            structured(&r)["code"],
            "denied",
            "{tool} {args}: {}",
            r.joined_text()
        );
        assert!(
            !r.joined_text().contains("outside\n"),
            "{}",
            r.joined_text()
        );
    }
}

#[tokio::test]
async fn read_and_write_round_trip_any_bytes_in_base64_within_the_cap() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let node = gw.node("b64", ws.path()).await;
    let agent = gw.agent().await;

    // Random bytes with NUL and invalid UTF-8 in them.
    let mut bytes = vec![0u8; 200_000];
    rand::fill(&mut bytes[..]);
    bytes[..6].copy_from_slice(&[0, 0xff, 0xfe, 0xc3, 0x28, 0]);
    assert!(std::str::from_utf8(&bytes).is_err());
    let r = call(
        &agent,
        "b64__Write",
        json!({"path": "bin/blob", "content": B64.encode(&bytes), "encoding": "base64"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(structured(&r)["bytes"], bytes.len());
    assert_eq!(std::fs::read(ws.path().join("bin/blob")).unwrap(), bytes);
    let r = call(
        &agent,
        "b64__Read",
        json!({"path": "bin/blob", "encoding": "base64"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let v = structured(&r);
    assert_eq!(v["size"], bytes.len());
    assert_eq!(B64.decode(v["data"].as_str().unwrap()).unwrap(), bytes);
    // The text block is the base64 alone.
    assert_eq!(B64.decode(r.joined_text()).unwrap(), bytes);
    // Without base64 the same file is refused as binary, as before.
    let r = call(&agent, "b64__Read", json!({"path": "bin/blob"})).await;
    assert!(r.is_error && r.joined_text().contains("Binary file"));
    // A piece, by byte offset and limit.
    let r = call(
        &agent,
        "b64__Read",
        json!({"path": "bin/blob", "encoding": "base64", "offset": 1, "limit": 4}),
    )
    .await;
    assert_eq!(B64.decode(r.joined_text()).unwrap(), bytes[1..5]);

    // The cap: exactly 4 MiB goes both ways; one byte more is refused both ways,
    // and nothing is written.
    let big: Vec<u8> = (0..CAP).map(|i| (i % 251) as u8).collect();
    let r = call(
        &agent,
        "b64__Write",
        json!({"path": "cap", "content": B64.encode(&big), "encoding": "base64"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    let r = call(
        &agent,
        "b64__Read",
        json!({"path": "cap", "encoding": "base64"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.joined_text());
    assert_eq!(B64.decode(r.joined_text()).unwrap(), big);
    let mut over = big.clone();
    over.push(7);
    let r = call(
        &agent,
        "b64__Write",
        json!({"path": "over", "content": B64.encode(&over), "encoding": "base64"}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    assert!(
        r.joined_text().contains("over the base64 limit"),
        "{}",
        r.joined_text()
    );
    assert!(!ws.path().join("over").exists());
    std::fs::write(ws.path().join("over"), &over).unwrap();
    let r = call(
        &agent,
        "b64__Read",
        json!({"path": "over", "encoding": "base64"}),
    )
    .await;
    assert!(r.is_error, "{}", r.joined_text());
    assert!(r.joined_text().contains("in pieces"), "{}", r.joined_text());
    // ... and read in two pieces it is whole again.
    let mut back = Vec::new();
    for (offset, limit) in [(0, CAP), (CAP, CAP)] {
        let r = call(
            &agent,
            "b64__Read",
            json!({"path": "over", "encoding": "base64", "offset": offset, "limit": limit}),
        )
        .await;
        back.extend(B64.decode(r.joined_text()).unwrap());
    }
    assert_eq!(back, over);
    // Bad base64 is a tool error that writes nothing.
    let r = call(
        &agent,
        "b64__Write",
        json!({"path": "bad", "content": "%%%", "encoding": "base64"}),
    )
    .await;
    assert!(r.is_error && !ws.path().join("bad").exists());
    drop(node);
}

#[tokio::test]
async fn time_reports_the_node_clock() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _node = gw.node("clock", ws.path()).await;
    let agent = gw.agent().await;
    let before = chrono::Utc::now().timestamp_millis();
    let r = call(&agent, "clock__time", json!({})).await;
    let after = chrono::Utc::now().timestamp_millis();
    assert!(!r.is_error, "{}", r.joined_text());
    let v = structured(&r);
    let ms = v["unixMs"].as_i64().unwrap();
    assert!((before..=after).contains(&ms), "{v}");
    let utc = chrono::DateTime::parse_from_rfc3339(v["utc"].as_str().unwrap()).unwrap();
    assert_eq!(utc.timestamp_millis(), ms);
    assert!(v["uptimeSeconds"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["utcOffsetSeconds"].is_i64(), "{v}");
    assert!(v["ntp"]["synchronized"].is_boolean(), "{v}");
    assert_eq!(v["ntp"]["source"], "adjtimex");
}

async fn offered(agent: &AgentClient, node: &str) -> BTreeSet<String> {
    agent
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.node == node)
        .map(|t| t.tool)
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn the_node_owner_picks_the_tools_and_a_token_cannot_call_others() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let _picked = gw.spawn_node(
        "picked",
        &gw.node_token("picked"),
        ws.path(),
        &[
            "--tools",
            "Read,fs_*,time",
            "--tools",
            "Echo",
            "--without",
            "fs_stat",
        ],
    );
    gw.wait_online("picked").await;
    // A token allowed everything, and one allowed exactly the tools left out.
    let agent = gw.agent().await;
    assert_eq!(
        offered(&agent, "picked").await,
        set(&["Echo", "Read", "fs_list", "time"])
    );
    let narrow = gw.token(&[
        "agent",
        "narrow",
        "--allow",
        "picked__Bash",
        "--allow",
        "picked__fs_stat",
        "--allow",
        "picked__Write",
    ]);
    let narrow = gw.agent_with(&narrow).await;
    for client in [&agent, &narrow] {
        for (tool, args) in [
            ("Bash", json!({"command": "touch X"})),
            ("fs_stat", json!({"path": "a.txt"})),
            ("Write", json!({"path": "b.txt", "content": "x"})),
        ] {
            let e = client
                .call(&format!("picked__{tool}"), args, Some(30_000))
                .await
                .expect_err("a tool the node does not offer");
            assert_eq!(
                e.remote().map(|s| s.code),
                Some(ErrorCode::NotFound),
                "{tool}: {e:?}"
            );
        }
    }
    assert!(!ws.path().join("X").exists() && !ws.path().join("b.txt").exists());
    let r = call(&agent, "picked__Read", json!({"path": "a.txt"})).await;
    assert!(r.joined_text().contains("hello"));

    // A glob that matches no tool is a startup error (exit 2), not a silent no-op.
    let mut typo = gw.node_command("typo", &gw.node_token("typo"), ws.path());
    typo.args(["--without", "Bahs"])
        .stderr(std::process::Stdio::piped());
    let mut typo = common::Proc(common::die_with_parent(&mut typo).spawn().unwrap());
    let status = eventually(
        "the node with a typo to exit",
        Duration::from_secs(20),
        || {
            let s = typo.0.try_wait().ok().flatten();
            async move { s }
        },
    )
    .await;
    assert_eq!(status.code(), Some(2), "{status:?}");

    // --read-only covers the new read-only tools (the git tools too) by their annotations.
    let _ro = gw.spawn_node("ro", &gw.node_token("ro"), ws.path(), &["--read-only"]);
    gw.wait_online("ro").await;
    let tools = offered(&agent, "ro").await;
    for t in [
        "fs_list",
        "fs_stat",
        "time",
        "git_status",
        "git_log",
        "git_diff",
        "git_show",
        "Read",
        "Glob",
        "Grep",
    ] {
        assert!(tools.contains(t), "{t} missing from {tools:?}");
    }
    for t in ["Write", "Edit", "Bash", "exec", "Process"] {
        assert!(!tools.contains(t), "{t} offered read-only: {tools:?}");
    }
    let r = call(&agent, "ro__fs_stat", json!({"path": "a.txt"})).await;
    assert_eq!(structured(&r)["size"], 6);
}

#[tokio::test]
async fn a_tool_that_needs_approval_runs_only_once_an_operator_approves() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let _gated = gw.spawn_node(
        "gated",
        &gw.node_token("gated"),
        ws.path(),
        &["--echo-needs-approval"],
    );
    let _waived = gw.spawn_node(
        "waived",
        &gw.node_token("waived"),
        ws.path(),
        &["--echo-needs-approval", "--no-approval", "Echo"],
    );
    gw.wait_online("gated").await;
    gw.wait_online("waived").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let agent = Arc::new(gw.agent().await);

    // The posture is in the listing: the flag and a marked description.
    let tools = agent.list_tools().await.unwrap();
    let echo = |node: &str| {
        tools
            .iter()
            .find(|t| t.node == node && t.tool == "Echo")
            .cloned()
            .expect("Echo listed")
    };
    assert!(echo("gated").requires_approval);
    assert!(echo("gated").description.starts_with("[needs approval] "));
    assert!(!echo("waived").requires_approval);
    assert!(!echo("waived").description.starts_with("[needs approval]"));
    // Every description says its tool's posture: read-only tools are marked too, and a
    // tool that runs at once and may change things carries no marker.
    assert!(echo("waived").description.starts_with("[read-only] "));
    let described = |tool: &str| {
        tools
            .iter()
            .find(|t| t.node == "gated" && t.tool == tool)
            .map(|t| t.description.clone())
            .expect("listed")
    };
    for tool in ["Read", "Grep", "fs_stat", "git_status", "time", "fetch_url"] {
        assert!(described(tool).starts_with("[read-only] "), "{tool}");
    }
    for tool in ["Bash", "exec", "Write"] {
        assert!(!described(tool).starts_with('['), "{tool}");
    }

    // No operator: no result. The call waits, then ends without the tool's answer.
    let e = agent
        .call("gated__Echo", json!({"text": "unapproved"}), Some(2_000))
        .await
        .expect_err("no operator approved");
    let code = e.remote().map(|s| s.code);
    assert!(
        matches!(code, Some(ErrorCode::Timeout | ErrorCode::Denied)),
        "{e:?}"
    );
    let req = next_approval_request(&operator).await;
    assert_eq!(
        (req["node"].as_str(), req["tool"].as_str()),
        (Some("gated"), Some("Echo"))
    );
    assert!(
        req["reason"]
            .as_str()
            .unwrap()
            .contains("--no-approval Echo"),
        "{req}"
    );

    // Denied: refused, the tool never answers.
    let a = agent.clone();
    let pending = tokio::spawn(async move {
        a.call("gated__Echo", json!({"text": "denied"}), Some(60_000))
            .await
    });
    let id = next_approval_request(&operator).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    let e = pending.await.unwrap().expect_err("denied");
    assert_eq!(e.remote().map(|s| s.code), Some(ErrorCode::Denied), "{e:?}");

    // Approved: it runs. The request shows the tool's dry-run plan, as the node
    // said it (in the event and `--json`), escaped where a person reads it.
    let a = agent.clone();
    let pending = tokio::spawn(async move {
        a.call(
            "gated__Echo",
            json!({"text": "approved\n\u{1b}[2J"}),
            Some(60_000),
        )
        .await
    });
    let req = next_approval_request(&operator).await;
    assert!(
        req["summary"].as_str().unwrap().contains("approved"),
        "{req}"
    );
    assert_eq!(
        req["plan"], "would answer 13 characters:\napproved\n\u{1b}[2J",
        "{req}"
    );
    let (code, out, err) = gw.cli(&["approvals", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("      plan:\n        would answer 13 characters:\n        approved\n        \\x1b[2J\n"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "{out:?}");
    let (code, out, err) = gw.cli(&["approvals", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["plan"], req["plan"], "{listed}");
    assert!(!pending.is_finished());
    let id = req["id"].as_str().unwrap().to_owned();
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let r = pending.await.unwrap().expect("approved call runs");
    assert_eq!(r.joined_text(), "approved\n\u{1b}[2J");

    // Waived by the node's owner: runs at once, no request opened.
    let r = call(&agent, "waived__Echo", json!({"text": "at once"})).await;
    assert_eq!(r.joined_text(), "at once");
    let quiet = tokio::time::Instant::now() + Duration::from_millis(300);
    while tokio::time::Instant::now() < quiet {
        if let Some(e) = operator.next_event(Duration::from_millis(50)).await {
            assert_ne!(e.event, EventName::ApprovalRequested, "{:?}", e.payload);
        }
    }
}

#[tokio::test]
async fn third_party_capability_ids_are_accepted_by_form_and_malformed_ones_refused() {
    use gsv_node::{async_trait, NodeConfig, Registry, Tool, ToolContext};
    use gsv_protocol::{NodeId, ToolDef};

    struct Deploy;
    #[async_trait]
    impl Tool for Deploy {
        fn def(&self) -> ToolDef {
            serde_json::from_value(json!({
                "name": "deploy",
                "description": "Pretend to deploy.",
                "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
                "capability": "x.acme.deploy"
            }))
            .expect("def")
        }
        async fn execute(&self, _args: Value, _ctx: ToolContext) -> ToolResult {
            ToolResult::text("deployed")
        }
    }

    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let config = NodeConfig::new(
        gw.url(),
        NodeId::parse("vendor").unwrap(),
        gw.node_token("vendor"),
        ws.path().to_path_buf(),
    );
    let mut registry = Registry::new();
    registry.register(Deploy).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(gsv_node::run_with_registry(config, registry, stop.clone()));
    gw.wait_online("vendor").await;
    let agent = gw.agent().await;
    let listed = agent.list_tools().await.unwrap();
    let deploy = listed
        .iter()
        .find(|t| t.name == "vendor__deploy")
        .expect("listed");
    assert_eq!(deploy.capability, "x.acme.deploy");
    let r = call(&agent, "vendor__deploy", json!({})).await;
    assert_eq!(r.joined_text(), "deployed");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("node stops")
        .unwrap()
        .unwrap();

    // The gateway checks the form strictly: each of these is refused at connect.
    for (i, bad) in [
        "x.Acme.deploy",
        "x.acme",
        "x.acme.deploy.now",
        "x..deploy",
        "acme.deploy",
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("rawvendor{i}");
        let (_raw, r) =
            Raw::node(&gw.addr, &id, &gw.node_token(&id), json!([tool("T", bad)])).await;
        let e = r.expect_err(bad);
        assert_eq!(e.code, ErrorCode::InvalidArgs, "{bad}: {e:?}");
        assert!(e.message.contains(bad), "{bad}: {}", e.message);
    }
}
