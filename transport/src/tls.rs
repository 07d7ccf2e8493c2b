//! Which gateway certificates a client (a node, an agent, the `gsv` CLI) trusts on `wss://`.
//!
//! Tokens are bearer secrets, so off loopback they must only ever reach the real
//! gateway. This module builds the rustls client configuration for the three ways a
//! gateway can be trusted:
//!
//! - **System roots** (the default): the operating system's root certificates, plus
//!   `SSL_CERT_FILE` / `SSL_CERT_DIR`. Built once per process and shared.
//! - **`--ca FILE`**: the PEM certificates in FILE are the *only* roots (the system's
//!   are not consulted), and the chain and host name are checked as usual. A
//!   self-signed gateway certificate works as its own CA.
//! - **`--pin SHA256`**: only the SHA-256 fingerprint of the gateway's leaf certificate
//!   is checked; chain, name and validity dates are not. The handshake signatures are
//!   still verified against that certificate's key, so only the holder of its private
//!   key can answer.
//!
//! The `ring` crypto provider is chosen explicitly, so no process-wide default provider
//! has to be installed.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use thiserror::Error;
use tokio_tungstenite::tungstenite;
use tracing::{debug, warn};

/// Why a TLS client configuration could not be built (bad `--ca` or `--pin`).
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read the CA file {path}: {source}")]
    ReadCa {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the CA file {path} holds no usable PEM certificate{detail}")]
    BadCa { path: PathBuf, detail: String },
    #[error("bad --pin {0:?}: expected the SHA-256 fingerprint of the gateway's certificate (64 hex digits, colons allowed)")]
    BadPin(String),
    #[error("--ca and --pin cannot be used together: pin one certificate or trust one CA")]
    Conflict,
    #[error("TLS setup: {0}")]
    Setup(String),
}

/// The gateway presented a certificate whose fingerprint is not the pinned one.
#[derive(Debug, Error)]
#[error("certificate fingerprint mismatch: the gateway presented SHA-256 {presented}, but the pin is {expected}")]
pub struct PinMismatch {
    pub expected: String,
    pub presented: String,
}

/// The SHA-256 fingerprint of a DER certificate: 64 lowercase hex digits (the
/// canonical form `gsv gateway` prints).
pub fn fingerprint(der: &[u8]) -> String {
    hex(&Sha256::digest(der))
}

fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// Parses a pin: 64 hex digits, any case, with or without `:` separators, optionally
/// prefixed `sha256:` or `SHA256:`.
pub fn parse_pin(input: &str) -> Result<[u8; 32], TlsError> {
    let bad = || TlsError::BadPin(input.to_owned());
    let s = input.trim();
    let s = match s.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("sha256:") => &s[7..],
        _ => s,
    };
    let digits: Vec<u8> = s.bytes().filter(|&b| b != b':').collect();
    if digits.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16).ok_or_else(bad)?;
        let lo = (pair[1] as char).to_digit(16).ok_or_else(bad)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Ok(out)
}

/// Normalises a pin to the canonical 64 lowercase hex digits.
pub fn normalize_pin(input: &str) -> Result<String, TlsError> {
    parse_pin(input).map(|p| hex(&p))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client configuration for the given trust options: `pin` (leaf fingerprint
/// only), `ca` (these roots only), or neither (the system roots, shared per process).
/// Reads files, so call it off the async runtime's worker threads when it matters.
pub fn client_config(ca: Option<&Path>, pin: Option<&str>) -> Result<Arc<ClientConfig>, TlsError> {
    match (ca, pin) {
        (Some(_), Some(_)) => Err(TlsError::Conflict),
        (None, Some(pin)) => pinned(pin),
        (Some(ca), None) => with_ca(ca),
        (None, None) => system_roots(),
    }
}

/// The shared configuration with the system's root certificates.
pub fn system_roots() -> Result<Arc<ClientConfig>, TlsError> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(build_system_roots)
        .clone()
        .map_err(TlsError::Setup)
}

fn build_system_roots() -> Result<Arc<ClientConfig>, String> {
    let loaded = rustls_native_certs::load_native_certs();
    for error in &loaded.errors {
        warn!(%error, "could not load some root certificates");
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(loaded.certs);
    debug!(added, ignored, "loaded root certificates");
    if roots.is_empty() {
        warn!("no root certificates found: wss:// connections will fail (set SSL_CERT_FILE, or use --ca / --pin)");
    }
    with_roots(roots).map_err(|e| e.to_string())
}

fn with_roots(roots: RootCertStore) -> Result<Arc<ClientConfig>, TlsError> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn with_ca(path: &Path) -> Result<Arc<ClientConfig>, TlsError> {
    let pem = std::fs::read(path).map_err(|source| TlsError::ReadCa {
        path: path.to_owned(),
        source,
    })?;
    let bad = |detail: String| TlsError::BadCa {
        path: path.to_owned(),
        detail,
    };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!(": {e}")))?;
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad(if ignored > 0 {
            format!(" ({ignored} could not be parsed)")
        } else {
            String::new()
        }));
    }
    debug!(added, ignored, ca = %path.display(), "trusting only the given CA certificates");
    with_roots(roots)
}

fn pinned(pin: &str) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider();
    let verifier = PinVerifier {
        pin: parse_pin(pin)?,
        algorithms: provider.signature_verification_algorithms,
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts exactly the leaf certificate with the pinned SHA-256 fingerprint. The
/// handshake signatures are still checked with the provider's algorithms, so the peer
/// must hold that certificate's private key.
#[derive(Debug)]
struct PinVerifier {
    pin: [u8; 32],
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = Sha256::digest(end_entity.as_ref());
        if presented.as_slice() == self.pin.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            let mismatch = PinMismatch {
                expected: hex(&self.pin),
                presented: hex(&presented),
            };
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                OtherError(Arc::new(mismatch)),
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// If a dial failed because the gateway's certificate was rejected (wrong pin, unknown
/// issuer, wrong name, expired), a message saying so. Retrying does not fix these.
pub fn certificate_failure(error: &tungstenite::Error) -> Option<String> {
    let rustls_error: &rustls::Error = match error {
        tungstenite::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>()?,
        tungstenite::Error::Tls(tungstenite::error::TlsError::Rustls(e)) => e,
        _ => return None,
    };
    let rustls::Error::InvalidCertificate(cert_error) = rustls_error else {
        return None;
    };
    if let CertificateError::Other(OtherError(inner)) = cert_error {
        if let Some(mismatch) = inner.downcast_ref::<PinMismatch>() {
            return Some(mismatch.to_string());
        }
    }
    Some(format!(
        "the gateway's certificate is not trusted: {cert_error}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_roots_build_once() {
        let a = system_roots().unwrap();
        let b = client_config(None, None).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn pins_in_every_spelling() {
        let canonical = "ab".repeat(32);
        let colons = vec!["AB"; 32].join(":");
        for input in [
            canonical.clone(),
            colons.clone(),
            format!("sha256:{canonical}"),
            format!("SHA256:{colons}"),
            format!("  {canonical}\n"),
        ] {
            assert_eq!(normalize_pin(&input).unwrap(), canonical, "{input}");
        }
        for bad in ["", "abcd", &"zz".repeat(32), &"ab".repeat(33)] {
            assert!(matches!(parse_pin(bad), Err(TlsError::BadPin(_))), "{bad}");
        }
    }

    #[test]
    fn fingerprint_is_lowercase_hex_sha256() {
        assert_eq!(
            fingerprint(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn conflicting_and_bad_options_are_refused() {
        let pin = "00".repeat(32);
        assert!(matches!(
            client_config(Some(Path::new("x.pem")), Some(&pin)),
            Err(TlsError::Conflict)
        ));
        assert!(matches!(
            client_config(None, Some("nope")),
            Err(TlsError::BadPin(_))
        ));
        assert!(matches!(
            client_config(Some(Path::new("/nonexistent/ca.pem")), None),
            Err(TlsError::ReadCa { .. })
        ));
        let dir = std::env::temp_dir().join(format!("gsv-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        assert!(matches!(
            client_config(Some(&empty), None),
            Err(TlsError::BadCa { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pin_mismatch_is_recognised_through_the_io_error() {
        let e = rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
            PinMismatch {
                expected: "aa".into(),
                presented: "bb".into(),
            },
        ))));
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let msg = certificate_failure(&tungstenite::Error::Io(io)).unwrap();
        assert!(msg.contains("certificate fingerprint mismatch"), "{msg}");
        let other = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, other);
        let msg = certificate_failure(&tungstenite::Error::Io(io)).unwrap();
        assert!(msg.contains("not trusted"), "{msg}");
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(certificate_failure(&tungstenite::Error::Io(plain)).is_none());
    }
}
