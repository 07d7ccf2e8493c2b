//! Finding the gateway and a token without flags.
//!
//! On the machine that runs `gsv up` or `gsv gateway`, the data directory holds the
//! address the gateway listens on and the tokens, so `gsv call/nodes/tools` work with
//! no flags. Flags and environment variables override each piece. When that gateway
//! serves TLS with its self-signed certificate (`tls-cert.pem` in the data directory),
//! the CLI pins that certificate by itself.

use gsv_client::TlsOptions;
use gsv_gateway::datadir;
use gsv_protocol::endpoint::Gateway;
use std::path::{Path, PathBuf};

/// The data directory: `--data`, else `$GSV_DATA`, else the XDG default.
pub fn data_dir(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .unwrap_or_else(datadir::default_data_dir)
}

/// What a node's file tools never touch besides its own data directory: `extra`
/// (`--protect`), plus the default gateway data directory of this user when it exists,
/// since a gateway on the same host keeps its tokens and database there.
pub fn protected_paths(mut extra: Vec<PathBuf>) -> Vec<PathBuf> {
    let default = datadir::default_data_dir();
    if default.is_dir() {
        extra.push(default);
    }
    extra
}

/// The gateway URL: `--gateway`, else `$GSV_GATEWAY`, else the address file in the data
/// directory (a bare `ADDR` means `http://ADDR`; a TLS gateway writes `https://ADDR`),
/// else the default `127.0.0.1:8787`.
pub fn gateway(flag: Option<&str>, data: &Path) -> String {
    if let Some(g) = flag.filter(|g| !g.is_empty()) {
        return g.to_owned();
    }
    if let Some(g) = std::env::var("GSV_GATEWAY").ok().filter(|g| !g.is_empty()) {
        return g;
    }
    match datadir::read_line(&data.join(datadir::ADDR_FILE)) {
        Some(addr) if addr.contains("://") => addr,
        Some(addr) => format!("http://{addr}"),
        None => "http://127.0.0.1:8787".to_owned(),
    }
}

/// The agent token: `--token`, else `$GSV_AGENT_TOKEN`, else `agent.token`, else
/// `admin.token` in the data directory.
pub fn agent_token(flag: Option<&str>, data: &Path) -> Option<String> {
    if let Some(t) = flag.filter(|t| !t.is_empty()) {
        return Some(t.to_owned());
    }
    if let Some(t) = std::env::var("GSV_AGENT_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        return Some(t);
    }
    datadir::read_line(&data.join(datadir::AGENT_TOKEN_FILE))
        .or_else(|| datadir::read_line(&data.join(datadir::ADMIN_TOKEN_FILE)))
}

/// The TLS trust for `gateway`: `--ca` / `--pin` (or `$GSV_CA` / `$GSV_PIN`) when given;
/// else, if `gateway` is the TLS gateway recorded in the data directory and that
/// directory holds its self-signed certificate, a pin of that certificate; else the
/// system roots.
pub fn tls(ca: Option<PathBuf>, pin: Option<String>, gateway: &str, data: &Path) -> TlsOptions {
    let ca = ca.filter(|p| !p.as_os_str().is_empty());
    let pin = pin.filter(|p| !p.trim().is_empty());
    if ca.is_some() || pin.is_some() {
        return TlsOptions { ca, pin };
    }
    let local = datadir::read_line(&data.join(datadir::ADDR_FILE))
        .and_then(|a| Gateway::parse(&a).ok())
        .filter(|g| g.tls);
    let (Some(local), Ok(target)) = (local, Gateway::parse(gateway)) else {
        return TlsOptions::default();
    };
    if !target.tls || !same_gateway(&local, &target) {
        return TlsOptions::default();
    }
    let cert = data.join(gsv_gateway::tls::CERT_FILE);
    match gsv_gateway::tls::fingerprint_pem_file(&cert) {
        Ok(fingerprint) => TlsOptions {
            ca: None,
            pin: Some(fingerprint),
        },
        Err(_) => TlsOptions::default(),
    }
}

/// The same authority, or both on loopback with the same port (`localhost:8787` and
/// `127.0.0.1:8787` reach the same local gateway).
fn same_gateway(a: &Gateway, b: &Gateway) -> bool {
    let port = |g: &Gateway| g.authority.rsplit_once(':').map(|(_, p)| p.to_owned());
    a.authority.eq_ignore_ascii_case(&b.authority)
        || (a.is_loopback() && b.is_loopback() && port(a).is_some() && port(a) == port(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_spellings_are_the_same_gateway() {
        let g = |s: &str| Gateway::parse(s).unwrap();
        assert!(same_gateway(
            &g("https://127.0.0.1:8787"),
            &g("wss://localhost:8787")
        ));
        assert!(same_gateway(
            &g("https://gw.example:443"),
            &g("https://GW.example:443")
        ));
        assert!(!same_gateway(
            &g("https://127.0.0.1:8787"),
            &g("https://127.0.0.1:9999")
        ));
        assert!(!same_gateway(
            &g("https://127.0.0.1:8787"),
            &g("https://10.0.0.1:8787")
        ));
    }

    #[test]
    fn explicit_options_win_and_plain_gateways_get_defaults() {
        let dir = std::env::temp_dir().join(format!("gsv-resolve-{}", std::process::id()));
        let pin = Some("ab".repeat(32));
        let t = tls(None, pin.clone(), "https://127.0.0.1:1", &dir);
        assert_eq!(t.pin, pin);
        assert_eq!(
            tls(None, None, "http://127.0.0.1:1", &dir),
            TlsOptions::default()
        );
    }
}
