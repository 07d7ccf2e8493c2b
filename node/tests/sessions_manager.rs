//! The session manager's retention and caps: expiry of finished sessions, the
//! finished-session and memory caps (oldest dropped first), refusals.

mod sessions_support;

use gsv_node::sessions::{Limits, SessionManager, SpawnSpec};
use gsv_node::EventSender;
use serde_json::json;
use sessions_support::Node;
use std::time::{Duration, Instant};

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_sessions_expire() {
    let node = Node::with_limits(Limits {
        retention: Duration::from_millis(300),
        ..Limits::default()
    });
    let id = node.start("true").await;
    node.wait_done(&id).await;
    assert_eq!(node.sessions.list().len(), 1);
    // Expired by the timer even if nothing else happens.
    until("the session expired", || node.sessions.is_empty()).await;
    let err = node
        .process_err(json!({"action": "poll", "sessionId": id}))
        .await;
    assert!(err.contains("no session"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_finished_sessions_go_first() {
    let node = Node::with_limits(Limits {
        max_finished: 2,
        ..Limits::default()
    });
    let mut ids = Vec::new();
    for i in 0..4 {
        let id = node.start(&format!("echo {i}")).await;
        node.wait_done(&id).await;
        ids.push(id);
    }
    until("two are left", || node.sessions.len() == 2).await;
    let kept: Vec<String> = node
        .sessions
        .list()
        .iter()
        .map(|s| s.id().to_owned())
        .collect();
    assert_eq!(kept, [ids[3].clone(), ids[2].clone()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_cap_drops_finished_then_refuses() {
    let node = Node::with_limits(Limits {
        max_retained_bytes: 10_000,
        ..Limits::default()
    });
    // Each finished session holds ~6,000 bytes (text plus the stdout ring).
    let a = node.start("head -c 3000 /dev/zero | tr '\\0' x").await;
    node.wait_done(&a).await;
    let b = node.start("head -c 3000 /dev/zero | tr '\\0' y").await;
    node.wait_done(&b).await;
    until("the older one is dropped", || {
        node.sessions.prune();
        node.sessions.len() == 1
    })
    .await;
    assert_eq!(node.sessions.list()[0].id(), b);
    assert!(node.sessions.retained_bytes() <= 10_000);

    // Running sessions are never dropped; once they alone hold the cap, new jobs are
    // refused.
    let c = node
        .start("head -c 6000 /dev/zero | tr '\\0' z; sleep 1000")
        .await;
    until("all of c's output is in", || {
        node.sessions
            .get(&c)
            .is_some_and(|s| s.snapshot().total_chars == 6000)
    })
    .await;
    until("the finished one is dropped", || {
        node.sessions.prune();
        node.sessions.len() == 1
    })
    .await;
    let r = node.bash(json!({"command": "true"})).await;
    assert!(r.is_error);
    assert!(
        r.joined_text().contains("reached its cap"),
        "{}",
        r.joined_text()
    );
    node.process_ok(json!({"action": "kill", "sessionId": c}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_manager_kills_running_sessions() {
    let sessions = SessionManager::new(EventSender::detached());
    let dir = tempfile::tempdir().unwrap();
    let session = sessions
        .spawn(SpawnSpec {
            command: "sleep 1000".into(),
            workdir: dir.path().to_owned(),
            pty: false,
            background: true,
            stdin: false,
            timeout: None,
            owner: None,
            env_overrides: Vec::new(),
            argv: None,
            call_id: None,
            yields: false,
        })
        .await
        .unwrap();
    let pid = session.pid();
    drop(sessions);
    sessions_support::wait_gone(&[pid]).await;
    tokio::time::timeout(Duration::from_secs(5), session.wait_finished())
        .await
        .unwrap();
}
