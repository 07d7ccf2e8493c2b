//! `dns_lookup`'s structured content ([`super::dns`]): the query, its status, and the
//! answer's records with the typed fields of each record type.

use hickory_resolver::proto::rr::{RData, Record};
use serde::Serialize;

/// The result of one lookup (an empty answer and NXDOMAIN included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupOutput {
    /// The name queried: absolute, in ASCII (punycode).
    pub name: String,
    /// The record type queried (`A`, `MX`, ...).
    #[serde(rename = "type")]
    pub record_type: String,
    /// The server asked (`IP:PORT`), or `system` for the system's configuration.
    pub server: String,
    /// `NOERROR` or `NXDOMAIN` (other response codes are tool errors).
    pub status: String,
    /// Records in `records`.
    pub count: usize,
    pub records: Vec<DnsRecord>,
    pub time_ms: u64,
}

/// One record of an answer: owner, type, TTL, and the typed fields of its data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsRecord {
    /// The owner name (absolute, ASCII).
    pub name: String,
    #[serde(rename = "type")]
    pub record_type: String,
    pub ttl: u32,
    #[serde(flatten)]
    pub data: RecordData,
}

/// The typed fields of a record's data, beside `name`, `type` and `ttl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum RecordData {
    /// A and AAAA.
    Address { address: String },
    /// MX.
    Mx { preference: u16, exchange: String },
    /// NS, CNAME and PTR.
    Target { target: String },
    /// SRV.
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: String,
    },
    /// TXT: the character-strings (`segments`, as `dig` shows them quoted) and
    /// their concatenation (`text`).
    Txt { text: String, segments: Vec<String> },
    /// CAA.
    Caa {
        flags: u8,
        tag: String,
        value: String,
    },
    /// SOA.
    Soa {
        mname: String,
        rname: String,
        serial: u32,
        refresh: i32,
        retry: i32,
        expire: i32,
        minimum: u32,
    },
    /// Any other type: its data in presentation format.
    Other { data: String },
}

impl From<&Record> for DnsRecord {
    fn from(record: &Record) -> Self {
        DnsRecord {
            name: record.name().to_ascii(),
            record_type: record.record_type().to_string(),
            ttl: record.ttl(),
            data: RecordData::from(record.data()),
        }
    }
}

impl From<&RData> for RecordData {
    fn from(data: &RData) -> Self {
        match data {
            RData::A(a) => RecordData::Address {
                address: a.0.to_string(),
            },
            RData::AAAA(a) => RecordData::Address {
                address: a.0.to_string(),
            },
            RData::MX(mx) => RecordData::Mx {
                preference: mx.preference(),
                exchange: mx.exchange().to_ascii(),
            },
            RData::NS(ns) => RecordData::Target {
                target: ns.0.to_ascii(),
            },
            RData::CNAME(c) => RecordData::Target {
                target: c.0.to_ascii(),
            },
            RData::PTR(p) => RecordData::Target {
                target: p.0.to_ascii(),
            },
            RData::SRV(srv) => RecordData::Srv {
                priority: srv.priority(),
                weight: srv.weight(),
                port: srv.port(),
                target: srv.target().to_ascii(),
            },
            RData::TXT(txt) => {
                let segments: Vec<String> = txt
                    .txt_data()
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
                RecordData::Txt {
                    text: segments.concat(),
                    segments,
                }
            }
            RData::CAA(caa) => RecordData::Caa {
                flags: caa.flags(),
                tag: caa.tag().as_str().to_owned(),
                value: String::from_utf8_lossy(caa.raw_value()).into_owned(),
            },
            RData::SOA(soa) => RecordData::Soa {
                mname: soa.mname().to_ascii(),
                rname: soa.rname().to_ascii(),
                serial: soa.serial(),
                refresh: soa.refresh(),
                retry: soa.retry(),
                expire: soa.expire(),
                minimum: soa.minimum(),
            },
            other => RecordData::Other {
                data: other.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_resolver::proto::rr::rdata::{CAA, CNAME, HINFO, MX, NS, PTR, SOA, SRV, TXT};
    use hickory_resolver::Name;
    use serde_json::{json, Value};
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::str::FromStr;

    fn name(s: &str) -> Name {
        Name::from_str(s).unwrap()
    }

    fn record(data: RData) -> Value {
        let record = DnsRecord::from(&Record::from_rdata(name("example.test."), 300, data));
        serde_json::to_value(record).unwrap()
    }

    fn with(fields: Value, record_type: &str) -> Value {
        let mut v = json!({"name": "example.test.", "type": record_type, "ttl": 300});
        if let (Some(a), Value::Object(b)) = (v.as_object_mut(), fields) {
            a.extend(b);
        }
        v
    }

    #[test]
    fn records_as_json() {
        let cases = [
            (
                RData::A(Ipv4Addr::new(10, 1, 2, 3).into()),
                with(json!({"address": "10.1.2.3"}), "A"),
            ),
            (
                RData::AAAA(Ipv6Addr::from_str("fd00::1").unwrap().into()),
                with(json!({"address": "fd00::1"}), "AAAA"),
            ),
            (
                RData::MX(MX::new(10, name("mail.example.test."))),
                with(
                    json!({"preference": 10, "exchange": "mail.example.test."}),
                    "MX",
                ),
            ),
            (
                RData::NS(NS(name("ns1.example.test."))),
                with(json!({"target": "ns1.example.test."}), "NS"),
            ),
            (
                RData::CNAME(CNAME(name("other.test."))),
                with(json!({"target": "other.test."}), "CNAME"),
            ),
            (
                RData::PTR(PTR(name("host.example.test."))),
                with(json!({"target": "host.example.test."}), "PTR"),
            ),
            (
                RData::SRV(SRV::new(10, 60, 5060, name("sip.example.test."))),
                with(
                    json!({"priority": 10, "weight": 60, "port": 5060, "target": "sip.example.test."}),
                    "SRV",
                ),
            ),
            (
                RData::TXT(TXT::new(vec!["part one ".into(), "part two".into()])),
                with(
                    json!({"text": "part one part two", "segments": ["part one ", "part two"]}),
                    "TXT",
                ),
            ),
            (
                RData::CAA(CAA::new_issue(true, Some(name("letsencrypt.org")), vec![])),
                with(
                    json!({"flags": 128, "tag": "issue", "value": "letsencrypt.org"}),
                    "CAA",
                ),
            ),
            (
                RData::SOA(SOA::new(
                    name("ns1.example.test."),
                    name("hostmaster.example.test."),
                    2026051601,
                    3600,
                    600,
                    86400,
                    300,
                )),
                with(
                    json!({
                        "mname": "ns1.example.test.",
                        "rname": "hostmaster.example.test.",
                        "serial": 2026051601u32,
                        "refresh": 3600,
                        "retry": 600,
                        "expire": 86400,
                        "minimum": 300,
                    }),
                    "SOA",
                ),
            ),
            (
                RData::HINFO(HINFO::new("cpu".to_owned(), "os".to_owned())),
                with(json!({"data": "cpu os"}), "HINFO"),
            ),
        ];
        for (data, want) in cases {
            assert_eq!(record(data), want);
        }
    }
}
