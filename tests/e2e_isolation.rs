//! End to end: agents sharing a node own their process sessions (issue 15, item 2).
//! Several tokens on one real gateway and one real node: a session belongs to the token
//! that started it; Process, `GET /v1/sessions` and `process.exited` show and act on the
//! caller's own sessions only (an operator sees all), another token's session looks
//! exactly like one that does not exist, and `confirm` on Process also holds back the
//! `process.exited` events.

mod common;

use common::{eventually, http_get, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{EventName, ToolResult};
use serde_json::{json, Value};
use std::time::Duration;

async fn call(agent: &AgentClient, name: &str, args: Value) -> ToolResult {
    agent
        .call(name, args, Some(30_000))
        .await
        .expect("call answered")
}

/// Every `process.exited` event `agent` received within `wait`, as session ids.
async fn exited_ids(agent: &AgentClient, wait: Duration) -> Vec<String> {
    let mut ids = Vec::new();
    while let Some(e) = agent.next_event(wait).await {
        if e.event == EventName::ProcessExited {
            ids.push(
                e.payload["data"]["sessionId"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            );
        }
    }
    ids
}

#[tokio::test]
async fn sessions_belong_to_the_token_that_started_them() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("iso-ws");
    let _node = gw.node("lab", ws.path()).await;
    let alice_token = gw.token(&["agent", "alice", "--allow", "lab__*"]);
    let mallory_token = gw.token(&["agent", "mallory", "--allow", "lab__Process"]);
    let carol_token = gw.token(&[
        "agent",
        "carol",
        "--allow",
        "lab__*",
        "--confirm",
        "lab__Process",
    ]);
    let alice = gw.agent_with(&alice_token).await;
    let mallory = gw.agent_with(&mallory_token).await;
    let carol = gw.agent_with(&carol_token).await;
    let admin = gw.agent_with(&gw.admin_token()).await;

    // Alice runs a shell that reads commands, with a secret in its output.
    let r = call(
        &alice,
        "lab__Bash",
        json!({"command": "echo DB_PASSWORD=hunter2; exec sh", "background": true}),
    )
    .await;
    let id = sc(&r)["sessionId"].as_str().expect("sessionId").to_owned();

    // Mallory sees nothing of it, and every action on its id is "no such session".
    let list = call(&mallory, "lab__Process", json!({"action": "list"})).await;
    assert!(!list.joined_text().contains(&id), "{}", list.joined_text());
    assert!(
        !list.joined_text().contains("DB_PASSWORD"),
        "{}",
        list.joined_text()
    );
    assert_eq!(sc(&list)["sessions"], json!([]), "{}", list.joined_text());
    let missing = call(
        &mallory,
        "lab__Process",
        json!({"action": "poll", "sessionId": "00000000-0000-0000-0000-000000000000"}),
    )
    .await;
    for action in [
        json!({"action": "poll", "sessionId": id}),
        json!({"action": "log", "sessionId": id}),
        json!({"action": "submit", "sessionId": id, "data": "touch PWNED"}),
        json!({"action": "write", "sessionId": id, "data": "touch PWNED2\n"}),
        json!({"action": "kill", "sessionId": id}),
        json!({"action": "remove", "sessionId": id}),
    ] {
        let r = call(&mallory, "lab__Process", action.clone()).await;
        assert!(r.is_error, "{action}: {}", r.joined_text());
        assert!(
            !r.joined_text().contains("DB_PASSWORD"),
            "{}",
            r.joined_text()
        );
        assert_eq!(
            r.joined_text().replace(&id, "ID"),
            missing
                .joined_text()
                .replace("00000000-0000-0000-0000-000000000000", "ID"),
            "{action}: another token's session must look like a missing one"
        );
    }
    // Over HTTP too.
    let (status, body) = http_get(&gw.addr, "/v1/sessions", Some(&mallory_token)).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.contains(&id) && !body.contains("DB_PASSWORD"),
        "{body}"
    );
    let (_, body) = http_get(&gw.addr, "/v1/sessions", Some(&gw.admin_token())).await;
    assert!(
        body.contains(&id),
        "the operator sees every session: {body}"
    );

    // Alice still owns a live session, and her own input runs.
    let p = call(
        &alice,
        "lab__Process",
        json!({"action": "poll", "sessionId": id}),
    )
    .await;
    assert_eq!(sc(&p)["status"], "running", "{}", p.joined_text());
    let s = call(
        &alice,
        "lab__Process",
        json!({"action": "submit", "sessionId": id, "data": "touch MINE"}),
    )
    .await;
    assert!(!s.is_error, "{}", s.joined_text());
    eventually("alice's command ran", Duration::from_secs(10), || async {
        ws.path().join("MINE").exists().then_some(())
    })
    .await;
    assert!(!ws.path().join("PWNED").exists() && !ws.path().join("PWNED2").exists());
    let list = call(&alice, "lab__Process", json!({"action": "list"})).await;
    assert!(list.joined_text().contains(&id), "{}", list.joined_text());

    // Carol (Process needs an operator) starts her own session with Bash; it ends.
    let r = call(
        &carol,
        "lab__Bash",
        json!({"command": "echo carol-secret", "background": true}),
    )
    .await;
    let carol_id = sc(&r)["sessionId"].as_str().expect("sessionId").to_owned();
    call(
        &alice,
        "lab__Process",
        json!({"action": "kill", "sessionId": id}),
    )
    .await;

    // The ends: alice hears of hers, the operator of both, mallory and carol of none.
    let admin_ids = eventually("operator hears both ends", Duration::from_secs(15), || {
        let admin = &admin;
        let (id, carol_id) = (id.clone(), carol_id.clone());
        async move {
            let mut seen = Vec::new();
            while let Some(e) = admin.next_event(Duration::from_millis(200)).await {
                if e.event == EventName::ProcessExited {
                    seen.push(
                        e.payload["data"]["sessionId"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned(),
                    );
                }
                if seen.contains(&id) && seen.contains(&carol_id) {
                    return Some(seen);
                }
            }
            None
        }
    })
    .await;
    assert!(admin_ids.contains(&id));
    let alice_ids = exited_ids(&alice, Duration::from_millis(500)).await;
    assert_eq!(
        alice_ids,
        vec![id.clone()],
        "alice hears of her own session only"
    );
    let mallory_ids = exited_ids(&mallory, Duration::from_millis(300)).await;
    assert!(mallory_ids.is_empty(), "mallory heard {mallory_ids:?}");
    let carol_ids = exited_ids(&carol, Duration::from_millis(300)).await;
    assert!(
        carol_ids.is_empty(),
        "confirm on Process holds back events: {carol_ids:?}"
    );
}
