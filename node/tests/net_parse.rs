//! The network tools' parsers against captured real output (node/tests/fixtures/net/).

use gsv_node::tools::net::parse::{
    arp, ip_addr, ip_route, nmap, nmcli, ping, resolv_conf, resolvectl, sockets, traceroute,
};
use proptest::prelude::*;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("fixtures/net/", $name))
    };
}

#[test]
fn nmap_ping_scan_of_loopback() {
    let r = nmap::parse_greppable(fixture!("nmap_sn_loopback.gnmap"));
    assert_eq!(r.hosts.len(), 1);
    let h = &r.hosts[0];
    assert_eq!(h.ip, "127.0.0.1");
    assert_eq!(h.hostname.as_deref(), Some("localhost"));
    assert_eq!(h.status.as_deref(), Some("up"));
    assert!(h.ports.is_empty());
    assert!(r.summary.unwrap().starts_with("1 IP address (1 host up)"));
}

#[test]
fn nmap_ping_scan_of_a_lan() {
    let r = nmap::parse_greppable(fixture!("nmap_sn_lan.gnmap"));
    let ips: Vec<&str> = r.hosts.iter().map(|h| h.ip.as_str()).collect();
    assert_eq!(
        ips,
        [
            "192.168.1.1",
            "192.168.1.20",
            "192.168.1.42",
            "192.168.1.77"
        ]
    );
    assert_eq!(r.hosts[0].hostname.as_deref(), Some("router.lan"));
    assert_eq!(r.hosts[2].hostname, None);
    assert!(r.hosts.iter().all(|h| h.status.as_deref() == Some("up")));
    assert!(r.summary.unwrap().contains("(4 hosts up)"));
}

#[test]
fn nmap_service_scan_of_a_loopback_listener() {
    let r = nmap::parse_greppable(fixture!("nmap_sv_loopback.gnmap"));
    assert_eq!(
        r.hosts.len(),
        1,
        "status and ports lines merge into one host"
    );
    let h = &r.hosts[0];
    assert_eq!(h.hostname, None);
    assert_eq!(h.status.as_deref(), Some("up"));
    assert_eq!(h.ports.len(), 2);
    let open = &h.ports[0];
    assert_eq!(
        (open.port, open.protocol.as_str(), open.state.as_str()),
        (18081, "tcp", "open")
    );
    assert_eq!(open.service.as_deref(), Some("http"));
    assert_eq!(
        open.version.as_deref(),
        Some("SimpleHTTPServer 0.6 (Python 3.11.7)")
    );
    let closed = &h.ports[1];
    assert_eq!((closed.port, closed.state.as_str()), (18082, "closed"));
    assert_eq!(
        (closed.service.as_deref(), closed.version.as_deref()),
        (None, None)
    );
}

#[test]
fn nmap_service_scan_with_ignored_ports() {
    let r = nmap::parse_greppable(fixture!("nmap_sv_top100.gnmap"));
    let h = &r.hosts[0];
    assert!(h.ports.is_empty());
    assert_eq!(h.ignored.as_deref(), Some("closed (100)"));

    let r = nmap::parse_greppable(fixture!("nmap_sv_lan.gnmap"));
    let h = &r.hosts[0];
    assert_eq!(h.ignored.as_deref(), Some("closed (93)"));
    let ports: Vec<(u16, &str)> = h.ports.iter().map(|p| (p.port, p.state.as_str())).collect();
    assert_eq!(
        ports,
        [
            (22, "open"),
            (80, "open"),
            (139, "open"),
            (443, "open"),
            (445, "open"),
            (5000, "filtered"),
            (8080, "open")
        ]
    );
    assert_eq!(
        h.ports[0].version.as_deref(),
        Some("OpenSSH 9.2p1 Debian 2+deb12u2 (protocol 2.0)")
    );
    assert_eq!(h.ports[3].service.as_deref(), Some("ssl|http"));
    assert_eq!(h.ports[5].version, None);
    // A ", " inside a version does not start a new entry.
    assert_eq!(
        h.ports[6].version.as_deref(),
        Some("Apache httpd 2.4.57 ((Debian), PHP 8.2)")
    );
}

#[test]
fn ip_brief_addresses() {
    let ifs = ip_addr::parse_brief_addr(fixture!("ip_br_addr.txt"));
    let names: Vec<&str> = ifs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["lo", "ifb0", "ifb1", "eth0"]);
    assert_eq!(ifs[0].addresses, ["127.0.0.1/8", "::1/128"]);
    assert_eq!(ifs[1].state, "DOWN");
    assert!(ifs[1].addresses.is_empty());
    assert_eq!(ifs[3].addresses.len(), 3);

    let ifs = ip_addr::parse_brief_addr(fixture!("ip_br_addr_laptop.txt"));
    let veth = ifs.iter().find(|i| i.name == "veth3c1a2b4").unwrap();
    assert_eq!(veth.link.as_deref(), Some("if7"));
    let ts = ifs.iter().find(|i| i.name == "tailscale0").unwrap();
    assert_eq!(ts.addresses[0], "100.101.102.103/32");
}

#[test]
fn ip_routes() {
    let r = ip_route::parse_routes(fixture!("ip_route.txt"));
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].destination, "default");
    assert_eq!(r[0].gateway.as_deref(), Some("192.0.2.1"));
    assert_eq!(r[0].dev.as_deref(), Some("eth0"));
    assert_eq!(r[1].scope.as_deref(), Some("link"));
    assert_eq!(r[1].src.as_deref(), Some("192.0.2.2"));

    let r = ip_route::parse_routes(fixture!("ip6_route.txt"));
    assert_eq!(r.len(), 3);
    assert_eq!(r[2].gateway.as_deref(), Some("fd00::1"));
    assert_eq!(r[2].metric, Some(1024));

    let r = ip_route::parse_routes(fixture!("ip_route_laptop.txt"));
    assert_eq!(r.len(), 7);
    assert_eq!(r[0].proto.as_deref(), Some("dhcp"));
    assert_eq!(r[0].metric, Some(600));
    assert_eq!(r[1].flags, ["onlink"]);
    assert_eq!(r[2].kind.as_deref(), Some("blackhole"));
    assert_eq!(r[2].destination, "10.66.0.0/16");
    assert_eq!(r[3].flags, ["linkdown"]);
    assert_eq!(r[5].kind.as_deref(), Some("unreachable"));
    let multipath = &r[6];
    assert_eq!(multipath.nexthops.len(), 2);
    assert_eq!(
        multipath.nexthops[1].gateway.as_deref(),
        Some("192.168.2.1")
    );
    assert_eq!(multipath.nexthops[1].dev.as_deref(), Some("enp0s31f6"));
}

#[test]
fn ip_route_get() {
    let r = ip_route::parse_route_get(fixture!("ip_route_get.txt")).unwrap();
    assert_eq!(r.destination, "1.1.1.1");
    assert_eq!(r.gateway.as_deref(), Some("192.168.1.1"));
    assert_eq!(r.dev.as_deref(), Some("wlp2s0"));
    assert_eq!(r.src.as_deref(), Some("192.168.1.42"));
    assert_eq!(r.flags, ["cache"]);
    let vpn = ip_route::parse_route_get(fixture!("ip_route_get_vpn.txt")).unwrap();
    assert_eq!(vpn.gateway, None);
    assert_eq!(vpn.src.as_deref(), Some("10.7.0.2"));
    assert!(ip_route::parse_route_get("").is_none());
}

#[test]
fn ss_listeners() {
    let l = sockets::parse_ss(fixture!("ss_tulpn.txt"));
    assert_eq!(l.len(), 3);
    assert_eq!(l[0].protocol, "tcp");
    assert_eq!(l[0].state.as_deref(), Some("LISTEN"));
    assert_eq!(
        (l[0].address.as_str(), l[0].port),
        ("127.0.0.1", Some(44457))
    );
    assert_eq!(l[0].processes[0].name, "gsv");
    assert_eq!(l[0].processes[0].pid, Some(3287));
    assert!(l[1].processes.is_empty());

    let l = sockets::parse_ss(fixture!("ss_tulpn_desktop.txt"));
    assert_eq!(l.len(), 8);
    assert_eq!(
        (l[0].address.as_str(), l[0].port),
        ("127.0.0.53%lo", Some(53))
    );
    assert_eq!(l[0].state.as_deref(), Some("UNCONN"));
    assert_eq!(l[0].processes[0].name, "systemd-resolve");
    assert_eq!(l[2].address, "::");
    let nginx = &l[4];
    assert_eq!(nginx.processes.len(), 2);
    assert_eq!(nginx.processes[1].pid, Some(1200));
    assert_eq!(l[6].address, "*");
    assert_eq!(l[7].address, "::ffff:127.0.0.1");
    assert_eq!(l[7].port, Some(8080));
}

#[test]
fn netstat_listeners() {
    let l = sockets::parse_netstat(fixture!("netstat_tulpn.txt"));
    assert_eq!(l.len(), 3);
    assert_eq!(l[0].processes[0].pid, Some(3287));
    assert!(l[1].processes.is_empty());

    let l = sockets::parse_netstat(fixture!("netstat_tulpn_desktop.txt"));
    assert_eq!(l.len(), 6);
    assert_eq!(l[1].processes[0].name, "nginx: master");
    assert_eq!(
        (l[2].protocol.as_str(), l[2].address.as_str(), l[2].port),
        ("tcp6", "::", Some(22))
    );
    assert_eq!(l[3].state, None, "netstat prints no state for UDP");
    assert_eq!(l[3].processes[0].name, "systemd-resolve");
    assert!(l[4].processes.is_empty());
    assert_eq!(l[5].port, Some(5353));
}

#[test]
fn nmcli_terse() {
    let c = nmcli::parse_active(fixture!("nmcli_active.txt"));
    assert_eq!(c.len(), 5);
    assert_eq!(c[0].name, "Home: 5 GHz");
    assert_eq!(c[0].kind, "802-11-wireless");
    assert_eq!(c[0].device.as_deref(), Some("wlp2s0"));
    assert_eq!(c[1].state.as_deref(), Some("activating"));
    assert_eq!(c[4].device, None);
    assert_eq!(nmcli::split_terse(r"a\\b:c\:d:"), ["a\\b", "c:d", ""]);
}

#[test]
fn resolvectl_sections() {
    let s = resolvectl::parse_status(fixture!("resolvectl_status.txt"));
    assert_eq!(s.len(), 4);
    assert_eq!(s[0].scope, "global");
    assert_eq!(s[0].settings["resolv.conf mode"], "stub");
    assert!(s[0].settings["Fallback DNS Servers"].contains("9.9.9.9"));
    assert_eq!(s[1].interface.as_deref(), Some("enp0s31f6"));
    assert_eq!(s[1].ifindex, Some(2));
    assert!(s[1].servers.is_empty());
    let wlan = &s[2];
    assert_eq!(wlan.current_server.as_deref(), Some("192.168.1.1"));
    assert_eq!(wlan.servers, ["192.168.1.1", "fd00:1234::1"]);
    assert_eq!(wlan.domains, ["lan"]);
    assert_eq!(s[3].domains.len(), 3);
}

#[test]
fn resolv_conf_file() {
    let c = resolv_conf::parse(fixture!("resolv_conf.txt"));
    assert_eq!(c.nameservers, ["127.0.0.53", "192.168.1.1"]);
    assert_eq!(c.search, ["lan", "tail1234.ts.net", "example.internal"]);
    assert_eq!(c.options, ["edns0", "trust-ad"]);
}

#[test]
fn ping_statistics() {
    let s = ping::parse(fixture!("ping_loopback.txt")).unwrap();
    assert_eq!((s.sent, s.received, s.loss_pct), (3, 3, 0.0));
    assert_eq!(s.min_ms, Some(0.021));
    assert_eq!(s.avg_ms, Some(0.027));
    assert_eq!(s.max_ms, Some(0.039));

    let s = ping::parse(fixture!("ping_no_reply.txt")).unwrap();
    assert_eq!((s.sent, s.received, s.loss_pct), (3, 0, 100.0));
    assert_eq!((s.min_ms, s.errors), (None, None));

    let s = ping::parse(fixture!("ping_unreachable.txt")).unwrap();
    assert_eq!((s.received, s.errors), (0, Some(3)));

    let s = ping::parse(fixture!("ping_partial.txt")).unwrap();
    assert_eq!(s.received, 2);
    assert!((s.loss_pct - 33.3333).abs() < 1e-9);
    assert_eq!(s.max_ms, Some(16.8));

    let s = ping::parse(fixture!("ping_busybox.txt")).unwrap();
    assert_eq!((s.sent, s.received), (3, 3));
    assert_eq!(s.avg_ms, Some(0.533));

    assert!(ping::parse("ping: connect: Network is unreachable\n").is_none());
}

#[test]
fn traceroute_hops() {
    let h = traceroute::parse_traceroute(fixture!("traceroute_loopback.txt"));
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].address.as_deref(), Some("127.0.0.1"));
    assert_eq!(h[0].rtt_ms, Some(0.011));

    let h = traceroute::parse_traceroute(fixture!("traceroute_lan.txt"));
    assert_eq!(h.len(), 5);
    assert_eq!(h[2].address, None);
    assert_eq!(h[2].rtt_ms, None);
    assert_eq!(h[4].note.as_deref(), Some("!H"));
    assert_eq!(h[4].rtt_ms, Some(3010.117));

    let h = traceroute::parse_traceroute(fixture!("traceroute_reached.txt"));
    assert_eq!(h.last().unwrap().address.as_deref(), Some("10.20.30.40"));
}

#[test]
fn tracepath_hops() {
    let h = traceroute::parse_tracepath(fixture!("tracepath.txt"));
    let hops: Vec<(u32, Option<&str>)> = h.iter().map(|h| (h.hop, h.address.as_deref())).collect();
    assert_eq!(
        hops,
        [
            (1, Some("192.168.1.1")),
            (2, None),
            (3, Some("10.0.0.1")),
            (4, Some("10.20.30.40"))
        ]
    );
    assert_eq!(h[0].rtt_ms, Some(0.612));
    assert_eq!(h[3].note.as_deref(), Some("reached"));
}

#[test]
fn neighbour_table() {
    let n = arp::parse_proc_net_arp(fixture!("proc_net_arp.txt"));
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].mac, "02:fc:00:00:00:05");
    let n = arp::parse_proc_net_arp(fixture!("proc_net_arp_lan.txt"));
    assert_eq!(n.len(), 3, "the incomplete entry is skipped");
    assert_eq!(n[0].mac, "a4:2b:b0:12:34:56", "MACs are lower-cased");
    assert_eq!(n[2].ip, "192.168.1.77");
}

#[test]
fn garbage_yields_nothing() {
    let junk = "error: something went wrong\n\n\t\t:::\n/ / /\n";
    assert!(nmap::parse_greppable(junk).hosts.is_empty());
    assert!(ip_route::parse_routes("").is_empty());
    assert!(sockets::parse_ss(junk).is_empty());
    assert!(sockets::parse_netstat(junk).is_empty());
    assert!(traceroute::parse_traceroute(junk).is_empty());
    assert!(traceroute::parse_tracepath(junk).is_empty());
    assert!(arp::parse_proc_net_arp(junk).is_empty());
    assert!(ping::parse(junk).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// No parser panics, whatever the program printed.
    #[test]
    fn parsers_never_panic(text in "(?s)[ -~\t\n\u{e9}\u{2014}]{0,400}") {
        let _ = nmap::parse_greppable(&text);
        let _ = ip_addr::parse_brief_addr(&text);
        let _ = ip_route::parse_routes(&text);
        let _ = sockets::parse_ss(&text);
        let _ = sockets::parse_netstat(&text);
        let _ = nmcli::parse_active(&text);
        let _ = resolvectl::parse_status(&text);
        let _ = resolv_conf::parse(&text);
        let _ = ping::parse(&text);
        let _ = traceroute::parse_traceroute(&text);
        let _ = traceroute::parse_tracepath(&text);
        let _ = arp::parse_proc_net_arp(&text);
    }

    /// Structured-looking noise too: nmap lines with random fields.
    #[test]
    fn nmap_lines_never_panic(ip in "[0-9.:a-f]{0,20}", fields in proptest::collection::vec("[ -~]{0,40}", 0..5)) {
        let line = format!("Host: {ip} ()\tPorts: {}\n", fields.join(", "));
        let _ = nmap::parse_greppable(&line);
    }
}
