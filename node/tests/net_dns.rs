//! `dns_lookup` against a tiny DNS server this test runs on 127.0.0.1 (canned
//! records for `example.test.`), and against the system resolver for `localhost`
//! only (answered locally, RFC 6761). No query leaves the machine; the `server`
//! validation is checked without sending anything.

use gsv_node::tools::net::dns::{parse_server, parse_type, query_name};
use gsv_node::tools::net::DnsLookup;
use gsv_node::{Tool, ToolContext};
use hickory_resolver::proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_resolver::proto::rr::rdata::{CAA, CNAME, MX, NS, PTR, SOA, SRV, TXT};
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::UdpSocket;

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

fn rec(owner: &str, ttl: u32, data: RData) -> Record {
    Record::from_rdata(name(owner), ttl, data)
}

fn soa() -> Record {
    rec(
        "example.test.",
        300,
        RData::SOA(SOA::new(
            name("ns1.example.test."),
            name("hostmaster.example.test."),
            2026051601,
            3600,
            600,
            86400,
            300,
        )),
    )
}

/// The canned zone: (answers, response code) for a query.
fn answer(qname: &str, qtype: RecordType) -> (Vec<Record>, ResponseCode) {
    let a = |ip: [u8; 4]| RData::A(Ipv4Addr::from(ip).into());
    match (qname, qtype) {
        ("example.test.", RecordType::A) => (
            vec![
                rec(qname, 300, a([10, 1, 2, 3])),
                rec(qname, 300, a([10, 1, 2, 4])),
            ],
            ResponseCode::NoError,
        ),
        ("example.test.", RecordType::AAAA) => (
            vec![rec(
                qname,
                60,
                RData::AAAA(Ipv6Addr::from_str("fd00::1").unwrap().into()),
            )],
            ResponseCode::NoError,
        ),
        ("example.test.", RecordType::MX) => (
            vec![
                rec(
                    qname,
                    3600,
                    RData::MX(MX::new(10, name("mail.example.test."))),
                ),
                rec(
                    qname,
                    3600,
                    RData::MX(MX::new(20, name("backup.example.test."))),
                ),
            ],
            ResponseCode::NoError,
        ),
        ("example.test.", RecordType::NS) => (
            vec![rec(qname, 86400, RData::NS(NS(name("ns1.example.test."))))],
            ResponseCode::NoError,
        ),
        ("example.test.", RecordType::TXT) => (
            vec![
                rec(qname, 120, RData::TXT(TXT::new(vec!["v=spf1 -all".into()]))),
                rec(
                    qname,
                    120,
                    RData::TXT(TXT::new(vec!["part one ".into(), "part two".into()])),
                ),
            ],
            ResponseCode::NoError,
        ),
        ("example.test.", RecordType::CAA) => (
            vec![rec(
                qname,
                600,
                RData::CAA(CAA::new_issue(false, Some(name("letsencrypt.org")), vec![])),
            )],
            ResponseCode::NoError,
        ),
        ("example.test.", RecordType::SOA) => (vec![soa()], ResponseCode::NoError),
        ("_sip._tcp.example.test.", RecordType::SRV) => (
            vec![rec(
                qname,
                900,
                RData::SRV(SRV::new(10, 60, 5060, name("sip.example.test."))),
            )],
            ResponseCode::NoError,
        ),
        ("www.example.test.", RecordType::CNAME) => (
            vec![rec(qname, 30, RData::CNAME(CNAME(name("example.test."))))],
            ResponseCode::NoError,
        ),
        ("www.example.test.", RecordType::A) => (
            vec![
                rec(qname, 30, RData::CNAME(CNAME(name("example.test.")))),
                rec("example.test.", 300, a([10, 1, 2, 3])),
            ],
            ResponseCode::NoError,
        ),
        ("3.2.1.10.in-addr.arpa.", RecordType::PTR) => (
            vec![rec(qname, 300, RData::PTR(PTR(name("host.example.test."))))],
            ResponseCode::NoError,
        ),
        ("xn--bcher-kva.example.test.", RecordType::A) => (
            vec![rec(qname, 300, a([10, 9, 9, 9]))],
            ResponseCode::NoError,
        ),
        ("servfail.example.test.", _) => (vec![], ResponseCode::ServFail),
        (n, _)
            if n.ends_with("example.test.")
                && n != "missing.example.test."
                && n.starts_with("empty") =>
        {
            (vec![], ResponseCode::NoError)
        }
        _ => (vec![], ResponseCode::NXDomain),
    }
}

/// Serves the canned zone on 127.0.0.1 over UDP; returns its address and a query count.
async fn dns_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
                return;
            };
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut resp = Message::new();
            resp.set_id(query.id())
                .set_message_type(MessageType::Response)
                .set_op_code(OpCode::Query)
                .set_recursion_desired(true)
                .set_recursion_available(true)
                .set_authoritative(true);
            if let Some(q) = query.queries().first() {
                resp.add_query(q.clone());
                let (answers, code) =
                    answer(&q.name().to_ascii().to_ascii_lowercase(), q.query_type());
                resp.set_response_code(code);
                let empty = answers.is_empty();
                for a in answers {
                    resp.add_answer(a);
                }
                if empty && code != ResponseCode::ServFail {
                    resp.add_name_server(soa());
                }
            }
            if let Ok(bytes) = resp.to_vec() {
                let _ = sock.send_to(&bytes, peer).await;
            }
        }
    });
    (addr, count)
}

async fn lookup(args: Value) -> (bool, Value, String) {
    let r = DnsLookup.execute(args, ToolContext::new("/", "d")).await;
    (
        r.is_error,
        r.structured_content.clone().unwrap_or(Value::Null),
        r.joined_text(),
    )
}

async fn records(server: SocketAddr, qname: &str, qtype: &str) -> Value {
    let (err, v, text) =
        lookup(json!({"name": qname, "type": qtype, "server": server.to_string()})).await;
    assert!(!err, "{qname} {qtype}: {text}");
    assert_eq!(v["status"], "NOERROR", "{v}");
    assert_eq!(v["server"], server.to_string());
    v["records"].clone()
}

#[tokio::test]
async fn every_record_type_from_a_loopback_server() {
    let (server, count) = dns_server().await;

    let a = records(server, "example.test", "A").await;
    assert_eq!(a.as_array().unwrap().len(), 2);
    assert_eq!(
        a[0],
        json!({"name": "example.test.", "type": "A", "ttl": 300, "address": "10.1.2.3"})
    );

    let aaaa = records(server, "Example.TEST.", "aaaa").await;
    assert_eq!(aaaa[0]["address"], "fd00::1");
    assert_eq!(aaaa[0]["ttl"], 60);

    let mx = records(server, "example.test", "MX").await;
    assert_eq!(mx[0]["preference"], 10);
    assert_eq!(mx[0]["exchange"], "mail.example.test.");
    assert_eq!(mx[1]["preference"], 20);

    let ns = records(server, "example.test", "NS").await;
    assert_eq!(ns[0]["target"], "ns1.example.test.");

    let txt = records(server, "example.test", "TXT").await;
    assert_eq!(txt[0]["segments"], json!(["v=spf1 -all"]));
    assert_eq!(txt[1]["segments"], json!(["part one ", "part two"]));
    assert_eq!(txt[1]["text"], "part one part two");

    let srv = records(server, "_sip._tcp.example.test", "SRV").await;
    assert_eq!(
        (
            srv[0]["priority"].clone(),
            srv[0]["weight"].clone(),
            srv[0]["port"].clone()
        ),
        (json!(10), json!(60), json!(5060))
    );
    assert_eq!(srv[0]["target"], "sip.example.test.");

    let caa = records(server, "example.test", "CAA").await;
    assert_eq!(caa[0]["tag"], "issue");
    assert_eq!(caa[0]["flags"], 0);
    assert_eq!(caa[0]["value"], "letsencrypt.org");

    let soa = records(server, "example.test", "SOA").await;
    assert_eq!(soa[0]["mname"], "ns1.example.test.");
    assert_eq!(soa[0]["serial"], 2026051601u32);
    assert_eq!(soa[0]["minimum"], 300);

    let cname = records(server, "www.example.test", "CNAME").await;
    assert_eq!(cname[0]["target"], "example.test.");
    // The chain met on the way to an A record is kept.
    let chain = records(server, "www.example.test", "A").await;
    let types: Vec<&str> = chain
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["CNAME", "A"]);

    // PTR from an address, as dig -x.
    let ptr = records(server, "10.1.2.3", "PTR").await;
    assert_eq!(ptr[0]["name"], "3.2.1.10.in-addr.arpa.");
    assert_eq!(ptr[0]["target"], "host.example.test.");

    // IDN names are sent as punycode.
    let idn = records(server, "bücher.example.test", "A").await;
    assert_eq!(idn[0]["address"], "10.9.9.9");

    assert!(count.load(Ordering::SeqCst) >= 12);
}

/// A lookup's whole result, its timing (present, a whole number) set to 0.
async fn exact(args: Value) -> Value {
    let (err, mut v, text) = lookup(args).await;
    assert!(!err, "{text}");
    assert!(v["timeMs"].is_u64(), "{v}");
    v["timeMs"] = json!(0);
    v
}

#[tokio::test]
async fn results_exactly() {
    let (server, _) = dns_server().await;
    let s = server.to_string();
    assert_eq!(
        exact(json!({"name": "www.example.test", "server": s})).await,
        json!({
            "name": "www.example.test.",
            "type": "A",
            "server": s,
            "status": "NOERROR",
            "count": 2,
            "records": [
                {"name": "www.example.test.", "type": "CNAME", "ttl": 30, "target": "example.test."},
                {"name": "example.test.", "type": "A", "ttl": 300, "address": "10.1.2.3"},
            ],
            "timeMs": 0,
        })
    );
    assert_eq!(
        exact(json!({"name": "missing.example.test", "type": "MX", "server": s})).await,
        json!({
            "name": "missing.example.test.",
            "type": "MX",
            "server": s,
            "status": "NXDOMAIN",
            "count": 0,
            "records": [],
            "timeMs": 0,
        })
    );
    assert_eq!(
        exact(json!({"name": "example.test", "type": "SOA", "server": s})).await["records"],
        json!([{
            "name": "example.test.",
            "type": "SOA",
            "ttl": 300,
            "mname": "ns1.example.test.",
            "rname": "hostmaster.example.test.",
            "serial": 2026051601u32,
            "refresh": 3600,
            "retry": 600,
            "expire": 86400,
            "minimum": 300,
        }])
    );
}

#[tokio::test]
async fn negative_answers_are_results_and_failures_are_errors() {
    let (server, _) = dns_server().await;
    let s = server.to_string();
    let (err, v, _) = lookup(json!({"name": "missing.example.test", "server": s})).await;
    assert!(!err);
    assert_eq!(v["status"], "NXDOMAIN");
    assert_eq!(v["count"], 0);

    let (err, v, _) =
        lookup(json!({"name": "empty.example.test", "type": "MX", "server": s})).await;
    assert!(!err);
    assert_eq!(v["status"], "NOERROR");
    assert_eq!(v["records"], json!([]));

    let (err, _, text) = lookup(json!({"name": "servfail.example.test", "server": s})).await;
    assert!(err, "{text}");
    assert!(text.contains("dns_lookup"), "{text}");

    // Nothing listens: an error, quickly enough (bounded retries).
    let dead = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let start = std::time::Instant::now();
    let (err, _, text) =
        lookup(json!({"name": "example.test", "server": dead_addr.to_string()})).await;
    assert!(err, "{text}");
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
}

#[tokio::test]
async fn localhost_through_the_system_resolver() {
    let (err, v, text) = lookup(json!({"name": "localhost"})).await;
    assert!(!err, "{text}");
    assert_eq!(v["server"], "system");
    assert_eq!(v["records"][0]["address"], "127.0.0.1");
    let (err, v, text) = lookup(json!({"name": "LOCALHOST.", "type": "AAAA"})).await;
    assert!(!err, "{text}");
    assert_eq!(v["records"][0]["address"], "::1");
    let (err, v, text) = lookup(json!({"name": "127.0.0.1", "type": "PTR"})).await;
    assert!(!err, "{text}");
    // 127.in-addr.arpa is answered locally: /etc/hosts, else `localhost.`.
    assert!(
        v["records"][0]["target"].as_str().unwrap().ends_with('.'),
        "{v}"
    );
}

#[tokio::test]
async fn bad_arguments_and_servers_are_refused_before_any_query() {
    for args in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "-x"}),
        json!({"name": "a b"}),
        json!({"name": "example.test", "type": "ANY"}),
        json!({"name": "example.test", "type": "AXFR"}),
        json!({"name": "example.test", "server": "203.0.113.5"}),
        json!({"name": "example.test", "server": "8.8.4.4"}),
        json!({"name": "example.test", "server": "1.1.1.1:5353"}),
        json!({"name": "example.test", "server": "192.168.1.1:5353"}),
        json!({"name": "example.test", "server": "dns.google"}),
        json!({"name": "example.test", "server": "127.0.0.1:0"}),
        json!({"name": "example.test", "server": "-p 53"}),
        json!({"name": "example.test", "bogus": true}),
    ] {
        let (err, _, text) = lookup(args.clone()).await;
        assert!(err, "{args}: {text}");
    }
}

#[test]
fn server_rules() {
    for (input, want) in [
        ("127.0.0.1", "127.0.0.1:53"),
        ("127.0.0.1:5353", "127.0.0.1:5353"),
        ("[::1]:5353", "[::1]:53530"),
        ("::1", "[::1]:53"),
        ("192.168.1.1", "192.168.1.1:53"),
        ("10.0.0.53:53", "10.0.0.53:53"),
        ("100.100.100.100", "100.100.100.100:53"),
        ("fd00::53", "[fd00::53]:53"),
        ("1.1.1.1", "1.1.1.1:53"),
        ("8.8.8.8", "8.8.8.8:53"),
        ("9.9.9.9:53", "9.9.9.9:53"),
        ("::ffff:8.8.8.8", "8.8.8.8:53"),
    ] {
        let want = if input == "[::1]:5353" {
            "[::1]:5353"
        } else {
            want
        };
        assert_eq!(
            parse_server(input).map(|a| a.to_string()),
            Ok(want.to_owned()),
            "{input}"
        );
    }
    for input in [
        "8.8.4.4",
        "1.0.0.1",
        "203.0.113.5",
        "2001:4860:4860::8888",
        "0.0.0.0",
        "224.0.0.251",
        "8.8.8.8:5353",
        "10.0.0.1:5353",
        "127.0.0.1:0",
        "dns.google",
        "-x",
        "",
    ] {
        assert!(parse_server(input).is_err(), "{input}");
    }
}

#[test]
fn types_and_names() {
    for t in [
        "A", "aaaa", "Mx", "NS", "TXT", "SRV", "CAA", "CNAME", "PTR", "SOA",
    ] {
        assert!(parse_type(t).is_ok(), "{t}");
    }
    for t in ["ANY", "AXFR", "DNSKEY", "", "A;"] {
        assert!(parse_type(t).is_err(), "{t}");
    }
    assert_eq!(
        query_name("Example.COM", RecordType::A).unwrap().to_ascii(),
        "example.com."
    );
    assert_eq!(
        query_name("::1", RecordType::PTR).unwrap().to_ascii(),
        "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa."
    );
    assert!(query_name("::1", RecordType::A).is_err());
}
