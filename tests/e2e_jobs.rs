//! End to end: jobs (issue 20, first part) through a real gateway and a real
//! `gsv node`: `gsv call --async` answers with a job id at once, the call runs on
//! after the caller's process exited, and `gsv jobs show` reads its outcome later —
//! from another process, after a gateway restart, for the same token or an operator
//! but not for another token; a job whose gateway is killed mid-call completes after
//! the restart (the node is asked for the call again); one that never reached a node
//! is reported `lost`, never left `running`.

mod common;

use common::{eventually, Gateway, TempDir};
use gsv_protocol::job::JobState;
use gsv_protocol::ErrorCode;
use serde_json::{json, Value};
use std::time::Duration;

/// `gsv ARGS --token TOKEN` against the gateway; (exit code, stdout, stderr).
fn cli_as(gw: &Gateway, token: &str, args: &[&str]) -> (i32, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--gateway", "", "--token", token]);
    let url = gw.url();
    all[args.len() + 1] = &url;
    gw.cli(&all)
}

fn job_json(gw: &Gateway, token: &str, id: &str) -> Value {
    let (code, out, err) = cli_as(gw, token, &["jobs", "show", id, "--json"]);
    assert!(code == 0 || !out.is_empty(), "jobs show {id}: {code} {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"))
}

#[tokio::test]
async fn an_async_call_outlives_its_caller_and_its_gateway_restart() {
    let mut gw = Gateway::start().await;
    let ws = TempDir::new("jobs-ws");
    let _node = gw.node("lab", ws.path()).await;
    let owner = gw.agent_token();
    let other = gw.token(&["agent", "other", "--allow", "*"]);

    // The CLI answers with the job id at once and exits; the command runs on.
    let (code, out, err) = cli_as(
        &gw,
        &owner,
        &[
            "call",
            "--async",
            "lab__Bash",
            r#"{"command": "sleep 2; echo done-$((6*7))"}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_owned();
    assert!(
        id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{out}"
    );
    let running = job_json(&gw, &owner, &id);
    assert_eq!(running["state"], "running", "{running}");
    assert_eq!(running["name"], "lab__Bash");

    // Read back once done, by another process of the same token: as `gsv call`
    // would have printed it.
    eventually("the job to finish", Duration::from_secs(30), || {
        let state = job_json(&gw, &owner, &id)["state"].clone();
        async move { (state != "running").then_some(()) }
    })
    .await;
    let (code, out, err) = cli_as(&gw, &owner, &["jobs", "show", &id]);
    assert_eq!((code, out.trim()), (0, "done-42"), "{err}");

    // Another token's job does not exist for it; an operator sees every job.
    let (code, _, err) = cli_as(&gw, &other, &["jobs", "show", &id]);
    assert_ne!(code, 0);
    assert!(err.contains("not_found"), "{err}");
    let (code, out, _) = cli_as(&gw, &other, &["jobs", "list", "--json"]);
    assert_eq!(code, 0);
    assert!(!out.contains(&id), "{out}");
    let (code, out, err) = gw.cli(&["jobs", "list", "--gateway", &gw.url()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id) && out.contains("done"), "{out}");

    // Kept across a restart of the gateway.
    gw.restart().await;
    let kept = job_json(&gw, &owner, &id);
    assert_eq!(kept["state"], "done", "{kept}");
    assert!(
        kept["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("done-42")),
        "{kept}"
    );

    // The same over HTTP.
    let (status, body) = common::http_get(&gw.addr, &format!("/v1/jobs/{id}"), Some(&owner)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("done-42"), "{body}");
    let (status, body) = common::http_get(&gw.addr, &format!("/v1/jobs/{id}"), Some(&other)).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) =
        common::http_get(&gw.addr, "/v1/jobs?limit=5", Some(&gw.admin_token())).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&id), "{body}");

    // A job that fails keeps its error: the call's own code.
    let client = gw.agent_with(&owner).await;
    let failed = client
        .call_async("nowhere__Echo", json!({"text": "x"}), None)
        .await
        .expect("an async call is accepted, then fails");
    let job = eventually("the failing job to end", Duration::from_secs(10), || {
        let client = &client;
        let failed = failed.clone();
        async move {
            let j = client.job(&failed).await.ok()?;
            (j.summary.state != JobState::Running).then_some(j)
        }
    })
    .await;
    assert_eq!(job.summary.state, JobState::Failed);
    assert_eq!(job.error.map(|e| e.code), Some(ErrorCode::NotFound));
}

#[tokio::test]
async fn a_job_whose_gateway_is_killed_mid_call_is_read_back_complete() {
    let mut gw = Gateway::start().await;
    let ws = TempDir::new("jobs-ws");
    let _node = gw.node("lab", ws.path()).await;
    let owner = gw.agent_token();
    let careful = gw.token(&["agent", "careful", "--allow", "*", "--confirm", "lab__Echo"]);
    let client = gw.agent_with(&owner).await;
    let id = client
        .call_async(
            "lab__Bash",
            json!({"command": "sleep 2; echo survived-$((6*7))"}),
            None,
        )
        .await
        .expect("started");
    // A job can be cancelled by its token: the call ends `cancelled`.
    let doomed = client
        .call_async("lab__Bash", json!({"command": "sleep 30"}), None)
        .await
        .expect("started");
    let (code, out, err) = cli_as(&gw, &owner, &["jobs", "cancel", &doomed]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("failed"), "{out}");
    let job = client.job(&doomed).await.expect("read");
    assert_eq!(job.error.map(|e| e.code), Some(ErrorCode::Cancelled));
    // A job still waiting for an operator when the gateway dies never reached a node.
    let waiting = gw
        .agent_with(&careful)
        .await
        .call_async("lab__Echo", json!({"text": "x"}), None)
        .await
        .expect("started");
    drop(client);
    // The caller is gone; the job still runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(job_json(&gw, &owner, &id)["state"], "running");

    // The gateway is killed mid-call and comes back: the node kept the call's result
    // and hands it over when asked again, so the job completes.
    gw.kill();
    gw.restart().await;
    eventually(
        "the job to be read back complete",
        Duration::from_secs(30),
        || {
            let state = job_json(&gw, &owner, &id)["state"].clone();
            async move { (state != "running").then_some(()) }
        },
    )
    .await;
    let done = job_json(&gw, &owner, &id);
    assert_eq!(done["state"], "done", "{done}");
    let (code, out, err) = cli_as(&gw, &owner, &["jobs", "show", &id]);
    assert_eq!((code, out.trim()), (0, "survived-42"), "{err}");

    // The one that never reached a node is reported lost, never left running.
    let lost = job_json(&gw, &careful, &waiting);
    assert_eq!(lost["state"], "lost", "{lost}");
    assert_eq!(lost["error"]["code"], "node_disconnected", "{lost}");
    let (code, _, err) = cli_as(&gw, &careful, &["jobs", "show", &waiting]);
    assert_ne!(code, 0);
    assert!(err.contains("not known"), "{err}");
}

#[tokio::test]
async fn a_fan_out_is_a_job_read_back_later() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("jobs-ws");
    let _a = gw.node("fa", ws.path()).await;
    let _b = gw.node("fb", ws.path()).await;
    let owner = gw.agent_token();
    let (code, out, err) = cli_as(
        &gw,
        &owner,
        &[
            "call",
            "--select",
            "id~f*",
            "--json",
            "Echo",
            r#"{"text": "hi"}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let result: Value = serde_json::from_str(&out).expect("the fan-out's result");
    let id = result["job"].as_str().expect("a job id").to_owned();
    // Kept: the same per-node blocks and summary, from another process.
    let (code, out, err) = cli_as(&gw, &owner, &["jobs", "show", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("== fa: ok") && out.contains("== fb: ok"),
        "{out}"
    );
    assert!(out.contains("2 ok, 0 failed, 0 offline, 0 denied"), "{out}");
    let job = job_json(&gw, &owner, &id);
    assert_eq!(
        (
            job["kind"].as_str(),
            job["select"].as_str(),
            job["name"].as_str()
        ),
        (Some("fanout"), Some("id~f*"), Some("Echo")),
        "{job}"
    );
    assert_eq!(job["result"]["summary"]["ok"], 2, "{job}");
    let (code, out, _) = cli_as(&gw, &owner, &["jobs", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains("Echo on id~f*"), "{out}");
    // Listed by the nodes it ran on.
    let (code, out, _) = cli_as(&gw, &owner, &["jobs", "list", "--select", "id~fb"]);
    assert_eq!(code, 0);
    assert!(out.contains(&id), "{out}");
    let (code, out, err) = cli_as(&gw, &owner, &["jobs", "list", "--select", "id~zz*"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains(&id) && err.contains("no jobs"), "{out} {err}");
    let (code, _, err) = cli_as(&gw, &owner, &["jobs", "list", "--select", "=bad"]);
    assert_ne!(code, 0);
    assert!(err.contains("invalid_args"), "{err}");
    // Not another token's to read.
    let other = gw.token(&["agent", "other", "--allow", "*"]);
    let (code, _, err) = cli_as(&gw, &other, &["jobs", "show", &id]);
    assert_ne!(code, 0);
    assert!(err.contains("not_found"), "{err}");
}

#[tokio::test]
async fn a_job_whose_node_is_killed_mid_call_is_read_back_complete() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("jobs-ws");
    let token = gw.node_token("lab");
    let mut node = gw.spawn_node("lab", &token, ws.path(), &[]);
    gw.wait_online("lab").await;
    let owner = gw.agent_token();
    let client = gw.agent_with(&owner).await;
    // A job, and a background session of the same token.
    let id = client
        .call_async(
            "lab__Bash",
            json!({"command": "sleep 3; echo node-survived-$((6*7))"}),
            None,
        )
        .await
        .expect("started");
    let bg = client
        .call(
            "lab__Bash",
            json!({"command": "sleep 3; echo bg-done", "background": true}),
            None,
        )
        .await
        .expect("background session");
    let session = bg.structured_content.as_ref().expect("structured")["sessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    eventually(
        "the job's command to start",
        Duration::from_secs(10),
        || {
            let running = job_json(&gw, &owner, &id)["state"] == "running";
            async move { running.then_some(()) }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // SIGKILL of the node process alone (its commands live on), then the same node
    // again: it re-adopts the command and the job completes as if nothing happened.
    node.kill();
    let _node = gw.spawn_node("lab", &token, ws.path(), &[]);
    gw.wait_online("lab").await;
    eventually("the job to be read back", Duration::from_secs(30), || {
        let state = job_json(&gw, &owner, &id)["state"].clone();
        async move { (state != "running").then_some(()) }
    })
    .await;
    let (code, out, err) = cli_as(&gw, &owner, &["jobs", "show", &id]);
    assert_eq!((code, out.trim()), (0, "node-survived-42"), "{err}");

    // The background session was re-adopted: Process polls it after the restart.
    let polled = eventually(
        "the re-adopted session to finish",
        Duration::from_secs(30),
        || {
            let client = &client;
            let session = session.clone();
            async move {
                let r = client
                    .call(
                        "lab__Process",
                        json!({"action": "poll", "sessionId": session}),
                        None,
                    )
                    .await
                    .ok()?;
                let sc = r.structured_content.clone()?;
                (sc["status"] != "running").then_some(sc)
            }
        },
    )
    .await;
    assert_eq!(polled["exitCode"], 0, "{polled}");
    assert!(
        polled.to_string().contains("bg-done"),
        "the session's output survived: {polled}"
    );
}

/// Issue 42: `jobs.list` with a selector matched over every node, so a token's own job
/// on a node it may not see (a refused call is a job too) told it that node's labels.
/// Now the selector matches only the nodes the token may see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_selector_never_reveals_a_node_the_token_cannot_see() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("jobs-sel-ws");
    let _open = gw.node("open", ws.path()).await;
    let _vault = gw.node("vault", ws.path()).await;
    let (code, _, err) = gw.cli(&["nodes", "label", "vault", "env=secret"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = gw.cli(&["nodes", "label", "open", "env=public"]);
    assert_eq!(code, 0, "{err}");
    let token = gw.token(&["agent", "narrow", "--allow", "open__*"]);
    let agent = gw.agent_with(&token).await;
    // A job on the hidden node, refused by the policy, and one on the open node.
    let _ = agent
        .call_async("vault__Echo", serde_json::json!({"text": "x"}), None)
        .await;
    agent
        .call_async("open__Echo", serde_json::json!({"text": "x"}), None)
        .await
        .expect("a job on the open node");
    let listed = |select: &str| {
        let (code, out, err) = cli_as(&gw, &token, &["jobs", "list", "--select", select, "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        v["jobs"].as_array().map(|j| j.len()).unwrap_or(0)
    };
    assert_eq!(
        listed("env=secret"),
        0,
        "the hidden node's label picked a job"
    );
    assert_eq!(listed("id~vault"), 0, "the hidden node's id picked a job");
    assert_eq!(listed("env=public"), 1);
}
