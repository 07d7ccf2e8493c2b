//! End to end: gateway replicas joined by a real `nats-server` with JetStream (cluster
//! mode, issue 24, first part): a token made on one replica works on the others, a
//! revocation on one cuts the token's connections on another, and a token made while
//! NATS is down reaches the other replicas once it is back.

mod common;

use common::mcp::{heard, send_mcp};
use common::{eventually, Gateway, TempDir};
use gsv_bench::nats::NatsServer;
use gsv_client::AgentClient;
use serde_json::json;
use std::time::Duration;

/// How long replication may take in these tests (it takes well under a second).
const SPREAD: Duration = Duration::from_secs(15);

async fn replica(nats: &NatsServer, name: &str) -> Gateway {
    replica_with(nats, name, &[]).await
}

/// A replica of `nats`'s cluster (its URL and cluster key) with `extra` flags.
async fn replica_with(nats: &NatsServer, name: &str, extra: &[&str]) -> Gateway {
    let mut args = nats.cluster_args();
    args.extend(["--replica".to_owned(), name.to_owned()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    Gateway::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

/// The id part of `gsv_KIND_ID_SECRET`.
fn token_id(token: &str) -> String {
    token.split('_').nth(2).expect("token id").to_owned()
}

/// An agent connected to `gw` with `token`, once `gw` accepts it.
async fn accepted(gw: &Gateway, token: &str, what: &str) -> AgentClient {
    eventually(what, SPREAD, || async {
        AgentClient::connect_with(&gw.url(), token, &gw.tls_options())
            .await
            .ok()
    })
    .await
}

#[tokio::test]
async fn tokens_made_or_revoked_on_one_replica_hold_on_every_replica() {
    let dir = TempDir::new("cluster-tokens");
    let mut nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;

    // A token unknown everywhere is refused (the replicas do not accept just anything).
    let bogus = "gsv_agent_00112233445566778899aabbccddeeff_secret";
    assert!(AgentClient::connect_with(&c.url(), bogus, &c.tls_options())
        .await
        .is_err());

    // An agent token made on A works on C; a node token made on B lets a node join C.
    let agent_token = a.agent_token();
    let agent = accepted(&c, &agent_token, "A's agent token accepted by C").await;
    let node_token = b.node_token("n1");
    let _ = accepted(&a, &agent_token, "A's agent token accepted by A").await;
    // The node's token must have reached C before the node dials it.
    eventually("B's node token known to C", SPREAD, || async {
        let (code, out, _) = c.cli(&["token", "list"]);
        (code == 0 && out.contains(&token_id(&node_token))).then_some(())
    })
    .await;
    let ws = TempDir::new("cluster-ws");
    let _node = c.spawn_node("n1", &node_token, ws.path(), &[]);
    c.wait_online("n1").await;
    let r = agent
        .call("n1__Echo", json!({"text": "through C"}), Some(30_000))
        .await
        .expect("call through C");
    assert!(r.joined_text().contains("through C"), "{}", r.joined_text());

    // The same agent token, connected to A, is cut there when B revokes it.
    let on_a = accepted(&a, &agent_token, "agent on A").await;
    let (code, _, err) = b.cli(&["token", "revoke", &token_id(&agent_token)]);
    assert_eq!(code, 0, "revoke on B: {err}");
    eventually("A cuts the token revoked on B", SPREAD, || async {
        on_a.call("n1__Echo", json!({"text": "x"}), Some(2_000))
            .await
            .is_err()
            .then_some(())
    })
    .await;
    eventually("C refuses the token revoked on B", SPREAD, || async {
        AgentClient::connect_with(&c.url(), &agent_token, &c.tls_options())
            .await
            .is_err()
            .then_some(())
    })
    .await;

    // NATS down: each replica keeps serving with what it has; a token made on A
    // meanwhile reaches B once NATS is back (JetStream kept the stream on disk).
    nats.kill();
    let later = a.agent_token();
    let _ = accepted(&a, &later, "a token made on A while NATS is down, on A").await;
    nats.restart().await.expect("nats-server restarts");
    let _ = accepted(&b, &later, "the token made during the outage, on B").await;

    // The replica that imported a token recorded it in its audit log.
    let (code, out, err) = c.cli(&["audit", "tail", "-n", "200", "--json"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "C's audit chain is intact: {err}");
    assert!(
        out.contains("replica:a") && out.contains(&token_id(&agent_token)),
        "C's audit log names the token and the replica it came from: {out}"
    );
}

/// The ids of the nodes `gw`'s CLI lists for `select`.
fn selected(gw: &Gateway, select: &str) -> Vec<String> {
    let (code, out, err) = gw.cli(&["nodes", "--select", select, "--json"]);
    assert_eq!(code, 0, "nodes --select {select}: {err}");
    let listed: Vec<serde_json::Value> = serde_json::from_str(&out).expect("--json");
    listed
        .iter()
        .filter_map(|n| n["id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn labels_set_on_one_replica_select_the_same_nodes_on_every_replica() {
    let dir = TempDir::new("cluster-labels");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;

    // Enrolled on A with a label; connected to B; selected by it from C.
    let token = a.token(&["node", "lab", "--label", "env=prod"]);
    eventually("A's node token known to B", SPREAD, || async {
        let (code, out, _) = b.cli(&["token", "list"]);
        (code == 0 && out.contains(&token_id(&token))).then_some(())
    })
    .await;
    let ws = TempDir::new("cluster-labels-ws");
    let _node = b.spawn_node("lab", &token, ws.path(), &[]);
    b.wait_online("lab").await;
    eventually(
        "C selects B's node by the label made on A",
        SPREAD,
        || async { (selected(&c, "env=prod") == ["lab"]).then_some(()) },
    )
    .await;
    assert_eq!(selected(&b, "env=prod"), ["lab"]);

    // An operator's change on A holds on B (which holds the node) and on C; the old
    // label no longer selects it anywhere.
    let (code, _, err) = a.cli(&["nodes", "label", "lab", "env=staging", "tier=db"]);
    assert_eq!(code, 0, "label on A: {err}");
    for gw in [&a, &b, &c] {
        eventually(
            "every replica selects by A's new labels",
            SPREAD,
            || async {
                (selected(gw, "env=staging,tier=db") == ["lab"]
                    && selected(gw, "env=prod").is_empty())
                .then_some(())
            },
        )
        .await;
    }
    // A removal on C travels too.
    let (code, _, err) = c.cli(&["nodes", "label", "lab", "--remove", "tier"]);
    assert_eq!(code, 0, "remove on C: {err}");
    for gw in [&a, &b] {
        eventually(
            "the label removed on C is gone everywhere",
            SPREAD,
            || async {
                (selected(gw, "tier").is_empty() && selected(gw, "env=staging") == ["lab"])
                    .then_some(())
            },
        )
        .await;
    }
    // The replicas that applied a change recorded it, naming where it came from.
    let (code, out, err) = b.cli(&["audit", "tail", "-n", "200", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("node.labels_changed") && out.contains("@a") && out.contains("@c"),
        "B's audit log records the labels from A and C: {out}"
    );
    let (code, _, err) = b.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "B's audit chain is intact: {err}");
}

#[tokio::test]
async fn calls_reach_a_node_held_by_another_replica() {
    let dir = TempDir::new("cluster-calls");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;

    // The node connects to A; the agent to B.
    let ws = TempDir::new("cluster-calls-ws");
    let node_token = a.node_token("far");
    let mut node = a.spawn_node("far", &node_token, ws.path(), &[]);
    a.wait_online("far").await;
    let agent_token = a.agent_token();
    let agent = accepted(&b, &agent_token, "A's agent token on B").await;
    let r = eventually("a call from B reaches the node on A", SPREAD, || async {
        agent
            .call("far__Echo", json!({"text": "across"}), Some(10_000))
            .await
            .ok()
    })
    .await;
    assert!(r.joined_text().contains("across"), "{}", r.joined_text());
    // B dials A's link after its first call there: later calls take it (one hop
    // instead of two through NATS) — the progress, cancel and deadline checks below
    // included.
    eventually("B's calls to A take the direct link", SPREAD, || async {
        agent
            .call("far__Echo", json!({"text": "linked"}), Some(10_000))
            .await
            .ok()?;
        (forwarded(&b, "link").await > 0).then_some(())
    })
    .await;

    // B lists the node A holds, saying so; `gsv nodes` on B too.
    let far = eventually("B lists the node A holds", SPREAD, || async {
        let listed = agent.list_nodes().await.ok()?;
        listed.into_iter().find(|n| n.id == "far")
    })
    .await;
    assert!(far.online);
    assert_eq!(far.replica.as_deref(), Some("a"));
    // And its tools.
    let tools = agent.list_tools().await.expect("tools.list on B");
    assert!(
        tools.iter().any(|t| t.name == "far__Echo" && t.online),
        "far__Echo not listed on B"
    );
    // `nodes.show` on B for the node A holds: its tools, and which replica holds it.
    let (code, out, err) = b.cli(&["nodes", "show", "far", "--json"]);
    assert_eq!(code, 0, "nodes show on B: {out} {err}");
    let detail: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(detail["node"]["replica"], "a", "{detail}");
    assert!(
        detail["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "Echo")),
        "{detail}"
    );
    let (code, out, err) = b.cli(&["nodes"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("far ") && l.contains("replica=a")),
        "{out}"
    );

    // Progress events come back before the result, named by the agent's own id.
    let cmd = "for i in 1 2 3; do echo step$i; sleep 1; done";
    let r = agent
        .call_with_id("p1", "far__Bash", json!({"command": cmd}), None)
        .await
        .expect("Bash across replicas");
    assert!(r.joined_text().contains("step3"), "{}", r.joined_text());
    let mut progress = Vec::new();
    while let Some(e) = agent.next_event(Duration::from_millis(100)).await {
        if e.event == gsv_protocol::EventName::CallProgress {
            progress.push(e.payload);
        }
    }
    assert!(
        !progress.is_empty(),
        "no call.progress event across replicas"
    );
    assert!(progress.iter().all(|p| p["callId"] == "p1"), "{progress:?}");

    // A cancel on B stops the call on A's node; a deadline holds too.
    let agent = std::sync::Arc::new(agent);
    let caller = agent.clone();
    let started = std::time::Instant::now();
    let call = tokio::spawn(async move {
        caller
            .call_with_id(
                "long",
                "far__Echo",
                json!({"text": "x", "delayMs": 60000}),
                None,
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    agent.cancel("long").await.expect("cancel");
    let err = call.await.expect("join").expect_err("cancelled");
    assert_eq!(
        err.remote().map(|s| s.code),
        Some(gsv_protocol::ErrorCode::Cancelled),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let err = agent
        .call(
            "far__Echo",
            json!({"text": "x", "delayMs": 60000}),
            Some(500),
        )
        .await
        .expect_err("deadline");
    assert_eq!(
        err.remote().map(|s| s.code),
        Some(gsv_protocol::ErrorCode::Timeout),
        "{err}"
    );

    // The token's policy holds across replicas: a token allowed only Echo cannot run
    // Bash on A's node from B.
    let echo_only = a.token(&["agent", "echo-only", "--allow", "far__Echo"]);
    let limited = accepted(&b, &echo_only, "the Echo-only token on B").await;
    let r = limited
        .call("far__Echo", json!({"text": "ok"}), Some(10_000))
        .await
        .expect("Echo allowed");
    assert!(r.joined_text().contains("ok"));
    let err = limited
        .call("far__Bash", json!({"command": "true"}), Some(10_000))
        .await
        .expect_err("Bash not allowed");
    assert_eq!(
        err.remote().map(|s| s.code),
        Some(gsv_protocol::ErrorCode::Forbidden),
        "{err}"
    );

    // Lists across replicas keep the token's view: a token that may call nothing on
    // `far` does not see it, from any replica.
    let blind = a.token(&["agent", "blind", "--allow", "elsewhere__*"]);
    let blind = accepted(&b, &blind, "the blind token on B").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let listed = blind.list_nodes().await.expect("nodes.list");
    assert!(listed.iter().all(|n| n.id != "far"), "{listed:?}");
    let tools = blind.list_tools().await.expect("tools.list");
    assert!(
        tools.iter().all(|t| t.node != "far"),
        "far's tools shown to a blind token"
    );

    // A node no replica holds is answered as on one gateway.
    let err = agent
        .call("nowhere__Echo", json!({"text": "x"}), Some(5_000))
        .await
        .expect_err("no such node");
    assert_eq!(
        err.remote().map(|s| s.code),
        Some(gsv_protocol::ErrorCode::NotFound),
        "{err}"
    );

    // The node moves to B, with the credential it enrolled with on A (shared like
    // every token): calls from an agent on A follow it there.
    node.kill();
    let mut cmd = a.node_command_via(&b.url(), "far", &node_token, ws.path());
    cmd.arg("--echo-tool");
    let _moved = common::Proc(common::die_with_parent(&mut cmd).spawn().expect("node"));
    b.wait_online("far").await;
    let on_a = accepted(&a, &agent_token, "the agent token on A").await;
    let r = eventually(
        "a call from A reaches the node now on B",
        SPREAD,
        || async {
            on_a.call("far__Echo", json!({"text": "moved"}), Some(10_000))
                .await
                .ok()
        },
    )
    .await;
    assert!(r.joined_text().contains("moved"), "{}", r.joined_text());
}

#[tokio::test]
async fn a_node_and_an_agent_move_to_a_live_replica_when_theirs_dies() {
    let dir = TempDir::new("cluster-failover");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let mut a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;

    // The node knows two replicas and connects to the first.
    let ws = TempDir::new("cluster-failover-ws");
    let node_token = a.node_token("mover");
    let mut cmd = a.node_command_via(
        &format!("{},{}", a.url(), b.url()),
        "mover",
        &node_token,
        ws.path(),
    );
    cmd.arg("--echo-tool");
    let _node = common::Proc(common::die_with_parent(&mut cmd).spawn().expect("node"));
    a.wait_online("mover").await;
    let agent_token = a.agent_token();
    let agent = accepted(&c, &agent_token, "the agent token on C").await;
    eventually("a call from C reaches the node on A", SPREAD, || async {
        agent
            .call("mover__Echo", json!({"text": "before"}), Some(5_000))
            .await
            .ok()
    })
    .await;

    // A dies (kill -9): the node moves to B by itself, and calls from C reach it there.
    let b_url = b.url();
    let a_url = a.url();
    a.kill();
    let started = std::time::Instant::now();
    let r = eventually(
        "the node is reached on B after A died",
        Duration::from_secs(20),
        || async {
            agent
                .call("mover__Echo", json!({"text": "after"}), Some(5_000))
                .await
                .ok()
        },
    )
    .await;
    assert!(r.joined_text().contains("after"), "{}", r.joined_text());
    let moved_in = started.elapsed();
    assert!(moved_in < Duration::from_secs(20), "took {moved_in:?}");
    b.wait_online("mover").await;

    // An agent given both addresses connects to the live one.
    let both = format!("{a_url},{b_url}");
    let on_b = AgentClient::connect_with(&both, &agent_token, &b.tls_options())
        .await
        .expect("the agent reaches B when A is dead");
    let r = on_b
        .call("mover__Echo", json!({"text": "via B"}), Some(10_000))
        .await
        .expect("call via B");
    assert!(r.joined_text().contains("via B"));
}

/// The id of the approval request waiting on `gw` for `node`, once there is one.
async fn waiting_approval(gw: &Gateway, node: &str) -> String {
    eventually("the approval request is listed", SPREAD, || async {
        let (_, out, _) = gw.cli(&["approvals", "list", "--json"]);
        let list: serde_json::Value = serde_json::from_str(&out).ok()?;
        list.as_array()?
            .iter()
            .find(|a| a["node"] == node && a["state"] == "pending")
            .and_then(|a| a["id"].as_str().map(str::to_owned))
    })
    .await
}

#[tokio::test]
async fn an_approval_decided_on_one_replica_releases_a_call_waiting_on_another() {
    let dir = TempDir::new("cluster-approvals");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;
    let ws = TempDir::new("cluster-approvals-ws");
    let _node = a.spawn_node("gated", &a.node_token("gated"), ws.path(), &[]);
    a.wait_online("gated").await;
    let agent = confirming_agent(&a, &b, "gated", "gated__Echo").await;

    // The call waits on A (the replica that routes it); an operator on C approves.
    let caller = agent.clone();
    let call = tokio::spawn(async move {
        caller
            .call(
                "gated__Echo",
                json!({"text": "approved on C"}),
                Some(60_000),
            )
            .await
    });
    // Listed on C too, though it waits on A.
    let id = waiting_approval(&c, "gated").await;
    let (code, out, err) = c.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "approve on C: {out} {err}");
    let r = call.await.expect("join").expect("the approved call runs");
    assert!(
        r.joined_text().contains("approved on C"),
        "{}",
        r.joined_text()
    );
    // Deciding it again, anywhere, is refused as on one gateway.
    let (code, _, _) = b.cli(&["approvals", "deny", &id]);
    assert_ne!(code, 0, "a decided request cannot be decided again");

    // Denied on B: the call fails `denied`.
    let caller = agent.clone();
    let call = tokio::spawn(async move {
        caller
            .call("gated__Echo", json!({"text": "never"}), Some(60_000))
            .await
    });
    let id = waiting_approval(&a, "gated").await;
    let (code, out, err) = b.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "deny on B: {out} {err}");
    let err = call.await.expect("join").expect_err("denied");
    assert_eq!(
        err.remote().map(|s| s.code),
        Some(gsv_protocol::ErrorCode::Denied),
        "{err}"
    );

    // An id no replica has is not found.
    let (code, _, _) = c.cli(&["approvals", "approve", "000000000000"]);
    assert_ne!(code, 0);
}

/// How many calls `gw` forwarded to another replica on `path` (`link` or `nats`).
async fn forwarded(gw: &Gateway, path: &str) -> u64 {
    let (_, body) = common::http_get(&gw.addr, "/metrics", None).await;
    forwarded_in(&body, path)
}

/// The `gsv_forwarded_calls_total` count for `path` in a metrics text.
fn forwarded_in(metrics: &str, path: &str) -> u64 {
    counter_in(
        metrics,
        &format!("gsv_forwarded_calls_total{{path=\"{path}\"}}"),
    )
}

/// The value of `series` (a name with its labels) in a metrics text; 0 if absent.
fn counter_in(metrics: &str, series: &str) -> u64 {
    let prefix = format!("{series} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// How many node or tool lists `gw` built for the other replicas.
async fn list_answers(gw: &Gateway) -> u64 {
    let (_, body) = common::http_get(&gw.addr, "/metrics", None).await;
    counter_in(&body, "gsv_cluster_list_answers_total")
}

/// A token flooding node lists on one replica costs the others what a few lists
/// cost: the same list asked while it is out is not asked again, and a token has at
/// most four different lists out at once; every request is still answered in full.
#[tokio::test]
async fn a_flood_of_lists_on_one_replica_costs_the_others_a_few_lists() {
    let dir = TempDir::new("cluster-list-flood");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let ws = TempDir::new("cluster-list-flood-ws");
    let node_token = a.node_token("far");
    let _node = a.spawn_node("far", &node_token, ws.path(), &[]);
    a.wait_online("far").await;
    let token = a.agent_token();
    accepted(&b, &token, "A's agent token on B").await;
    hears(&b, &["a", "b"]).await;
    eventually("B lists A's node", SPREAD, || async {
        let (status, body) = common::http_get(&b.addr, "/v1/nodes", Some(&token)).await;
        (status == 200 && body.contains("\"far\"")).then_some(())
    })
    .await;

    let before = list_answers(&a).await;
    let flood = futures_util::future::join_all(
        (0..48).map(|_| common::http_get(&b.addr, "/v1/nodes", Some(&token))),
    )
    .await;
    for (status, body) in &flood {
        assert_eq!(*status, 200, "{body}");
        assert!(body.contains("\"far\""), "a list came back short: {body}");
    }
    let asked = list_answers(&a).await - before;
    assert!(
        (1..=12).contains(&asked),
        "48 concurrent lists on B made A build {asked} lists"
    );
}

/// Waits until `gw` hears every replica named in `names`.
async fn hears(gw: &Gateway, names: &[&str]) {
    eventually("the replicas hear each other", SPREAD, || async {
        let s = cluster_state(gw).await?;
        let heard: Vec<&str> = s["replicas"]
            .as_array()?
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        names.iter().all(|n| heard.contains(n)).then_some(())
    })
    .await;
}

/// An agent on `on` whose token (made on `maker`) needs approval for `tool` and may
/// call everything else, once it reaches `node` (through its `time` tool).
async fn confirming_agent(
    maker: &Gateway,
    on: &Gateway,
    node: &str,
    tool: &str,
) -> std::sync::Arc<AgentClient> {
    let token = maker.token(&["agent", "careful", "--allow", "*", "--confirm", tool]);
    let agent = std::sync::Arc::new(accepted(on, &token, "the confirming token").await);
    eventually("the agent reaches the node", SPREAD, || async {
        agent
            .call(&format!("{node}__time"), json!({}), Some(5_000))
            .await
            .ok()
    })
    .await;
    agent
}

async fn cluster_state(gw: &Gateway) -> Option<serde_json::Value> {
    let (status, body) = common::http_get(&gw.addr, "/v1/cluster", Some(&gw.admin_token())).await;
    (status == 200)
        .then(|| serde_json::from_str(&body).ok())
        .flatten()
}

#[tokio::test]
async fn without_nats_replicas_serve_their_own_nodes_say_degraded_and_recover() {
    let dir = TempDir::new("cluster-degraded");
    let mut nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let ws = TempDir::new("cluster-degraded-ws");
    let _node = a.spawn_node("kept", &a.node_token("kept"), ws.path(), &[]);
    a.wait_online("kept").await;
    let token = a.agent_token();
    let on_a = accepted(&a, &token, "the token on A").await;
    let on_b = accepted(&b, &token, "the token on B").await;

    // Both replicas hear each other; A says it holds one node.
    eventually("A sees both replicas, ok", SPREAD, || async {
        let s = cluster_state(&a).await?;
        let names: Vec<&str> = s["replicas"]
            .as_array()?
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        (s["state"] == "ok" && names == ["a", "b"]).then_some(())
    })
    .await;
    // Each replica has a slot of its own (their call ids never meet).
    let (sa, sb) = (
        cluster_state(&a).await.expect("A's state")["slot"].clone(),
        cluster_state(&b).await.expect("B's state")["slot"].clone(),
    );
    assert!(
        sa.is_u64() && sb.is_u64() && sa != sb,
        "slots {sa} and {sb}"
    );
    eventually("B hears that A holds one node", SPREAD, || async {
        let s = cluster_state(&b).await?;
        let a_seen = s["replicas"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == "a")?
            .clone();
        (a_seen["nodes"] == 1).then_some(())
    })
    .await;
    eventually("B reaches A's node", SPREAD, || async {
        on_b.call("kept__Echo", json!({"text": "x"}), Some(5_000))
            .await
            .ok()
    })
    .await;

    // NATS dies: each replica says degraded and keeps serving the nodes it holds;
    // a call from B to A's node is answered at once, not held.
    nats.kill();
    eventually("A says degraded", SPREAD, || async {
        (cluster_state(&a).await?["state"] == "degraded").then_some(())
    })
    .await;
    let r = on_a
        .call("kept__Echo", json!({"text": "local"}), Some(10_000))
        .await
        .expect("A still serves its own node");
    assert!(r.joined_text().contains("local"));
    let started = std::time::Instant::now();
    let err = on_b
        .call("kept__Echo", json!({"text": "x"}), Some(30_000))
        .await
        .expect_err("B cannot reach A's node without NATS");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered at once: {err}"
    );
    let (status, metrics) = common::http_get(&a.addr, "/metrics", Some(&a.admin_token())).await;
    assert_eq!(status, 200);
    assert!(metrics.contains("gsv_cluster_connected 0"), "{metrics}");

    // NATS is back: ok again, and calls cross replicas again.
    nats.restart().await.expect("nats-server restarts");
    eventually("A says ok again", Duration::from_secs(30), || async {
        (cluster_state(&a).await?["state"] == "ok").then_some(())
    })
    .await;
    let r = eventually(
        "B reaches A's node again",
        Duration::from_secs(30),
        || async {
            on_b.call("kept__Echo", json!({"text": "again"}), Some(5_000))
                .await
                .ok()
        },
    )
    .await;
    assert!(r.joined_text().contains("again"));
}

#[tokio::test]
async fn a_call_whose_replica_dies_mid_call_is_answered_once_by_the_nodes_next_holder() {
    let dir = TempDir::new("cluster-midcall");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let mut a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;
    let ws = TempDir::new("cluster-midcall-ws");
    let node_token = a.node_token("busy");
    let mut cmd = a.node_command_via(
        &format!("{},{}", a.url(), b.url()),
        "busy",
        &node_token,
        ws.path(),
    );
    cmd.arg("--echo-tool");
    let _node = common::Proc(common::die_with_parent(&mut cmd).spawn().expect("node"));
    a.wait_online("busy").await;
    let agent = std::sync::Arc::new(accepted(&c, &a.agent_token(), "the agent token on C").await);
    eventually("C reaches the node on A", SPREAD, || async {
        agent
            .call("busy__Echo", json!({"text": "x"}), Some(5_000))
            .await
            .ok()
    })
    .await;
    // Every replica has heard every other by now.
    hears(&c, &["a"]).await;

    // A long call through C to the node on A; A dies meanwhile. The node keeps running
    // it, moves to B, and C asks B for the same call: one real result, run once.
    let caller = agent.clone();
    let started = std::time::Instant::now();
    let call = tokio::spawn(async move {
        caller
            .call(
                "busy__Bash",
                json!({"command": "sleep 5; echo ran >> runs.txt; echo finished"}),
                Some(60_000),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    a.kill();
    let result = call
        .await
        .expect("join")
        .expect("the call's own result, from the node's next holder");
    let waited = started.elapsed();
    assert!(
        result.joined_text().contains("finished"),
        "{}",
        result.joined_text()
    );
    assert!(
        waited < Duration::from_secs(30),
        "answered at {waited:?}, not at the 60 s deadline"
    );
    // Run once: asked for again under its call id, the node answered from what it kept.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let runs = std::fs::read_to_string(ws.path().join("runs.txt")).expect("runs.txt");
    assert_eq!(runs.lines().count(), 1, "the call ran {runs:?}");
    // The node is on B now: the next call reaches it there.
    let r = eventually(
        "the node is reached on B",
        Duration::from_secs(20),
        || async {
            agent
                .call("busy__Echo", json!({"text": "again"}), Some(5_000))
                .await
                .ok()
        },
    )
    .await;
    assert!(r.joined_text().contains("again"));
}

#[tokio::test]
async fn a_forwarded_call_with_an_approval_survives_its_holders_death_and_one_still_waiting_is_not_run(
) {
    let dir = TempDir::new("cluster-approval-death");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let mut a = replica(&nats, "a").await;
    let mut b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;
    let d = replica(&nats, "d").await;
    let ws = TempDir::new("cluster-approval-death-ws");
    let node_token = a.node_token("gated");
    let gateways = format!("{},{},{}", a.url(), b.url(), d.url());
    let mut cmd = a.node_command_via(&gateways, "gated", &node_token, ws.path());
    let _node = common::Proc(common::die_with_parent(&mut cmd).spawn().expect("node"));
    a.wait_online("gated").await;
    let agent = confirming_agent(&a, &c, "gated", "gated__Bash").await;
    hears(&c, &["a", "b"]).await;

    // A call waiting for its approval on A when A dies: not sent, so not run by the
    // node's next holder either; the caller is told to call again.
    let caller = agent.clone();
    let waiting = tokio::spawn(async move {
        caller
            .call(
                "gated__Bash",
                json!({"command": "echo ran >> unapproved.txt"}),
                Some(60_000),
            )
            .await
    });
    waiting_approval(&a, "gated").await;
    a.kill();
    let err = waiting
        .await
        .expect("join")
        .expect_err("a call still waiting for approval is not carried over");
    let shape = err.remote().expect("an error answer");
    assert_eq!(
        shape.code,
        gsv_protocol::ErrorCode::NodeDisconnected,
        "{err}"
    );
    assert!(shape.retryable, "{err}");
    assert!(shape.message.contains("approval"), "{err}");
    assert!(!ws.path().join("unapproved.txt").exists());

    // On the node's next holder (B) a call is approved, runs, and B dies mid-run: B
    // described the call with its approval before sending it, so D is asked for the
    // same call and the caller gets its one result.
    b.wait_online("gated").await;
    let caller = agent.clone();
    let approved = tokio::spawn(async move {
        caller
            .call(
                "gated__Bash",
                json!({"command": "sleep 4; echo ran >> approved.txt; echo finished"}),
                Some(60_000),
            )
            .await
    });
    let id = waiting_approval(&b, "gated").await;
    let (code, out, err) = c.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "approve on C: {out} {err}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    b.kill();
    let result = approved
        .await
        .expect("join")
        .expect("the approved call's own result, from the node's next holder");
    assert!(
        result.joined_text().contains("finished"),
        "{}",
        result.joined_text()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let runs = std::fs::read_to_string(ws.path().join("approved.txt")).expect("approved.txt");
    assert_eq!(runs.lines().count(), 1, "the call ran {runs:?}");
    let _ = d;
}

#[tokio::test]
async fn a_replica_link_is_open_only_to_a_replica_that_proves_it_heard_the_hello() {
    use futures_util::{SinkExt, StreamExt};
    use gsv_transport::tungstenite::Message;
    // A gateway on its own has no such endpoint.
    let alone = Gateway::start().await;
    let (status, _) = common::http_get(&alone.addr, "/v1/replica", None).await;
    assert_eq!(status, 404);

    let dir = TempDir::new("cluster-link");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let url = format!("ws://{}/v1/replica", a.addr);
    let challenge = |m: Option<Result<Message, _>>| -> String {
        match m {
            Some(Ok(Message::Text(t))) => {
                let v: serde_json::Value = serde_json::from_str(t.as_str()).expect("JSON");
                v["challenge"].as_str().expect("a challenge").to_owned()
            }
            other => panic!("no challenge: {other:?}"),
        }
    };
    let closed = |m: Option<Result<Message, gsv_transport::tungstenite::Error>>| {
        matches!(m, None | Some(Ok(Message::Close(_))) | Some(Err(_)))
    };
    let call = json!({"call": {"key": "k", "call": {"tokenId": "00", "name": "x__Echo",
        "args": {}, "timeoutMs": null, "key": "k", "progressTo": null, "origin": "evil"}}});

    // A wrong proof: closed, nothing taken.
    let mut ws = gsv_transport::dial(&url, None, Duration::from_secs(5))
        .await
        .expect("dial");
    let _ = challenge(ws.next().await);
    let bad = json!({"replica": "evil", "proof": "00".repeat(32)});
    ws.send(Message::text(bad.to_string())).await.expect("send");
    let _ = ws.send(Message::text(call.to_string())).await;
    assert!(closed(ws.next().await), "a wrong proof is refused");

    // A call instead of a proof: closed.
    let mut ws = gsv_transport::dial(&url, None, Duration::from_secs(5))
        .await
        .expect("dial");
    let _ = challenge(ws.next().await);
    ws.send(Message::text(call.to_string()))
        .await
        .expect("send");
    assert!(
        closed(ws.next().await),
        "a call before the proof is refused"
    );

    // Silence: closed within the opening's time.
    let mut ws = gsv_transport::dial(&url, None, Duration::from_secs(5))
        .await
        .expect("dial");
    let _ = challenge(ws.next().await);
    let started = std::time::Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(30), ws.next())
        .await
        .expect("closed, not held open");
    assert!(closed(end));
    assert!(started.elapsed() < Duration::from_secs(15));
    // The replica still serves.
    assert!(cluster_state(&a).await.is_some());
}

#[tokio::test]
async fn replicas_with_tls_link_over_tls_pinned_by_the_fingerprint_in_their_hello() {
    let dir = TempDir::new("cluster-tls-link");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica_with(&nats, "a", &["--tls-self-signed"]).await;
    let b = replica_with(&nats, "b", &["--tls-self-signed"]).await;
    assert!(a.url().starts_with("https://"), "{}", a.url());
    let ws = TempDir::new("cluster-tls-link-ws");
    let pin = a.tls_options().pin.expect("A's fingerprint");
    let _node = a.spawn_node(
        "sealed",
        &a.node_token("sealed"),
        ws.path(),
        &["--pin", &pin],
    );
    a.wait_online("sealed").await;
    let agent = accepted(&b, &a.agent_token(), "A's agent token on B").await;
    eventually("B's calls to A take the TLS link", SPREAD, || async {
        let r = agent
            .call("sealed__Echo", json!({"text": "sealed"}), Some(10_000))
            .await
            .ok()?;
        // B's metrics, over its TLS (the test's own gateway on loopback: not verified).
        let out = std::process::Command::new("curl")
            .arg("-sk")
            .arg(format!("https://{}/metrics", b.addr))
            .output()
            .ok()?;
        let linked = forwarded_in(&String::from_utf8_lossy(&out.stdout), "link");
        (r.joined_text().contains("sealed") && linked > 0).then_some(())
    })
    .await;
}

/// `gsv audit verify --json` of a replica's data directory: (exit code, report).
fn verified(gw: &Gateway) -> (i32, serde_json::Value) {
    let (code, out, err) = gw.cli(&["audit", "verify", "--json"]);
    let report =
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("verify --json: {out} {err}"));
    (code, report)
}

/// The replicas whose rows a replica's copy of the cluster chain holds.
fn chain_replicas(gw: &Gateway) -> Vec<String> {
    let store = gsv_gateway::store::Store::open(gw.data.path()).expect("store");
    store
        .with_conn(|c| {
            let mut stmt =
                c.prepare("SELECT DISTINCT replica FROM cluster_audit ORDER BY replica")?;
            let names = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(names)
        })
        .expect("cluster chain")
}

#[tokio::test]
async fn every_replica_holds_the_same_one_audit_chain_rows_written_during_an_outage_included() {
    let dir = TempDir::new("cluster-audit");
    let mut nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;
    let ws = TempDir::new("cluster-audit-ws");
    let _node = a.spawn_node("n1", &a.node_token("n1"), ws.path(), &[]);
    a.wait_online("n1").await;
    // Rows on every replica: A routes the calls (its log), B and C record the agent's
    // connections and a token made there.
    let token = a.agent_token();
    let on_b = accepted(&b, &token, "A's token on B").await;
    eventually("B reaches A's node", SPREAD, || async {
        on_b.call("n1__Echo", json!({"text": "from b"}), Some(5_000))
            .await
            .ok()
    })
    .await;
    let _ = accepted(&c, &c.agent_token(), "C's own token on C").await;

    // A row written on A while NATS is down reaches the others' chains once it is back.
    nats.kill();
    let on_a = accepted(&a, &token, "the token on A").await;
    let r = on_a
        .call(
            "n1__Echo",
            json!({"text": "during the outage"}),
            Some(10_000),
        )
        .await
        .expect("A serves its own node without NATS");
    assert!(r.joined_text().contains("during the outage"));
    let outage_rows = own_rows(&a);
    nats.restart().await.expect("nats-server restarts");

    // Every replica ends with the same chain: as many rows, the same head, holding
    // rows from all three and every row A wrote.
    let head = eventually(
        "the three chains agree",
        Duration::from_secs(30),
        || async {
            let reports: Vec<_> = [&a, &b, &c].iter().map(|gw| verified(gw)).collect();
            let first = &reports[0].1["cluster"];
            let same = reports.iter().all(|(code, r)| {
                *code == 0 && r["ok"] == true && r["cluster"]["head"] == first["head"]
            });
            let a_rows = own_rows(&a);
            let a_in_chain = chain_rows_of(&b, "a");
            (same && first["ok"] == true && a_in_chain >= outage_rows && a_in_chain == a_rows)
                .then(|| first["head"].as_str().map(str::to_owned))
                .flatten()
        },
    )
    .await;
    assert_eq!(head.len(), 64);
    for gw in [&a, &b, &c] {
        assert_eq!(chain_replicas(gw), ["a", "b", "c"]);
    }
    // One call, one row: the call B forwarded is A's row only (B, which forwarded it,
    // wrote none), as is the call made on A during the outage.
    assert_eq!(ok_call_rows(&b), 0, "B wrote a row for a call A ran");
    assert!(ok_call_rows(&a) >= 2, "A's rows: {}", ok_call_rows(&a));
    let (code, out, err) = c.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{err}");
    // (Rows may have come since: the head is the chain's, not necessarily `head`.)
    assert!(
        out.contains("rows of the cluster's audit chain verify (head "),
        "{out}"
    );

    // A row of C's copy edited afterwards: `gsv audit verify` on C says which.
    let store = gsv_gateway::store::Store::open(c.data.path()).expect("store");
    store
        .with_conn(|conn| {
            conn.execute(
                "UPDATE cluster_audit SET outcome = 'ok-edited' WHERE cseq = 2",
                [],
            )?;
            Ok(())
        })
        .expect("edit");
    let (code, out, _) = c.cli(&["audit", "verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAILED at cluster row 2"), "{out}");
}

/// The count `sql` (one `COUNT(*)`, with `param` bound to `?1` if given) gives in
/// `gw`'s database.
fn count(gw: &Gateway, sql: &str, param: Option<&str>) -> u64 {
    let store = gsv_gateway::store::Store::open(gw.data.path()).expect("store");
    store
        .with_conn(|c| {
            Ok(match param {
                Some(p) => c.query_row(sql, [p], |r| r.get::<_, i64>(0))?,
                None => c.query_row(sql, (), |r| r.get::<_, i64>(0))?,
            })
        })
        .map(|n| n.max(0) as u64)
        .unwrap_or(0)
}

/// How many rows of `gw`'s own log are its own doing: all but those recording a token
/// another replica made or revoked (actor `replica:NAME`), which the cluster chain
/// holds as that replica's row.
fn own_rows(gw: &Gateway) -> u64 {
    count(
        gw,
        "SELECT COUNT(*) FROM audit WHERE actor NOT LIKE 'replica:%'",
        None,
    )
}

/// How many `call` rows with outcome `ok` `gw`'s own audit log holds.
fn ok_call_rows(gw: &Gateway) -> u64 {
    count(
        gw,
        "SELECT COUNT(*) FROM audit WHERE kind = 'call' AND outcome = 'ok'",
        None,
    )
}

/// How many rows of replica `name`'s log `gw`'s copy of the cluster chain holds.
fn chain_rows_of(gw: &Gateway, name: &str) -> u64 {
    count(
        gw,
        "SELECT COUNT(*) FROM cluster_audit WHERE replica = ?1",
        Some(name),
    )
}

#[tokio::test]
async fn jobs_started_through_one_replica_are_read_and_cancelled_through_another_and_outlive_it() {
    let dir = TempDir::new("cluster-jobs");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let mut b = replica(&nats, "b").await;
    let c = replica(&nats, "c").await;
    let ws = TempDir::new("cluster-jobs-ws");
    let _node = a.spawn_node("n1", &a.node_token("n1"), ws.path(), &[]);
    a.wait_online("n1").await;
    let token = a.agent_token();
    let other = a.agent_token();
    let on_b = accepted(&b, &token, "the token on B").await;
    let on_c = accepted(&c, &token, "the token on C").await;
    let other_on_c = accepted(&c, &other, "another token on C").await;

    // A job started through B (its node held by A) is read through C once done.
    let done = eventually("B starts a job for A's node", SPREAD, || async {
        on_b.call_async("n1__Echo", json!({"text": "kept"}), Some(10_000))
            .await
            .ok()
    })
    .await;
    let job = eventually("C reads B's job, done", SPREAD, || async {
        on_c.job(&done)
            .await
            .ok()
            .filter(|j| j.summary.state == gsv_protocol::job::JobState::Done)
    })
    .await;
    let result = job.result.expect("the result travelled").get().to_owned();
    assert!(result.contains("kept"), "{result}");
    let listed = on_c.jobs(50, 0).await.expect("jobs.list on C");
    assert!(listed.jobs.iter().any(|j| j.id == done), "{listed:?}");
    // Another token sees neither the job nor its listing, on any replica.
    let err = other_on_c
        .job(&done)
        .await
        .expect_err("another token's job");
    assert!(err.to_string().contains("not_found"), "{err}");
    let listed = other_on_c.jobs(50, 0).await.expect("jobs.list");
    assert!(listed.jobs.iter().all(|j| j.id != done), "{listed:?}");

    // A running job started through B is cancelled through C: B, which runs it,
    // cancels the call; C answers with the job as it ended.
    let long = on_b
        .call_async("n1__Bash", json!({"command": "sleep 60"}), Some(120_000))
        .await
        .expect("a long job");
    eventually("C knows the long job", SPREAD, || async {
        on_c.job(&long).await.ok()
    })
    .await;
    let err = other_on_c.cancel_job(&long).await.expect_err("not its job");
    assert!(err.to_string().contains("not_found"), "{err}");
    let started = std::time::Instant::now();
    let cancelled = on_c.cancel_job(&long).await.expect("cancelled through C");
    assert_ne!(
        cancelled.summary.state,
        gsv_protocol::job::JobState::Running,
        "{cancelled:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    eventually("C's copy ends too", SPREAD, || async {
        on_c.job(&long)
            .await
            .ok()
            .filter(|j| j.summary.state != gsv_protocol::job::JobState::Running)
    })
    .await;

    // B dies: its jobs' outcomes are still read through C.
    b.kill();
    let job = on_c.job(&done).await.expect("B's job after B died");
    assert!(job.result.expect("result").get().contains("kept"));
}

/// One session-less (2026-07-28) MCP request to `gw`'s `/mcp{query}`: the JSON-RPC
/// answer.
async fn mcp(
    gw: &Gateway,
    token: &str,
    query: &str,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    use tokio::io::AsyncReadExt;
    let mut s = send_mcp(gw, token, query, method, params, true).await;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("an answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON answer: {body}"))
}

/// The names in an MCP `tools/list` answer.
fn tool_names(answer: &serde_json::Value) -> Vec<String> {
    answer["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn mcp_on_any_replica_lists_and_calls_the_nodes_every_replica_holds() {
    let dir = TempDir::new("cluster-mcp");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let ws = TempDir::new("cluster-mcp-ws");
    let node_token = a.token(&["node", "web1", "--label", "role=web"]);
    let _node = a.spawn_node("web1", &node_token, ws.path(), &[]);
    a.wait_online("web1").await;
    let token = a.agent_token();
    let _ = accepted(&b, &token, "A's token on B").await;

    // Flat view on B: A's node's tools are listed and called.
    eventually("B's MCP lists A's node's tools", SPREAD, || async {
        let listed = mcp(&b, &token, "?view=flat", "tools/list", json!({})).await;
        tool_names(&listed)
            .contains(&"web1__Echo".to_owned())
            .then_some(())
    })
    .await;
    let called = mcp(
        &b,
        &token,
        "?view=flat",
        "tools/call",
        json!({"name": "web1__Echo", "arguments": {"text": "over mcp on b"}}),
    )
    .await;
    assert_eq!(called["result"]["isError"], false, "{called}");
    assert!(called.to_string().contains("over mcp on b"), "{called}");

    // A session selecting by label sees and calls it too; another label sees nothing.
    let select = "?view=flat&select=role%3Dweb";
    assert!(
        tool_names(&mcp(&b, &token, select, "tools/list", json!({})).await)
            .contains(&"web1__Echo".to_owned())
    );
    let called = mcp(
        &b,
        &token,
        select,
        "tools/call",
        json!({"name": "web1__Echo", "arguments": {"text": "selected"}}),
    )
    .await;
    assert!(called.to_string().contains("selected"), "{called}");
    let none = "?view=flat&select=role%3Ddb";
    assert!(
        !tool_names(&mcp(&b, &token, none, "tools/list", json!({})).await)
            .contains(&"web1__Echo".to_owned())
    );
    let refused = mcp(
        &b,
        &token,
        none,
        "tools/call",
        json!({"name": "web1__Echo", "arguments": {"text": "x"}}),
    )
    .await;
    assert!(!refused.to_string().contains("\"x\""), "{refused}");
    assert!(
        refused.get("error").is_some() || refused["result"]["isError"] == true,
        "{refused}"
    );

    // The fleet view's inventory and the resources name it too.
    let nodes = mcp(
        &b,
        &token,
        "?view=fleet",
        "tools/call",
        json!({"name": "fleet_nodes", "arguments": {}}),
    )
    .await;
    assert!(nodes.to_string().contains("web1"), "{nodes}");
    let resources = mcp(&b, &token, "", "resources/list", json!({})).await;
    assert!(
        resources.to_string().contains("gsv://nodes/web1"),
        "{resources}"
    );

    // A fan-out through B picks the selected nodes of every replica: web1 on A, web2
    // on B, both called once; over MCP (`fleet_run`) too.
    let web2 = a.token(&["node", "web2", "--label", "role=web"]);
    eventually("A's node token known to B", SPREAD, || async {
        let (code, out, _) = b.cli(&["token", "list"]);
        (code == 0 && out.contains(&token_id(&web2))).then_some(())
    })
    .await;
    let ws2 = TempDir::new("cluster-mcp-ws2");
    let _web2 = b.spawn_node("web2", &web2, ws2.path(), &[]);
    b.wait_online("web2").await;
    let agent = accepted(&b, &token, "the agent on B").await;
    let params = gsv_protocol::fanout::ToolsFanoutParams {
        tool: "Echo".into(),
        select: "role=web".into(),
        args: serde_json::value::to_raw_value(&json!({"text": "everyone"})).expect("args"),
        batch: None,
        fail_fast: false,
        timeout_ms: Some(10_000),
        wait_offline_ms: None,
        is_async: false,
    };
    let ran = agent.fanout_with_id("f1", &params).await.expect("fan-out");
    let mut called: Vec<(&str, bool)> = ran
        .results
        .iter()
        .map(|r| (r.node.as_str(), r.ok))
        .collect();
    called.sort();
    assert_eq!(
        called,
        [("web1", true), ("web2", true)],
        "{:?}",
        ran.results
    );
    let run = mcp(
        &b,
        &token,
        "?view=fleet",
        "tools/call",
        json!({"name": "fleet_run", "arguments": {"tool": "Echo", "select": "role=web", "args": {"text": "mcp fan-out"}}}),
    )
    .await;
    let text = run.to_string();
    assert!(text.contains("web1") && text.contains("web2"), "{run}");
    assert_eq!(run["result"]["isError"], false, "{run}");
}

/// A 2026-07-28 `subscriptions/listen` stream for tool-list changes on `gw`'s `/mcp`,
/// once acknowledged.
async fn listen(gw: &Gateway, token: &str) -> tokio::net::TcpStream {
    let filter = json!({"notifications": {"toolsListChanged": true}});
    // Every tool listed (`?view=flat`): what these tests change is tools beyond the
    // reference set.
    let mut s = send_mcp(
        gw,
        token,
        "?view=flat",
        "subscriptions/listen",
        filter,
        false,
    )
    .await;
    assert!(
        heard(&mut s, "notifications/subscriptions/acknowledged", SPREAD).await,
        "the listen stream was not acknowledged"
    );
    s
}

/// Whether `agent` gets `tools.changed` for `node` with `change` (other events
/// skipped) within [`SPREAD`].
async fn told(agent: &AgentClient, node: &str, change: &str) -> bool {
    while let Some(e) = agent.next_event(SPREAD).await {
        if e.event == gsv_protocol::EventName::ToolsChanged
            && e.payload["node"] == node
            && e.payload["change"] == change
        {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn clients_on_one_replica_hear_that_the_lists_changed_when_a_node_joins_another() {
    let dir = TempDir::new("cluster-mcp-listen");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    let token = a.agent_token();
    let blind = a.token(&["agent", "blind", "--allow", "elsewhere__*"]);
    // Both tokens (made on A) are known on B, and B hears A.
    let agent = accepted(&b, &token, "A's agent token on B").await;
    let blind_agent = accepted(&b, &blind, "the blind token on B").await;
    hears(&b, &["a", "b"]).await;
    let mut sees = listen(&b, &token).await;
    let mut does_not = listen(&b, &blind).await;
    assert!(
        !heard(
            &mut sees,
            "notifications/tools/list_changed",
            Duration::from_millis(1500)
        )
        .await,
        "told of a change before anything changed"
    );

    // A node joins A: the client on B is told; its next listing shows the node.
    let ws = TempDir::new("cluster-mcp-listen-ws");
    let node_token = a.node_token("late");
    let _node = a.spawn_node("late", &node_token, ws.path(), &[]);
    a.wait_online("late").await;
    assert!(
        heard(&mut sees, "notifications/tools/list_changed", SPREAD).await,
        "the client on B was not told that a node joined A"
    );
    let listed = mcp(&b, &token, "?view=flat", "tools/list", json!({})).await;
    assert!(
        tool_names(&listed).iter().any(|n| n == "late__Echo"),
        "{listed}"
    );
    // A token that may see nothing of `late` is told nothing.
    assert!(
        !heard(
            &mut does_not,
            "notifications/tools/list_changed",
            Duration::from_secs(2)
        )
        .await,
        "a token that cannot see the node was told of it"
    );

    // WebSocket agents on B get `tools.changed` for the node on A, as on one gateway;
    // the blind token does not.
    assert!(
        told(&agent, "late", "connected").await,
        "the agent on B got no tools.changed for the node joining A"
    );
    while let Some(e) = blind_agent.next_event(Duration::from_millis(500)).await {
        assert!(
            e.event != gsv_protocol::EventName::ToolsChanged,
            "the blind agent was told: {e:?}"
        );
    }
    drop(_node);
    assert!(
        told(&agent, "late", "disconnected").await,
        "the agent on B got no tools.changed when the node left A"
    );
}

/// Tools accepted on the replica that holds their node change no directory entry;
/// MCP clients on the other replicas are told all the same, and list them next.
#[tokio::test]
async fn clients_on_one_replica_hear_of_tools_accepted_on_another() {
    let dir = TempDir::new("cluster-mcp-accept");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica_with(&nats, "a", &["--pin-tools"]).await;
    let b = replica(&nats, "b").await;
    let token = a.agent_token();
    accepted(&b, &token, "A's agent token on B").await;
    hears(&b, &["a", "b"]).await;

    // The node first offers the standard tools (trusted as they are), then comes back
    // with Echo, hidden until an operator accepts it.
    let ws = TempDir::new("cluster-mcp-accept-ws");
    let node_token = a.node_token("lab");
    let mut cmd = a.node_command("lab", &node_token, ws.path());
    let first = common::Proc(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn gsv node"),
    );
    a.wait_online("lab").await;
    drop(first);
    let _node = a.spawn_node("lab", &node_token, ws.path(), &[]);
    let admin = a.admin_token();
    eventually("Echo waits for acceptance on A", SPREAD, || async {
        let (status, body) = common::http_get(&a.addr, "/v1/nodes/lab", Some(&admin)).await;
        (status == 200 && body.contains("\"online\":true") && body.contains("\"unaccepted\":{"))
            .then_some(())
    })
    .await;
    let listed = |names: Vec<String>| names.iter().any(|n| n == "lab__Echo");
    eventually("B lists lab's standard tools", SPREAD, || async {
        let names = tool_names(&mcp(&b, &token, "?view=flat", "tools/list", json!({})).await);
        names.iter().any(|n| n == "lab__Read").then_some(())
    })
    .await;
    assert!(!listed(tool_names(
        &mcp(&b, &token, "?view=flat", "tools/list", json!({})).await
    )));

    // A client on B, once what the restart stirred up has settled.
    let mut sees = listen(&b, &token).await;
    for _ in 0..5 {
        if !heard(
            &mut sees,
            "notifications/tools/list_changed",
            Duration::from_millis(1500),
        )
        .await
        {
            break;
        }
    }
    let (code, _, err) = a.cli(&["nodes", "accept-tools", "lab"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        heard(&mut sees, "notifications/tools/list_changed", SPREAD).await,
        "the client on B was not told of the tools accepted on A"
    );
    assert!(listed(tool_names(
        &mcp(&b, &token, "?view=flat", "tools/list", json!({})).await
    )));
}

#[tokio::test]
async fn mcp_auto_view_counts_the_tools_every_replica_holds() {
    let dir = TempDir::new("cluster-mcp-auto");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let a = replica(&nats, "a").await;
    let b = replica(&nats, "b").await;
    // Two nodes on A: more tools than `auto` shows flat; none on B.
    let ws1 = TempDir::new("cluster-mcp-auto-ws1");
    let ws2 = TempDir::new("cluster-mcp-auto-ws2");
    let t1 = a.node_token("many1");
    let t2 = a.node_token("many2");
    let _n1 = a.spawn_node("many1", &t1, ws1.path(), &[]);
    let _n2 = a.spawn_node("many2", &t2, ws2.path(), &[]);
    a.wait_online("many1").await;
    a.wait_online("many2").await;
    let token = a.agent_token();
    let _agent = accepted(&b, &token, "A's agent token on B").await;
    hears(&b, &["a", "b"]).await;
    // On B, `auto` (the token's default) weighs A's tools too: every tool of two
    // nodes (`?tools=all`) is past what it shows flat, so the fleet view.
    let names = eventually("B's auto view counts A's nodes", SPREAD, || async {
        let names = tool_names(&mcp(&b, &token, "?tools=all", "tools/list", json!({})).await);
        names.iter().any(|n| n == "fleet_nodes").then_some(names)
    })
    .await;
    assert!(
        !names.iter().any(|n| n.starts_with("many1__")),
        "the fleet view lists no node tools: {names:?}"
    );
    // Asked for flat, the same token gets A's tools listed on B.
    let flat = tool_names(&mcp(&b, &token, "?view=flat", "tools/list", json!({})).await);
    assert!(
        flat.iter().any(|n| n == "many1__Read") && flat.iter().any(|n| n == "many2__Read"),
        "{flat:?}"
    );
    // A selection that picks one node weighs that node's tools only: flat.
    let one = tool_names(
        &mcp(
            &b,
            &token,
            "?select=id~many1&tools=all",
            "tools/list",
            json!({}),
        )
        .await,
    );
    assert!(one.iter().any(|n| n == "many1__Read"), "{one:?}");
    assert!(!one.iter().any(|n| n.starts_with("many2__")), "{one:?}");
    // By default, each node's reference tools, flat, across replicas: A's Bash listed
    // on B, A's git tools left to fleet_tools.
    let default = tool_names(&mcp(&b, &token, "", "tools/list", json!({})).await);
    assert!(
        default.iter().any(|n| n == "many1__Bash") && default.iter().any(|n| n == "many2__Bash"),
        "{default:?}"
    );
    assert!(
        !default.iter().any(|n| n == "many1__git_log"),
        "{default:?}"
    );
    assert!(default.iter().any(|n| n == "fleet_tools"), "{default:?}");
}
