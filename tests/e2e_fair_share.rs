//! End to end: no token can take a whole shared capacity (issue 15, item 4). Each test
//! lets an attacker token hold its full share of one capacity of a real node or gateway
//! and then shows a victim token's call still going through, and the attacker's next
//! one refused with a clear, retryable `overloaded` naming the limit. Some shares are
//! set small by their flag (`--sessions-per-token`, `--approvals-per-token`) so the
//! flag is what is tried; the others run at their defaults. Bounded in count (the
//! shares themselves) and in time.

mod common;

use common::{eventually, rss, Gateway, TempDir};
use gsv_protocol::ErrorCode;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn one_token_cannot_fill_a_nodes_session_slots() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("share-ws");
    // The share is a node flag (default 32 of the node's 64 slots).
    const SHARE: usize = 8;
    let _node = gw.spawn_node(
        "lab",
        &gw.node_token("lab"),
        ws.path(),
        &["--sessions-per-token", &SHARE.to_string()],
    );
    gw.wait_online("lab").await;
    let attacker = gw
        .agent_with(&gw.token(&["agent", "hog", "--allow", "lab__Bash"]))
        .await;
    let victim = gw
        .agent_with(&gw.token(&["agent", "victim", "--allow", "lab__*"]))
        .await;
    for i in 0..SHARE {
        let r = attacker
            .call(
                "lab__Bash",
                json!({"command": "sleep 120", "background": true}),
                None,
            )
            .await
            .expect("answered");
        assert!(!r.is_error, "session {i}: {}", r.joined_text());
    }
    let r = attacker
        .call(
            "lab__Bash",
            json!({"command": "sleep 120", "background": true}),
            None,
        )
        .await
        .expect("answered");
    assert!(
        r.is_error,
        "a session over the share started: {}",
        r.joined_text()
    );
    assert!(r.joined_text().contains("share"), "{}", r.joined_text());
    // The victim still runs commands, in the foreground and the background.
    let r = victim
        .call("lab__Bash", json!({"command": "echo still-here"}), None)
        .await
        .expect("answered");
    assert!(
        r.joined_text().contains("still-here"),
        "{}",
        r.joined_text()
    );
    let r = victim
        .call(
            "lab__Bash",
            json!({"command": "sleep 1", "background": true}),
            None,
        )
        .await
        .expect("answered");
    assert!(!r.is_error, "{}", r.joined_text());
}

#[tokio::test]
async fn one_token_cannot_fill_a_nodes_pending_calls() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("share-ws");
    let _node = gw.node("lab", ws.path()).await;
    let hog_token = gw.token(&["agent", "hog", "--allow", "lab__Echo"]);
    let victim = gw
        .agent_with(&gw.token(&["agent", "victim", "--allow", "lab__*"]))
        .await;
    let share = gsv_gateway::registry::MAX_PENDING_PER_TOKEN;
    // The attacker's share of the node's pending calls, over three connections (each
    // carries at most 1 024 calls in flight): slow calls that hold their slots.
    let mut hogs = Vec::new();
    for _ in 0..3 {
        hogs.push(Arc::new(gw.agent_with(&hog_token).await));
    }
    let mut held = Vec::new();
    for i in 0..share {
        let hog = hogs[i % 3].clone();
        held.push(tokio::spawn(async move {
            hog.call(
                "lab__Echo",
                json!({"text": "hold", "delayMs": 60_000}),
                Some(90_000),
            )
            .await
        }));
    }
    // Wait until the gateway counts them all pending at the node.
    eventually(
        "the attacker's calls pending",
        Duration::from_secs(60),
        || async {
            let (_, m) = common::http_get(&gw.addr, "/metrics", None).await;
            let pending: usize = m
                .lines()
                .find_map(|l| l.strip_prefix("gsv_pending_calls "))
                .and_then(|v| v.trim().parse().ok())?;
            (pending >= share).then_some(())
        },
    )
    .await;
    // Once the share is full, the attacker's next call is refused…
    let refused = eventually(
        "the attacker's share is full",
        Duration::from_secs(60),
        || {
            let hog = hogs[0].clone();
            async move {
                match hog
                    .call("lab__Echo", json!({"text": "one more"}), Some(10_000))
                    .await
                {
                    Err(e) => e
                        .remote()
                        .filter(|r| r.code == ErrorCode::Overloaded)
                        .cloned(),
                    Ok(_) => None,
                }
            }
        },
    )
    .await;
    assert!(refused.retryable, "{refused:?}");
    assert!(refused.message.contains("share"), "{refused:?}");
    // …and the victim's goes through at once.
    let r = victim
        .call("lab__Echo", json!({"text": "victim"}), Some(10_000))
        .await
        .expect("the victim's call is served");
    assert_eq!(r.joined_text(), "victim");
    for h in held {
        h.abort();
    }
}

#[tokio::test]
async fn one_token_cannot_crowd_out_the_approval_queue() {
    // The share is a gateway flag (default 32).
    const SHARE: usize = 12;
    let gw = Gateway::start_with(&["--approvals-per-token", &SHARE.to_string()]).await;
    let ws = TempDir::new("share-ws");
    let _node = gw.node("lab", ws.path()).await;
    let hog = Arc::new(
        gw.agent_with(&gw.token(&[
            "agent",
            "hog",
            "--allow",
            "lab__Echo",
            "--confirm",
            "lab__Echo",
        ]))
        .await,
    );
    let victim = Arc::new(
        gw.agent_with(&gw.token(&[
            "agent",
            "victim",
            "--allow",
            "lab__Echo",
            "--confirm",
            "lab__Echo",
        ]))
        .await,
    );
    let operator = gw.agent_with(&gw.admin_token()).await;
    let share = SHARE;
    let mut held = Vec::new();
    for i in 0..share {
        let hog = hog.clone();
        held.push(tokio::spawn(async move {
            hog.call(
                "lab__Echo",
                json!({"text": format!("spam {i}")}),
                Some(120_000),
            )
            .await
        }));
    }
    eventually(
        "the attacker's requests all listed",
        Duration::from_secs(30),
        || async {
            let (_, out, _) = gw.cli(&["approvals", "list", "--json"]);
            let list: serde_json::Value = serde_json::from_str(&out).ok()?;
            let n = list
                .as_array()?
                .iter()
                .filter(|a| a["agent"] == "hog")
                .count();
            (n >= share).then_some(())
        },
    )
    .await;
    let refused = eventually(
        "the attacker's approval share is full",
        Duration::from_secs(30),
        || {
            let hog = hog.clone();
            async move {
                match hog
                    .call("lab__Echo", json!({"text": "one more"}), Some(10_000))
                    .await
                {
                    Err(e) => e
                        .remote()
                        .filter(|r| r.code == ErrorCode::Overloaded)
                        .cloned(),
                    Ok(_) => None,
                }
            }
        },
    )
    .await;
    assert!(refused.message.contains("approval"), "{refused:?}");
    // The victim's request is opened, an operator finds and approves it.
    let v = victim.clone();
    let call = tokio::spawn(async move {
        v.call("lab__Echo", json!({"text": "let me"}), Some(60_000))
            .await
    });
    let id = eventually(
        "the victim's request is listed",
        Duration::from_secs(15),
        || async {
            let (_, out, _) = gw.cli(&["approvals", "list", "--json"]);
            let list: serde_json::Value = serde_json::from_str(&out).ok()?;
            list.as_array()?
                .iter()
                .find(|a| a["agent"] == "victim")
                .and_then(|a| a["id"].as_str().map(str::to_owned))
        },
    )
    .await;
    // The list pages, says how many more there are, and counts every agent's requests
    // (fewest first) even when the page holds only the flood.
    let (code, out, err) = gw.cli(&["approvals", "list", "--limit", "10"]);
    assert_eq!(code, 0, "{err}");
    let victim_line = out.find("agent victim: 1 pending").expect(&out);
    let hog_line = out
        .find(&format!("agent hog: {share} pending"))
        .expect(&out);
    assert!(victim_line < hog_line, "{out}");
    assert!(
        err.contains(&format!(
            "{} more: gsv approvals list --offset 10",
            share + 1 - 10
        )),
        "{err}"
    );
    let (_, page2, _) = gw.cli(&["approvals", "list", "--limit", "10", "--offset", "10"]);
    assert!(
        !page2.contains(&id),
        "the newest request is on the first page only: {page2}"
    );
    let (code, _, err) = gw.cli(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{err}");
    let r = call.await.expect("join").expect("approved call runs");
    assert_eq!(r.joined_text(), "let me");
    drop(operator);
    for h in held {
        h.abort();
    }
}

/// The public id inside a token `gsv_agent_{id}_{secret}`.
fn token_id(token: &str) -> String {
    token.split('_').nth(2).expect("token id").to_owned()
}

/// The statuses of every session the operator sees on `lab`, by id.
async fn statuses(
    operator: &gsv_client::AgentClient,
) -> serde_json::Map<String, serde_json::Value> {
    let list = operator
        .call("lab__Process", json!({"action": "list"}), None)
        .await
        .expect("list");
    let sessions = list.structured_content.as_ref().expect("sc")["sessions"].clone();
    sessions
        .as_array()
        .expect("array")
        .iter()
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap_or("").to_owned(),
                s["status"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn sessions_of_a_revoked_token_end_even_if_revoked_while_the_gateway_was_down() {
    let mut gw = Gateway::start().await;
    let ws = TempDir::new("share-ws");
    let _node = gw.node("lab", ws.path()).await;
    let first = gw.token(&["agent", "first", "--allow", "lab__*"]);
    let second = gw.token(&["agent", "second", "--allow", "lab__*"]);
    let bystander = gw.token(&["agent", "bystander", "--allow", "lab__*"]);
    let mut ids = Vec::new();
    for token in [&first, &second, &bystander] {
        let a = gw.agent_with(token).await;
        let r = a
            .call(
                "lab__Bash",
                json!({"command": "sleep 300", "background": true}),
                None,
            )
            .await
            .expect("started");
        ids.push(
            r.structured_content.as_ref().expect("sc")["sessionId"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
    }
    // Revoked while the gateway runs: its sessions end within seconds.
    let (code, _, err) = gw.cli(&["token", "revoke", &token_id(&first)]);
    assert_eq!(code, 0, "{err}");
    let operator = gw.agent_with(&gw.admin_token()).await;
    eventually(
        "the revoked token's session ended",
        Duration::from_secs(15),
        || async {
            let s = statuses(&operator).await;
            (s.get(&ids[0]).is_some_and(|st| st != "running")).then_some(())
        },
    )
    .await;
    // Revoked while the gateway is down: ended when the node comes back.
    gw.kill();
    let (code, _, err) = gw.cli(&["token", "revoke", &token_id(&second)]);
    assert_eq!(code, 0, "{err}");
    gw.restart().await;
    gw.wait_online("lab").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    eventually(
        "the session of the token revoked offline ended",
        Duration::from_secs(15),
        || async {
            let s = statuses(&operator).await;
            (s.get(&ids[1]).is_some_and(|st| st != "running")).then_some(())
        },
    )
    .await;
    assert_eq!(
        statuses(&operator).await.get(&ids[2]),
        Some(&json!("running")),
        "a bystander's session was ended"
    );
}

/// Gateway-wide calls pending at nodes (`gsv_pending_calls`).
async fn pending_calls(gw: &Gateway) -> Option<usize> {
    let (_, m) = common::http_get(&gw.addr, "/metrics", None).await;
    m.lines()
        .find_map(|l| l.strip_prefix("gsv_pending_calls "))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn one_token_cannot_hold_every_pending_byte() {
    const MIB: usize = 1024 * 1024;
    const TRIES: usize = 100;
    let gw = Gateway::start().await;
    let ws = TempDir::new("share-ws");
    let _node = gw.node("lab", ws.path()).await;
    let pid = gw.proc.0.id();
    let hog = Arc::new(
        gw.agent_with(&gw.token(&["agent", "hog", "--allow", "lab__Echo"]))
            .await,
    );
    let victim = gw
        .agent_with(&gw.token(&["agent", "victim", "--allow", "lab__*"]))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = rss(pid);
    // 100 calls of 1 MiB each, held for a minute at the node: the token's share of the
    // bytes in flight (64 MiB by default) takes 63 of them, the rest are refused.
    let big = Arc::new("x".repeat(MIB));
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut held = Vec::new();
    for _ in 0..TRIES {
        let (hog, big, refused) = (hog.clone(), big.clone(), refused.clone());
        held.push(tokio::spawn(async move {
            let r = hog
                .call(
                    "lab__Echo",
                    json!({"text": big.as_str(), "delayMs": 60_000}),
                    Some(90_000),
                )
                .await;
            if let Err(e) = &r {
                if let Some(remote) = e.remote() {
                    if remote.code == ErrorCode::Overloaded {
                        let d = remote.details.as_ref().expect("details");
                        assert_eq!(d["limit"], "pending_bytes_per_token", "{remote:?}");
                        assert_eq!(d["max"], 64 * MIB, "{remote:?}");
                        assert!(remote.retryable, "{remote:?}");
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
            r
        }));
        // Paced: building a megabyte of JSON takes a while in a debug build, and this
        // test's single thread must still answer the gateway's pings.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pending = eventually(
        "every call pending or refused",
        Duration::from_secs(60),
        || async {
            let pending = pending_calls(&gw).await?;
            let refused = refused.load(std::sync::atomic::Ordering::Relaxed);
            (pending + refused == TRIES).then_some(pending)
        },
    )
    .await;
    assert!(
        (1..=64).contains(&pending),
        "{pending} calls of 1 MiB pending for one token"
    );
    // The victim's own megabyte goes through while the attacker holds its share.
    let r = victim
        .call("lab__Echo", json!({"text": big.as_str()}), Some(30_000))
        .await
        .expect("the victim's call is served");
    assert_eq!(r.joined_text().len(), MIB);
    // The gateway holds about one copy of what is pending: 63 MiB of arguments, where
    // four copies (args parsed, kept for the audit row, and re-encoded) held ~250 MiB.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let grown = rss(pid).saturating_sub(base);
    eprintln!(
        "gateway RSS grew by {} MiB for {pending} pending calls of 1 MiB",
        grown / MIB as u64
    );
    assert!(
        grown < 200 * MIB as u64,
        "gateway RSS grew by {} MiB for {pending} pending MiB",
        grown / MIB as u64
    );
    for h in held {
        h.abort();
    }
}

/// The pids of processes whose command line is exactly `argv`.
fn pids_running(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// Issue 42: what a token started under `setsid` (its own session, outside the
/// session's process group) outlived the token's revocation. Every process a session
/// starts carries its owner in the environment, so revoking the token ends these too,
/// while another token's detached process goes on.
#[tokio::test]
async fn revocation_ends_what_a_token_detached_with_setsid() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("share-setsid-ws");
    let _node = gw.node("lab", ws.path()).await;
    let doomed = gw.token(&["agent", "doomed", "--allow", "lab__*"]);
    let bystander = gw.token(&["agent", "bystander", "--allow", "lab__*"]);
    let tag = format!("{}", std::process::id());
    let mine = ["sleep", "301", &tag];
    let theirs = ["sleep", "302", &tag];
    for (token, argv) in [(&doomed, &mine), (&bystander, &theirs)] {
        let a = gw.agent_with(token).await;
        // The shell exits at once; only the detached sleep is left.
        let command = format!(
            "setsid -f {} >/dev/null 2>&1 </dev/null; echo started",
            argv.join(" ")
        );
        let r = a
            .call("lab__Bash", json!({"command": command}), None)
            .await
            .expect("ran");
        assert!(r.joined_text().contains("started"), "{}", r.joined_text());
        // And through exec, whose caller-given env cannot replace the owner tag.
        let r = a
            .call(
                "lab__exec",
                json!({"argv": ["setsid", "-f", argv[0], argv[1], argv[2], "1"],
                       "env": {"GSV_SESSION_OWNER": "someone-else"}}),
                None,
            )
            .await
            .expect("ran");
        assert!(!r.is_error, "{}", r.joined_text());
    }
    let with_x = |argv: &[&str]| {
        let mut v = argv.to_vec();
        v.push("1");
        v.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let mine_x = with_x(&mine);
    let theirs_x = with_x(&theirs);
    let running = |argv: &[String]| {
        let v: Vec<&str> = argv.iter().map(String::as_str).collect();
        !pids_running(&v).is_empty()
    };
    eventually(
        "the detached sleeps run",
        Duration::from_secs(10),
        || async {
            (!pids_running(&mine).is_empty() && running(&mine_x) && running(&theirs_x))
                .then_some(())
        },
    )
    .await;
    let (code, _, err) = gw.cli(&["token", "revoke", &token_id(&doomed)]);
    assert_eq!(code, 0, "{err}");
    eventually(
        "the revoked token's detached processes ended",
        Duration::from_secs(20),
        || async { (pids_running(&mine).is_empty() && !running(&mine_x)).then_some(()) },
    )
    .await;
    assert!(
        !pids_running(&theirs).is_empty(),
        "a bystander's process was ended"
    );
    assert!(running(&theirs_x), "a bystander's exec process was ended");
    // Clean up the bystander's.
    for pid in pids_running(&theirs).into_iter().chain(pids_running(
        &theirs_x.iter().map(String::as_str).collect::<Vec<_>>(),
    )) {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
}
