//! The five network tools with their host access faked: a command runner that answers
//! with captured output and records every command, a resolver answering from a table,
//! a connector that counts connections. Nothing here sends a packet (except the two
//! port-check tests, which talk to a listener they open on 127.0.0.1).
//!
//! What is checked: the argv each tool builds, that refused calls start nothing, the
//! approval posture (`check`), partial failures, and missing binaries.

use gsv_node::async_trait;
use gsv_node::tools::net::portcheck::Connector;
use gsv_node::tools::net::run::{install_hint, Command, CommandRunner, Output, RunError};
use gsv_node::tools::net::target::HostResolver;
use gsv_node::tools::net::{
    DnsLookup, NetDiagnose, NetDiscover, NetEnv, NetServices, NetworkStatus,
};
use gsv_node::{NodeConfig, Registry, Tool, ToolContext};
use gsv_protocol::{ErrorCode, NodeId, ToolResult};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).unwrap()
}

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/net")
        .join(name)
}

type Reply = Box<dyn Fn(&Command) -> Result<Output, RunError> + Send + Sync>;

/// Answers commands from canned output; records each.
struct FakeRunner {
    missing: HashSet<&'static str>,
    reply: Reply,
    calls: Mutex<Vec<Command>>,
}

impl FakeRunner {
    fn new(reply: impl Fn(&Command) -> Result<Output, RunError> + Send + Sync + 'static) -> Self {
        FakeRunner {
            missing: HashSet::new(),
            reply: Box::new(reply),
            calls: Mutex::new(Vec::new()),
        }
    }

    fn without(mut self, programs: &[&'static str]) -> Self {
        self.missing.extend(programs);
        self
    }

    fn calls(&self) -> Vec<Command> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl CommandRunner for FakeRunner {
    async fn available(&self, program: &'static str) -> bool {
        !self.missing.contains(program)
    }

    async fn run(&self, command: &Command, _: &CancellationToken) -> Result<Output, RunError> {
        self.calls.lock().unwrap().push(command.clone());
        if self.missing.contains(command.program) {
            return Err(RunError::NotInstalled {
                program: command.program,
                hint: install_hint(command.program),
            });
        }
        (self.reply)(command)
    }
}

fn ok(stdout: &str) -> Result<Output, RunError> {
    Ok(Output {
        status: Some(0),
        stdout: stdout.to_owned(),
        ..Output::default()
    })
}

fn exit(code: i32, stdout: &str, stderr: &str) -> Result<Output, RunError> {
    Ok(Output {
        status: Some(code),
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
        ..Output::default()
    })
}

/// Answers names from a table.
struct Table(HashMap<&'static str, Vec<&'static str>>);

#[async_trait]
impl HostResolver for Table {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        self.0
            .get(name)
            .map(|a| a.iter().map(|s| s.parse().unwrap()).collect())
            .ok_or_else(|| "Name or service not known".to_owned())
    }
}

fn names() -> Table {
    Table(HashMap::from([
        ("nas.lan", vec!["192.168.1.20"]),
        ("public.example", vec!["93.184.216.34"]),
        ("mixed.example", vec!["10.0.0.5", "8.8.8.8"]),
        ("blocked.example", vec!["0.0.0.0"]),
    ]))
}

/// Refuses every connection, counting them; or sends them to a loopback port.
struct FakeConnector {
    count: AtomicUsize,
    redirect: Option<u16>,
}

#[async_trait]
impl Connector for FakeConnector {
    async fn connect(&self, _addr: SocketAddr) -> io::Result<TcpStream> {
        self.count.fetch_add(1, Ordering::SeqCst);
        match self.redirect {
            Some(port) => TcpStream::connect(("127.0.0.1", port)).await,
            None => Err(io::Error::from(io::ErrorKind::ConnectionRefused)),
        }
    }
}

struct Env {
    runner: Arc<FakeRunner>,
    connector: Arc<FakeConnector>,
    net: NetEnv,
}

fn env(runner: FakeRunner) -> Env {
    env_with(runner, None)
}

fn env_with(runner: FakeRunner, redirect: Option<u16>) -> Env {
    let runner = Arc::new(runner);
    let connector = Arc::new(FakeConnector {
        count: AtomicUsize::new(0),
        redirect,
    });
    let net = NetEnv {
        runner: runner.clone(),
        resolver: Arc::new(names()),
        connector: connector.clone(),
        arp_table: fixture_path("proc_net_arp_lan.txt"),
        resolv_conf: fixture_path("resolv_conf.txt"),
    };
    Env {
        runner,
        connector,
        net,
    }
}

impl Env {
    fn nothing_started(&self) {
        assert!(self.runner.calls().is_empty(), "{:?}", self.runner.calls());
        assert_eq!(self.connector.count.load(Ordering::SeqCst), 0);
    }
}

/// Answers everything the tools run on a healthy LAN host.
fn lan(cmd: &Command) -> Result<Output, RunError> {
    match (cmd.program, cmd.args.first().map(String::as_str)) {
        ("nmap", Some("-sn")) => ok(&fixture("nmap_sn_lan.gnmap")),
        ("nmap", Some("-sV")) => ok(&fixture("nmap_sv_lan.gnmap")),
        ("ip", Some("route")) if cmd.args.get(1).map(String::as_str) == Some("get") => {
            ok(&fixture("ip_route_get.txt"))
        }
        ("ip", Some("route")) => ok(&fixture("ip_route_laptop.txt")),
        ("ip", Some("-6")) => ok(&fixture("ip6_route.txt")),
        ("ip", Some("-br")) => ok(&fixture("ip_br_addr_laptop.txt")),
        ("ss", _) => ok(&fixture("ss_tulpn_desktop.txt")),
        ("netstat", _) => ok(&fixture("netstat_tulpn_desktop.txt")),
        ("nmcli", _) => ok(&fixture("nmcli_active.txt")),
        ("resolvectl", _) => ok(&fixture("resolvectl_status.txt")),
        ("ping", _) => ok(&fixture("ping_partial.txt")),
        ("traceroute", _) => ok(&fixture("traceroute_reached.txt")),
        ("tracepath", _) => ok(&fixture("tracepath.txt")),
        _ => exit(127, "", "unexpected command"),
    }
}

fn ctx() -> ToolContext {
    ToolContext::new("/", "t1")
}

fn approved() -> ToolContext {
    let mut c = ctx();
    c.approval = Some("apr-1".to_owned());
    c
}

fn structured(r: &ToolResult) -> &Value {
    assert!(!r.is_error, "{}", r.joined_text());
    r.structured_content.as_ref().expect("structured content")
}

fn error_text(r: &ToolResult) -> String {
    assert!(r.is_error, "expected an error, got {}", r.joined_text());
    r.joined_text()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------- declarations

#[test]
fn declarations() {
    let e = env(FakeRunner::new(lan));
    let tools: Vec<Box<dyn Tool>> = vec![
        Box::new(NetDiagnose::new(e.net.clone())),
        Box::new(NetDiscover::new(e.net.clone())),
        Box::new(NetServices::new(e.net.clone())),
        Box::new(NetworkStatus::new(e.net.clone())),
        Box::new(DnsLookup),
    ];
    let want = [
        (
            "net_diagnose",
            "network.diagnose",
            true,
            &["ping", "traceroute"][..],
        ),
        (
            "net_discover",
            "network.discover",
            true,
            &["nmap", "ip"][..],
        ),
        ("net_services", "network.scan", true, &["nmap"][..]),
        (
            "network_status",
            "network.status",
            false,
            &["ip", "ss", "nmcli", "resolvectl"][..],
        ),
        ("dns_lookup", "dns.query", true, &[][..]),
    ];
    for (tool, (name, capability, open_world, bins)) in tools.iter().zip(want) {
        let d = tool.def();
        assert_eq!(d.name, name);
        assert_eq!(d.capability, capability);
        assert_eq!(d.annotations.read_only_hint, Some(true), "{name}");
        assert_eq!(d.annotations.destructive_hint, Some(false), "{name}");
        assert_eq!(d.annotations.open_world_hint, Some(open_world), "{name}");
        assert_eq!(d.requires_bins, strings(bins), "{name}");
        assert_eq!(d.input_schema["type"], "object");
        assert_eq!(d.input_schema["additionalProperties"], false);
        assert!(d.default_timeout_ms.is_some());
    }
}

#[test]
fn the_standard_registry_offers_them_also_read_only() {
    for read_only in [false, true] {
        let mut c = NodeConfig::new(
            "ws://127.0.0.1:1".into(),
            NodeId::parse("n").unwrap(),
            "t".into(),
            "/".into(),
        );
        c.read_only = read_only;
        let r = Registry::standard(&c).unwrap();
        for name in [
            "net_diagnose",
            "net_discover",
            "net_services",
            "network_status",
            "dns_lookup",
        ] {
            assert!(r.get(name).is_some(), "{name} (read_only {read_only})");
        }
        let bins = r.required_bins();
        for bin in [
            "nmap",
            "ping",
            "traceroute",
            "ip",
            "ss",
            "nmcli",
            "resolvectl",
        ] {
            assert!(bins.contains(bin), "{bin}");
        }
        for cap in [
            "network.diagnose",
            "network.discover",
            "network.scan",
            "network.status",
            "dns.query",
        ] {
            assert!(r.capabilities().contains(&cap.to_owned()), "{cap}");
        }
    }
}

// ---------------------------------------------------------------- net_discover

#[tokio::test]
async fn discover_builds_the_fixed_argv_and_adds_macs() {
    let e = env(FakeRunner::new(lan));
    let tool = NetDiscover::new(e.net.clone());
    let r = tool
        .execute(json!({"subnet": "192.168.1.77/24"}), ctx())
        .await;
    let v = structured(&r);
    let calls = e.runner.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].program, "nmap");
    assert_eq!(
        calls[0].args,
        strings(&[
            "-sn",
            "--host-timeout",
            "30s",
            "--max-retries",
            "1",
            "-oG",
            "-",
            "--",
            "192.168.1.0/24"
        ])
    );
    assert!(calls[0].timeout <= Duration::from_secs(150));
    assert_eq!(v["subnet"], "192.168.1.0/24");
    assert_eq!(v["subnetSource"], "argument");
    assert_eq!(v["count"], 4);
    assert_eq!(
        v["hosts"][0],
        json!({"ip": "192.168.1.1", "mac": "a4:2b:b0:12:34:56", "hostname": "router.lan", "state": "up"})
    );
    assert_eq!(
        v["hosts"][2]["mac"],
        Value::Null,
        "not in the neighbour table"
    );
    assert_eq!(v["hosts"][2]["hostname"], Value::Null);
}

#[tokio::test]
async fn discover_refuses_public_wide_and_odd_subnets_before_running_anything() {
    for subnet in [
        "8.8.8.0/24",
        "1.1.1.1/32",
        "192.0.2.0/24",
        "10.0.0.0/8",
        "192.168.0.0/21",
        "-oN/tmp/x",
        "--script=broadcast",
        "192.168.1.0/24 -sS",
        "0xc0a80100/24",
        "fd00::/120",
    ] {
        let e = env(FakeRunner::new(lan));
        let tool = NetDiscover::new(e.net.clone());
        // Never an approval: public subnets are refused outright.
        assert_eq!(tool.check(&json!({"subnet": subnet}), &ctx()).await, Ok(()));
        let r = tool.execute(json!({"subnet": subnet}), approved()).await;
        assert!(
            error_text(&r).contains("net_discover: refused"),
            "{subnet}: {}",
            r.joined_text()
        );
        e.nothing_started();
    }
}

#[tokio::test]
async fn discover_derives_the_default_subnet_from_the_route_lookup() {
    let e = env(FakeRunner::new(lan));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["subnet"], "192.168.1.0/24");
    assert_eq!(v["subnetSource"], "default route");
    let calls = e.runner.calls();
    assert_eq!(calls.len(), 2);
    // A routing-table lookup (netlink, no packet), then the scan.
    assert_eq!(
        (calls[0].program, calls[0].args.clone()),
        ("ip", strings(&["route", "get", "1.1.1.1"]))
    );
    assert_eq!(calls[1].args.last().unwrap(), "192.168.1.0/24");
}

#[tokio::test]
async fn discover_refuses_a_public_default_lan() {
    let e = env(FakeRunner::new(|cmd| match cmd.program {
        "ip" => ok(&fixture("ip_route_get_public.txt")),
        _ => panic!("nothing but the route lookup may run: {cmd:?}"),
    }));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    let text = error_text(&r);
    assert!(
        text.contains("203.0.113.0/24") && text.contains("not a private subnet"),
        "{text}"
    );
    assert_eq!(e.runner.calls().len(), 1);

    // No source address, or no route at all: a clear message, no scan.
    let e = env(FakeRunner::new(|cmd| match cmd.program {
        "ip" => exit(2, "", "RTNETLINK answers: Network is unreachable"),
        _ => panic!("{cmd:?}"),
    }));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    assert!(error_text(&r).contains("Network is unreachable"));
    let e = env(FakeRunner::new(|cmd| match cmd.program {
        "ip" => ok("1.1.1.1 dev wg0 table 51820 uid 0\n    cache\n"),
        _ => panic!("{cmd:?}"),
    }));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    assert!(error_text(&r).contains("pass \"subnet\""));
}

#[tokio::test]
async fn discover_without_nmap_says_install_nmap() {
    let e = env(FakeRunner::new(lan).without(&["nmap"]));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({"subnet": "127.0.0.1/32"}), ctx())
        .await;
    let text = error_text(&r);
    assert!(
        text.contains("install nmap") && text.contains("apt-get install nmap"),
        "{text}"
    );
    e.nothing_started();
}

#[tokio::test]
async fn discover_reports_nmap_failures_and_timeouts() {
    let e = env(FakeRunner::new(|_| {
        exit(1, "", "Failed to open device eth9")
    }));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({"subnet": "10.1.1.0/24"}), ctx())
        .await;
    assert!(error_text(&r).contains("Failed to open device eth9"));
    let e = env(FakeRunner::new(|_| {
        Ok(Output {
            timed_out: true,
            ..Output::default()
        })
    }));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({"subnet": "10.1.1.0/24"}), ctx())
        .await;
    assert!(error_text(&r).contains("did not finish"));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({"subnet": 24}), ctx())
        .await;
    assert!(error_text(&r).contains("must be a string"));
}

// ---------------------------------------------------------------- net_services

#[tokio::test]
async fn services_argv_for_each_port_selection() {
    for (args, ports) in [
        (json!({"host": "nas.lan"}), vec!["--top-ports", "100"]),
        (
            json!({"host": "nas.lan", "fast": true}),
            vec!["--top-ports", "20"],
        ),
        (
            json!({"host": "nas.lan", "fast": false, "ports": "443, 22,80"}),
            vec!["-p", "22,80,443"],
        ),
        (
            json!({"host": "nas.lan", "ports": "8000-8100,8050,22"}),
            vec!["-p", "22,8000-8100"],
        ),
        (
            json!({"host": "nas.lan", "ports": "1-1024"}),
            vec!["-p", "1-1024"],
        ),
    ] {
        let e = env(FakeRunner::new(lan));
        let tool = NetServices::new(e.net.clone());
        assert_eq!(tool.check(&args, &ctx()).await, Ok(()));
        let r = tool.execute(args.clone(), ctx()).await;
        let v = structured(&r);
        let calls = e.runner.calls();
        assert_eq!(calls.len(), 1, "{args}");
        let mut want = strings(&["-sV", "-Pn", "-n", "-oG", "-"]);
        want.extend(strings(&ports));
        want.extend(strings(&["--", "192.168.1.20"]));
        assert_eq!(calls[0].args, want, "{args}");
        assert_eq!(v["address"], "192.168.1.20");
        assert_eq!(v["host"], "nas.lan");
        assert_eq!(v["open"], 6);
        assert_eq!(v["ports"][0]["port"], 22);
        assert_eq!(v["ports"][0]["service"], "ssh");
        assert_eq!(v["ignored"], "closed (93)");
    }
}

#[tokio::test]
async fn services_refuses_bad_port_lists_without_running() {
    for (ports, why) in [
        ("1-1025", "at most 1024"),
        ("1-500,1000-1600", "at most 1024"),
        ("0", "not a port"),
        ("65536", "not a port"),
        ("80,-sC", "not a port"),
        ("-p-", "not a port"),
        ("22;reboot", "not a port"),
        ("T:22", "not a port"),
        ("22 80", "not a port"),
        ("100-10", "backwards"),
        ("1-", "not a port"),
        (",", "not a port"),
        ("   ", "empty"),
    ] {
        let e = env(FakeRunner::new(lan));
        let r = NetServices::new(e.net.clone())
            .execute(json!({"host": "nas.lan", "ports": ports}), ctx())
            .await;
        let text = error_text(&r);
        assert!(text.contains(why), "{ports:?}: {text}");
        e.nothing_started();
    }
    let e = env(FakeRunner::new(lan));
    let r = NetServices::new(e.net.clone())
        .execute(
            json!({"host": "nas.lan", "ports": "22", "fast": true}),
            ctx(),
        )
        .await;
    assert!(error_text(&r).contains("not both"));
    e.nothing_started();
}

#[tokio::test]
async fn services_public_targets_need_external_then_approval() {
    for host in [
        "8.8.8.8",
        "public.example",
        "mixed.example",
        "::ffff:8.8.8.8",
        "134744072",
        "0x08080808",
    ] {
        // Without external: refused, nothing runs, nothing to approve.
        let e = env(FakeRunner::new(lan));
        let tool = NetServices::new(e.net.clone());
        let args = json!({"host": host});
        assert_eq!(tool.check(&args, &ctx()).await, Ok(()), "{host}");
        let text = error_text(&tool.execute(args, ctx()).await);
        assert!(
            text.contains("public") && text.contains("\"external\": true"),
            "{host}: {text}"
        );
        e.nothing_started();

        // With external: the node asks for approval.
        let args = json!({"host": host, "external": true, "fast": true});
        let err = tool.check(&args, &ctx()).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::ApprovalRequired, "{host}");
        let details = err.details.clone().unwrap();
        assert!(
            details["reason"].as_str().unwrap().contains("public"),
            "{details}"
        );
        let summary = details["summary"].as_str().unwrap();
        assert!(
            summary.contains("net_services") && summary.contains("top 20"),
            "{summary}"
        );
        // Executed without the approval anyway: refused.
        assert!(error_text(&tool.execute(args.clone(), ctx()).await).contains("approval"));
        e.nothing_started();

        // Approved: it runs, against the resolved address.
        assert_eq!(tool.check(&args, &approved()).await, Ok(()));
        let _ = tool.execute(args, approved()).await;
        let calls = e.runner.calls();
        assert_eq!(calls.len(), 1);
        let ip = calls[0].args.last().unwrap().clone();
        assert!(
            ["8.8.8.8", "93.184.216.34", "10.0.0.5"].contains(&ip.as_str()),
            "{ip}"
        );
    }
}

#[tokio::test]
async fn services_argv_never_carries_the_input_string() {
    // Every input that is accepted reaches nmap as the address it resolved to.
    let allowed = ["-sV", "-Pn", "-n", "-oG", "-", "--top-ports", "100", "--"];
    for (host, ip) in [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        (" NAS.LAN. ", "192.168.1.20"),
        ("１２７．０．０．１", "127.0.0.1"),
    ] {
        let e = env(FakeRunner::new(|_| ok("")));
        let _ = NetServices::new(e.net.clone())
            .execute(json!({"host": host}), ctx())
            .await;
        let calls = e.runner.calls();
        assert_eq!(calls.len(), 1, "{host}");
        let args = &calls[0].args;
        assert_eq!(args.last().unwrap(), ip, "{host}");
        assert_eq!(args[args.len() - 2], "--", "{host}");
        for a in &args[..args.len() - 1] {
            assert!(allowed.contains(&a.as_str()) || a == "-6", "{host}: {a}");
        }
    }
    // Option-like and malformed inputs never reach a process.
    for host in [
        "-oN/tmp/x",
        "--script=http-title",
        "-iL/etc/passwd",
        "nas.lan -oN/tmp/x",
        "nas.lan,-A",
        "$(id)",
        "fe80::1%eth0",
        "0.0.0.0",
        "255.255.255.255",
        "blocked.example",
        "nope.example",
    ] {
        let e = env(FakeRunner::new(|_| ok("")));
        let tool = NetServices::new(e.net.clone());
        assert_eq!(
            tool.check(&json!({"host": host, "external": true}), &ctx())
                .await,
            Ok(())
        );
        let r = tool
            .execute(json!({"host": host, "external": true}), approved())
            .await;
        assert!(r.is_error, "{host}: {}", r.joined_text());
        e.nothing_started();
    }
}

#[tokio::test]
async fn services_without_nmap_says_install_nmap_and_asks_no_approval() {
    let e = env(FakeRunner::new(lan).without(&["nmap"]));
    let tool = NetServices::new(e.net.clone());
    let args = json!({"host": "8.8.8.8", "external": true});
    assert_eq!(tool.check(&args, &ctx()).await, Ok(()));
    let text = error_text(&tool.execute(json!({"host": "nas.lan"}), ctx()).await);
    assert!(text.contains("install nmap"), "{text}");
    e.nothing_started();
}

#[tokio::test]
async fn services_reports_a_timeout_with_a_hint() {
    let e = env(FakeRunner::new(|_| {
        Ok(Output {
            timed_out: true,
            ..Output::default()
        })
    }));
    let text = error_text(
        &NetServices::new(e.net.clone())
            .execute(json!({"host": "nas.lan"}), ctx())
            .await,
    );
    assert!(
        text.contains("did not finish") && text.contains("fast"),
        "{text}"
    );
}

// ---------------------------------------------------------------- net_diagnose

#[tokio::test]
async fn diagnose_runs_every_check_on_the_resolved_address() {
    let e = env(FakeRunner::new(lan));
    let tool = NetDiagnose::new(e.net.clone());
    let args = json!({"target": "NAS.lan.", "port": 22});
    assert_eq!(tool.check(&args, &ctx()).await, Ok(()));
    let r = tool.execute(args, ctx()).await;
    let v = structured(&r);
    assert_eq!(v["resolvedTo"], "192.168.1.20");
    assert_eq!(v["scope"], "private (RFC 1918)");
    assert_eq!(v["dns"]["status"], "ok");
    assert_eq!(v["dns"]["addresses"], json!(["192.168.1.20"]));
    assert_eq!(v["ping"]["status"], "ok");
    assert_eq!(v["ping"]["received"], 2);
    assert_eq!(v["traceroute"]["status"], "not reached");
    assert_eq!(v["traceroute"]["lastHop"], "10.20.30.40");
    assert_eq!(v["portCheck"]["port"], 22);
    assert_eq!(v["portCheck"]["open"], false);
    assert!(v["portCheck"]["failure"]
        .as_str()
        .unwrap()
        .contains("refused"));
    let mut calls = e.runner.calls();
    calls.sort_by_key(|c| c.program);
    assert_eq!(calls[0].program, "ping");
    assert_eq!(
        calls[0].args,
        strings(&["-n", "-c", "3", "-W", "2", "--", "192.168.1.20"])
    );
    assert_eq!(calls[1].program, "traceroute");
    assert_eq!(
        calls[1].args,
        strings(&["-n", "-w", "2", "-q", "1", "-m", "20", "--", "192.168.1.20"])
    );
    for c in &calls {
        assert!(c.timeout <= Duration::from_secs(20), "{c:?}");
    }
    assert_eq!(e.connector.count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn diagnose_skips_dns_for_literals_and_reports_partial_failures() {
    let e = env(FakeRunner::new(|cmd| match cmd.program {
        "ping" => exit(1, &fixture("ping_no_reply.txt"), ""),
        "traceroute" => Ok(Output {
            status: None,
            stdout: fixture("traceroute_lan.txt"),
            timed_out: true,
            ..Output::default()
        }),
        _ => panic!("{cmd:?}"),
    }));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "10.20.30.40"}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["dns"]["status"], "skipped");
    assert_eq!(v["ping"]["status"], "no reply");
    assert_eq!(v["ping"]["lossPct"], 100.0);
    assert!(v["ping"]["failure"]
        .as_str()
        .unwrap()
        .contains("no echo reply"));
    assert_eq!(v["traceroute"]["status"], "timed out");
    assert_eq!(v["traceroute"]["hops"], 5);
    assert_eq!(v["traceroute"]["path"][4]["note"], "!H");
    assert_eq!(v["portCheck"], Value::Null, "no port, no port check");
    assert_eq!(e.connector.count.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn diagnose_dns_failures_are_the_diagnosis() {
    for (target, failure) in [
        ("nope.example", "not known"),
        ("blocked.example", "not a unicast"),
    ] {
        let e = env(FakeRunner::new(lan));
        let r = NetDiagnose::new(e.net.clone())
            .execute(json!({"target": target, "port": 443}), ctx())
            .await;
        let v = structured(&r);
        assert_eq!(v["resolvedTo"], Value::Null);
        assert_eq!(v["ping"]["status"], "skipped");
        assert_eq!(v["traceroute"]["status"], "skipped");
        assert_eq!(v["portCheck"]["status"], "skipped");
        let text = v.to_string();
        assert!(text.contains(failure), "{target}: {text}");
        e.nothing_started();
    }
    let e = env(FakeRunner::new(lan));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "blocked.example"}), ctx())
        .await;
    assert_eq!(structured(&r)["dns"]["addresses"], json!(["0.0.0.0"]));
    // An address literal that is no target is refused outright.
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "0.0.0.0"}), ctx())
        .await;
    assert!(error_text(&r).contains("refused"));
    e.nothing_started();
}

#[tokio::test]
async fn diagnose_public_targets_need_external_then_approval() {
    let e = env(FakeRunner::new(lan));
    let tool = NetDiagnose::new(e.net.clone());
    for target in [
        "8.8.8.8",
        "public.example",
        "mixed.example",
        "::ffff:8.8.8.8",
    ] {
        let args = json!({"target": target, "port": 443});
        assert_eq!(tool.check(&args, &ctx()).await, Ok(()));
        let text = error_text(&tool.execute(args, ctx()).await);
        assert!(text.contains("\"external\": true"), "{target}: {text}");

        let args = json!({"target": target, "port": 443, "external": true});
        let err = tool.check(&args, &ctx()).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::ApprovalRequired);
        let summary = err.details.unwrap()["summary"].as_str().unwrap().to_owned();
        assert!(
            summary.contains("net_diagnose") && summary.contains("443"),
            "{summary}"
        );
        assert!(error_text(&tool.execute(args, ctx()).await).contains("approval"));
    }
    e.nothing_started();
    // Private targets never need approval, external or not.
    assert_eq!(
        tool.check(&json!({"target": "127.0.0.1", "external": true}), &ctx())
            .await,
        Ok(())
    );
    // Approved, the probes run (here: against the fakes).
    let r = tool
        .execute(json!({"target": "8.8.8.8", "external": true}), approved())
        .await;
    assert_eq!(structured(&r)["resolvedTo"], "8.8.8.8");
    assert_eq!(e.runner.calls().len(), 2);
}

#[tokio::test]
async fn diagnose_refuses_option_like_targets() {
    let e = env(FakeRunner::new(lan));
    let tool = NetDiagnose::new(e.net.clone());
    for target in ["-oN/tmp/x", "--script=x", "127.0.0.1 -c 1000", "-f"] {
        let r = tool.execute(json!({"target": target}), approved()).await;
        assert!(error_text(&r).contains("refused"), "{target}");
    }
    for bad in [
        json!({}),
        json!({"target": ""}),
        json!({"target": "x", "port": 0}),
        json!({"target": "x", "port": 70000}),
        json!({"target": "x", "bogus": 1}),
    ] {
        assert!(tool.execute(bad.clone(), ctx()).await.is_error, "{bad}");
        assert_eq!(tool.check(&bad, &ctx()).await, Ok(()), "{bad}");
    }
    e.nothing_started();
}

#[tokio::test]
async fn diagnose_copes_with_missing_binaries() {
    // No traceroute: tracepath instead.
    let e = env(FakeRunner::new(lan).without(&["traceroute"]));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "10.20.30.40"}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["traceroute"]["program"], "tracepath");
    assert_eq!(v["traceroute"]["status"], "ok");
    assert_eq!(v["traceroute"]["reached"], true);
    let tracepath = e
        .runner
        .calls()
        .into_iter()
        .find(|c| c.program == "tracepath")
        .unwrap();
    assert_eq!(
        tracepath.args,
        strings(&["-n", "-m", "20", "--", "10.20.30.40"])
    );

    // Neither, and no ping: each field says what to install; the call still answers.
    let e = env(FakeRunner::new(lan).without(&["traceroute", "tracepath", "ping"]));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "10.20.30.40"}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["ping"]["status"], "not installed");
    assert!(v["ping"]["failure"]
        .as_str()
        .unwrap()
        .contains("iputils-ping"));
    assert_eq!(v["traceroute"]["status"], "not installed");
    assert!(v["traceroute"]["failure"]
        .as_str()
        .unwrap()
        .contains("apt-get install traceroute"));
}

/// A one-shot HTTP server on 127.0.0.1 answering `status_line`.
async fn http_listener(status_line: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
            let _ = s
                .write_all(format!("{status_line}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                .await;
        }
    });
    port
}

#[tokio::test]
async fn diagnose_port_80_reads_the_http_status() {
    // The connector sends "port 80" to a listener on 127.0.0.1.
    let port = http_listener("HTTP/1.1 204 No Content").await;
    let e = env_with(FakeRunner::new(lan), Some(port));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "127.0.0.1", "port": 80}), ctx())
        .await;
    let pc = &structured(&r)["portCheck"];
    assert_eq!(pc["open"], true);
    assert_eq!(pc["httpStatus"], 204);
    assert_eq!(pc["failure"], Value::Null);
}

#[tokio::test]
async fn diagnose_port_443_reports_a_failed_tls_handshake() {
    // Plain HTTP where TLS is expected: the handshake fails, and says so.
    let port = http_listener("HTTP/1.1 200 OK").await;
    let e = env_with(FakeRunner::new(lan), Some(port));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "127.0.0.1", "port": 443}), ctx())
        .await;
    let pc = &structured(&r)["portCheck"];
    assert_eq!(pc["open"], true);
    assert!(pc["tls"].as_str().unwrap().starts_with("failed"), "{pc}");
    assert_eq!(pc.get("httpStatus"), None);
}

// ---------------------------------------------------------------- network_status

#[tokio::test]
async fn status_gathers_every_section() {
    let e = env(FakeRunner::new(lan));
    let r = NetworkStatus::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    let v = structured(&r);
    assert_eq!(v["interfaces"]["entries"][2]["name"], "wlp2s0");
    assert_eq!(v["routes"]["ipv4"][0]["gateway"], "192.168.1.1");
    assert_eq!(v["routes"]["ipv6"][2]["gateway"], "fd00::1");
    assert_eq!(v["networkManager"]["available"], true);
    assert_eq!(v["networkManager"]["active"][0]["name"], "Home: 5 GHz");
    assert_eq!(v["listening"]["source"], "ss -tulpn");
    assert_eq!(v["listening"]["sockets"][3]["port"], 631);
    assert_eq!(v["dns"]["source"], "resolvectl status");
    assert_eq!(v["dns"]["scopes"][2]["currentServer"], "192.168.1.1");
    let mut argv: Vec<String> = e
        .runner
        .calls()
        .iter()
        .map(|c| format!("{} {}", c.program, c.args.join(" ")))
        .collect();
    argv.sort();
    assert_eq!(
        argv,
        [
            "ip -6 route",
            "ip -br addr",
            "ip route",
            "nmcli -t -f NAME,TYPE,DEVICE,STATE connection show --active",
            "resolvectl status --no-pager",
            "ss -tulpn",
        ]
    );
    assert!(e
        .runner
        .calls()
        .iter()
        .all(|c| c.timeout <= Duration::from_secs(5)));
    assert!(
        NetworkStatus::new(e.net.clone())
            .execute(json!({"x": 1}), ctx())
            .await
            .is_error
    );
}

#[tokio::test]
async fn status_sections_fail_independently() {
    let e = env(FakeRunner::new(
        |cmd| match (cmd.program, cmd.args.first().map(String::as_str)) {
            ("ip", Some("-br")) => exit(1, "", "Cannot open netlink socket: Permission denied"),
            ("resolvectl", _) => exit(
                1,
                "",
                "Failed to get global data: Unit dbus-org.freedesktop.resolve1.service not found.",
            ),
            _ => lan(cmd),
        },
    )
    .without(&["nmcli", "ss"]));
    let r = NetworkStatus::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    let v = structured(&r);
    assert!(v["interfaces"]["error"]
        .as_str()
        .unwrap()
        .contains("Permission denied"));
    assert_eq!(v["routes"]["ipv4"][0]["destination"], "default");
    assert_eq!(v["networkManager"]["available"], false);
    assert_eq!(v["listening"]["source"], "netstat -tulpn");
    assert_eq!(
        v["listening"]["sockets"][1]["processes"][0]["name"],
        "nginx: master"
    );
    assert!(v["dns"]["source"]
        .as_str()
        .unwrap()
        .ends_with("resolv_conf.txt"));
    assert_eq!(v["dns"]["resolvConf"]["nameservers"][0], "127.0.0.53");
    assert!(v["dns"]["resolvectlError"]
        .as_str()
        .unwrap()
        .contains("resolve1"));

    // Nothing installed at all: every section says so, the call still answers.
    let e = env(FakeRunner::new(lan).without(&["ip", "ss", "netstat", "nmcli", "resolvectl"]));
    let mut net = e.net.clone();
    net.resolv_conf = PathBuf::from("/nonexistent/resolv.conf");
    let r = NetworkStatus::new(net).execute(json!({}), ctx()).await;
    let v = structured(&r);
    assert!(v["interfaces"]["error"]
        .as_str()
        .unwrap()
        .contains("iproute2"));
    assert!(v["routes"]["error"].as_str().unwrap().contains("iproute2"));
    assert!(v["listening"]["error"]
        .as_str()
        .unwrap()
        .contains("neither ss nor netstat"));
    assert!(v["dns"]["error"].as_str().unwrap().contains("cannot read"));
}

// ---------------------------------------------------------------- exact results

/// `v` with the timings at `pointers` (present, whole numbers) set to 0.
fn steady(mut v: Value, pointers: &[&str]) -> Value {
    for p in pointers {
        let at = v.pointer_mut(p).unwrap_or_else(|| panic!("no {p}"));
        assert!(at.is_u64(), "{p}: {at}");
        *at = json!(0);
    }
    v
}

/// What a parser's output is as JSON.
fn as_json(parsed: impl serde::Serialize) -> Value {
    serde_json::to_value(parsed).unwrap()
}

#[tokio::test]
async fn discover_result_exactly() {
    let e = env(FakeRunner::new(lan));
    let r = NetDiscover::new(e.net.clone())
        .execute(json!({"subnet": "192.168.1.77/24"}), ctx())
        .await;
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs"]),
        json!({
            "subnet": "192.168.1.0/24",
            "subnetSource": "argument",
            "count": 4,
            "hosts": [
                {"ip": "192.168.1.1", "mac": "a4:2b:b0:12:34:56", "hostname": "router.lan", "state": "up"},
                {"ip": "192.168.1.20", "mac": "00:11:32:ab:cd:ef", "hostname": "nas.lan", "state": "up"},
                {"ip": "192.168.1.42", "mac": null, "hostname": null, "state": "up"},
                {"ip": "192.168.1.77", "mac": "3c:2a:f4:01:02:03", "hostname": "printer.lan", "state": "up"},
            ],
            "summary": "256 IP addresses (4 hosts up) scanned in 2.61 seconds",
            "elapsedMs": 0,
        })
    );
}

#[tokio::test]
async fn services_result_exactly() {
    let e = env(FakeRunner::new(lan));
    let r = NetServices::new(e.net.clone())
        .execute(json!({"host": "nas.lan"}), ctx())
        .await;
    let port = |port: u16, service: &str, state: &str, version: Option<&str>| json!({"port": port, "protocol": "tcp", "state": state, "service": service, "version": version});
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs"]),
        json!({
            "host": "nas.lan",
            "address": "192.168.1.20",
            "scope": "private (RFC 1918)",
            "scanned": "the top 100 ports",
            "status": "up",
            "open": 6,
            "ports": [
                port(22, "ssh", "open", Some("OpenSSH 9.2p1 Debian 2+deb12u2 (protocol 2.0)")),
                port(80, "http", "open", Some("nginx 1.22.1")),
                port(139, "netbios-ssn", "open", Some("Samba smbd 4.6.2")),
                port(443, "ssl|http", "open", Some("nginx 1.22.1")),
                port(445, "netbios-ssn", "open", Some("Samba smbd 4.6.2")),
                port(5000, "upnp", "filtered", None),
                port(8080, "http", "open", Some("Apache httpd 2.4.57 ((Debian), PHP 8.2)")),
            ],
            "ignored": "closed (93)",
            "summary": "1 IP address (1 host up) scanned in 18.22 seconds",
            "elapsedMs": 0,
        })
    );
}

#[tokio::test]
async fn diagnose_results_exactly() {
    // Every check ran.
    let e = env(FakeRunner::new(lan));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "NAS.lan.", "port": 22}), ctx())
        .await;
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs", "/dns/timeMs"]),
        json!({
            "target": "NAS.lan.",
            "resolvedTo": "192.168.1.20",
            "scope": "private (RFC 1918)",
            "dns": {"status": "ok", "timeMs": 0, "addresses": ["192.168.1.20"]},
            "ping": {
                "status": "ok",
                "sent": 3,
                "received": 2,
                "lossPct": 33.3333,
                "minMs": 14.213,
                "avgMs": 15.506,
                "maxMs": 16.8,
            },
            "traceroute": {
                "status": "not reached",
                "program": "traceroute",
                "hops": 3,
                "lastHop": "10.20.30.40",
                "reached": false,
                "path": [
                    {"hop": 1, "address": "192.168.1.1", "rttMs": 0.412},
                    {"hop": 2, "address": "10.0.0.1", "rttMs": 2.877},
                    {"hop": 3, "address": "10.20.30.40", "rttMs": 4.051},
                ],
                "failure": "the target did not answer within 20 hops",
            },
            "portCheck": {
                "port": 22,
                "open": false,
                "connectMs": null,
                "failure": "connection refused (nothing listens on the port)",
            },
            "elapsedMs": 0,
        })
    );

    // The name does not resolve: every probe is skipped, the port check too.
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "nope.example", "port": 443}), ctx())
        .await;
    let skipped = json!({"status": "skipped", "reason": "DNS failed: Name or service not known"});
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs", "/dns/timeMs"]),
        json!({
            "target": "nope.example",
            "resolvedTo": null,
            "dns": {"status": "failed", "timeMs": 0, "failure": "Name or service not known"},
            "ping": skipped,
            "traceroute": skipped,
            "portCheck": skipped,
            "elapsedMs": 0,
        })
    );

    // It resolves to nothing a probe may target; no port asked for.
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "blocked.example"}), ctx())
        .await;
    let skipped = json!({
        "status": "skipped",
        "reason": "blocked.example resolves only to 0.0.0.0, which is not a unicast address a probe may target",
    });
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs", "/dns/timeMs"]),
        json!({
            "target": "blocked.example",
            "resolvedTo": null,
            "dns": {"status": "ok", "timeMs": 0, "addresses": ["0.0.0.0"]},
            "ping": skipped,
            "traceroute": skipped,
            "portCheck": null,
            "elapsedMs": 0,
        })
    );

    // No echo reply, a traceroute that ran out of time.
    let e = env(FakeRunner::new(|cmd| match cmd.program {
        "ping" => exit(1, &fixture("ping_no_reply.txt"), ""),
        "traceroute" => Ok(Output {
            status: None,
            stdout: fixture("traceroute_lan.txt"),
            timed_out: true,
            ..Output::default()
        }),
        _ => panic!("{cmd:?}"),
    }));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "10.20.30.40"}), ctx())
        .await;
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs"]),
        json!({
            "target": "10.20.30.40",
            "resolvedTo": "10.20.30.40",
            "scope": "private (RFC 1918)",
            "dns": {"status": "skipped", "reason": "the target is an IP address"},
            "ping": {
                "status": "no reply",
                "sent": 3,
                "received": 0,
                "lossPct": 100.0,
                "minMs": null,
                "avgMs": null,
                "maxMs": null,
                "failure": "no echo reply (host down, or ICMP filtered)",
            },
            "traceroute": {
                "status": "timed out",
                "program": "traceroute",
                "hops": 5,
                "lastHop": "10.20.30.1",
                "reached": false,
                "path": [
                    {"hop": 1, "address": "192.168.1.1", "rttMs": 0.512},
                    {"hop": 2, "address": "10.0.0.1", "rttMs": 3.204},
                    {"hop": 3, "address": null, "rttMs": null},
                    {"hop": 4, "address": "10.20.30.1", "rttMs": 9.871},
                    {"hop": 5, "address": "10.20.30.1", "rttMs": 3010.117, "note": "!H"},
                ],
                "failure": "timed out",
            },
            "portCheck": null,
            "elapsedMs": 0,
        })
    );

    // Neither ping nor a traceroute installed.
    let e = env(FakeRunner::new(lan).without(&["traceroute", "tracepath", "ping"]));
    let r = NetDiagnose::new(e.net.clone())
        .execute(json!({"target": "10.20.30.40"}), ctx())
        .await;
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs"]),
        json!({
            "target": "10.20.30.40",
            "resolvedTo": "10.20.30.40",
            "scope": "private (RFC 1918)",
            "dns": {"status": "skipped", "reason": "the target is an IP address"},
            "ping": {
                "status": "not installed",
                "failure": "ping is not installed on this node; install ping (Debian/Ubuntu: apt-get install iputils-ping)",
            },
            "traceroute": {
                "status": "not installed",
                "failure": "traceroute is not installed on this node; install traceroute (Debian/Ubuntu: apt-get install traceroute)",
            },
            "portCheck": null,
            "elapsedMs": 0,
        })
    );
}

#[tokio::test]
async fn status_results_exactly() {
    use gsv_node::tools::net::parse::{ip_addr, ip_route, nmcli, resolv_conf, resolvectl, sockets};
    const NMCLI: &str = "nmcli -t -f NAME,TYPE,DEVICE,STATE connection show --active";
    let routes = json!({
        "source": "ip route; ip -6 route",
        "ipv4": as_json(ip_route::parse_routes(&fixture("ip_route_laptop.txt"))),
        "ipv6": as_json(ip_route::parse_routes(&fixture("ip6_route.txt"))),
    });

    // Everything answers.
    let e = env(FakeRunner::new(lan));
    let r = NetworkStatus::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs"]),
        json!({
            "interfaces": {
                "source": "ip -br addr",
                "entries": as_json(ip_addr::parse_brief_addr(&fixture("ip_br_addr_laptop.txt"))),
            },
            "routes": routes,
            "networkManager": {
                "source": NMCLI,
                "available": true,
                "active": as_json(nmcli::parse_active(&fixture("nmcli_active.txt"))),
            },
            "listening": {
                "source": "ss -tulpn",
                "sockets": as_json(sockets::parse_ss(&fixture("ss_tulpn_desktop.txt"))),
            },
            "dns": {
                "source": "resolvectl status",
                "scopes": as_json(resolvectl::parse_status(&fixture("resolvectl_status.txt"))),
            },
            "elapsedMs": 0,
        })
    );

    // Failures and fallbacks.
    let e = env(FakeRunner::new(
        |cmd| match (cmd.program, cmd.args.first().map(String::as_str)) {
            ("ip", Some("-br")) => exit(1, "", "Cannot open netlink socket: Permission denied"),
            ("ip", Some("-6")) => exit(2, "", "IPv6 disabled"),
            ("nmcli", _) => exit(8, "", "Error: NetworkManager is not running."),
            ("resolvectl", _) => exit(1, "", "Failed to get global data"),
            _ => lan(cmd),
        },
    )
    .without(&["ss"]));
    let resolv_conf_path = fixture_path("resolv_conf.txt").display().to_string();
    let r = NetworkStatus::new(e.net.clone())
        .execute(json!({}), ctx())
        .await;
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs"]),
        json!({
            "interfaces": {
                "source": "ip -br addr",
                "error": "ip -br addr: Cannot open netlink socket: Permission denied",
            },
            "routes": {
                "source": "ip route; ip -6 route",
                "ipv4": as_json(ip_route::parse_routes(&fixture("ip_route_laptop.txt"))),
                "ipv6": {"error": "ip -6 route: IPv6 disabled"},
            },
            "networkManager": {
                "source": NMCLI,
                "available": true,
                "error": "nmcli -t -f NAME,TYPE,DEVICE,STATE connection show --active: Error: NetworkManager is not running.",
            },
            "listening": {
                "source": "netstat -tulpn",
                "sockets": as_json(sockets::parse_netstat(&fixture("netstat_tulpn_desktop.txt"))),
            },
            "dns": {
                "source": resolv_conf_path,
                "resolvConf": as_json(resolv_conf::parse(&fixture("resolv_conf.txt"))),
                "resolvectlError": "resolvectl status --no-pager: Failed to get global data",
            },
            "elapsedMs": 0,
        })
    );

    // Nothing installed at all.
    let e = env(FakeRunner::new(lan).without(&["ip", "ss", "netstat", "nmcli", "resolvectl"]));
    let mut net = e.net.clone();
    net.resolv_conf = PathBuf::from("/nonexistent/resolv.conf");
    let r = NetworkStatus::new(net).execute(json!({}), ctx()).await;
    let no_ip = "ip is not installed on this node; install iproute2 (Debian/Ubuntu: apt-get install iproute2)";
    assert_eq!(
        steady(structured(&r).clone(), &["/elapsedMs"]),
        json!({
            "interfaces": {"source": "ip -br addr", "error": no_ip},
            "routes": {
                "source": "ip route; ip -6 route",
                "ipv4": {"error": no_ip},
                "ipv6": {"error": no_ip},
                "error": no_ip,
            },
            "networkManager": {
                "source": NMCLI,
                "available": false,
                "note": "nmcli is not installed: NetworkManager does not manage this host's network",
            },
            "listening": {
                "source": "ss -tulpn",
                "error": "neither ss nor netstat is installed; install iproute2 (Debian/Ubuntu: apt-get install iproute2)",
            },
            "dns": {
                "source": "/nonexistent/resolv.conf",
                "error": "cannot read /nonexistent/resolv.conf: No such file or directory (os error 2)",
            },
            "elapsedMs": 0,
        })
    );
}
