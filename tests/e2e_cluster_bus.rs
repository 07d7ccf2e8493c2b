//! End to end: the NATS bus between gateway replicas trusts only the replicas (issue
//! 43). A plain NATS client — one with NATS access but not the replicas' cluster key —
//! subscribes to everything and publishes what it likes: it never reads a job's output
//! or a call crossing replicas in clear, and nothing it forges or replays (a call under
//! the admin token's id, an approval decision, a token record, a revocation, a genuine
//! call published again) is acted on. NATS itself can require credentials of the
//! replicas (an nkey here), and a replica without them is refused with a clear error.

mod common;

use common::{eventually, Gateway, TempDir};
use gsv_bench::nats::NatsServer;
use gsv_client::AgentClient;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long replication may take in these tests (it takes well under a second).
const SPREAD: Duration = Duration::from_secs(15);
/// How long a forged or replayed message is given to (wrongly) take effect.
const GRACE: Duration = Duration::from_secs(4);

/// A replica on `url` with the test cluster's key (`key`) and `extra` flags.
async fn replica(url: &str, name: &str, key: &Path, extra: &[&str]) -> Gateway {
    let key = key.to_str().expect("utf-8 path");
    let mut args = vec![
        "--cluster",
        url,
        "--replica",
        name,
        "--cluster-key-file",
        key,
    ];
    args.extend_from_slice(extra);
    Gateway::start_with(&args).await
}

/// The id part of `gsv_KIND_ID_SECRET`.
fn token_id(token: &str) -> String {
    token.split('_').nth(2).expect("token id").to_owned()
}

async fn accepted(gw: &Gateway, token: &str, what: &str) -> AgentClient {
    eventually(what, SPREAD, || async {
        AgentClient::connect_with(&gw.url(), token, &gw.tls_options())
            .await
            .ok()
    })
    .await
}

/// Everything a plain NATS client saw on every subject (`>`): subject and payload.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A plain NATS client that records every message it can see.
struct Spy {
    client: async_nats::Client,
    seen: Seen,
    _task: tokio::task::JoinHandle<()>,
}

impl Spy {
    async fn on(client: async_nats::Client) -> Spy {
        let mut sub = client.subscribe(">").await.expect("subscribe to >");
        let seen: Seen = Arc::default();
        let kept = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            use futures_util::StreamExt;
            while let Some(m) = sub.next().await {
                if let Ok(mut s) = kept.lock() {
                    s.push((m.subject.to_string(), m.payload.to_vec()));
                }
            }
        });
        client.flush().await.expect("flush");
        Spy {
            client,
            seen,
            _task: task,
        }
    }

    async fn connect(url: &str) -> Spy {
        Spy::on(async_nats::connect(url).await.expect("the spy connects")).await
    }

    /// The subjects of the messages whose payload holds `needle`.
    fn carrying(&self, needle: &str) -> Vec<String> {
        let seen = self.seen.lock().expect("lock");
        seen.iter()
            .filter(|(_, p)| p.windows(needle.len()).any(|w| w == needle.as_bytes()))
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// The first message seen on `subject`.
    fn first_on(&self, subject: &str) -> Option<Vec<u8>> {
        let seen = self.seen.lock().expect("lock");
        seen.iter()
            .find(|(s, _)| s == subject)
            .map(|(_, p)| p.clone())
    }

    fn count_prefixed(&self, prefix: &str) -> usize {
        let seen = self.seen.lock().expect("lock");
        seen.iter().filter(|(s, _)| s.starts_with(prefix)).count()
    }

    /// A request on `subject`: its answer, or `None` when none came within [`GRACE`].
    async fn ask(&self, subject: &str, payload: Vec<u8>) -> Option<Vec<u8>> {
        let sent = self.client.request(subject.to_owned(), payload.into());
        match tokio::time::timeout(GRACE, sent).await {
            Ok(Ok(m)) => Some(m.payload.to_vec()),
            _ => None,
        }
    }
}

/// A fresh 32-byte cluster key, 0600, in `dir`.
fn cluster_key(dir: &Path) -> PathBuf {
    common::cluster_key(dir)
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_plain_nats_subscriber_never_reads_a_job_output_nor_a_crossing_call_in_clear() {
    let dir = TempDir::new("bus-clear");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let key = cluster_key(dir.path());
    let spy = Spy::connect(&nats.url()).await;
    let a = replica(&nats.url(), "a", &key, &[]).await;
    let b = replica(&nats.url(), "b", &key, &[]).await;
    let ws = TempDir::new("bus-clear-ws");
    let _node = a.spawn_node("far", &a.node_token("far"), ws.path(), &[]);
    a.wait_online("far").await;
    let agent = accepted(&b, &a.agent_token(), "A's agent token on B").await;

    // The output is made on the node ("out-" and the marker), never written in the
    // call's arguments as such.
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let command = format!("printf 'out-%s\\n' {marker}");
    let out = format!("out-{marker}");
    // A call crossing replicas (B to A, over NATS: the first one takes no link).
    let r = eventually("B reaches A's node", SPREAD, || async {
        agent
            .call("far__Bash", json!({ "command": command }), Some(20_000))
            .await
            .ok()
    })
    .await;
    assert!(r.joined_text().contains(&out), "{}", r.joined_text());
    // A job through B for A's node: its copy travels on the jobs stream.
    let job = agent
        .call_async("far__Bash", json!({ "command": command }), Some(20_000))
        .await
        .expect("a job through B");
    let done = eventually("the job is done", SPREAD, || async {
        agent
            .job(&job)
            .await
            .ok()
            .filter(|j| j.summary.state == gsv_protocol::job::JobState::Done)
    })
    .await;
    assert!(done.result.expect("result").get().contains(&out));
    eventually("the job's copy crossed NATS", SPREAD, || async {
        (spy.count_prefixed("gsv.jobs.") > 0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        spy.count_prefixed("gsv.replica.a.call") > 0,
        "the crossing call took NATS"
    );
    let leaked = spy.carrying(&out);
    assert!(
        leaked.is_empty(),
        "the job's output travelled in clear on {leaked:?}"
    );
    let leaked = spy.carrying(&marker);
    assert!(
        leaked.is_empty(),
        "the call's arguments travelled in clear on {leaked:?}"
    );
}

#[tokio::test]
async fn a_call_forged_on_nats_under_the_admin_token_id_never_runs() {
    let dir = TempDir::new("bus-forged-call");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let key = cluster_key(dir.path());
    let a = replica(&nats.url(), "a", &key, &[]).await;
    let b = replica(&nats.url(), "b", &key, &[]).await;
    let ws = TempDir::new("bus-forged-call-ws");
    let _node = a.spawn_node("far", &a.node_token("far"), ws.path(), &[]);
    a.wait_online("far").await;
    // The replicas hear each other (B could forward to A now).
    let agent = accepted(&b, &a.agent_token(), "A's agent token on B").await;
    eventually("B reaches A's node", SPREAD, || async {
        agent
            .call("far__Echo", json!({"text": "x"}), Some(10_000))
            .await
            .ok()
    })
    .await;

    let spy = Spy::connect(&nats.url()).await;
    let pwned = dir.path().join("pwned");
    // Shaped exactly as B forwards a call to A (`cluster::call_book::Forwarded`), under
    // the id of A's admin token.
    let forged = json!({
        "tokenId": token_id(&a.admin_token()),
        "name": "far__Bash",
        "args": { "command": format!("touch {}", pwned.display()) },
        "timeoutMs": 10_000,
        "key": uuid::Uuid::new_v4().simple().to_string(),
        "progressTo": null,
        "holderTo": null,
        "origin": "b",
    });
    let answer = spy
        .ask(
            "gsv.replica.a.call",
            serde_json::to_vec(&forged).expect("json"),
        )
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !pwned.exists(),
        "the forged call ran Bash on A's node (answer: {:?})",
        answer.map(|a| String::from_utf8_lossy(&a).into_owned())
    );
    assert!(answer.is_none(), "a forged call is not answered");
}

/// An agent on `on` whose token (made on `maker`) needs approval for `tool` and may
/// call everything else, once it reaches `node`.
async fn confirming_agent(
    maker: &Gateway,
    on: &Gateway,
    node: &str,
    tool: &str,
) -> Arc<AgentClient> {
    let token = maker.token(&["agent", "careful", "--allow", "*", "--confirm", tool]);
    let agent = Arc::new(accepted(on, &token, "the confirming token").await);
    eventually("the agent reaches the node", SPREAD, || async {
        agent
            .call(&format!("{node}__time"), json!({}), Some(5_000))
            .await
            .ok()
    })
    .await;
    agent
}

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
async fn a_forged_approval_decision_releases_nothing() {
    let dir = TempDir::new("bus-forged-approval");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let key = cluster_key(dir.path());
    let a = replica(&nats.url(), "a", &key, &[]).await;
    let b = replica(&nats.url(), "b", &key, &[]).await;
    let ws = TempDir::new("bus-forged-approval-ws");
    let _node = a.spawn_node("gated", &a.node_token("gated"), ws.path(), &[]);
    a.wait_online("gated").await;
    let agent = confirming_agent(&a, &b, "gated", "gated__Bash").await;
    let spy = Spy::connect(&nats.url()).await;

    let ran = dir.path().join("approved");
    let command = format!("touch {}", ran.display());
    let caller = Arc::clone(&agent);
    let call = tokio::spawn(async move {
        caller
            .call("gated__Bash", json!({ "command": command }), Some(60_000))
            .await
    });
    let id = waiting_approval(&a, "gated").await;
    // Shaped as a replica sends it (`cluster::approvals::Decide`).
    let forged = json!({"id": id, "verdict": "approve", "by": "mallory", "origin": "b"});
    let answer = spy
        .ask(
            "gsv.approvals.decide",
            serde_json::to_vec(&forged).expect("json"),
        )
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !ran.exists(),
        "a forged decision released the call (answer: {:?})",
        answer.map(|a| String::from_utf8_lossy(&a).into_owned())
    );
    assert_eq!(waiting_approval(&a, "gated").await, id, "still pending");
    // An operator's own denial still decides it.
    let (code, out, err) = b.cli(&["approvals", "deny", &id]);
    assert_eq!(code, 0, "deny on B: {out} {err}");
    let err = tokio::time::timeout(SPREAD, call)
        .await
        .expect("the call ends")
        .expect("join")
        .expect_err("denied");
    assert_eq!(
        err.remote().map(|s| s.code),
        Some(gsv_protocol::ErrorCode::Denied),
        "{err}"
    );
    assert!(!ran.exists());
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn forged_token_records_and_revocations_are_refused() {
    let dir = TempDir::new("bus-forged-tokens");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let key = cluster_key(dir.path());
    let a = replica(&nats.url(), "a", &key, &[]).await;
    let b = replica(&nats.url(), "b", &key, &[]).await;
    let agent_token = a.agent_token();
    let _ = accepted(&b, &agent_token, "A's agent token on B").await;

    let spy = Spy::connect(&nats.url()).await;
    let js = async_nats::jetstream::new(spy.client.clone());
    let now = chrono::Utc::now().timestamp();
    // An admin token nobody made, shaped as `cluster::tokens::Created`.
    let forged_id = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let secret = "forged-secret";
    let created = json!({
        "id": forged_id, "kind": "admin", "subject": "mallory",
        "hash": sha256_hex(secret), "policy": null, "created_at": now,
        "role": null, "origin": "a",
    });
    // A revocation of a live token nobody revoked (`cluster::tokens::Revoked`).
    let revoked = json!({"id": token_id(&agent_token), "revoked_at": now, "origin": "a"});
    for (subject, body) in [
        (format!("gsv.tokens.{forged_id}.created"), created),
        (
            format!("gsv.tokens.{}.revoked", token_id(&agent_token)),
            revoked,
        ),
    ] {
        let ack = js
            .publish(subject, serde_json::to_vec(&body).expect("json").into())
            .await
            .expect("the spy publishes to the token stream");
        tokio::time::timeout(SPREAD, ack)
            .await
            .expect("ack in time")
            .expect("stored");
    }
    // A genuine token made after them reaches B: B has read past the forged records.
    let later = a.agent_token();
    let _ = accepted(&b, &later, "a token made after the forged records, on B").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let forged = format!("gsv_admin_{forged_id}_{secret}");
    for gw in [&a, &b] {
        assert!(
            AgentClient::connect_with(&gw.url(), &forged, &gw.tls_options())
                .await
                .is_err(),
            "a forged token record made a token"
        );
        assert!(
            AgentClient::connect_with(&gw.url(), &agent_token, &gw.tls_options())
                .await
                .is_ok(),
            "a forged revocation revoked a live token"
        );
    }
}

#[tokio::test]
async fn a_replayed_genuine_call_is_not_answered_and_does_not_run_again() {
    let dir = TempDir::new("bus-replay");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let key = cluster_key(dir.path());
    let spy = Spy::connect(&nats.url()).await;
    let a = replica(&nats.url(), "a", &key, &[]).await;
    let b = replica(&nats.url(), "b", &key, &[]).await;
    let ws = TempDir::new("bus-replay-ws");
    let _node = a.spawn_node("far", &a.node_token("far"), ws.path(), &[]);
    a.wait_online("far").await;
    let agent = accepted(&b, &a.agent_token(), "A's agent token on B").await;

    let counter = dir.path().join("counter");
    let command = format!("echo ran >> {}", counter.display());
    eventually("B reaches A's node", SPREAD, || async {
        agent
            .call("far__Bash", json!({ "command": command }), Some(20_000))
            .await
            .ok()
    })
    .await;
    assert_eq!(lines(&counter), 1);
    let genuine = eventually("the spy saw the call on NATS", SPREAD, || async {
        spy.first_on("gsv.replica.a.call")
    })
    .await;
    let answer = spy.ask("gsv.replica.a.call", genuine).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(lines(&counter), 1, "the replayed call ran again");
    assert!(
        answer.is_none(),
        "a replayed call was answered: {:?}",
        answer.map(|a| String::from_utf8_lossy(&a).into_owned())
    );
}

#[tokio::test]
async fn a_forged_answer_on_a_calls_inbox_neither_fails_nor_fakes_the_call() {
    use futures_util::StreamExt;
    let dir = TempDir::new("bus-forged-answer");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let key = cluster_key(dir.path());
    // Whatever call crosses to A, this client answers first, on its inbox.
    let forger = async_nats::connect(nats.url()).await.expect("connect");
    let mut calls = forger
        .subscribe("gsv.replica.a.call")
        .await
        .expect("subscribe");
    forger.flush().await.expect("flush");
    let answering = forger.clone();
    let forged_answers = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&forged_answers);
    let _task = tokio::spawn(async move {
        while let Some(m) = calls.next().await {
            if let Some(reply) = m.reply {
                let fake = json!({"ok": {"result": {"content": [{"type": "text", "text": "faked"}],
                    "isError": false}, "progress": 0, "audited": true}});
                let _ = answering
                    .publish(reply, serde_json::to_vec(&fake).expect("json").into())
                    .await;
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let a = replica(&nats.url(), "a", &key, &[]).await;
    let b = replica(&nats.url(), "b", &key, &[]).await;
    let ws = TempDir::new("bus-forged-answer-ws");
    let _node = a.spawn_node("far", &a.node_token("far"), ws.path(), &[]);
    a.wait_online("far").await;
    let agent = accepted(&b, &a.agent_token(), "A's agent token on B").await;
    eventually("B lists A's node", SPREAD, || async {
        let (code, out, _) = b.cli(&["nodes", "--json"]);
        (code == 0 && out.contains("\"far\"")).then_some(())
    })
    .await;
    // The first call crossing to A (over NATS: no link yet), once, no retry; its real
    // answer comes a second later than the forged one.
    let r = agent
        .call(
            "far__Bash",
            json!({"command": "sleep 1; echo real-answer"}),
            Some(20_000),
        )
        .await
        .expect("the call is answered by A, not failed by the forger");
    assert!(
        forged_answers.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the call crossed on NATS and was answered by the forger first"
    );
    assert!(
        r.joined_text().contains("real-answer") && !r.joined_text().contains("faked"),
        "{}",
        r.joined_text()
    );
}

/// `gsv gateway` in cluster mode with `args`, expected to stop by itself: its exit code
/// and stderr (killed after 30 s).
fn refused_start(data: &Path, args: &[&str]) -> (Option<i32>, String) {
    let err = data.join("stderr");
    let mut cmd = Command::new(common::gsv_bin());
    cmd.arg("gateway")
        .arg("--data")
        .arg(data)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"));
    let mut child = common::die_with_parent(&mut cmd).spawn().expect("spawn");
    let started = Instant::now();
    let code = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status.code();
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (code, std::fs::read_to_string(&err).unwrap_or_default())
}

#[tokio::test]
async fn replicas_join_a_nats_that_requires_an_nkey_and_one_without_it_is_refused() {
    let dir = TempDir::new("bus-nkey");
    let user = nkeys::KeyPair::new_user();
    let seed = dir.path().join("replica.nk");
    std::fs::write(&seed, user.seed().expect("seed")).expect("seed file");
    let conf = format!(
        "authorization {{\n  users = [\n    {{ nkey: {} }}\n    {{ user: spy, password: spypass }}\n  ]\n}}\n",
        user.public_key()
    );
    let nats = NatsServer::start_conf(dir.path(), &conf)
        .await
        .expect("nats-server");
    let key = cluster_key(dir.path());
    let nk = seed.to_str().expect("utf-8");
    let a = replica(&nats.url(), "a", &key, &["--cluster-nkey", nk]).await;
    let b = replica(&nats.url(), "b", &key, &["--cluster-nkey", nk]).await;
    // The replicas share tokens and calls through that NATS.
    let ws = TempDir::new("bus-nkey-ws");
    let _node = a.spawn_node("far", &a.node_token("far"), ws.path(), &[]);
    a.wait_online("far").await;
    let agent = accepted(&b, &a.agent_token(), "A's agent token on B").await;
    let r = eventually("B reaches A's node", SPREAD, || async {
        agent
            .call("far__Echo", json!({"text": "over nkey"}), Some(10_000))
            .await
            .ok()
    })
    .await;
    assert!(r.joined_text().contains("over nkey"));

    // A replica without NATS credentials (or with the wrong ones) is refused.
    let url = nats.url();
    let keyf = key.to_str().expect("utf-8");
    let other = nkeys::KeyPair::new_user();
    let wrong = dir.path().join("wrong.nk");
    std::fs::write(&wrong, other.seed().expect("seed")).expect("seed file");
    for extra in [
        vec![],
        vec!["--cluster-nkey", wrong.to_str().expect("utf-8")],
    ] {
        let data = TempDir::new("bus-nkey-refused");
        let mut args = vec![
            "--cluster",
            &url,
            "--replica",
            "c",
            "--cluster-key-file",
            keyf,
        ];
        args.extend(extra);
        let (code, err) = refused_start(data.path(), &args);
        assert!(
            code.is_some_and(|c| c != 0),
            "a replica NATS refuses stops (exit {code:?}): {err}"
        );
        assert!(
            err.contains("NATS refused") && !err.contains("panicked"),
            "a clear error: {err}"
        );
    }
}

#[tokio::test]
async fn replicas_reach_a_nats_that_serves_tls_with_the_cluster_ca() {
    let dir = TempDir::new("bus-tls");
    // A certificate for 127.0.0.1, its own CA.
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("params");
    let cert = params.self_signed(&key).expect("certificate");
    let (cert_file, key_file) = (dir.path().join("nats.crt"), dir.path().join("nats.key"));
    std::fs::write(&cert_file, cert.pem()).expect("write");
    std::fs::write(&key_file, key.serialize_pem()).expect("write");
    let conf = format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n}}\n",
        cert_file.display(),
        key_file.display()
    );
    let nats = NatsServer::start_conf(dir.path(), &conf)
        .await
        .expect("nats-server");
    let url = nats.url().replace("nats://", "tls://");
    let ca = cert_file.to_str().expect("utf-8");
    let cluster_key = cluster_key(dir.path());
    let a = replica(&url, "a", &cluster_key, &["--cluster-ca", ca]).await;
    let b = replica(&url, "b", &cluster_key, &["--cluster-ca", ca]).await;
    let ws = TempDir::new("bus-tls-ws");
    let _node = a.spawn_node("far", &a.node_token("far"), ws.path(), &[]);
    a.wait_online("far").await;
    let agent = accepted(&b, &a.agent_token(), "A's agent token on B, over NATS TLS").await;
    let r = eventually("B reaches A's node", SPREAD, || async {
        agent
            .call("far__Echo", json!({"text": "over tls"}), Some(10_000))
            .await
            .ok()
    })
    .await;
    assert!(r.joined_text().contains("over tls"));
}

#[tokio::test]
async fn cluster_mode_refuses_to_start_without_a_good_cluster_key() {
    let dir = TempDir::new("bus-nokey");
    let nats = NatsServer::start(dir.path()).await.expect("nats-server");
    let url = nats.url();
    // No key at all.
    let data = TempDir::new("bus-nokey-gw");
    let (code, err) = refused_start(data.path(), &["--cluster", &url, "--replica", "a"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--cluster-key-file"), "{err}");
    // A short key, and one others may read.
    let short = dir.path().join("short.key");
    std::fs::write(&short, b"too short").expect("write");
    let open = dir.path().join("open.key");
    std::fs::write(&open, [7u8; 32]).expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    for (file, says) in [(&short, "32 bytes"), (&open, "chmod 600")] {
        let data = TempDir::new("bus-nokey-gw");
        let f = file.to_str().expect("utf-8");
        let (code, err) = refused_start(
            data.path(),
            &["--cluster", &url, "--replica", "a", "--cluster-key-file", f],
        );
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(says), "{says}: {err}");
    }
}
