//! End to end: node → node copies (`gsv cp A:x B:y`, `transfer.copy`) through a real
//! gateway and two real nodes on loopback: hashes, mode and mtime, the audit rows of
//! both legs, into a directory and within one node; an interrupted copy resumed where
//! the destination stands; the policy of both sides; `confirm` rules waiting for an
//! operator (copies, puts and gets), and transfers nobody moves ended.

mod common;

use common::files::{cp, mode, mtime_ms, s, sha, sha_file, varied, write_file, write_varied};
use common::{eventually, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::transfer::Place;
use gsv_protocol::{ErrorCode, EventName};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

fn audit_rows(gw: &Gateway) -> Vec<Value> {
    let (code, out, err) = gw.cli(&["audit", "tail", "--lines", "200", "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits (a few seconds at most: the audit log is written in the background) for an
/// audit row `pred` holds for.
async fn audited(gw: &Gateway, what: &str, pred: impl Fn(&Value) -> bool) {
    eventually(what, Duration::from_secs(10), || async {
        audit_rows(gw).iter().any(&pred).then_some(())
    })
    .await
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("gsv-part"))
        .collect()
}

fn place(node: &str, path: &str) -> Place {
    Place {
        node: node.into(),
        path: path.into(),
    }
}

/// The next `approval.requested` an operator connection hears.
async fn next_request(operator: &AgentClient) -> Value {
    eventually("approval.requested", Duration::from_secs(20), || async {
        let e = operator.next_event(Duration::from_millis(100)).await?;
        (e.event == EventName::ApprovalRequested).then_some(e.payload)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_to_node_copies_keep_bytes_mode_and_mtime_and_audit_both_legs() {
    let gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("cpn-a"), TempDir::new("cpn-b"));
    let _a = gw.node("alpha", wa.path()).await;
    let _b = gw.node("beta", wb.path()).await;
    let token = gw.agent_token();

    let data = varied(40 * 1024 * 1024 + 4321, 21);
    let want = sha(&data);
    let mtime = 1_690_000_000_321u64;
    write_file(&wa.path().join("big.bin"), &data, 0o640, mtime);

    let (code, out, err) = cp(&gw, &token, &["alpha:big.bin", "beta:copy.bin", "--json"]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["direction"], "copy");
    assert_eq!(v["bytes"], data.len() as u64);
    assert_eq!(v["sha256"], want.as_str());
    assert_eq!(v["resumedFrom"], 0);
    let placed = wb.path().join("copy.bin");
    assert!(
        v["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("beta:") && p.ends_with("/copy.bin")),
        "{v}"
    );
    assert_eq!(sha(&std::fs::read(&placed).expect("read")), want);
    assert_eq!(mode(&placed), 0o640);
    assert_eq!(mtime_ms(&placed), mtime);
    assert!(leftovers(wb.path()).is_empty());

    // Into a directory (ending in /): under the source's name.
    std::fs::create_dir(wb.path().join("sub")).expect("mkdir");
    let (code, _, err) = cp(&gw, &token, &["alpha:big.bin", "beta:sub/"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        sha(&std::fs::read(wb.path().join("sub/big.bin")).expect("read")),
        want
    );

    // Within one node.
    let (code, _, err) = cp(&gw, &token, &["alpha:big.bin", "alpha:again.bin"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        sha(&std::fs::read(wa.path().join("again.bin")).expect("read")),
        want
    );

    // A missing source: not_found, nothing placed.
    let (code, _, err) = cp(&gw, &token, &["alpha:nope.bin", "beta:nope.bin"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("not_found"), "{err}");
    assert!(!wb.path().join("nope.bin").exists());

    // Each leg is on the record with its hash.
    for (node, tool) in [("alpha", "Read"), ("beta", "Write")] {
        audited(&gw, &format!("a {node} {tool} row with the hash"), |r| {
            r["kind"] == "transfer"
                && r["node"] == node
                && r["tool"] == tool
                && r["outcome"] == "ok"
                && r.to_string().contains(&want)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_node_to_node_copy_resumes_where_the_destination_stands() {
    let gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("cpn-a"), TempDir::new("cpn-b"));
    let _a = gw.node("alpha", wa.path()).await;
    let _b = gw.node("beta", wb.path()).await;
    let token = gw.agent_token();
    let data = varied(192 * 1024 * 1024, 23);
    write_file(&wa.path().join("huge.bin"), &data, 0o644, 1_700_000_000_000);

    let args = [
        "cp",
        "alpha:huge.bin",
        "beta:huge.bin",
        "--token",
        &token,
        "--data",
        s(gw.data.path()),
    ];
    let mut child = std::process::Command::new(common::gsv_bin())
        .args(args)
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn gsv cp");
    let partial_len = || {
        std::fs::read_dir(wb.path())
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().contains("gsv-part"))
            .and_then(|e| e.metadata().ok())
            .map(|m| m.len())
    };
    // Once some bytes are on the destination: the caller dies (its connection with it).
    eventually("a partial file", Duration::from_secs(60), || async {
        partial_len().filter(|&n| n >= 8 * 1024 * 1024)
    })
    .await;
    child.kill().expect("kill gsv cp");
    let _ = child.wait();
    // The gateway cancels both legs; the destination keeps what it verified.
    let kept = eventually("the copy cancelled", Duration::from_secs(20), || async {
        let a = gw.agent().await;
        let busy = a.list_nodes().await.ok().map(|_| ());
        drop(a);
        busy?;
        let n = partial_len()?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        (partial_len() == Some(n)).then_some(n)
    })
    .await;
    assert!(kept > 0 && kept < data.len() as u64, "{kept}");
    assert!(!wb.path().join("huge.bin").exists());

    let (code, out, err) = cp(&gw, &token, &["alpha:huge.bin", "beta:huge.bin", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let resumed = v["resumedFrom"].as_u64().expect("resumedFrom");
    assert!(
        resumed > 0 && resumed <= kept,
        "resumed from {resumed}, {kept} were kept"
    );
    assert_eq!(
        sha(&std::fs::read(wb.path().join("huge.bin")).expect("read")),
        sha(&data)
    );
    assert!(leftovers(wb.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_of_a_copy_answer_to_the_tokens_policy() {
    let gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("cpn-a"), TempDir::new("cpn-b"));
    let _a = gw.node("alpha", wa.path()).await;
    let _b = gw.node("beta", wb.path()).await;
    std::fs::write(wa.path().join("f.txt"), b"policy\n").expect("write");

    // Read on alpha but no Write on beta; Write on beta but no Read on alpha.
    for (name, allow) in [
        ("reader", ["alpha__Read", "beta__Read"]),
        ("writer", ["alpha__Write", "beta__Write"]),
    ] {
        let token = gw.token(&["agent", name, "--allow", allow[0], "--allow", allow[1]]);
        let (code, _, err) = cp(&gw, &token, &["alpha:f.txt", "beta:f.txt"]).await;
        assert_ne!(code, 0, "{name}");
        assert!(err.contains("forbidden"), "{name}: {err}");
        assert!(!wb.path().join("f.txt").exists(), "{name}");
        let actor = format!("agent:{name}");
        audited(&gw, &format!("a refused row for {name}"), |r| {
            r["kind"] == "transfer" && r["actor"] == actor.as_str() && r["outcome"] == "forbidden"
        })
        .await;
    }
    // Both: it copies.
    let both = gw.token(&[
        "agent",
        "both",
        "--allow",
        "alpha__Read",
        "--allow",
        "beta__Write",
    ]);
    let (code, _, err) = cp(&gw, &both, &["alpha:f.txt", "beta:f.txt"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(wb.path().join("f.txt")).expect("read"),
        b"policy\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_rules_turn_transfers_into_approval_requests() {
    let gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("cpn-a"), TempDir::new("cpn-b"));
    let local = TempDir::new("cpn-local");
    let _a = gw.node("alpha", wa.path()).await;
    let _b = gw.node("beta", wb.path()).await;
    let data = varied(3 * 1024 * 1024 + 7, 29);
    write_file(&wa.path().join("conf.bin"), &data, 0o600, 1_650_000_000_000);
    let token = gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "beta__Write",
        "--confirm",
        "alpha__Read",
    ]);
    let agent = std::sync::Arc::new(gw.agent_with(&token).await);
    let operator = gw.agent_with(&gw.admin_token()).await;

    // A node → node copy: one request naming source, destination and size.
    let a = agent.clone();
    let copy = tokio::spawn(async move {
        a.copy_file(
            place("alpha", "conf.bin"),
            place("beta", "conf.bin"),
            |_, _| {},
        )
        .await
    });
    let req = next_request(&operator).await;
    let summary = req["summary"].as_str().unwrap_or_default().to_owned();
    assert!(
        summary.contains("alpha:") && summary.contains("conf.bin") && summary.contains("beta:"),
        "{req}"
    );
    assert!(summary.contains(&data.len().to_string()), "{req}");
    assert_eq!(req["node"], "beta");
    assert_eq!(req["tool"], "Write");
    let args: Value = serde_json::from_str(req["args"].as_str().unwrap_or("{}")).expect("args");
    assert_eq!(args["size"], data.len() as u64, "{req}");
    assert!(
        !wb.path().join("conf.bin").exists(),
        "nothing before the decision"
    );
    let id = req["id"].as_str().expect("id").to_owned();
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let done = copy.await.expect("join").expect("copied");
    assert_eq!(done.sha256, sha(&data));
    assert_eq!(
        sha(&std::fs::read(wb.path().join("conf.bin")).expect("read")),
        sha(&data)
    );

    // A get from alpha (confirm on alpha__Read): held until approved, then sent; a
    // denied one fails `denied` and writes nothing.
    let target = local.path().join("got.bin");
    let a = agent.clone();
    let t = target.clone();
    let get = tokio::spawn(async move { a.get_file("alpha", "conf.bin", &t, |_, _| {}).await });
    let req = next_request(&operator).await;
    assert_eq!(
        (req["node"].as_str(), req["tool"].as_str()),
        (Some("alpha"), Some("Read"))
    );
    assert!(
        req["summary"]
            .as_str()
            .is_some_and(|s| s.contains(&data.len().to_string())),
        "{req}"
    );
    // Held: nothing has come yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!target.exists() && leftovers(local.path()).is_empty());
    let id = req["id"].as_str().expect("id").to_owned();
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    get.await.expect("join").expect("got");
    assert_eq!(sha(&std::fs::read(&target).expect("read")), sha(&data));

    // A put to beta (confirm on beta__Write), denied.
    let src = local.path().join("up.bin");
    std::fs::write(&src, b"not wanted").expect("write");
    let a = agent.clone();
    let put = tokio::spawn(async move { a.put_file("beta", &src, "up.bin", |_, _| {}).await });
    let req = next_request(&operator).await;
    assert_eq!(
        (req["node"].as_str(), req["tool"].as_str()),
        (Some("beta"), Some("Write"))
    );
    // The agent's own end is named for the operator.
    assert!(
        req["summary"]
            .as_str()
            .is_some_and(|s| s.contains("up.bin\" (agent \"careful\")")),
        "{req}"
    );
    let id = req["id"].as_str().expect("id").to_owned();
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    let e = put.await.expect("join").expect_err("denied");
    assert_eq!(e.remote().map(|r| r.code), Some(ErrorCode::Denied), "{e}");
    assert!(!wb.path().join("up.bin").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_nobody_moves_is_ended_and_frees_its_place() {
    let gw = Gateway::start_with(&["--transfer-idle-ms", "1500"]).await;
    let ws = TempDir::new("cpn-idle");
    let _node = gw.node("box", ws.path()).await;
    let agent = gw.agent().await;
    // Two puts opened and never fed: the token's whole share of the node.
    let open = json!({"node": "box", "path": "idle.bin", "direction": "put",
        "meta": {"size": 10, "mode": 420, "mtimeMs": 0}});
    let mut ids = Vec::new();
    for i in 0..2 {
        let mut p = open.clone();
        p["path"] = json!(format!("idle{i}.bin"));
        let raw = agent
            .request(gsv_protocol::Method::TransferOpen, &p)
            .await
            .expect("opened");
        let v: Value = serde_json::from_str(raw.get()).expect("json");
        ids.push(v["id"].as_str().expect("id").to_owned());
    }
    let mut p = open.clone();
    p["path"] = json!("third.bin");
    let e = agent
        .request(gsv_protocol::Method::TransferOpen, &p)
        .await
        .expect_err("over the share");
    assert_eq!(e.remote().map(|r| r.code), Some(ErrorCode::Overloaded));
    // Both end on their own (`timeout` on the record), and their places are free
    // again.
    assert_eq!(ids.len(), 2);
    eventually(
        "both idle transfers ended",
        Duration::from_secs(30),
        || async {
            let ended = audit_rows(&gw)
                .iter()
                .filter(|r| r["kind"] == "transfer" && r["outcome"] == "timeout")
                .count();
            (ended == 2).then_some(())
        },
    )
    .await;
    agent
        .request(gsv_protocol::Method::TransferOpen, &p)
        .await
        .expect("a new transfer opens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gib_node_to_node_with_hashes_compared() {
    let gw = Gateway::start().await;
    let (wa, wb) = (TempDir::new("cpn-gib-a"), TempDir::new("cpn-gib-b"));
    let _a = gw.node("alpha", wa.path()).await;
    let _b = gw.node("beta", wb.path()).await;
    let token = gw.agent_token();
    let want = write_varied(&wa.path().join("gib.bin"), 1 << 30, 31);
    let started = std::time::Instant::now();
    let (code, out, err) = cp(&gw, &token, &["alpha:gib.bin", "beta:gib.bin", "--json"]).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    eprintln!("1 GiB node → node in {:?}", started.elapsed());
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["bytes"], 1u64 << 30);
    assert_eq!(v["sha256"], want.as_str());
    let _ = std::fs::remove_file(wa.path().join("gib.bin"));
    assert_eq!(sha_file(&wb.path().join("gib.bin")), want);
}

/// `gsv cp` runs below the machine's other work (nice +10), so a copy's reading and
/// hashing wait for calls and shells on the same machine. Seen while it waits for an
/// approval.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gsv_cp_runs_below_the_machines_other_work() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("cpn-nice");
    let local = TempDir::new("cpn-nice-local");
    let _node = gw.node("box", ws.path()).await;
    let token = gw.token(&["agent", "niced", "--allow", "*", "--confirm", "box__Write"]);
    let operator = gw.agent_with(&gw.admin_token()).await;
    let src = local.path().join("n.bin");
    std::fs::write(&src, b"nice").expect("write");
    let mut child = std::process::Command::new(common::gsv_bin())
        .args(["cp", s(&src), "box:n.bin", "--token", &token, "--data"])
        .arg(gw.data.path())
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_AGENT_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn gsv cp");
    let req = next_request(&operator).await;
    let nice_of = |pid: u32| -> i64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        // Fields after the command's closing parenthesis; nice is field 19.
        let rest = stat.rsplit_once(')').expect("comm").1;
        rest.split_whitespace()
            .nth(16)
            .and_then(|n| n.parse().ok())
            .expect("nice")
    };
    let ours = nice_of(std::process::id());
    assert_eq!(nice_of(child.id()), (ours + 10).min(19));
    let id = req["id"].as_str().expect("id").to_owned();
    let (code, _, err) = gw.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "{err}");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert_eq!(status.code(), Some(5));
}
