//! The network guardrails (`tools::net::target`), table-driven: parsing, resolution
//! with a fake resolver (no DNS traffic), classification on the resolved address,
//! the run / approve / refuse decision, and subnets.

use gsv_node::async_trait;
use gsv_node::tools::net::target::{
    self, classify, decide, from_addresses, parse_host, parse_subnet, resolve_target,
    validate_subnet, AddrClass, Decision, Host, HostResolver, PublicTargets, SubnetError,
    TargetError,
};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A resolver answering from a table; it never touches the network.
struct Table {
    names: HashMap<&'static str, Vec<&'static str>>,
    calls: AtomicUsize,
}

impl Table {
    fn new(entries: &[(&'static str, &[&'static str])]) -> Table {
        Table {
            names: entries.iter().map(|(n, a)| (*n, a.to_vec())).collect(),
            calls: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl HostResolver for Table {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.names.get(name) {
            Some(addrs) => Ok(addrs.iter().map(|a| a.parse().unwrap()).collect()),
            None => Err("Name or service not known".to_owned()),
        }
    }
}

fn resolver() -> Table {
    Table::new(&[
        ("nas.lan", &["192.168.1.20"]),
        ("public.example", &["93.184.216.34"]),
        ("mixed.example", &["10.0.0.5", "8.8.8.8"]),
        ("mixed6.example", &["fd00::5", "2001:4860:4860::8888"]),
        ("mapped.example", &["::ffff:8.8.8.8"]),
        ("mapped-private.example", &["::ffff:10.1.2.3"]),
        ("v6only.example", &["fd12::1"]),
        ("blocked.example", &["0.0.0.0"]),
        ("localhost", &["127.0.0.1", "::1"]),
        ("xn--bcher-kva.example", &["192.168.7.7"]),
        ("empty.example", &[]),
        ("tailnet.example", &["100.101.102.103"]),
    ])
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn address_classes() {
    use AddrClass::*;
    for (addr, class) in [
        ("127.0.0.1", Loopback),
        ("127.255.255.254", Loopback),
        ("::1", Loopback),
        ("10.0.0.1", Rfc1918),
        ("10.255.255.255", Rfc1918),
        ("172.16.0.1", Rfc1918),
        ("172.31.255.255", Rfc1918),
        ("172.15.255.255", Public),
        ("172.32.0.0", Public),
        ("192.168.0.1", Rfc1918),
        ("192.169.0.1", Public),
        ("169.254.1.1", LinkLocal),
        ("169.255.0.1", Public),
        ("fe80::1", LinkLocal),
        ("febf::1", LinkLocal),
        ("fec0::1", Public),
        ("100.64.0.1", Cgnat),
        ("100.127.255.255", Cgnat),
        ("100.63.255.255", Public),
        ("100.128.0.0", Public),
        ("fc00::1", UniqueLocal),
        ("fdff::1", UniqueLocal),
        ("fe00::1", Public),
        ("8.8.8.8", Public),
        ("1.1.1.1", Public),
        ("2001:4860:4860::8888", Public),
        ("0.0.0.0", NotUnicast),
        ("0.1.2.3", NotUnicast),
        ("::", NotUnicast),
        ("224.0.0.1", NotUnicast),
        ("239.255.255.250", NotUnicast),
        ("255.255.255.255", NotUnicast),
        ("ff02::1", NotUnicast),
        // IPv4-mapped IPv6 is classified by the IPv4 address it carries.
        ("::ffff:8.8.8.8", Public),
        ("::ffff:127.0.0.1", Loopback),
        ("::ffff:192.168.1.1", Rfc1918),
        // Other embeddings are not unwrapped: public (the safe side).
        ("::127.0.0.1", Public),
        ("64:ff9b::7f00:1", Public),
        ("2002:7f00:1::", Public),
    ] {
        assert_eq!(classify(ip(addr)), class, "{addr}");
    }
    assert!(Loopback.is_private() && Cgnat.is_private() && UniqueLocal.is_private());
    assert!(!Public.is_private() && !NotUnicast.is_private());
}

#[test]
fn tricky_host_inputs_parse_to_the_address_they_mean() {
    for (input, want) in [
        ("127.0.0.1", "127.0.0.1"),
        ("  127.0.0.1\t", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0177.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("134744072", "8.8.8.8"),
        ("0x08080808", "8.8.8.8"),
        ("010.010.010.010", "8.8.8.8"),
        ("8.8.2056", "8.8.8.8"),
        ("::ffff:8.8.8.8", "8.8.8.8"),
        ("[::ffff:8.8.8.8]", "8.8.8.8"),
        ("::FFFF:7F00:1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("FE80::1", "fe80::1"),
        // Full-width digits and dots (UTS-46 maps them to ASCII).
        ("１２７．０．０．１", "127.0.0.1"),
    ] {
        assert_eq!(parse_host(input), Ok(Host::Ip(ip(want))), "{input:?}");
    }
}

#[test]
fn tricky_names_are_normalised() {
    for (input, want) in [
        ("NAS.LAN", "nas.lan"),
        ("nas.lan.", "nas.lan"),
        (" nas.lan ", "nas.lan"),
        ("Bücher.example", "xn--bcher-kva.example"),
        ("BÜCHER.EXAMPLE.", "xn--bcher-kva.example"),
        ("_sip._tcp.example", "_sip._tcp.example"),
        ("1e100.net", "1e100.net"),
        ("localhost", "localhost"),
    ] {
        assert_eq!(
            parse_host(input),
            Ok(Host::Name(want.to_owned())),
            "{input:?}"
        );
    }
}

#[test]
fn bad_and_option_like_inputs_are_refused() {
    for input in [
        "-oN/tmp/x",
        "--script=http-title",
        "-sS",
        "  -iL /etc/passwd",
        "－oN",
        "-",
    ] {
        assert!(
            matches!(parse_host(input), Err(TargetError::OptionLike(_))),
            "{input:?}: {:?}",
            parse_host(input)
        );
    }
    for input in [
        "",
        "   ",
        ".",
        "..",
        "a..b",
        "nas.lan -oN/tmp/x",
        "nas.lan\n-sV",
        "a\u{0}b",
        "nas.lan;reboot",
        "nas.lan,8.8.8.8",
        "nas.lan/24",
        "host:22",
        "[::1",
        "fe80::1%eth0",
        "999.1.1.1",
        "1.2.3.4.5",
        "08.1.2.3",
        "0x",
        "4294967296",
        "host.123",
        "a.-b",
        "$(reboot)",
        "`id`",
        "http://nas.lan/",
        "user@nas.lan",
        &"a".repeat(64),
        &format!("{}.lan", "a.".repeat(130)),
    ] {
        assert!(
            parse_host(input).is_err(),
            "{input:?} was accepted: {:?}",
            parse_host(input)
        );
    }
    // Refusals name the problem.
    assert!(parse_host("fe80::1%eth0")
        .unwrap_err()
        .to_string()
        .contains("zone"));
    assert!(parse_host("-oN/x")
        .unwrap_err()
        .to_string()
        .contains("option"));
    assert!(parse_host("999.1.1.1")
        .unwrap_err()
        .to_string()
        .contains("IPv4"));
}

#[tokio::test]
async fn classification_uses_the_resolved_addresses() {
    let r = resolver();
    let t = Duration::from_secs(1);
    for (input, address, class) in [
        ("nas.lan", "192.168.1.20", AddrClass::Rfc1918),
        ("NAS.LAN.", "192.168.1.20", AddrClass::Rfc1918),
        ("public.example", "93.184.216.34", AddrClass::Public),
        // Private and public: public wins, whichever is probed.
        ("mixed.example", "10.0.0.5", AddrClass::Public),
        ("mixed6.example", "fd00::5", AddrClass::Public),
        ("mapped.example", "8.8.8.8", AddrClass::Public),
        ("mapped-private.example", "10.1.2.3", AddrClass::Rfc1918),
        ("v6only.example", "fd12::1", AddrClass::UniqueLocal),
        ("localhost", "127.0.0.1", AddrClass::Loopback),
        ("bücher.example", "192.168.7.7", AddrClass::Rfc1918),
        ("tailnet.example", "100.101.102.103", AddrClass::Cgnat),
        // Literals are not looked up.
        ("0x08080808", "8.8.8.8", AddrClass::Public),
        ("::ffff:8.8.8.8", "8.8.8.8", AddrClass::Public),
        ("2130706433", "127.0.0.1", AddrClass::Loopback),
    ] {
        let got = resolve_target(input, &r, t).await.unwrap();
        assert_eq!(got.address, ip(address), "{input}");
        assert_eq!(got.class, class, "{input}");
    }
    let before = r.calls.load(Ordering::SeqCst);
    resolve_target("10.0.0.1", &r, t).await.unwrap();
    assert_eq!(
        r.calls.load(Ordering::SeqCst),
        before,
        "a literal is never resolved"
    );

    // Failures.
    assert!(matches!(
        resolve_target("nope.example", &r, t).await,
        Err(TargetError::Resolve { .. })
    ));
    assert!(matches!(
        resolve_target("empty.example", &r, t).await,
        Err(TargetError::NoAddress { .. })
    ));
    assert!(matches!(
        resolve_target("blocked.example", &r, t).await,
        Err(TargetError::NotUnicast { .. })
    ));
    assert!(matches!(
        resolve_target("0.0.0.0", &r, t).await,
        Err(TargetError::NotUnicast { .. })
    ));
    assert!(matches!(
        resolve_target("-oN/tmp/x", &r, t).await,
        Err(TargetError::OptionLike(_))
    ));
}

#[tokio::test]
async fn a_slow_resolver_times_out() {
    struct Slow;
    #[async_trait]
    impl HostResolver for Slow {
        async fn resolve(&self, _: &str) -> Result<Vec<IpAddr>, String> {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(vec![])
        }
    }
    let e = resolve_target("slow.example", &Slow, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(e, TargetError::ResolveTimeout { .. }), "{e}");
}

#[test]
fn the_probed_address_prefers_unicast_ipv4() {
    let host = Host::Name("x".into());
    let r = from_addresses(
        host.clone(),
        vec![ip("fd00::1"), ip("0.0.0.0"), ip("10.0.0.9")],
        None,
    )
    .unwrap();
    assert_eq!(r.address, ip("10.0.0.9"));
    assert_eq!(r.addresses.len(), 3);
    // Duplicates (also through IPv4 mapping) collapse.
    let r = from_addresses(
        host.clone(),
        vec![ip("10.0.0.9"), ip("::ffff:10.0.0.9")],
        None,
    )
    .unwrap();
    assert_eq!(r.addresses, [ip("10.0.0.9")]);
    // A non-unicast address next to a public one: still public.
    let r = from_addresses(host, vec![ip("0.0.0.0"), ip("8.8.4.4")], None).unwrap();
    assert_eq!((r.address, r.class), (ip("8.8.4.4"), AddrClass::Public));
}

#[test]
fn decisions() {
    let private =
        from_addresses(Host::Ip(ip("192.168.1.1")), vec![ip("192.168.1.1")], None).unwrap();
    let public = from_addresses(Host::Ip(ip("8.8.8.8")), vec![ip("8.8.8.8")], None).unwrap();
    for policy in [PublicTargets::Refuse, PublicTargets::WithExternal] {
        for external in [false, true] {
            assert_eq!(decide("t", &private, external, policy), Decision::Run);
        }
    }
    let Decision::Refuse(why) = decide("net_discover", &public, true, PublicTargets::Refuse) else {
        panic!("public must be refused");
    };
    assert!(why.contains("8.8.8.8") && why.contains("public"), "{why}");
    let Decision::Refuse(why) = decide("net_services", &public, false, PublicTargets::WithExternal)
    else {
        panic!("public without external must be refused");
    };
    assert!(why.contains("\"external\": true"), "{why}");
    assert!(matches!(
        decide("net_services", &public, true, PublicTargets::WithExternal),
        Decision::NeedsApproval { .. }
    ));
}

#[test]
fn subnets() {
    for (input, want) in [
        ("192.168.1.0/24", "192.168.1.0/24"),
        (" 192.168.1.77/24 ", "192.168.1.0/24"),
        ("10.20.0.0/22", "10.20.0.0/22"),
        ("10.20.3.255/22", "10.20.0.0/22"),
        ("172.16.5.0/23", "172.16.4.0/23"),
        ("169.254.0.0/24", "169.254.0.0/24"),
        ("100.64.1.0/24", "100.64.1.0/24"),
        ("127.0.0.1/32", "127.0.0.1/32"),
        ("127.0.0.1", "127.0.0.1/32"),
        ("10.0.0.1/31", "10.0.0.0/31"),
    ] {
        assert_eq!(
            validate_subnet(input).map(|s| s.to_string()),
            Ok(want.to_owned()),
            "{input}"
        );
    }
    for input in [
        "192.168.0.0/16",
        "10.0.0.0/8",
        "10.0.0.0/21",
        "0.0.0.0/0",
        "127.0.0.0/8",
    ] {
        assert!(
            matches!(validate_subnet(input), Err(SubnetError::TooWide { .. })),
            "{input}"
        );
    }
    for input in [
        "8.8.8.0/24",
        "1.1.1.1/32",
        "192.0.2.0/24",
        "100.128.0.0/24",
        "172.32.0.0/24",
        "224.0.0.0/24",
        "0.0.0.0/32",
        "255.255.255.255/32",
    ] {
        assert!(
            matches!(validate_subnet(input), Err(SubnetError::NotPrivate { .. })),
            "{input}: {:?}",
            validate_subnet(input)
        );
    }
    for input in [
        "",
        "-oN/tmp/x",
        "--script=x",
        "192.168.1.0/",
        "192.168.1.0/33",
        "192.168.1.0/024x",
        "192.168.1/24",
        "0xc0a80100/24",
        "2130706433/32",
        "0300.0250.1.0/24",
        "192.168.1.0/24 -sV",
        "192.168.1.0/24,8.8.8.8",
        "nas.lan/24",
        "fd00::/120",
        "::ffff:192.168.1.0/120",
    ] {
        assert!(validate_subnet(input).is_err(), "{input:?} was accepted");
    }
    assert!(matches!(
        parse_subnet("fd00::/120"),
        Err(SubnetError::Ipv6(_))
    ));
    assert!(matches!(
        parse_subnet("-x"),
        Err(SubnetError::OptionLike(_))
    ));
    let e = validate_subnet("8.8.8.0/24").unwrap_err().to_string();
    assert!(e.contains("not a private subnet"), "{e}");
}

#[test]
fn dns_names_for_lookups() {
    assert_eq!(
        target::normalize_dns_name(" Example.COM. "),
        Ok("example.com".into())
    );
    assert_eq!(
        target::normalize_dns_name("_dmarc.example.com"),
        Ok("_dmarc.example.com".into())
    );
    assert_eq!(
        target::normalize_dns_name("münchen.de"),
        Ok("xn--mnchen-3ya.de".into())
    );
    // Numeric labels are fine in a name to look up (reverse zones).
    assert_eq!(
        target::normalize_dns_name("1.0.0.127.in-addr.arpa"),
        Ok("1.0.0.127.in-addr.arpa".into())
    );
    for bad in ["", "-x", "a b", "a;b", "a..b", "--type=ANY"] {
        assert!(target::normalize_dns_name(bad).is_err(), "{bad:?}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Whatever comes in, nothing panics, and what is accepted as a name can never
        /// be read as an option or carry anything but host-name characters.
        #[test]
        fn accepted_names_are_plain(input in "(?s)[ -~\t\n\u{e9}\u{ff0d}\u{3002}]{0,80}") {
            match parse_host(&input) {
                Ok(Host::Name(name)) => {
                    prop_assert!(!name.starts_with('-'));
                    prop_assert!(!name.is_empty() && name.len() <= 253);
                    prop_assert!(name.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'_')));
                }
                Ok(Host::Ip(ip)) => prop_assert!(!ip.to_string().starts_with('-')),
                Err(_) => {}
            }
            let _ = target::normalize_dns_name(&input);
            let _ = parse_subnet(&input);
        }

        /// Every 32-bit number is the IPv4 address it encodes, in decimal and hex.
        #[test]
        fn numeric_forms_are_addresses(n in any::<u32>()) {
            let want = Host::Ip(IpAddr::V4(Ipv4Addr::from(n)));
            prop_assert_eq!(parse_host(&n.to_string()), Ok(want.clone()));
            prop_assert_eq!(parse_host(&format!("{n:#x}")), Ok(want.clone()));
            prop_assert_eq!(parse_host(&Ipv4Addr::from(n).to_ipv6_mapped().to_string()), Ok(want));
        }

        /// A subnet that passes is private, at most /22, and prints as it parsed.
        #[test]
        fn accepted_subnets_are_small_and_private(a in any::<u32>(), prefix in 0u8..=32) {
            let input = format!("{}/{prefix}", Ipv4Addr::from(a));
            if let Ok(s) = validate_subnet(&input) {
                prop_assert!(s.prefix >= 22);
                prop_assert!(classify(IpAddr::V4(s.network)).is_private());
                prop_assert!(classify(IpAddr::V4(s.last())).is_private());
                prop_assert_eq!(validate_subnet(&s.to_string()), Ok(s));
            }
        }
    }
}
