//! End to end: the network triage tools through a real gateway and a real node on
//! loopback.
//!
//! Network safety: every probe here targets 127.0.0.1 (or listeners this test opens
//! on it); the DNS lookup is `localhost`, answered on the node without a query. The
//! public address `8.8.8.8` appears only in calls that the node must refuse, or that
//! wait for an operator's approval which this test denies — so nothing is ever sent
//! to it. The default subnet (the host's LAN) is never scanned.
//!
//! Parts that need nmap, ping or traceroute are skipped with a message when the
//! program is missing, unless `CI` is set (then they fail: `.ci/run` installs them).

mod common;

use common::{eventually, Gateway, TempDir};
use gsv_client::AgentClient;
use gsv_protocol::{ErrorCode, EventName, ToolResult};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const NET_TOOLS: [(&str, &str); 5] = [
    ("dns_lookup", "dns.query"),
    ("net_diagnose", "network.diagnose"),
    ("net_discover", "network.discover"),
    ("net_services", "network.scan"),
    ("network_status", "network.status"),
];

/// Whether `bin` is on the PATH; skips (or, under CI, fails) otherwise.
fn have(bin: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
        .unwrap_or(false);
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{bin} is required under CI (.ci/run installs it)"
        );
        eprintln!("skipping the part that needs {bin}: it is not installed");
    }
    found
}

fn structured(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "{}", r.joined_text());
    r.structured_content.as_ref().expect("structured content")
}

/// A listener on 127.0.0.1 that greets like an SSH server.
async fn listener() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n").await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
        }
    });
    port
}

async fn setup(id: &str) -> (Gateway, TempDir, common::Proc, Arc<AgentClient>) {
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let node = gw.node(id, ws.path()).await;
    let agent = Arc::new(gw.agent().await);
    (gw, ws, node, agent)
}

#[tokio::test]
async fn the_tools_are_listed_with_capabilities_and_binaries() {
    let (_gw, _ws, _node, agent) = setup("netl").await;
    let tools: BTreeMap<String, (String, Option<bool>)> = agent
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.node == "netl")
        .map(|t| (t.tool, (t.capability, t.annotations.open_world_hint)))
        .collect();
    for (name, capability) in NET_TOOLS {
        let (cap, _) = tools
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing: {tools:?}"));
        assert_eq!(cap, capability, "{name}");
    }
    assert_eq!(tools["network_status"].1, Some(false));
    assert_eq!(tools["net_services"].1, Some(true));
    // The binaries they need are reported in hostBinStatus.
    let nodes = agent.list_nodes().await.unwrap();
    let node = nodes.iter().find(|n| n.id == "netl").unwrap();
    for bin in [
        "nmap",
        "ping",
        "traceroute",
        "ip",
        "ss",
        "nmcli",
        "resolvectl",
    ] {
        assert!(
            node.runtime.host_bin_status.contains_key(bin),
            "{bin}: {:?}",
            node.runtime.host_bin_status
        );
    }
}

#[tokio::test]
async fn loopback_probes_through_the_gateway() {
    let (_gw, _ws, _node, agent) = setup("netp").await;

    // dns_lookup localhost: the system resolver configuration, answered locally.
    let r = agent
        .call(
            "netp__dns_lookup",
            json!({"name": "localhost"}),
            Some(30_000),
        )
        .await
        .unwrap();
    let v = structured(&r);
    assert_eq!(v["status"], "NOERROR");
    assert_eq!(v["records"][0]["address"], "127.0.0.1");

    // network_status: a snapshot, no traffic.
    let r = agent
        .call("netp__network_status", json!({}), Some(30_000))
        .await
        .unwrap();
    assert!(structured(&r)["interfaces"].is_object());

    let port = listener().await;
    if have("ping") && have("traceroute") {
        let r = agent
            .call(
                "netp__net_diagnose",
                json!({"target": "127.0.0.1", "port": port}),
                Some(60_000),
            )
            .await
            .unwrap();
        let v = structured(&r);
        assert_eq!(v["resolvedTo"], "127.0.0.1");
        assert_eq!(v["ping"]["status"], "ok", "{v}");
        assert_eq!(v["traceroute"]["reached"], true, "{v}");
        assert_eq!(v["portCheck"]["open"], true, "{v}");
    }

    if have("nmap") {
        let r = agent
            .call(
                "netp__net_services",
                json!({"host": "127.0.0.1", "ports": port.to_string()}),
                Some(120_000),
            )
            .await
            .unwrap();
        let v = structured(&r);
        assert_eq!(v["ports"][0]["port"], port, "{v}");
        assert_eq!(v["ports"][0]["state"], "open", "{v}");

        let r = agent
            .call(
                "netp__net_services",
                json!({"host": "127.0.0.1", "fast": true}),
                Some(120_000),
            )
            .await
            .unwrap();
        assert_eq!(structured(&r)["scanned"], "the top 20 ports");

        // nmap -sn 127.0.0.1/32.
        let r = agent
            .call(
                "netp__net_discover",
                json!({"subnet": "127.0.0.1/32"}),
                Some(120_000),
            )
            .await
            .unwrap();
        let v = structured(&r);
        assert_eq!(v["hosts"][0]["ip"], "127.0.0.1", "{v}");
        assert_eq!(v["hosts"][0]["state"], "up");
    }
}

#[tokio::test]
async fn public_and_option_like_targets_are_refused_on_the_node() {
    let (gw, _ws, _node, agent) = setup("netr").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let refused = [
        (
            "netr__net_discover",
            json!({"subnet": "8.8.8.0/24"}),
            "not a private subnet",
        ),
        (
            "netr__net_discover",
            json!({"subnet": "10.0.0.0/8"}),
            "wider than /22",
        ),
        (
            "netr__net_discover",
            json!({"subnet": "-oN/tmp/x"}),
            "option",
        ),
        (
            "netr__net_diagnose",
            json!({"target": "8.8.8.8"}),
            "\"external\": true",
        ),
        (
            "netr__net_diagnose",
            json!({"target": "134744072", "port": 53}),
            "\"external\": true",
        ),
        (
            "netr__net_diagnose",
            json!({"target": "-oN/tmp/x"}),
            "option",
        ),
        (
            "netr__net_services",
            json!({"host": "::ffff:8.8.8.8"}),
            "\"external\": true",
        ),
        (
            "netr__net_services",
            json!({"host": "--script=http-title"}),
            "option",
        ),
        (
            "netr__net_services",
            json!({"host": "127.0.0.1", "ports": "22,-sC"}),
            "not a port",
        ),
        (
            "netr__dns_lookup",
            json!({"name": "localhost", "server": "203.0.113.5"}),
            "not allowed",
        ),
    ];
    for (tool, args, why) in refused {
        let r = agent.call(tool, args.clone(), Some(30_000)).await.unwrap();
        assert!(r.is_error, "{tool} {args}: {}", r.joined_text());
        assert!(
            r.joined_text().contains(why),
            "{tool} {args}: {}",
            r.joined_text()
        );
    }
    // None of those asked an operator.
    let quiet_until = std::time::Instant::now() + Duration::from_millis(300);
    while std::time::Instant::now() < quiet_until {
        if let Some(e) = operator.next_event(Duration::from_millis(50)).await {
            assert_ne!(e.event, EventName::ApprovalRequested, "{:?}", e.payload);
        }
    }
}

#[tokio::test]
async fn a_public_target_with_external_waits_for_an_operator() {
    let (gw, _ws, _node, agent) = setup("neta").await;
    let operator = gw.agent_with(&gw.admin_token()).await;
    let a = agent.clone();
    let call = tokio::spawn(async move {
        a.call(
            "neta__net_diagnose",
            json!({"target": "8.8.8.8", "port": 443, "external": true}),
            Some(60_000),
        )
        .await
    });
    let req = eventually("approval.requested", Duration::from_secs(15), || async {
        let e = operator.next_event(Duration::from_millis(100)).await?;
        (e.event == EventName::ApprovalRequested).then_some(e.payload)
    })
    .await;
    assert_eq!(req["node"], "neta");
    assert_eq!(req["tool"], "net_diagnose");
    assert!(
        req["summary"].as_str().unwrap().contains("8.8.8.8"),
        "{req}"
    );
    assert!(req["reason"].as_str().unwrap().contains("public"), "{req}");
    assert!(!call.is_finished());
    // Denied: nothing is sent to 8.8.8.8.
    let (code, _, err) = gw.cli(&["approvals", "deny", req["id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.remote().unwrap().code, ErrorCode::Denied);
}

/// Writes `body` to `path` (creating its directory), executable if `exec`.
fn plant(path: &std::path::Path, body: &str, exec: bool) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    if exec {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Issue 14 item 6: `net_services` ran `nmap -sV` with the login environment, so an
/// agent that could write the workspace-as-home (a `.profile` putting its own `nmap`
/// first on `PATH`, or `NMAPDIR` at its own `nse_main.lua` and service probes) had its
/// code run by a "read-only" tool. The node here runs with `HOME` = its workspace (a
/// temporary directory; the real home is never touched) where all of that is planted;
/// every planted file would leave a marker or change the scan's answer.
#[tokio::test]
async fn network_tools_ignore_programs_and_nmap_data_planted_in_the_workspace() {
    if !have("nmap") {
        return;
    }
    let gw = Gateway::start().await;
    let ws = TempDir::new("ws");
    let markers = TempDir::new("markers");
    let m = markers.path().display();
    let home = ws.path();
    // A fake nmap first on PATH, both in the node's own environment and via .profile.
    plant(
        &home.join("bin/nmap"),
        &format!("#!/bin/sh\ntouch {m}/FAKE_NMAP\nexit 1\n"),
        true,
    );
    plant(
        &home.join(".profile"),
        "PATH=\"$HOME/bin:$PATH\"; export PATH\nNMAPDIR=\"$HOME/nmapdir\"; export NMAPDIR\n",
        false,
    );
    // nmap data that runs code (nse_main.lua) and relabels the service (probes), in
    // NMAPDIR and in ~/.nmap.
    let lua = format!(
        "local f = io.open(\"{m}/LUA_RAN\", \"w\") if f then f:write(\"x\") f:close() end\n"
    );
    let probes = "Probe TCP NULL q||\ntotalwaitms 6000\nmatch gsvplanted m|^SSH-| p/planted/\n";
    for dir in ["nmapdir", ".nmap"] {
        plant(&home.join(dir).join("nse_main.lua"), &lua, false);
        plant(&home.join(dir).join("nmap-service-probes"), probes, false);
        plant(
            &home.join(dir).join("scripts/script.db"),
            "Entry { filename = \"planted.nse\", categories = { \"version\", } }\n",
            false,
        );
        plant(&home.join(dir).join("scripts/planted.nse"), &lua, false);
    }
    let path = format!(
        "{}:{}",
        home.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = std::process::Command::new(common::gsv_bin());
    cmd.arg("node")
        .args(["--gateway", &gw.url(), "--id", "netp2"])
        .args(["--token", &gw.node_token("netp2")])
        .arg("--workspace")
        .arg(home)
        .arg("--data")
        .arg(gw.node_data.path())
        .args(["--heartbeat-ms", "1000"])
        .env("RUST_LOG", "warn")
        .env("HOME", home)
        .env("SHELL", "/bin/sh")
        .env("PATH", &path)
        .env("NMAPDIR", home.join("nmapdir"))
        .env_remove("GSV_GATEWAY")
        .env_remove("GSV_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    let _node = common::Proc(
        common::die_with_parent(&mut cmd)
            .spawn()
            .expect("spawn gsv node"),
    );
    gw.wait_online("netp2").await;
    let agent = gw.agent().await;

    // The Bash tool does see the planted environment (it is the user's shell)...
    let r = agent
        .call(
            "netp2__Bash",
            json!({"command": "command -v nmap; echo \"$NMAPDIR\""}),
            Some(30_000),
        )
        .await
        .unwrap();
    let seen = r.joined_text();
    assert!(
        seen.contains(&format!("{}/bin/nmap", home.display())),
        "{seen}"
    );

    // ...net_services does not: the real nmap, with the system data, scans.
    let port = listener().await;
    let r = agent
        .call(
            "netp2__net_services",
            json!({"host": "127.0.0.1", "ports": port.to_string()}),
            Some(120_000),
        )
        .await
        .unwrap();
    let v = structured(&r);
    assert_eq!(v["ports"][0]["port"], port, "{v}");
    assert_eq!(v["ports"][0]["state"], "open", "{v}");
    assert_eq!(v["ports"][0]["service"], "ssh", "{v}");
    let r = agent
        .call(
            "netp2__net_discover",
            json!({"subnet": "127.0.0.1/32"}),
            Some(120_000),
        )
        .await
        .unwrap();
    assert_eq!(structured(&r)["hosts"][0]["ip"], "127.0.0.1");

    let left: Vec<String> = std::fs::read_dir(markers.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "planted code ran: {left:?}");
}
