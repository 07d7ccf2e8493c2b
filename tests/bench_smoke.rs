//! The benchmark harness in its smoke size: every scenario runs end to end in seconds,
//! so the harness cannot rot. Figures are not asserted (tests never assert timings);
//! the shape of the report is.

mod common;

use serde_json::Value;
use std::process::Command;

fn bench(scenario: &str) -> Value {
    let out = Command::new(common::gsv_bin())
        .args(["bench", scenario, "--quick", "--json"])
        .output()
        .expect("run gsv bench");
    assert!(
        out.status.success(),
        "gsv bench {scenario} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(v["scenario"], scenario);
    let rows = v["rows"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for r in rows {
        assert!(r["value"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["baselineValue"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["ratio"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["met"].is_boolean());
    }
    v
}

fn have(bin: &str) -> bool {
    Command::new(bin).arg("--version").output().is_ok()
}

#[test]
fn bash_spawn_smoke() {
    bench("bash-spawn");
}

#[test]
fn exec_spawn_smoke() {
    bench("exec-spawn");
}

#[test]
fn grep_and_glob_smoke() {
    let fd = have("fd") || have("fdfind");
    if !(have("rg") && fd) {
        // CI installs both (.ci/run); elsewhere say what is missing instead of failing.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have ripgrep and fd-find installed"
        );
        eprintln!("skipping: install ripgrep and fd-find to run the grep/glob benchmarks");
        return;
    }
    bench("grep");
    bench("glob");
}

#[test]
fn gateway_scenarios_smoke() {
    bench("latency");
    bench("mcp-listing");
    bench("throughput");
    bench("memory");
    bench("reconnect");
}

#[test]
fn fanout_smoke() {
    // `--quick`: 20 simulated nodes, 1 round per side; the fan-out must answer for
    // every node (the scenario checks the summary and the events), timings are not
    // asserted.
    let v = bench("fanout");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    assert!(
        rows[0]["figure"].as_str().unwrap().contains("20 nodes"),
        "{v}"
    );
}

#[test]
fn ssh_call_smoke() {
    // The harness runs its own sshd on 127.0.0.1 (an ephemeral port, a temporary
    // config and keys), so it needs OpenSSH's server and client installed.
    let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if !(sshd && have_ssh()) {
        // CI installs both (.ci/run); elsewhere say what is missing instead of failing.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have openssh-server and openssh-client installed"
        );
        eprintln!("skipping: install openssh-server and openssh-client to run `gsv bench ssh`");
        return;
    }
    let v = bench("ssh");
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(3));
}

#[test]
fn transfer_smoke() {
    // scp against the harness's own sshd, as `gsv bench ssh`.
    let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if !(sshd && have_ssh()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have openssh-server and openssh-client installed"
        );
        eprintln!(
            "skipping: install openssh-server and openssh-client to run `gsv bench transfer`"
        );
        return;
    }
    let v = bench("transfer");
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(3));
}

/// `ssh -V` answers (it prints its version on stderr and exits 0).
fn have_ssh() -> bool {
    Command::new("ssh")
        .arg("-V")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn unknown_scenario_is_a_usage_error() {
    let out = Command::new(common::gsv_bin())
        .args(["bench", "no-such-scenario"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn ssh_backend_smoke() {
    // An SSH-backed node against the harness's own sshd, as `gsv bench ssh`.
    let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if !(sshd && have_ssh()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have openssh-server and openssh-client installed"
        );
        eprintln!(
            "skipping: install openssh-server and openssh-client to run `gsv bench ssh-backend`"
        );
        return;
    }
    let v = bench("ssh-backend");
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(4));
}

#[test]
fn cluster_smoke() {
    // `--quick`: 3 replicas and a nats-server (installed by .ci/run), 60 nodes, 300
    // calls, one replica killed; the rows must all be there.
    let v = bench("cluster");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 8, "{v}");
    assert!(
        rows[0]["figure"]
            .as_str()
            .unwrap()
            .contains("another replica"),
        "{v}"
    );
    // 60 nodes fit on two replicas: the kill step ran.
    assert!(
        rows[2]["figure"]
            .as_str()
            .unwrap()
            .contains("registered elsewhere"),
        "{v}"
    );
    assert!(
        rows[4]["figure"]
            .as_str()
            .unwrap()
            .contains("node directory"),
        "{v}"
    );
    assert!(
        rows[5]["figure"].as_str().unwrap().contains("node tokens"),
        "{v}"
    );
    assert!(rows[7]["figure"].as_str().unwrap().contains("CPU"), "{v}");
}
