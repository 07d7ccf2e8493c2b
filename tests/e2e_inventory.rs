//! The fleet's inventory end to end: labels an operator gives at enrollment and later
//! (CLI, WebSocket, HTTP), kept across gateway restarts and audited; facts each node
//! reports about itself (self-reported, bounded, refreshed on probe); selectors of
//! every form over the CLI, the WebSocket and HTTP, with bad ones answered
//! `invalid_args` naming the term; and what a narrow token may see of it all.
//!
//! A real gateway and real `gsv node` processes on loopback, except where a node must
//! say what a real one never would (labels for itself, a huge fact): a raw WebSocket
//! node then.

mod common;

use common::fake::{node_connect, tool, Raw};
use common::{eventually, http_get, http_request, Gateway, Proc, TempDir};
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::inventory::{Labels, MAX_FACT_TEXT, MAX_LABELS};
use gsv_protocol::method::{NodeLabelsResult, NodeSummary, NodesLabelParams, NodesListResult};
use gsv_protocol::offer::{NodeDetail, NodeIdParams};
use gsv_protocol::{ErrorCode, ErrorShape, Frame, Method};
use serde_json::{json, Value};
use std::time::Duration;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The fleet most tests use: `web1` (env=prod, role=web), `web2` (env=staging,
/// role=web), `db1` (env=prod, role=db, gpu=), each labelled at enrollment and
/// running as a real `gsv node`.
struct Fleet {
    gw: Gateway,
    _ws: TempDir,
    _nodes: Vec<Proc>,
}

const FLEET: &[(&str, &[&str])] = &[
    ("web1", &["env=prod", "role=web"]),
    ("web2", &["env=staging", "role=web"]),
    ("db1", &["env=prod", "role=db", "gpu="]),
];

async fn fleet() -> Fleet {
    let gw = Gateway::start().await;
    let ws = TempDir::new("inventory-ws");
    let mut nodes = Vec::new();
    for (id, node_labels) in FLEET {
        let mut args = vec!["node", id];
        for l in *node_labels {
            args.extend(["--label", l]);
        }
        let token = gw.token(&args);
        nodes.push(gw.spawn_node(id, &token, ws.path(), &[]));
    }
    for (id, _) in FLEET {
        gw.wait_online(id).await;
    }
    Fleet {
        gw,
        _ws: ws,
        _nodes: nodes,
    }
}

fn expected_labels(id: &str) -> Labels {
    let (_, given) = FLEET.iter().find(|(n, _)| *n == id).expect("fleet node");
    given
        .iter()
        .map(|l| {
            let (k, v) = l.split_once('=').expect("K=V");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn ids(nodes: &[NodeSummary]) -> Vec<String> {
    let mut ids: Vec<String> = nodes.iter().map(|n| n.id.clone()).collect();
    ids.sort();
    ids
}

fn remote(e: ClientError) -> ErrorShape {
    match e {
        ClientError::Remote(e) => e,
        other => panic!("expected an error from the gateway, got {other}"),
    }
}

/// `s` percent-encoded for a query string.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET /v1/nodes?select=SEL` with `token`: status and body.
async fn http_select(gw: &Gateway, token: &str, select: &str) -> (u16, Value) {
    let path = format!("/v1/nodes?select={}", urlencode(select));
    let (status, body) = http_get(&gw.addr, &path, Some(token)).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn body_ids(body: &Value) -> Vec<String> {
    let list: NodesListResult = serde_json::from_value(body.clone()).expect("nodes.list body");
    ids(&list.nodes)
}

/// A nodes list as text without its connection ids: a random UUID may spell a
/// node's name (`…5db1021f…`), and the leak checks look for names in the text.
fn scrubbed(body: &Value) -> String {
    let mut body = body.clone();
    if let Some(nodes) = body["nodes"].as_array_mut() {
        for node in nodes {
            if let Some(node) = node.as_object_mut() {
                node.remove("connId");
            }
        }
    }
    body.to_string()
}

/// The admin's view of `id` once `ready` holds for it.
async fn admin_node(gw: &Gateway, id: &str, ready: impl Fn(&NodeSummary) -> bool) -> NodeSummary {
    let (url, token, tls) = (gw.url(), gw.admin_token(), gw.tls_options());
    let ready = &ready;
    eventually(
        &format!("node {id} as expected"),
        Duration::from_secs(30),
        || {
            let (url, token, tls) = (url.clone(), token.clone(), tls.clone());
            async move {
                let admin = AgentClient::connect_with(&url, &token, &tls).await.ok()?;
                let nodes = admin.list_nodes().await.ok()?;
                nodes
                    .into_iter()
                    .find(|n| n.id == id && n.online && ready(n))
            }
        },
    )
    .await
}

/// The audit rows with `outcome`, details decoded.
fn audit_rows(gw: &Gateway, outcome: &str) -> Vec<Value> {
    let (code, out, err) = gw.cli(&["audit", "tail", "-n", "1000", "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["outcome"] == outcome)
        .map(|mut r| {
            let detail = r["detail"]
                .as_str()
                .and_then(|d| serde_json::from_str(d).ok());
            r["detail"] = detail.unwrap_or(Value::Null);
            r
        })
        .collect()
}

async fn label_ws(
    agent: &AgentClient,
    id: &str,
    set: Labels,
    remove: &[&str],
) -> Result<NodeLabelsResult, ErrorShape> {
    let params = NodesLabelParams {
        id: id.to_owned(),
        set,
        remove: remove.iter().map(|s| s.to_string()).collect(),
    };
    match agent.request(Method::NodesLabel, &params).await {
        Ok(raw) => Ok(serde_json::from_str(raw.get()).expect("nodes.label result")),
        Err(e) => Err(remote(e)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_from_enrollment_and_operators_survive_restarts_and_are_audited() {
    let mut f = fleet().await;
    let gw = &f.gw;
    let admin = gw.agent_with(&gw.admin_token()).await;
    let nodes = admin.list_nodes().await.expect("nodes.list");
    for (id, _) in FLEET {
        let n = nodes.iter().find(|n| n.id == *id).expect("listed");
        assert_eq!(n.labels, expected_labels(id), "{id}");
    }
    // Enrollment labels are audited with the token, by the CLI.
    let rows = audit_rows(gw, "node.labels_changed");
    let web1 = rows
        .iter()
        .find(|r| r["node"] == "web1")
        .expect("web1's enrollment labels audited");
    assert_eq!(web1["actor"], "cli");
    assert_eq!(web1["detail"]["before"], json!({}));
    assert_eq!(
        web1["detail"]["after"],
        json!({"env": "prod", "role": "web"})
    );

    // `gsv nodes` shows them compactly; `gsv nodes show` with the facts, marked.
    let (code, out, err) = gw.cli(&["nodes"]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("web1 "))
        .expect("web1 line");
    assert!(line.ends_with("  env=prod,role=web"), "{line}");
    let (code, out, err) = gw.cli(&["nodes", "show", "db1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("labels        env=prod,gpu=,role=db\n"),
        "{out}"
    );
    assert!(
        out.contains("facts (self-reported by the node, not verified)\n  os            linux\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("  version       {VERSION}\n")),
        "{out}"
    );

    // The CLI: set (replacing a value, adding a key).
    let (code, out, err) = gw.cli(&["nodes", "label", "web1", "env=staging", "tier=front"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "web1  env=staging,role=web,tier=front\n");
    // The WebSocket: remove.
    let r = label_ws(&admin, "web2", Labels::new(), &["role"])
        .await
        .expect("relabel");
    assert_eq!(r.labels, labels(&[("env", "staging")]));
    // HTTP: both at once.
    let (status, body) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/db1/labels",
        Some(&gw.admin_token()),
        Some(r#"{"set":{"zone":"eu-1"},"remove":["gpu"]}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let r: NodeLabelsResult = serde_json::from_str(&body).expect("labels result");
    assert_eq!(
        (r.id.as_str(), r.labels),
        (
            "db1",
            labels(&[("env", "prod"), ("role", "db"), ("zone", "eu-1")])
        )
    );
    // The CLI again: remove only.
    let (code, out, err) = gw.cli(&["nodes", "label", "web1", "--remove", "tier"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "web1  env=staging,role=web\n");
    // A change that changes nothing is answered, not audited.
    let before = audit_rows(gw, "node.labels_changed").len();
    label_ws(&admin, "web2", labels(&[("env", "staging")]), &["nope"])
        .await
        .expect("no-op relabel");

    let rows = audit_rows(gw, "node.labels_changed");
    assert_eq!(rows.len(), before, "{rows:?}");
    let http = rows
        .iter()
        .find(|r| r["node"] == "db1" && r["actor"] == "admin-api")
        .expect("the HTTP change audited");
    assert_eq!(
        http["detail"],
        json!({"before": {"env": "prod", "gpu": "", "role": "db"},
               "after": {"env": "prod", "role": "db", "zone": "eu-1"}})
    );
    assert!(rows
        .iter()
        .any(|r| r["node"] == "web2" && r["actor"] == "operator"));
    let (code, _, err) = gw.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "{err}");

    // A gateway restart keeps every label.
    f.gw.restart().await;
    let gw = &f.gw;
    for (id, want) in [
        ("web1", labels(&[("env", "staging"), ("role", "web")])),
        ("web2", labels(&[("env", "staging")])),
        (
            "db1",
            labels(&[("env", "prod"), ("role", "db"), ("zone", "eu-1")]),
        ),
    ] {
        gw.wait_online(id).await;
        let n = admin_node(gw, id, |_| true).await;
        assert_eq!(n.labels, want, "{id} after the restart");
    }

    // Labels written by another process (`gsv token create node … --label` while the
    // gateway runs) are read at the node's next registration.
    gw.token(&["node", "web2", "--label", "env=qa"]);
    let conn = admin_node(gw, "web2", |_| true).await.conn_id;
    f._nodes[1].kill();
    let token = gw.token(&["node", "web2"]);
    f._nodes[1] = gw.spawn_node("web2", &token, f._ws.path(), &[]);
    let n = admin_node(gw, "web2", |n| n.conn_id != conn).await;
    assert_eq!(n.labels, labels(&[("env", "qa")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_selector_form_picks_the_same_nodes_over_cli_websocket_and_http() {
    let f = fleet().await;
    let gw = &f.gw;
    let admin_token = gw.admin_token();
    let admin = gw.agent_with(&admin_token).await;

    // Real nodes report real facts.
    let web1 = admin_node(gw, "web1", |_| true).await;
    let facts = web1.runtime.facts.as_deref().expect("web1 reports facts");
    assert_eq!(facts.os, "linux");
    assert_eq!(facts.arch, std::env::consts::ARCH);
    assert_eq!(facts.version, VERSION);
    assert!(!facts.kernel.is_empty() && !facts.hostname.is_empty());
    assert!(facts.cpus.is_some_and(|c| c >= 1));
    assert!(facts.memory_bytes.is_some_and(|m| m > 0));
    assert!(facts.uptime_secs.is_some());
    let cpus = format!("fact.cpus={}", facts.cpus.unwrap_or(0));
    let version = format!("fact.version={VERSION}");

    let all = ["db1", "web1", "web2"];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("env=prod", vec!["db1", "web1"]),
        ("env!=prod", vec!["web2"]),
        ("gpu", vec!["db1"]),
        ("gpu=", vec!["db1"]),
        ("team", vec![]),
        ("id~web*", vec!["web1", "web2"]),
        ("id~?b1", vec!["db1"]),
        ("id~*", all.to_vec()),
        ("fact.os=linux", all.to_vec()),
        ("fact.os!=linux", vec![]),
        ("fact.os=macos", vec![]),
        (&cpus, all.to_vec()),
        (&version, all.to_vec()),
        ("role=web,env=prod", vec!["web1"]),
        (" env = prod , fact.os=linux , id~web* ", vec!["web1"]),
        ("env=staging,role=db", vec![]),
    ];
    for (select, want) in &cases {
        let got = ids(&admin.select_nodes(Some(select)).await.expect(select));
        assert_eq!(got, *want, "WebSocket {select:?}");
        let (status, body) = http_select(gw, &admin_token, select).await;
        assert_eq!(status, 200, "HTTP {select:?}: {body}");
        assert_eq!(body_ids(&body), *want, "HTTP {select:?}");
        let (code, out, err) = gw.cli(&["nodes", "--select", select, "--json"]);
        assert_eq!(code, 0, "CLI {select:?}: {err}");
        let listed: Vec<NodeSummary> = serde_json::from_str(&out).expect("--json");
        assert_eq!(ids(&listed), *want, "CLI {select:?}");
    }
    let (code, _, err) = gw.cli(&["nodes", "--select", "team"]);
    assert_eq!(code, 0);
    assert!(err.contains("no nodes match the selector"), "{err}");

    // Bad selectors: `invalid_args` (HTTP 400, CLI exit 2) naming the term.
    let bad = [
        ("env=prod,,role", "term 2 is empty"),
        (
            "env=prod,fact.colour=red",
            "term 2 `fact.colour=red`: unknown fact",
        ),
        ("Env=prod", "term 1 `Env=prod`"),
        ("role,id=web1", "term 2 `id=web1`"),
        ("env~prod", "term 1 `env~prod`"),
        ("fact.os", "term 1 `fact.os`: a fact term needs a value"),
        ("id~[a", "term 1 `id~[a`: bad glob"),
        ("", "the selector is empty"),
    ];
    for (select, says) in bad {
        let e = remote(admin.select_nodes(Some(select)).await.expect_err(select));
        assert_eq!(e.code, ErrorCode::InvalidArgs, "{select:?}");
        assert!(e.message.contains(says), "{select:?}: {}", e.message);
        let (status, body) = http_select(gw, &admin_token, select).await;
        assert_eq!(status, 400, "{select:?}: {body}");
        assert_eq!(body["error"]["code"], "invalid_args", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(says)),
            "{body}"
        );
        let (code, _, err) = gw.cli(&["nodes", "--select", select]);
        assert_eq!(code, 2, "{select:?}: {err}");
        assert!(
            err.starts_with("error: invalid_args: bad selector: ") && err.contains(says),
            "{err}"
        );
    }
    let long = "a,".repeat(600);
    let (status, body) = http_select(gw, &admin_token, &long).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_args"))
    );

    // A token that may call only web1__Read sees web1 (its labels, its facts, that one
    // tool) and nothing else, whatever it selects.
    let narrow = gw.token(&["agent", "narrow", "--allow", "web1__Read"]);
    let agent = gw.agent_with(&narrow).await;
    let seen = agent.list_nodes().await.expect("nodes.list");
    assert_eq!(ids(&seen), ["web1"]);
    assert_eq!(seen[0].labels, expected_labels("web1"));
    assert_eq!(seen[0].tools, ["Read"]);
    assert!(seen[0].runtime.facts.is_some());
    for (select, want) in &cases {
        let want: Vec<&str> = want.iter().copied().filter(|id| *id == "web1").collect();
        let got = ids(&agent.select_nodes(Some(select)).await.expect(select));
        assert_eq!(got, want, "narrow WebSocket {select:?}");
        let (status, body) = http_select(gw, &narrow, select).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body_ids(&body), want, "narrow HTTP {select:?}");
        let text = scrubbed(&body);
        assert!(
            !text.contains("web2") && !text.contains("db1") && !text.contains("staging"),
            "{text}"
        );
    }
    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&narrow)).await;
    assert_eq!(status, 200);
    let text = scrubbed(&serde_json::from_str(&body).expect("JSON"));
    assert!(!text.contains("db1") && !text.contains("web2"), "{body}");
    // Nor does nodes.show leak another node, or its labels.
    let e = remote(
        agent
            .request(Method::NodesShow, &NodeIdParams { id: "db1".into() })
            .await
            .expect_err("db1 is not visible"),
    );
    assert_eq!(e.code, ErrorCode::NotFound);
    let raw = agent
        .request(Method::NodesShow, &NodeIdParams { id: "web1".into() })
        .await
        .expect("web1 is visible");
    let d: NodeDetail = serde_json::from_str(raw.get()).expect("detail");
    assert_eq!(d.node.labels, expected_labels("web1"));
    let (status, body) = http_get(&gw.addr, "/v1/nodes/web1", Some(&narrow)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"env\":\"prod\""), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_operators_label_known_nodes_and_bad_labels_are_refused() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("inventory-ws");
    let token = gw.token(&["node", "web1", "--label", "env=prod"]);
    let _node = gw.spawn_node("web1", &token, ws.path(), &[]);
    gw.wait_online("web1").await;
    let admin_token = gw.admin_token();
    let admin = gw.agent_with(&admin_token).await;
    let prod = labels(&[("env", "prod")]);

    // Agents, even allowed every tool, cannot relabel: WebSocket, HTTP, CLI.
    let all = gw.agent_token();
    let agent = gw.agent_with(&all).await;
    let e = label_ws(&agent, "web1", labels(&[("env", "dev")]), &[])
        .await
        .expect_err("agents cannot label");
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert!(
        e.message.contains("labelling a node needs the admin token"),
        "{e}"
    );
    let (status, body) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/web1/labels",
        Some(&all),
        Some(r#"{"set":{"env":"dev"}}"#),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (code, _, err) = gw.cli(&["nodes", "label", "web1", "env=dev", "--token", &all]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("forbidden"), "{err}");

    // Bad labels: `invalid_args` with the rule, nothing changed.
    let e = label_ws(&admin, "web1", labels(&[("Env", "x")]), &[])
        .await
        .expect_err("bad key");
    assert_eq!(e.code, ErrorCode::InvalidArgs);
    assert!(e.message.contains("label key \"Env\" is invalid"), "{e}");
    let e = label_ws(&admin, "web1", labels(&[("fact.os", "x")]), &[])
        .await
        .expect_err("reserved key");
    assert!(e.message.contains("reserved"), "{e}");
    let e = label_ws(&admin, "web1", Labels::new(), &["Bad Key"])
        .await
        .expect_err("bad key to remove");
    assert_eq!(e.code, ErrorCode::InvalidArgs);
    for body in [
        r#"{"set":{"env":"a b"}}"#.to_owned(),
        r#"{"set":{"env":"prod"},"labels":{"x":"y"}}"#.to_owned(),
        r#"{"set":"env=prod"}"#.to_owned(),
        serde_json::to_string(&json!({
            "set": (0..MAX_LABELS).map(|i| (format!("k{i}"), "v".to_owned())).collect::<Labels>()
        }))
        .expect("json"),
    ] {
        let (status, text) = http_request(
            &gw.addr,
            "POST",
            "/v1/nodes/web1/labels",
            Some(&admin_token),
            Some(&body),
        )
        .await;
        assert_eq!(status, 400, "{body}: {text}");
        assert!(text.contains("\"invalid_args\""), "{text}");
    }
    for args in [
        vec!["nodes", "label", "web1", "Env=x"],
        vec!["nodes", "label", "web1", "env"],
        vec!["nodes", "label", "web1", "env=a,b"],
        vec!["nodes", "label", "web1", "--remove", "id"],
        vec!["nodes", "label", "web1"],
    ] {
        let (code, _, err) = gw.cli(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.starts_with("error: invalid_args: "), "{err}");
    }
    assert_eq!(admin_node(&gw, "web1", |_| true).await.labels, prod);

    // Bad enrollment labels: exit 2 before any token exists.
    for bad in ["Env=x", "env", "env=a b", "id=1"] {
        let (code, out, err) = gw.cli(&["token", "create", "node", "web3", "--label", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(
            out.is_empty() && err.starts_with("error: invalid_args: "),
            "{err}"
        );
    }
    let (code, _, err) = gw.cli(&[
        "token", "create", "node", "web3", "--label", "env=a", "--label", "env=b",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("given twice"), "{err}");
    let (code, _, err) = gw.cli(&[
        "token", "create", "agent", "ci", "--allow", "*", "--label", "env=a",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--label applies to node tokens only"), "{err}");
    let (_, list, _) = gw.cli(&["token", "list", "--json"]);
    assert!(!list.contains("web3"), "{list}");

    // Only node ids the gateway knows: unknown ones are not_found; an id holding a
    // join token (not yet connected) may be labelled.
    let e = label_ws(&admin, "ghost", labels(&[("env", "x")]), &[])
        .await
        .expect_err("unknown node");
    assert_eq!(e.code, ErrorCode::NotFound);
    let (status, _) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/ghost/labels",
        Some(&admin_token),
        Some(r#"{"set":{"env":"x"}}"#),
    )
    .await;
    assert_eq!(status, 404);
    let (code, _, err) = gw.cli(&["nodes", "label", "ghost", "env=x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not_found"), "{err}");
    gw.token(&["node", "web9"]);
    let r = label_ws(&admin, "web9", labels(&[("env", "lab")]), &[])
        .await
        .expect("a node id with a join token");
    assert_eq!(r.labels, labels(&[("env", "lab")]));
}

/// Answers the gateway's requests on a raw node connection until it has answered one
/// `node.probe` with `facts`.
async fn answer_probe(node: &mut Raw, facts: Value) {
    loop {
        match node.frame().await {
            Frame::Req { id, method, .. } => {
                let result = match method {
                    Method::NodeProbe => json!({
                        "hostBinStatus": {}, "hostBinStatusUpdatedAt": 1, "facts": facts
                    }),
                    _ => json!({"ended": 0}),
                };
                let res = json!({"type": "res", "id": id, "ok": true, "result": result});
                node.send(&res.to_string()).await;
                if method == Method::NodeProbe {
                    return;
                }
            }
            _ => continue,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cannot_label_itself_and_its_facts_are_bounded_and_refreshed_on_probe() {
    let gw = Gateway::start().await;
    let token = gw.token(&["node", "edge1", "--label", "env=prod"]);
    // A node that claims labels, in its declaration and its runtime, and an
    // overlong fact.
    let mut params = node_connect(
        "edge1",
        &token,
        "",
        json!([tool("Echo", "diagnostics.echo")]),
    );
    params["node"]["labels"] = json!({"env": "hacked", "owner": "me"});
    params["node"]["runtime"]["labels"] = json!({"env": "hacked"});
    params["node"]["runtime"]["facts"] = json!({
        "os": "linux", "hostname": "fake-a", "kernel": "k".repeat(500), "cpus": 2
    });
    let mut node = Raw::open(&gw.addr, "/v1/node").await;
    let hello = node
        .handshake(|nonce| {
            params["auth"]["nonce"] = json!(nonce);
            params
        })
        .await;
    assert!(hello.is_ok(), "{hello:?}");
    let n = admin_node(&gw, "edge1", |_| true).await;
    assert_eq!(n.labels, labels(&[("env", "prod")]));
    let facts = n.runtime.facts.as_deref().expect("facts");
    assert_eq!((facts.hostname.as_str(), facts.cpus), ("fake-a", Some(2)));
    assert_eq!(facts.kernel.len(), MAX_FACT_TEXT);
    let admin = gw.agent_with(&gw.admin_token()).await;
    for select in ["owner", "env=hacked", "owner=me"] {
        let got = admin.select_nodes(Some(select)).await.expect(select);
        assert!(got.is_empty(), "{select}: {got:?}");
    }
    assert_eq!(
        ids(&admin.select_nodes(Some("env=prod")).await.expect("select")),
        ["edge1"]
    );

    // A probe reads the facts again; they replace the ones from connect.
    let admin_token = gw.admin_token();
    let probe = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/edge1/probe",
        Some(&admin_token),
        None,
    );
    let answer = answer_probe(
        &mut node,
        json!({"os": "linux", "hostname": "fake-b", "osRelease": "x".repeat(300)}),
    );
    let ((status, body), ()) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(probe, answer)
    })
    .await
    .expect("the probe within 30 s");
    assert_eq!(status, 200, "{body}");
    let n = admin_node(&gw, "edge1", |_| true).await;
    let facts = n.runtime.facts.as_deref().expect("facts");
    assert_eq!(facts.hostname, "fake-b");
    assert_eq!(facts.cpus, None, "the probe's facts replace, not merge");
    assert_eq!(facts.os_release.len(), MAX_FACT_TEXT);
    assert_eq!(
        ids(&admin
            .select_nodes(Some("fact.hostname=fake-b"))
            .await
            .expect("select")),
        ["edge1"]
    );
    assert!(admin
        .select_nodes(Some("fact.hostname=fake-a"))
        .await
        .expect("select")
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_node_refreshes_its_facts_on_probe() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("inventory-ws");
    let _node = gw.node("web1", ws.path()).await;
    let before = admin_node(&gw, "web1", |n| n.runtime.facts.is_some()).await;
    let up_before = before
        .runtime
        .facts
        .as_deref()
        .and_then(|f| f.uptime_secs)
        .expect("uptime");
    // Uptime is whole seconds: after a second and a bit, a fresh read is larger.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, body) = http_request(
        &gw.addr,
        "POST",
        "/v1/nodes/web1/probe",
        Some(&gw.admin_token()),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let probed: Value = serde_json::from_str(&body).expect("probe result");
    assert_eq!(probed["facts"]["version"], VERSION, "{body}");
    let after = admin_node(&gw, "web1", |_| true).await;
    let up_after = after
        .runtime
        .facts
        .as_deref()
        .and_then(|f| f.uptime_secs)
        .expect("uptime");
    assert!(up_after > up_before, "{up_before} -> {up_after}");
}
