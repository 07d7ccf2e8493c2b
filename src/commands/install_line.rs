//! `gsv token create node ID --install`: the one line that sets up a new machine.
//!
//! ```text
//! curl -fsSL -k --pinnedpubkey 'sha256//…' 'https://gw:8787/v1/install/web1' | sh -s -- --token 'gsv_join_…'
//! ```
//!
//! The URL is the gateway's address as the new machine reaches it (`--gateway`, else
//! `$GSV_GATEWAY`, else the running gateway's `gateway.addr`, with an all-addresses
//! listen address replaced by this host's name). For a gateway with its self-signed
//! certificate (`tls-cert.pem` in the data directory) the line pins that certificate's
//! public key: `-k` turns off curl's chain check, which a self-signed certificate
//! cannot pass, and `--pinnedpubkey` replaces it — curl aborts unless the gateway
//! holds that key. A gateway with other certificates is checked against the system's
//! CAs, like any HTTPS site. Plain `http://` is accepted on loopback only. The token
//! is an argument of `sh`, never part of the URL.
//!
//! Everything is checked before the token is issued, so a refused `--install` leaves
//! no unused join token behind.

use gsv_gateway::datadir;
use gsv_protocol::endpoint::{EndpointError, Gateway};
use gsv_protocol::NodeId;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why no line could be made.
#[derive(Debug, Error)]
pub enum LineError {
    #[error("no gateway address: pass --gateway URL (how other machines reach the gateway), or run this where the gateway runs")]
    NoGateway,
    #[error(transparent)]
    Url(#[from] EndpointError),
    #[error("{0} is plain http:// off loopback: start the gateway with --tls-self-signed (or --tls-cert/--tls-key) and give its https:// URL")]
    PlainOffLoopback(String),
    #[error("cannot read the gateway's certificate {path}: {source}")]
    Certificate {
        path: PathBuf,
        source: gsv_gateway::tls::TlsError,
    },
}

impl LineError {
    /// The stable code printed before the message.
    pub fn code(&self) -> &'static str {
        match self {
            LineError::Certificate { .. } => "internal",
            _ => "invalid_args",
        }
    }

    /// The exit code: 2 for usage, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            LineError::Certificate { .. } => crate::exit::TOOL_ERROR,
            _ => crate::exit::USAGE,
        }
    }
}

/// Everything in the line but the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installer {
    /// `https://host:port/v1/install/ID`.
    pub url: String,
    /// curl's `--pinnedpubkey` for a self-signed gateway.
    pub pin: Option<String>,
    /// What the operator should know (printed on stderr).
    pub notes: Vec<String>,
}

impl Installer {
    /// The line for `token`.
    pub fn line(&self, token: &str) -> String {
        let curl = match &self.pin {
            Some(pin) => format!("curl -fsSL -k --pinnedpubkey '{pin}'"),
            None => "curl -fsSL".to_owned(),
        };
        format!("{curl} '{}' | sh -s -- --token '{token}'", self.url)
    }
}

/// The installer URL and pin for node `id` of the gateway whose data directory is
/// `data`, reached at `flag` (or `$GSV_GATEWAY`, or its `gateway.addr`).
pub fn prepare(data: &Path, flag: Option<&str>, id: &NodeId) -> Result<Installer, LineError> {
    let given = flag
        .map(str::to_owned)
        .or_else(|| std::env::var("GSV_GATEWAY").ok())
        .filter(|g| !g.trim().is_empty())
        .or_else(|| datadir::read_line(&data.join(datadir::ADDR_FILE)))
        .ok_or(LineError::NoGateway)?;
    let mut gateway = Gateway::parse(&given)?;
    let mut notes = Vec::new();
    if matches!(gateway.host(), "0.0.0.0" | "::") {
        let port = gateway
            .authority
            .rsplit_once(':')
            .map(|(_, p)| p.to_owned())
            .unwrap_or_else(|| "8787".to_owned());
        let host = gethostname::gethostname().to_string_lossy().to_lowercase();
        gateway.authority = format!("{host}:{port}");
        notes.push(format!(
            "the gateway listens on every address; the line names this host as {host}: if other machines reach it by another name, pass --gateway https://NAME:{port}"
        ));
    }
    if !gateway.tls && !gateway.is_loopback() {
        return Err(LineError::PlainOffLoopback(gateway.http_url("")));
    }
    let cert = data.join(gsv_gateway::tls::CERT_FILE);
    let pin = if gateway.tls && cert.exists() {
        Some(
            gsv_gateway::tls::public_key_pin_pem_file(&cert)
                .map_err(|source| LineError::Certificate { path: cert, source })?,
        )
    } else {
        if gateway.tls {
            notes.push(
                "no self-signed certificate in the data directory: curl and the node check the gateway's certificate against the system's CAs".into(),
            );
        }
        None
    };
    Ok(Installer {
        url: gateway.http_url(&format!("/v1/install/{id}")),
        pin,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gsv-line-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn loopback_http_is_fine_and_the_token_is_an_argument() {
        let data = temp_dir("plain");
        let id = NodeId::parse("web1").unwrap();
        let i = prepare(&data, Some("http://127.0.0.1:8787"), &id).unwrap();
        assert_eq!(
            i.line("gsv_join_a_b"),
            "curl -fsSL 'http://127.0.0.1:8787/v1/install/web1' | sh -s -- --token 'gsv_join_a_b'"
        );
        assert!(matches!(
            prepare(&data, Some("http://10.0.0.1:8787"), &id),
            Err(LineError::PlainOffLoopback(_))
        ));
        assert!(matches!(
            prepare(&data, Some("ftp://x"), &id),
            Err(LineError::Url(_))
        ));
        let _ = std::fs::remove_dir_all(&data);
    }

    #[test]
    fn a_self_signed_gateway_is_pinned_and_all_addresses_become_the_host_name() {
        let data = temp_dir("tls");
        let id = NodeId::parse("web1").unwrap();
        let tls = gsv_gateway::tls::load(
            &gsv_gateway::TlsSetup::SelfSigned,
            &data,
            "127.0.0.1:0".parse().unwrap(),
        )
        .unwrap();
        std::fs::write(data.join(datadir::ADDR_FILE), "https://0.0.0.0:8787\n").unwrap();
        let i = prepare(&data, None, &id).unwrap();
        let pin = tls.public_key_pin.unwrap();
        assert_eq!(i.pin.as_deref(), Some(pin.as_str()));
        assert!(i.url.starts_with("https://"), "{}", i.url);
        assert!(i.url.ends_with(":8787/v1/install/web1"), "{}", i.url);
        assert!(!i.url.contains("0.0.0.0"), "{}", i.url);
        assert_eq!(i.notes.len(), 1);
        assert!(i
            .line("gsv_join_a_b")
            .starts_with(&format!("curl -fsSL -k --pinnedpubkey '{pin}' 'https://")));
        let _ = std::fs::remove_dir_all(&data);
    }
}
