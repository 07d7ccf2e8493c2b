//! The network tools with the real programs, against loopback only: 127.0.0.1 and
//! listeners this test opens on it. Nothing else is ever a target, and the default
//! subnet (which would scan the host's LAN) is never used.
//!
//! A test whose program is missing is skipped with a message, unless `CI` is set, in
//! which case it fails (`.ci/run` installs nmap, iputils-ping, traceroute, iproute2).

use gsv_node::tools::net::{NetDiagnose, NetDiscover, NetEnv, NetServices, NetworkStatus};
use gsv_node::{Tool, ToolContext};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Whether `bin` is installed; skips (or, under CI, fails) the test otherwise.
fn have(bin: &str) -> bool {
    if which::which(bin).is_ok() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{bin} is required under CI (.ci/run installs it)");
    }
    eprintln!("skipping: {bin} is not installed");
    false
}

/// A listener on 127.0.0.1 that greets every connection like an SSH server.
async fn ssh_like_listener() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n").await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
        }
    });
    port
}

fn ctx() -> ToolContext {
    ToolContext::new("/", "it")
}

fn structured(r: &gsv_protocol::ToolResult) -> Value {
    assert!(!r.is_error, "{}", r.joined_text());
    r.structured_content.clone().unwrap()
}

#[tokio::test]
async fn discover_pings_loopback() {
    if !have("nmap") {
        return;
    }
    let r = NetDiscover::new(NetEnv::system())
        .execute(json!({"subnet": "127.0.0.1/32"}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["subnet"], "127.0.0.1/32");
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{v}");
    assert_eq!(hosts[0]["ip"], "127.0.0.1");
    assert_eq!(hosts[0]["state"], "up");
}

#[tokio::test]
async fn services_finds_the_listener_it_was_shown() {
    if !have("nmap") {
        return;
    }
    let port = ssh_like_listener().await;
    let r = NetServices::new(NetEnv::system())
        .execute(
            json!({"host": "127.0.0.1", "ports": port.to_string()}),
            ctx(),
        )
        .await;
    let v = structured(&r);
    assert_eq!(v["address"], "127.0.0.1");
    assert_eq!(v["open"], 1, "{v}");
    let p = &v["ports"][0];
    assert_eq!(p["port"], port);
    assert_eq!(p["state"], "open");
    assert_eq!(p["protocol"], "tcp");
    assert_eq!(p["service"], "ssh", "{v}");
    assert!(
        p["version"].as_str().unwrap_or("").contains("OpenSSH"),
        "{v}"
    );

    // The quick scan of loopback's top 20 ports answers too.
    let r = NetServices::new(NetEnv::system())
        .execute(json!({"host": "localhost", "fast": true}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["scanned"], "the top 20 ports");
    assert_eq!(v["status"], "up");
}

#[tokio::test]
async fn diagnose_loopback_with_a_port() {
    if !(have("ping") && have("traceroute")) {
        return;
    }
    let port = ssh_like_listener().await;
    let r = NetDiagnose::new(NetEnv::system())
        .execute(json!({"target": "127.0.0.1", "port": port}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["resolvedTo"], "127.0.0.1");
    assert_eq!(v["scope"], "loopback");
    assert_eq!(v["dns"]["status"], "skipped");
    assert_eq!(v["ping"]["status"], "ok", "{v}");
    assert_eq!(v["ping"]["received"], 3);
    assert_eq!(v["traceroute"]["reached"], true, "{v}");
    assert_eq!(v["traceroute"]["lastHop"], "127.0.0.1");
    assert_eq!(v["portCheck"]["open"], true);
    assert!(v["elapsedMs"].as_u64().unwrap() < 30_000);

    // A closed port: the check says so, the rest still answers.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = NetDiagnose::new(NetEnv::system())
        .execute(json!({"target": "localhost", "port": closed}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["dns"]["status"], "ok");
    assert_eq!(v["portCheck"]["open"], false);
    assert!(
        v["portCheck"]["failure"]
            .as_str()
            .unwrap()
            .contains("refused"),
        "{v}"
    );
}

#[tokio::test]
async fn status_of_this_host() {
    if !have("ip") {
        return;
    }
    let r = NetworkStatus::new(NetEnv::system())
        .execute(json!({}), ctx())
        .await;
    let v = structured(&r);
    let names: Vec<&str> = v["interfaces"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"lo"), "{v}");
    assert!(v["routes"]["ipv4"].is_array(), "{v}");
    for section in ["networkManager", "listening", "dns"] {
        assert!(v[section].is_object(), "{section}: {v}");
    }
}
