//! End to end: nothing an agent started is lost when its connection goes away
//! (issue 20). A synchronous call whose caller disconnects before the result becomes a
//! job of its token and finishes on its node; a fan-out goes on to its end; both are
//! read back with `jobs.get` from a new connection. Only a cancel ends them: `gsv call`
//! interrupted with Ctrl-C cancels its call (exit 130) instead of leaving it running.

mod common;

use common::{eventually, gsv_bin, Gateway, TempDir};
use gsv_protocol::job::{Job, JobKind, JobState};
use gsv_protocol::ErrorCode;
use serde_json::json;
use std::time::Duration;

/// The token's only job, once it exists.
async fn only_job(gw: &Gateway, token: &str) -> Job {
    let client = gw.agent_with(token).await;
    eventually("the job to be listed", Duration::from_secs(10), || {
        let client = &client;
        async move {
            let page = client.jobs(50, 0).await.ok()?;
            (page.jobs.len() == 1).then(|| page.jobs[0].id.clone())
        }
    })
    .await;
    let id = client.jobs(1, 0).await.expect("list").jobs[0].id.clone();
    client.job(&id).await.expect("read")
}

/// Waits until the job `id` is no longer running; reads it as `token`.
async fn finished(gw: &Gateway, token: &str, id: &str) -> Job {
    let client = gw.agent_with(token).await;
    eventually("the job to end", Duration::from_secs(30), || {
        let client = &client;
        async move {
            let job = client.job(id).await.ok()?;
            (job.summary.state != JobState::Running).then_some(job)
        }
    })
    .await
}

#[tokio::test]
async fn a_call_whose_caller_goes_away_becomes_a_job_and_finishes() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("detached-ws");
    let _node = gw.node("lab", ws.path()).await;
    let owner = gw.agent_token();
    let other = gw.token(&["agent", "other", "--allow", "*"]);

    // A plain call: no job while its caller waits.
    let client = gw.agent_with(&owner).await;
    let waited = tokio::time::timeout(
        Duration::from_millis(500),
        client.call(
            "lab__Bash",
            json!({"command": "sleep 1.5; echo kept-$((6*7))"}),
            None,
        ),
    )
    .await;
    assert!(waited.is_err(), "the call is still running");
    assert_eq!(client.jobs(50, 0).await.expect("list").total, 0);
    // The caller goes away (no cancel): the call goes on as a job of its token.
    drop(client);

    let job = only_job(&gw, &owner).await;
    assert_eq!(job.summary.kind, JobKind::Call);
    assert_eq!(job.summary.name, "lab__Bash");
    let done = finished(&gw, &owner, &job.summary.id).await;
    assert_eq!(done.summary.state, JobState::Done, "{done:?}");
    let text = serde_json::to_string(&done.result).expect("encode");
    assert!(text.contains("kept-42"), "{text}");

    // Another token neither lists nor reads it.
    let stranger = gw.agent_with(&other).await;
    assert_eq!(stranger.jobs(50, 0).await.expect("list").total, 0);
    let err = stranger
        .job(&job.summary.id)
        .await
        .expect_err("not another token's job");
    assert!(err.to_string().contains("not_found"), "{err}");
}

#[tokio::test]
async fn a_fan_out_goes_on_when_its_caller_goes_away() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("detached-ws");
    let _a = gw.node("da", ws.path()).await;
    let _b = gw.node("db", ws.path()).await;
    let owner = gw.agent_token();
    let client = gw.agent_with(&owner).await;
    let params = gsv_protocol::fanout::ToolsFanoutParams {
        tool: "Bash".into(),
        select: "id~d*".into(),
        args: serde_json::value::to_raw_value(&json!({"command": "sleep 1.5; echo fan-ok"}))
            .expect("args"),
        batch: None,
        fail_fast: false,
        timeout_ms: None,
        wait_offline_ms: None,
        is_async: false,
    };
    let id = client.next_id();
    let waited = tokio::time::timeout(
        Duration::from_millis(500),
        client.fanout_with_id(&id, &params),
    )
    .await;
    assert!(waited.is_err(), "the fan-out is still running");
    drop(client);

    let job = only_job(&gw, &owner).await;
    assert_eq!(job.summary.kind, JobKind::Fanout);
    let done = finished(&gw, &owner, &job.summary.id).await;
    assert_eq!(done.summary.state, JobState::Done, "{done:?}");
    let text = done.result.expect("a result").get().to_owned();
    let result: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(result["summary"]["ok"], 2, "{text}");
    assert_eq!(text.matches(r#""text":"fan-ok"#).count(), 2, "{text}");
}

#[tokio::test]
async fn a_detached_call_is_cancelled_with_jobs_cancel() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("detached-ws");
    let _node = gw.node("lab", ws.path()).await;
    let owner = gw.agent_token();
    let marker = ws.path().join("never-written");
    let command = format!("sleep 3; touch {}", marker.display());
    let client = gw.agent_with(&owner).await;
    let _ = tokio::time::timeout(
        Duration::from_millis(300),
        client.call("lab__Bash", json!({ "command": command }), None),
    )
    .await;
    drop(client);
    let job = only_job(&gw, &owner).await;
    let client = gw.agent_with(&owner).await;
    let cancelled = client.cancel_job(&job.summary.id).await.expect("cancel");
    assert_eq!(cancelled.summary.state, JobState::Failed, "{cancelled:?}");
    assert_eq!(cancelled.error.map(|e| e.code), Some(ErrorCode::Cancelled));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !marker.exists(),
        "the cancelled command did not run to its end"
    );
}

#[tokio::test]
async fn gsv_call_interrupted_cancels_its_call() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("detached-ws");
    let _node = gw.node("lab", ws.path()).await;
    let owner = gw.agent_token();
    let marker = ws.path().join("not-after-ctrl-c");
    let started = ws.path().join("started");
    let command = format!(
        "touch {}; sleep 3; touch {}",
        started.display(),
        marker.display()
    );
    let args = json!({ "command": command }).to_string();
    let mut child = std::process::Command::new(gsv_bin())
        .args([
            "call",
            "lab__Bash",
            &args,
            "--gateway",
            &gw.url(),
            "--token",
            &owner,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run gsv call");
    // Once the command runs on the node, Ctrl-C.
    eventually("the command to start", Duration::from_secs(10), || {
        let ready = started.exists().then_some(());
        async move { ready }
    })
    .await;
    // SAFETY: a plain signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = eventually("gsv call to exit", Duration::from_secs(10), || {
        let status = child.try_wait().ok().flatten();
        async move { status }
    })
    .await;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("cancelled"), "{err}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !marker.exists(),
        "the interrupted call's command was cancelled"
    );
    let client = gw.agent_with(&owner).await;
    assert_eq!(client.jobs(50, 0).await.expect("list").total, 0, "no job");
}

#[tokio::test]
async fn revoking_a_token_cancels_its_detached_calls_and_jobs() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("detached-ws");
    let _node = gw.node("lab", ws.path()).await;
    let token = gw.token(&["agent", "doomed", "--allow", "*", "--confirm", "lab__Echo"]);
    let id = token.split('_').nth(2).expect("token id").to_owned();
    // A call waiting for an operator when its caller goes away, and an async one.
    let client = gw.agent_with(&token).await;
    let waiting = tokio::time::timeout(
        Duration::from_millis(300),
        client.call("lab__Echo", json!({"text": "x"}), None),
    )
    .await;
    assert!(waiting.is_err(), "waits for approval");
    let job = client
        .call_async("lab__Echo", json!({"text": "y"}), None)
        .await
        .expect("started");
    drop(client);
    let admin = gw.agent_with(&gw.admin_token()).await;
    eventually("two running jobs", Duration::from_secs(10), || {
        let admin = &admin;
        async move {
            let page = admin.jobs(50, 0).await.ok()?;
            (page.jobs.len() == 2).then_some(())
        }
    })
    .await;
    let (code, _, err) = gw.cli(&["token", "revoke", &id]);
    assert_eq!(code, 0, "{err}");
    // Both end at once (cancelled), instead of waiting on for a decision nobody wants.
    for j in [
        job,
        admin.jobs(50, 0).await.expect("list").jobs[1].id.clone(),
    ] {
        let ended = finished(&gw, &gw.admin_token(), &j).await;
        assert_eq!(ended.summary.state, JobState::Failed, "{ended:?}");
        assert_eq!(ended.error.map(|e| e.code), Some(ErrorCode::Cancelled));
    }
}
