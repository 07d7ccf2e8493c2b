//! End to end: a node warns when its login profile changed (issue 15, item 5).
//!
//! The attack: an agent token allowed nothing but `Write` plants `~/.profile` on an
//! unconfined node; at the node's next start its login shell runs it, and what it sets
//! reaches every Bash command of every agent. The node cannot undo that, but it
//! compares the profile files with the baseline it recorded at its first start and
//! says so: in its log, in `runtime.loginProfile` of `GET /v1/nodes` (also after a
//! `node.probe`, without a restart) and as a warning line of `gsv nodes`, until it is
//! started with `--accept-login-profile`.
//!
//! The node runs with `HOME` in a temporary directory and `SHELL=/bin/sh` (dash on
//! Debian and in CI), so neither the developer's shell nor their profile matters.

mod common;

use common::{eventually, http_get, http_request, Gateway, Proc, TempDir};
use gsv_client::AgentClient;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const ID: &str = "prof";
const WARNING: &str = "! prof: login profile changed since enrollment: ~/.profile (accept with: gsv node --accept-login-profile)";

/// Starts the node as this test's user would: its own HOME, /bin/sh as its shell, and
/// none of the variables that would point the shells elsewhere.
fn start_node(gw: &Gateway, token: &str, ws: &Path, home: &Path, extra: &[&str]) -> Proc {
    gw.spawn_node_with_env(
        ID,
        token,
        ws,
        extra,
        &[("HOME", home), ("SHELL", Path::new("/bin/sh"))],
        &["BASH_ENV", "ENV", "ZDOTDIR", "XDG_CONFIG_HOME"],
    )
}

/// The node's entry of `GET /v1/nodes` (admin token), if listed.
async fn node_entry(gw: &Gateway) -> Option<Value> {
    let (status, body) = http_get(&gw.addr, "/v1/nodes", Some(&gw.admin_token())).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    v["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["id"] == ID)
        .cloned()
}

/// Waits until the node is online on a connection other than `old` (none: any).
async fn online_again(gw: &Gateway, old: Option<&str>) -> Value {
    eventually(
        "the node online on a new connection",
        Duration::from_secs(30),
        || async {
            let n = node_entry(gw).await?;
            let fresh = n["online"] == true && n["connId"].as_str() != old;
            fresh.then_some(n)
        },
    )
    .await
}

/// Kills the node and starts it again with the same data directory and environment.
async fn restart(
    gw: &Gateway,
    node: &mut Proc,
    seen: &Value,
    start: impl FnOnce() -> Proc,
) -> Value {
    node.kill();
    *node = start();
    online_again(gw, seen["connId"].as_str()).await
}

async fn bash_echo(agent: &AgentClient) -> String {
    let r = agent
        .call(
            &format!("{ID}__Bash"),
            json!({"command": "echo planted=${GSV_PLANTED:-none}"}),
            Some(30_000),
        )
        .await
        .expect("Bash answered");
    assert!(!r.is_error, "{}", r.joined_text());
    r.joined_text()
}

/// `gsv nodes` with the gateway's admin token: (stdout, stderr).
fn gsv_nodes(gw: &Gateway) -> (String, String) {
    let (code, out, err) = gw.cli(&["nodes"]);
    assert_eq!(code, 0, "{out}\n{err}");
    // The table itself is unchanged: one line for the node, in the usual columns.
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].starts_with(&format!("{ID:<24} online")), "{out}");
    assert!(lines[0].contains(" tools  since "), "{out}");
    (out, err)
}

#[tokio::test]
async fn a_planted_login_profile_is_reported_until_accepted() {
    let gw = Gateway::start().await;
    let ws = TempDir::new("lp-ws");
    let home = TempDir::new("lp-home");
    let token = gw.node_token(ID);
    let start = |extra: &'static [&'static str]| {
        let (gw, token, ws, home) = (&gw, token.clone(), ws.path(), home.path());
        move || start_node(gw, &token, ws, home, extra)
    };
    let mut node = start(&[])();
    let mut seen = online_again(&gw, None).await;

    // First start: the baseline is recorded (0600, in the node's data directory) and
    // nothing is reported.
    let baseline = gw.node_data.path().join(format!("node-{ID}.login-profile"));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&baseline)
            .expect("the baseline is recorded at the first start")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(seen["runtime"].get("loginProfile").is_none(), "{seen}");
    let (_, err) = gsv_nodes(&gw);
    assert!(!err.contains("login profile"), "{err}");

    let writer = gw.token(&["agent", "writer", "--allow", &format!("{ID}__Write")]);
    let victim = gw.token(&["agent", "victim", "--allow", &format!("{ID}__Bash")]);
    let writer = gw.agent_with(&writer).await;
    let victim = gw.agent_with(&victim).await;
    assert!(bash_echo(&victim).await.contains("planted=none"));

    // A Write-only token plants a login profile (the node is not confined).
    let profile = home.path().join(".profile");
    let r = writer
        .call(
            &format!("{ID}__Write"),
            json!({
                "path": profile.to_string_lossy(),
                "content": "GSV_PLANTED=from-profile; export GSV_PLANTED\n",
            }),
            Some(30_000),
        )
        .await
        .expect("Write answered");
    assert!(!r.is_error, "{}", r.joined_text());

    // A re-probe of the running node compares again and reports it at once.
    let (status, body) = http_request(
        &gw.addr,
        "POST",
        &format!("/v1/nodes/{ID}/probe"),
        Some(&gw.admin_token()),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let probed: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        probed["loginProfile"]["changed"],
        json!(["~/.profile"]),
        "{body}"
    );
    let listed = node_entry(&gw).await.expect("listed");
    assert_eq!(
        listed["runtime"]["loginProfile"]["changed"],
        json!(["~/.profile"]),
        "{listed}"
    );

    // After a restart the profile has run: every Bash command now carries what it set,
    // and the node reports the change from its start on.
    seen = restart(&gw, &mut node, &seen, start(&[])).await;
    assert!(bash_echo(&victim).await.contains("planted=from-profile"));
    let lp = &seen["runtime"]["loginProfile"];
    assert_eq!(lp["changed"], json!(["~/.profile"]), "{seen}");
    assert!(lp["since"].as_u64().is_some_and(|s| s > 0), "{seen}");
    assert!(lp["checkedAt"].as_u64() >= lp["since"].as_u64(), "{seen}");
    let (_, err) = gsv_nodes(&gw);
    assert!(err.lines().any(|l| l == WARNING), "{err}");
    // An agent that sees the node sees the warning too.
    let (code, _, err) = gw.cli(&[
        "nodes",
        "--token",
        &gw.token(&["agent", "viewer", "--allow", &format!("{ID}__Read")]),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.lines().any(|l| l == WARNING), "{err}");

    // Accepted at the next start: the warning is gone, and stays gone.
    seen = restart(&gw, &mut node, &seen, start(&["--accept-login-profile"])).await;
    assert!(seen["runtime"].get("loginProfile").is_none(), "{seen}");
    let (_, err) = gsv_nodes(&gw);
    assert!(!err.contains("login profile"), "{err}");
    seen = restart(&gw, &mut node, &seen, start(&[])).await;
    assert!(seen["runtime"].get("loginProfile").is_none(), "{seen}");
    let (_, err) = gsv_nodes(&gw);
    assert!(!err.contains("login profile"), "{err}");
    drop(node);
}
