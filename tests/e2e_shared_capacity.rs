//! End to end: a per-token share of every shared capacity (issue 42). Here: agent
//! WebSocket connections. One token that may call nothing used to hold ~20 000 of
//! them, until the gateway ran out of file descriptors and `/healthz` stopped
//! answering. Now a token holds at most its share (`--agent-conns-per-token`), all of
//! them together at most `--agent-conns-max`, and another token still connects.

mod common;

use common::{http_get, Gateway};
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::ErrorCode;

async fn connect(gw: &Gateway, token: &str) -> Result<AgentClient, ClientError> {
    AgentClient::connect_with(&gw.url(), token, &gw.tls_options()).await
}

fn overloaded(r: Result<AgentClient, ClientError>, limit: &str) {
    match r {
        Err(ClientError::Remote(e)) => {
            assert_eq!(e.code, ErrorCode::Overloaded, "{e:?}");
            assert!(e.message.contains(limit), "{e:?}");
        }
        Err(other) => panic!("expected overloaded ({limit}), got {other:?}"),
        Ok(_) => panic!("a connection over {limit} was accepted"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_holds_its_share_of_agent_connections_and_no_more() {
    let gw =
        Gateway::start_with(&["--agent-conns-per-token", "8", "--agent-conns-max", "12"]).await;
    // A token that may call nothing at all.
    let idle = gw.token(&["agent", "idle", "--allow", "nothing__here"]);
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(connect(&gw, &idle).await.expect("within the share"));
    }
    for _ in 0..20 {
        overloaded(connect(&gw, &idle).await, "agent_conns_per_token");
    }
    // The gateway still answers, and another token still connects.
    let (status, _) = http_get(&gw.addr, "/healthz", None).await;
    assert_eq!(status, 200);
    let other = gw.agent_token();
    let mut others = Vec::new();
    for _ in 0..4 {
        others.push(connect(&gw, &other).await.expect("another token's share"));
    }
    assert!(others[0].list_nodes().await.is_ok());
    // All 12 places are taken now: the total holds too.
    overloaded(
        connect(&gw, &gw.token(&["agent", "third", "--allow", "*"])).await,
        "agent_conns_max",
    );
    // A closed connection frees its place.
    drop(held.pop());
    common::eventually(
        "a place freed by a closed connection",
        std::time::Duration::from_secs(10),
        || async { connect(&gw, &idle).await.ok() },
    )
    .await;
}

/// Fan-out results kept while a fan-out runs count against a byte budget per token
/// (`--fanout-result-mib-per-token`): 16 fan-outs of one Echo-only token used to hold
/// hundreds of MiB for up to an hour. Past the share a node's outcome is kept without
/// its result (status kept, `overloaded` said), every result still goes out in its
/// `fanout.result` event, and the share is whole again when the fan-out ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_results_kept_count_against_the_tokens_share() {
    let gw = Gateway::start_with(&["--fanout-result-mib-per-token", "1"]).await;
    let ws = common::TempDir::new("fanout-share-ws");
    let mut nodes = Vec::new();
    for i in 0..6 {
        nodes.push(gw.node(&format!("n{i}"), ws.path()).await);
    }
    let token = gw.token(&["agent", "echoer", "--allow", "*__Echo"]);
    let agent = gw.agent_with(&token).await;
    let text = "x".repeat(300_000);
    let params = gsv_protocol::fanout::ToolsFanoutParams {
        tool: "Echo".to_owned(),
        select: "id~n*".to_owned(),
        args: serde_json::value::to_raw_value(&serde_json::json!({"text": text})).unwrap(),
        batch: Some(gsv_protocol::fanout::Batch::Count(1)),
        fail_fast: false,
        timeout_ms: None,
        wait_offline_ms: None,
        is_async: false,
    };
    for round in 0..2 {
        let id = format!("f{round}");
        let result = agent.fanout_with_id(&id, &params).await.expect("fan-out");
        assert_eq!(result.results.len(), 6);
        assert!(
            result.results.iter().all(|r| r.ok),
            "every node ran: {:?}",
            result.summary
        );
        let kept = result.results.iter().filter(|r| r.result.is_some()).count();
        assert!((1..6).contains(&kept), "round {round}: {kept} kept");
        for r in result.results.iter().filter(|r| r.result.is_none()) {
            let e = r.error.as_ref().expect("why it was not kept");
            assert_eq!(e.code, ErrorCode::Overloaded, "{e:?}");
            assert!(e.message.contains("not kept"), "{e:?}");
        }
        // Every node's whole result went out as it finished.
        let mut events = 0;
        while let Some(e) = agent
            .next_event(std::time::Duration::from_millis(500))
            .await
        {
            if let Some(o) = gsv_client::fanout_event(&e, &id) {
                assert!(o.result.is_some(), "{} sent without its result", o.node);
                events += 1;
            }
        }
        assert_eq!(events, 6, "round {round}");
    }
}

/// A webhook receiver on loopback that answers each POST after `delay`, recording
/// the `agent` of each body, in order.
async fn slow_receiver(
    delay: std::time::Duration,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = got.clone();
    tokio::spawn(async move {
        for _ in 0..2000 {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            let body = loop {
                let Ok(n) = tcp.read(&mut chunk).await else {
                    break None;
                };
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if buf.len() >= i + 4 + length {
                    break Some(buf[i + 4..i + 4 + length].to_vec());
                }
            };
            if let Some(body) = body {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let agent = v["agent"].as_str().unwrap_or("").to_owned();
                seen.lock().expect("lock").push(agent);
            }
            tokio::time::sleep(delay).await;
            let _ = tcp
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        }
    });
    (url, got)
}

/// The approval webhook's queue is fair between tokens: one token's 300 requests
/// used to fill the whole queue and drop another agent's notification. Now the
/// flooding token holds at most its share of the queue, notifications go out one
/// token at a time in turn, and the other agent's arrives among the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_cannot_push_another_agents_webhook_notification_out() {
    let (url, got) = slow_receiver(std::time::Duration::from_millis(200)).await;
    let gw =
        Gateway::start_with(&["--approval-webhook", &url, "--approvals-per-token", "400"]).await;
    let ws = common::TempDir::new("webhook-fair-ws");
    let _node = gw.node("lab", ws.path()).await;
    let flood = gw.token(&["agent", "flood", "--allow", "*", "--confirm", "lab__Echo"]);
    let quiet = gw.token(&["agent", "quiet", "--allow", "*", "--confirm", "lab__Echo"]);
    let flooder = gw.agent_with(&flood).await;
    for i in 0..300 {
        flooder
            .call_async(
                "lab__Echo",
                serde_json::json!({"text": format!("f{i}")}),
                None,
            )
            .await
            .expect("queued for approval");
    }
    let other = gw.agent_with(&quiet).await;
    other
        .call_async("lab__Echo", serde_json::json!({"text": "mine"}), None)
        .await
        .expect("queued for approval");
    let position = common::eventually(
        "the quiet agent's notification delivered",
        std::time::Duration::from_secs(30),
        || {
            let got = got.clone();
            async move { got.lock().expect("lock").iter().position(|a| a == "quiet") }
        },
    )
    .await;
    assert!(position < 40, "delivered only after {position} others");
}

/// Job names were not bounded: an async call with a name of megabytes stored a job
/// row of that size before the name was ever checked. Now the name is refused with
/// `invalid_args` before anything is kept, and no job row appears.
#[tokio::test]
async fn a_job_name_longer_than_any_tool_name_is_refused_before_it_is_kept() {
    let gw = Gateway::start().await;
    let agent = gw.agent().await;
    let before = agent.jobs(100, 0).await.expect("jobs").total;
    let name = format!("lab__{}", "x".repeat(2 * 1024 * 1024));
    let e = agent
        .call_async(&name, serde_json::json!({}), None)
        .await
        .expect_err("a 2 MiB name");
    assert_eq!(
        e.remote().map(|r| r.code),
        Some(ErrorCode::InvalidArgs),
        "{e:?}"
    );
    assert_eq!(agent.jobs(100, 0).await.expect("jobs").total, before);
}
