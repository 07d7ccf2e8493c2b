//! Graceful shutdown (SIGTERM) of the gateway and of a node, through real processes:
//! the gateway drains calls in flight and refuses new work; a node hands its calls back
//! at once and ends (or, when asked, keeps) its background sessions.

mod common;

use common::{eventually, sc, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, EventName};
use serde_json::json;
use std::time::{Duration, Instant};

fn sigterm(child: &std::process::Child) {
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
}

async fn exited(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    eventually(what, Duration::from_secs(20), || {
        let s = child.try_wait().ok().flatten();
        async move { s }
    })
    .await
}

fn pid_alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

#[tokio::test]
async fn sigterm_lets_calls_in_flight_finish_and_refuses_new_work() {
    let mut gw = Gateway::start_with(&["--drain-ms", "10000"]).await;
    let ws = TempDir::new("ws");
    let _node = gw.node("steady", ws.path()).await;
    let agent = gw.agent().await;
    agent.list_nodes().await.unwrap();
    let slow = agent.call(
        "steady__Echo",
        json!({"text": "finished", "delayMs": 1500}),
        None,
    );
    let stop = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        sigterm(&gw.proc.0);
        // Told to the agent; new calls and new agents are refused while draining.
        let event = eventually("the shutdown event", Duration::from_secs(5), || async {
            let e = agent.next_event(Duration::from_millis(200)).await?;
            (e.event == EventName::Shutdown).then_some(e.payload)
        })
        .await;
        assert_eq!(event["drainMs"], 10000);
        let refused = agent
            .call("steady__Echo", json!({"text": "late"}), None)
            .await
            .unwrap_err();
        let e = refused.remote().expect("a gateway error");
        assert_eq!(e.code, ErrorCode::Overloaded, "{e:?}");
        assert_eq!(e.details.as_ref().unwrap()["shutdown"], true);
        assert!(AgentClient::connect(&gw.url(), &gw.agent_token())
            .await
            .is_err());
    };
    let (result, ()) = tokio::join!(slow, stop);
    let result = result.expect("the call in flight finishes");
    assert_eq!(result.joined_text(), "finished");
    let status = exited(&mut gw.proc.0, "the gateway to exit").await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_stopping_node_hands_its_calls_back_at_once() {
    // A grace period far longer than the test: the caller must hear from the node
    // itself, not from the gateway giving up.
    let gw = Gateway::start_with(&["--grace-ms", "60000"]).await;
    let ws = TempDir::new("ws");
    let mut node = gw.node("leaving", ws.path()).await;
    let agent = gw.agent().await;
    let call = agent.call("leaving__Bash", json!({"command": "sleep 30"}), None);
    let stop = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        sigterm(&node.0);
        Instant::now()
    };
    let (result, stopped_at) = tokio::join!(call, stop);
    let err = result.unwrap_err();
    let e = err.remote().expect("a node error");
    assert_eq!(e.code, ErrorCode::Cancelled, "{e:?}");
    assert!(e.message.contains("shutting down"), "{}", e.message);
    assert!(
        stopped_at.elapsed() < Duration::from_secs(8),
        "took {:?}",
        stopped_at.elapsed()
    );
    let status = exited(&mut node.0, "the node to exit").await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn keep_sessions_on_exit_leaves_background_jobs_running() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let token = gw.node_token("keeper");
    let mut node = gw.spawn_node("keeper", &token, ws.path(), &["--keep-sessions-on-exit"]);
    gw.wait_online("keeper").await;
    let agent = gw.agent().await;
    let r = agent
        .call(
            "keeper__Bash",
            json!({"command": "echo $$; exec sleep 300", "background": true}),
            None,
        )
        .await
        .unwrap();
    let id = sc(&r)["sessionId"].as_str().unwrap().to_owned();
    let pid: u64 = eventually("the job's pid", Duration::from_secs(10), || async {
        let log = agent
            .call(
                "keeper__Process",
                json!({"action": "log", "sessionId": id}),
                None,
            )
            .await
            .ok()?;
        sc(&log)["output"]
            .as_str()?
            .trim()
            .lines()
            .next()?
            .parse()
            .ok()
    })
    .await;
    sigterm(&node.0);
    let status = exited(&mut node.0, "the node to exit").await;
    assert!(status.success(), "{status:?}");
    let alive = pid_alive(pid);
    // Clean up the kept job (its own process group) before asserting.
    // SAFETY: signalling a process group this test started.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
    assert!(
        alive,
        "the background job was ended despite --keep-sessions-on-exit"
    );
}
