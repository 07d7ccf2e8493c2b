//! `tools.fanout` and `gsv call --select` end to end: a real gateway and real
//! `gsv node` processes on loopback. One tool on every node a selector picks, with
//! each node's outcome (ok, failed, offline, denied, skipped) as an event as it
//! finishes and in the final result; rolling batches in id order; fail-fast; a
//! selector that never reaches nodes the token cannot see; the CLI's text and JSON
//! output and exit codes.

mod common;

use common::{eventually, Gateway, Proc, TempDir};
use gsv_client::{fanout_event, AgentClient, ClientError};
use gsv_protocol::fanout::{
    Batch, FanoutResult, FanoutSummary, NodeOutcome, NodeStatus, ToolsFanoutParams,
};
use gsv_protocol::ErrorCode;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Four nodes labelled `grp=a`; `n4` also `env=staging`, the others `env=prod`.
/// Each has its own workspace; `n2`'s holds a file `fail`, so the fleet command
/// [`CHECK`] fails there only.
struct Fleet {
    gw: Gateway,
    _ws: Vec<TempDir>,
    nodes: Vec<Proc>,
}

const IDS: [&str; 4] = ["n1", "n2", "n3", "n4"];

/// Exits 3 where the workspace holds `fail`, else prints `fine`.
const CHECK: &str = "if [ -e fail ]; then echo broken; exit 3; fi; echo fine";

async fn fleet() -> Fleet {
    let gw = Gateway::start().await;
    let mut workspaces = Vec::new();
    let mut nodes = Vec::new();
    for id in IDS {
        let ws = TempDir::new(&format!("fanout-{id}"));
        if id == "n2" {
            std::fs::write(ws.path().join("fail"), "x").expect("write fail marker");
        }
        let env = if id == "n4" {
            "env=staging"
        } else {
            "env=prod"
        };
        let token = gw.token(&["node", id, "--label", "grp=a", "--label", env]);
        nodes.push(gw.spawn_node(id, &token, ws.path(), &[]));
        workspaces.push(ws);
    }
    for id in IDS {
        gw.wait_online(id).await;
    }
    Fleet {
        gw,
        _ws: workspaces,
        nodes,
    }
}

/// Kills `n4` and waits until the gateway lists it offline.
async fn take_n4_offline(f: &mut Fleet) {
    f.nodes[3].kill();
    let admin = f.gw.agent_with(&f.gw.admin_token()).await;
    eventually("n4 offline", Duration::from_secs(20), || async {
        let nodes = admin.list_nodes().await.ok()?;
        nodes
            .iter()
            .any(|n| n.id == "n4" && !n.online)
            .then_some(())
    })
    .await;
}

fn params(tool: &str, select: &str, args: Value) -> ToolsFanoutParams {
    ToolsFanoutParams {
        tool: tool.into(),
        select: select.into(),
        args: serde_json::value::to_raw_value(&args).expect("args"),
        batch: None,
        fail_fast: false,
        timeout_ms: None,
        wait_offline_ms: None,
        is_async: false,
    }
}

/// Runs a fan-out; returns its result and the node outcomes its events carried, in
/// the order they arrived.
async fn fanout(
    agent: &AgentClient,
    p: &ToolsFanoutParams,
) -> (Result<FanoutResult, ClientError>, Vec<NodeOutcome>) {
    let id = agent.next_id();
    let result = agent.fanout_with_id(&id, p).await;
    let mut events = Vec::new();
    while let Some(e) = agent.next_event(Duration::from_millis(200)).await {
        if let Some(o) = fanout_event(&e, &id) {
            events.push(o);
        }
    }
    (result, events)
}

fn statuses(r: &FanoutResult) -> Vec<(String, NodeStatus)> {
    r.results
        .iter()
        .map(|o| (o.node.clone(), o.status))
        .collect()
}

fn st(pairs: &[(&str, NodeStatus)]) -> Vec<(String, NodeStatus)> {
    pairs.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[tokio::test]
async fn mixed_outcomes_over_the_websocket_and_the_cli() {
    let mut f = fleet().await;
    take_n4_offline(&mut f).await;
    let token =
        f.gw.token(&["agent", "ops", "--allow", "*", "--deny", "n3__Bash"]);
    let agent = f.gw.agent_with(&token).await;
    let (result, events) =
        fanout(&agent, &params("Bash", "grp=a", json!({"command": CHECK}))).await;
    let r = result.expect("fan-out result");
    assert_eq!(
        statuses(&r),
        st(&[
            ("n1", NodeStatus::Ok),
            ("n2", NodeStatus::Failed),
            ("n3", NodeStatus::Denied),
            ("n4", NodeStatus::Offline),
        ])
    );
    assert_eq!(
        r.summary,
        FanoutSummary {
            ok: 1,
            failed: 1,
            offline: 1,
            denied: 1,
            skipped: 0
        }
    );
    assert!(!r.job.is_empty());
    assert!(r.results[0].ok && r.results[0].result.is_some());
    assert_eq!(
        r.results[1].result.as_ref().unwrap()["structuredContent"]["exitCode"],
        3
    );
    assert_eq!(
        r.results[2].error.as_ref().unwrap().code,
        ErrorCode::Forbidden
    );
    assert_eq!(
        r.results[3].error.as_ref().unwrap().code,
        ErrorCode::NodeOffline
    );
    // One event per node, each as in the result.
    let mut seen: Vec<NodeOutcome> = events;
    seen.sort_by(|a, b| a.node.cmp(&b.node));
    assert_eq!(seen, r.results);

    // The CLI: one block per node, then the summary; exit 1.
    let args = format!(r#"{{"command":"{CHECK}"}}"#);
    let (code, out, err) = f.gw.cli(&[
        "call", "--select", "grp=a", "--token", &token, "Bash", &args,
    ]);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    for line in [
        "== n1: ok",
        "== n2: error (exit 3)",
        "== n3: denied (forbidden)",
        "== n4: offline (node_offline)",
        "1 ok, 1 failed, 1 offline, 1 denied",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    assert!(out.contains("fine") && out.contains("broken"), "{out}");
    assert_eq!(
        out.lines().last(),
        Some("1 ok, 1 failed, 1 offline, 1 denied")
    );

    // --json: the final result only.
    let (code, out, _) = f.gw.cli(&[
        "call", "--select", "grp=a", "--token", &token, "--json", "Bash", &args,
    ]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).expect("--json is JSON");
    assert!(v["job"].is_string());
    assert_eq!(v["results"].as_array().map(Vec::len), Some(4));
    assert_eq!(v["results"][0]["node"], "n1");
    assert_eq!(v["results"][0]["ok"], true);
    assert!(v["results"][0]["result"].is_object());
    assert_eq!(v["results"][2]["error"]["code"], "forbidden");
    assert_eq!(
        v["summary"],
        json!({"ok": 1, "failed": 1, "offline": 1, "denied": 1, "skipped": 0})
    );

    // Every node ok: exit 0.
    let (code, out, err) = f.gw.cli(&[
        "call",
        "--select",
        "id~n1",
        "--token",
        &token,
        "Echo",
        r#"{"text":"hi"}"#,
    ]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(out, "== n1: ok\nhi\n1 ok, 0 failed, 0 offline, 0 denied\n");

    // A node prefix with --select is a usage error; nothing is called.
    let (code, _, err) = f.gw.cli(&[
        "call", "--select", "grp=a", "--token", &token, "n1__Echo", "{}",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bare tool name"), "{err}");
    let (code, _, _) = f.gw.cli(&[
        "call", "--select", "grp=a", "--batch", "0", "--token", &token, "Echo", "{}",
    ]);
    assert_eq!(code, 2);
    // --batch without --select is refused by the parser.
    let (code, _, _) =
        f.gw.cli(&["call", "--batch", "2", "--token", &token, "n1__Echo", "{}"]);
    assert_eq!(code, 2);
}

#[tokio::test]
async fn batches_run_in_id_order_and_fail_fast_skips_the_rest() {
    let f = fleet().await;
    let agent = f.gw.agent().await;
    let delay = json!({"text": "x", "delayMs": 400});

    // All at once: about one delay.
    let started = Instant::now();
    let (r, _) = fanout(&agent, &params("Echo", "env=prod", delay.clone())).await;
    let all_at_once = started.elapsed();
    assert_eq!(r.expect("result").summary.ok, 3);
    assert!(all_at_once < Duration::from_millis(1100), "{all_at_once:?}");

    // One at a time: in id order, each after the one before.
    let mut p = params("Echo", "env=prod", delay);
    p.batch = Some(Batch::Count(1));
    let started = Instant::now();
    let (r, events) = fanout(&agent, &p).await;
    let one_at_a_time = started.elapsed();
    assert_eq!(r.expect("result").summary.ok, 3);
    assert!(
        one_at_a_time >= Duration::from_millis(1200),
        "{one_at_a_time:?}"
    );
    let order: Vec<&str> = events.iter().map(|o| o.node.as_str()).collect();
    assert_eq!(order, ["n1", "n2", "n3"]);

    // Fail-fast, one at a time: n2 fails, n3 never starts.
    let mut p = params("Bash", "env=prod", json!({"command": CHECK}));
    p.batch = Some(Batch::Count(1));
    p.fail_fast = true;
    let (r, events) = fanout(&agent, &p).await;
    let r = r.expect("result");
    assert_eq!(
        statuses(&r),
        st(&[
            ("n1", NodeStatus::Ok),
            ("n2", NodeStatus::Failed),
            ("n3", NodeStatus::Skipped),
        ])
    );
    assert_eq!(r.summary.skipped, 1);
    assert_eq!(events.len(), 3);

    // The CLI says the same, with --batch 1 and --fail-fast.
    let args = format!(r#"{{"command":"{CHECK}"}}"#);
    let (code, out, _) = f.gw.cli(&[
        "call",
        "--select",
        "env=prod",
        "--batch",
        "1",
        "--fail-fast",
        "Bash",
        &args,
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("== n3: skipped"), "{out}");
    assert!(
        out.ends_with("1 ok, 1 failed, 0 offline, 0 denied, 1 skipped\n"),
        "{out}"
    );

    // A percent batch: 50% of 3 nodes is 2 at once.
    let mut p = params("Echo", "env=prod", json!({"text": "x", "delayMs": 400}));
    p.batch = Some(Batch::Percent(50));
    let started = Instant::now();
    let (r, _) = fanout(&agent, &p).await;
    assert_eq!(r.expect("result").summary.ok, 3);
    assert!(started.elapsed() >= Duration::from_millis(800));
}

#[tokio::test]
async fn a_selector_never_reaches_past_the_token() {
    let f = fleet().await;
    // Sees n1 and n2 only.
    let narrow =
        f.gw.token(&["agent", "narrow", "--allow", "n1__*", "--allow", "n2__Echo"]);
    let agent = f.gw.agent_with(&narrow).await;
    let (r, _) = fanout(&agent, &params("Echo", "id~*", json!({"text": "t"}))).await;
    let r = r.expect("result");
    assert_eq!(
        statuses(&r),
        st(&[("n1", NodeStatus::Ok), ("n2", NodeStatus::Ok)])
    );
    // Visible for Echo only: n2's Bash is denied, never called.
    let (r, _) = fanout(&agent, &params("Bash", "grp=a", json!({"command": "true"}))).await;
    assert_eq!(
        statuses(&r.expect("result")),
        st(&[("n1", NodeStatus::Ok), ("n2", NodeStatus::Denied)])
    );
    // Naming an invisible node picks nothing: an empty result, not an error.
    let (r, events) = fanout(&agent, &params("Echo", "id~n3", json!({"text": "t"}))).await;
    let r = r.expect("result");
    assert!(r.results.is_empty() && events.is_empty());
    assert_eq!(r.summary, FanoutSummary::default());
    let (code, out, _) = f.gw.cli(&[
        "call",
        "--select",
        "id~n3",
        "--token",
        &narrow,
        "Echo",
        r#"{"text":"t"}"#,
    ]);
    assert_eq!(code, 0);
    assert_eq!(out, "0 ok, 0 failed, 0 offline, 0 denied\n");

    // Narrowing by label, over every node an admin sees.
    let admin = f.gw.agent_with(&f.gw.admin_token()).await;
    let (r, _) = fanout(&admin, &params("Echo", "env=staging", json!({"text": "t"}))).await;
    assert_eq!(statuses(&r.expect("result")), st(&[("n4", NodeStatus::Ok)]));

    // A missing tool is that node's error; a bad selector or tool name refuses it all.
    let (r, _) = fanout(&admin, &params("NoSuchTool", "id~n1", json!({}))).await;
    let r = r.expect("result");
    assert_eq!(r.results[0].status, NodeStatus::Failed);
    assert_eq!(
        r.results[0].error.as_ref().unwrap().code,
        ErrorCode::NotFound
    );
    for (tool, select) in [("Echo", ""), ("Echo", "=prod"), ("n1__Echo", "id~*")] {
        match fanout(&admin, &params(tool, select, json!({}))).await.0 {
            Err(ClientError::Remote(e)) => {
                assert_eq!(e.code, ErrorCode::InvalidArgs, "{tool} {select:?}")
            }
            other => panic!("{tool} {select:?}: expected invalid_args, got {other:?}"),
        }
    }
    // A batch out of range refuses it all, before any node is reported.
    for batch in [Batch::Count(0), Batch::Percent(0), Batch::Percent(101)] {
        let mut p = params("Echo", "id~*", json!({"text": "t"}));
        p.batch = Some(batch);
        let (r, events) = fanout(&admin, &p).await;
        match r {
            Err(ClientError::Remote(e)) => assert_eq!(e.code, ErrorCode::InvalidArgs),
            other => panic!("{batch:?}: expected invalid_args, got {other:?}"),
        }
        assert!(events.is_empty(), "{events:?}");
    }
}

#[tokio::test]
async fn cancelling_a_fanout_cancels_its_node_calls() {
    let f = fleet().await;
    let agent = f.gw.agent().await;
    let mut p = params(
        "Echo",
        "env=prod",
        json!({"text": "slow", "delayMs": 30000}),
    );
    p.batch = Some(Batch::Count(2));
    let id = agent.next_id();
    let started = Instant::now();
    let run = agent.fanout_with_id(&id, &p);
    tokio::pin!(run);
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        agent.cancel(&id).await.expect("cancel");
        std::future::pending::<()>().await
    };
    let r = tokio::select! {
        r = &mut run => r,
        _ = cancel => unreachable!(),
    }
    .expect("result");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        statuses(&r),
        st(&[
            ("n1", NodeStatus::Failed),
            ("n2", NodeStatus::Failed),
            ("n3", NodeStatus::Skipped),
        ])
    );
    assert_eq!(
        r.results[0].error.as_ref().unwrap().code,
        ErrorCode::Cancelled
    );
}

/// The next `approval.requested` the operator hears of.
async fn next_request(operator: &AgentClient) -> Value {
    eventually("approval.requested", Duration::from_secs(15), || async {
        let e = operator.next_event(Duration::from_millis(100)).await?;
        (e.event == gsv_protocol::EventName::ApprovalRequested).then_some(e.payload)
    })
    .await
}

/// Starts the fan-out of Echo on `env=prod` for `agent` in its own task.
fn start_prod_echo(
    agent: &std::sync::Arc<AgentClient>,
) -> tokio::task::JoinHandle<Result<FanoutResult, ClientError>> {
    let a = agent.clone();
    tokio::spawn(async move {
        let p = params("Echo", "env=prod", json!({"text": "t"}));
        let id = a.next_id();
        a.fanout_with_id(&id, &p).await
    })
}

#[tokio::test]
async fn a_confirm_fan_out_asks_one_approval_for_all_its_nodes() {
    let f = fleet().await;
    let token = f.gw.token(&[
        "agent",
        "careful",
        "--allow",
        "*",
        "--confirm",
        "n2__Echo",
        "--confirm",
        "n3__Echo",
    ]);
    let operator = f.gw.agent_with(&f.gw.admin_token()).await;
    let agent = std::sync::Arc::new(f.gw.agent_with(&token).await);

    // Two nodes need a decision: one request, naming every node the fan-out runs on.
    let run = start_prod_echo(&agent);
    let req = next_request(&operator).await;
    assert_eq!(req["node"], "env=prod", "{req}");
    assert_eq!(req["nodes"], json!(["n1", "n2", "n3"]), "{req}");
    let summary = req["summary"].as_str().unwrap_or("");
    assert!(
        summary.starts_with("fan-out to 3 nodes (selected by \"env=prod\"): "),
        "the agent's selector quoted inside the gateway's sentence: {req}"
    );
    let (code, out, err) = f.gw.cli(&["approvals", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("on 3 nodes: n1, n2, n3"), "{out}");
    let id = req["id"].as_str().expect("approval id");
    let (code, _, err) = f.gw.cli(&["approvals", "approve", id]);
    assert_eq!(code, 0, "{err}");
    let r = run.await.expect("join").expect("result");
    assert_eq!(
        statuses(&r),
        st(&[
            ("n1", NodeStatus::Ok),
            ("n2", NodeStatus::Ok),
            ("n3", NodeStatus::Ok),
        ])
    );
    while let Some(e) = operator.next_event(Duration::from_millis(300)).await {
        assert_ne!(
            e.event,
            gsv_protocol::EventName::ApprovalRequested,
            "a second request: {e:?}"
        );
    }

    // A denial refuses every node that needed the decision; the rest run.
    let run = start_prod_echo(&agent);
    let req = next_request(&operator).await;
    let id = req["id"].as_str().expect("approval id");
    let (code, _, err) = f.gw.cli(&["approvals", "deny", id]);
    assert_eq!(code, 0, "{err}");
    let r = run.await.expect("join").expect("result");
    assert_eq!(
        statuses(&r),
        st(&[
            ("n1", NodeStatus::Ok),
            ("n2", NodeStatus::Failed),
            ("n3", NodeStatus::Failed),
        ])
    );
    for o in &r.results[1..] {
        assert_eq!(o.error.as_ref().unwrap().code, ErrorCode::Denied, "{o:?}");
    }
}

#[tokio::test]
async fn wait_offline_calls_a_node_that_comes_back_and_async_answers_a_job() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("fanout-wait");
    let _w1 = gw.node("w1", ws.path()).await;
    let token = gw.node_token("w2");
    let mut w2 = gw.spawn_node("w2", &token, ws.path(), &[]);
    gw.wait_online("w2").await;
    w2.kill();
    let admin = gw.agent_with(&gw.admin_token()).await;
    eventually("w2 offline", Duration::from_secs(20), || async {
        let nodes = admin.list_nodes().await.ok()?;
        nodes
            .iter()
            .any(|n| n.id == "w2" && !n.online)
            .then_some(())
    })
    .await;
    let agent = gw.agent().await;

    // Without a wait: offline at once.
    let (r, _) = fanout(&agent, &params("Echo", "id~w*", json!({"text": "x"}))).await;
    assert_eq!(
        statuses(&r.expect("result")),
        st(&[("w1", NodeStatus::Ok), ("w2", NodeStatus::Offline)])
    );

    // With one: the node that comes back within it is called like the others.
    let mut p = params("Echo", "id~w*", json!({"text": "x"}));
    // Generous: a node process starting on a loaded machine can take a while.
    p.wait_offline_ms = Some(120_000);
    let agent = std::sync::Arc::new(agent);
    let a = agent.clone();
    let run = tokio::spawn(async move { fanout(&a, &p).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _w2 = gw.spawn_node("w2", &token, ws.path(), &[]);
    let (r, _) = run.await.expect("join");
    assert_eq!(
        statuses(&r.expect("result")),
        st(&[("w1", NodeStatus::Ok), ("w2", NodeStatus::Ok)])
    );
    // Beyond an hour is refused before anything runs.
    let mut p = params("Echo", "id~w*", json!({"text": "x"}));
    p.wait_offline_ms = Some(2 * 60 * 60 * 1000);
    let (r, _) = fanout(&agent, &p).await;
    match r {
        Err(ClientError::Remote(e)) => assert_eq!(e.code, ErrorCode::InvalidArgs),
        other => panic!("{other:?}"),
    }

    // `gsv call --select --async` prints the job id at once; the job has every node.
    let token = gw.agent_token();
    let (code, out, err) = gw.cli(&[
        "call",
        "--select",
        "id~w*",
        "--async",
        "Echo",
        r#"{"text": "later"}"#,
        "--gateway",
        &gw.url(),
        "--token",
        &token,
    ]);
    assert_eq!(code, 0, "{err}");
    let job = out.trim().to_owned();
    assert_eq!(job.len(), 32, "{out}");
    let client = gw.agent_with(&token).await;
    let done = eventually("the fan-out job to end", Duration::from_secs(20), || {
        let client = &client;
        let job = job.clone();
        async move {
            let j = client.job(&job).await.ok()?;
            (j.summary.state != gsv_protocol::job::JobState::Running).then_some(j)
        }
    })
    .await;
    let result = done.result.expect("a result").get().to_owned();
    assert!(result.contains(r#""ok":2"#), "{result}");
}

#[tokio::test]
async fn a_token_runs_at_most_its_share_of_fan_outs() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("fanout-share");
    let token = gw.node_token("gone");
    let mut gone = gw.spawn_node("gone", &token, ws.path(), &[]);
    gw.wait_online("gone").await;
    gone.kill();
    let admin = gw.agent_with(&gw.admin_token()).await;
    eventually("gone offline", Duration::from_secs(20), || async {
        let nodes = admin.list_nodes().await.ok()?;
        nodes
            .iter()
            .any(|n| n.id == "gone" && !n.online)
            .then_some(())
    })
    .await;
    let agent = gw.agent().await;
    // Async fan-outs that wait for the offline node: each one holds its share.
    let mut p = params("Echo", "id~gone", json!({"text": "x"}));
    p.wait_offline_ms = Some(60_000);
    p.is_async = true;
    let share = gsv_gateway::fanout::MAX_FANOUTS_PER_TOKEN;
    let mut jobs = Vec::new();
    for _ in 0..share {
        jobs.push(agent.fanout_async(&p).await.expect("within the share"));
    }
    match agent.fanout_async(&p).await {
        Err(ClientError::Remote(e)) => {
            assert_eq!(e.code, ErrorCode::Overloaded, "{e:?}");
            assert!(e.message.contains("fan-outs running"), "{e:?}");
        }
        other => panic!("one past the share: {other:?}"),
    }
    // Another token is not held back by this one's.
    let other = gw
        .agent_with(&gw.token(&["agent", "other", "--allow", "*"]))
        .await;
    let theirs = other
        .fanout_async(&p)
        .await
        .expect("another token's own share");
    other.cancel_job(&theirs).await.expect("cancel");
    // One ends: room for one more.
    agent.cancel_job(&jobs[0]).await.expect("cancel");
    eventually("room for a fan-out", Duration::from_secs(10), || {
        let agent = &agent;
        let p = &p;
        async move { agent.fanout_async(p).await.ok() }
    })
    .await;
}
