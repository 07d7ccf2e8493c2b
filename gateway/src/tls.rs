//! TLS on the gateway's one port.
//!
//! Tokens are bearer secrets; off loopback they must travel encrypted (DESIGN §4). This
//! module owns the two pieces that needs:
//!
//! - **The certificate.** Either PEM files the operator supplies (`--tls-cert`,
//!   `--tls-key`), or a self-signed one (`--tls-self-signed`, ECDSA P-256 made with
//!   `rcgen`) kept in the data directory (`tls-cert.pem`, `tls-key.pem` 0600) and reused
//!   on every restart, so the fingerprint nodes pin stays valid. Either way the SHA-256
//!   fingerprint of the leaf certificate is exposed for `gsv node --pin`.
//! - **The public-key pin** ([`public_key_pin`]): curl's `--pinnedpubkey` value for
//!   the same certificate, which the one-line installer (`crate::install`) pins.
//! - **The handshake** ([`accept`]), which the gateway's accept loop
//!   (`crate::listener`) runs under its header deadline before serving HTTP on the
//!   stream. A client that speaks plain HTTP to the port gets a `400` that says to use
//!   `https://`.
//!
//! The `ring` crypto provider is chosen explicitly; no process-wide default is needed.

use crate::datadir;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The self-signed certificate in the data directory (public; `gsv node --ca` can use it).
pub const CERT_FILE: &str = "tls-cert.pem";
/// The self-signed certificate's private key in the data directory (0600).
pub const KEY_FILE: &str = "tls-key.pem";

/// Where the gateway's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSetup {
    /// PEM files: the certificate chain (leaf first) and its private key.
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed certificate kept in the data directory.
    SelfSigned,
}

/// Why TLS could not be set up.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the certificate and key cannot be used: {0}")]
    Config(#[from] rustls::Error),
    #[error("cannot read the certificate's public key: {0}")]
    PublicKey(webpki::Error),
}

/// A loaded server certificate, ready to accept connections.
pub struct ServerTls {
    pub config: Arc<ServerConfig>,
    /// SHA-256 of the leaf certificate's DER, 64 lowercase hex digits.
    pub fingerprint: String,
    /// curl's `--pinnedpubkey` value for the leaf certificate ([`public_key_pin`]);
    /// `None` for a certificate whose public key cannot be read (the installer then
    /// pins nothing and curl checks the chain as usual).
    pub public_key_pin: Option<String>,
}

/// SHA-256 of a DER certificate as 64 lowercase hex digits (what `--pin` takes).
pub fn fingerprint(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// The fingerprint of the first certificate in a PEM file.
pub fn fingerprint_pem_file(path: &Path) -> Result<String, TlsError> {
    let certs = read_certs(path)?;
    Ok(fingerprint(certs[0].as_ref()))
}

/// What curl's `--pinnedpubkey` takes for a DER certificate: `sha256//` and the base64
/// of the SHA-256 of the certificate's SubjectPublicKeyInfo (its public key, in DER).
/// Unlike [`fingerprint`] it survives a renewal that keeps the key.
pub fn public_key_pin(der: &[u8]) -> Result<String, TlsError> {
    use base64::Engine;
    let der = CertificateDer::from(der);
    let cert = webpki::EndEntityCert::try_from(&der).map_err(TlsError::PublicKey)?;
    let spki = cert.subject_public_key_info();
    let digest = Sha256::digest(spki.as_ref());
    Ok(format!(
        "sha256//{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    ))
}

/// [`public_key_pin`] of the first certificate in a PEM file.
pub fn public_key_pin_pem_file(path: &Path) -> Result<String, TlsError> {
    let certs = read_certs(path)?;
    public_key_pin(certs[0].as_ref())
}

/// Loads (or makes) the certificate for `setup`. `listen` adds the listening IP to a
/// new self-signed certificate's names when it is a specific address.
pub fn load(setup: &TlsSetup, data_dir: &Path, listen: SocketAddr) -> Result<ServerTls, TlsError> {
    let (certs, key) = match setup {
        TlsSetup::Files { cert, key } => (read_certs(cert)?, read_key(key)?),
        TlsSetup::SelfSigned => return self_signed(data_dir, listen),
    };
    server_tls(certs, key)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let pem_error = |reason: String| TlsError::Pem {
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(pem_error("no CERTIFICATE block found".into()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::Pem {
        path: path.to_owned(),
        reason: format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
    })
}

fn server_tls(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerTls, TlsError> {
    let fingerprint = fingerprint(certs[0].as_ref());
    let public_key_pin = match public_key_pin(certs[0].as_ref()) {
        Ok(pin) => Some(pin),
        Err(error) => {
            tracing::warn!(%error, "the installer will not pin this certificate's public key");
            None
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        fingerprint,
        public_key_pin,
    })
}

/// Reuses the data directory's self-signed certificate if both files are there and
/// usable together; otherwise makes a new one (and the pin changes).
fn self_signed(data_dir: &Path, listen: SocketAddr) -> Result<ServerTls, TlsError> {
    let cert_path = data_dir.join(CERT_FILE);
    let key_path = data_dir.join(KEY_FILE);
    if cert_path.exists() || key_path.exists() {
        let existing = read_certs(&cert_path)
            .and_then(|certs| Ok((certs, read_key(&key_path)?)))
            .and_then(|(certs, key)| server_tls(certs, key));
        match existing {
            Ok(tls) => return Ok(tls),
            Err(error) => tracing::warn!(
                %error,
                "the stored self-signed certificate is unusable; making a new one (its fingerprint changes)"
            ),
        }
    }
    let names = self_signed_names(listen);
    let mut params = rcgen::CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "gsv gateway (self-signed)");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let cert = params.self_signed(&key)?;
    datadir::write_secret(&key_path, key.serialize_pem().trim_end()).map_err(|source| {
        TlsError::Write {
            path: key_path.clone(),
            source,
        }
    })?;
    write_public(&cert_path, cert.pem().as_bytes()).map_err(|source| TlsError::Write {
        path: cert_path.clone(),
        source,
    })?;
    tracing::info!(cert = %cert_path.display(), "made a self-signed TLS certificate");
    let key_der = PrivateKeyDer::try_from(key.serialize_der()).map_err(|reason| TlsError::Pem {
        path: key_path,
        reason: reason.to_owned(),
    })?;
    server_tls(vec![cert.der().clone()], key_der)
}

/// localhost, 127.0.0.1, ::1, the host name (when it is a valid DNS name) and the
/// listening IP (when it is a specific address).
fn self_signed_names(listen: SocketAddr) -> Vec<String> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let host = gethostname::gethostname().to_string_lossy().to_lowercase();
    let is_dns_name = matches!(
        ServerName::try_from(host.as_str()),
        Ok(ServerName::DnsName(_))
    );
    if is_dns_name && !names.contains(&host) {
        names.push(host);
    }
    let ip = listen.ip();
    if !ip.is_unspecified() && !names.contains(&ip.to_string()) {
        names.push(ip.to_string());
    }
    names
}

/// Writes a non-secret file atomically (temp file + rename).
fn write_public(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, content)?;
    std::fs::rename(&tmp, path)
}

/// The answer to plain HTTP on the TLS port.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\
Content-Length: 53\r\nConnection: close\r\n\r\n\
this port speaks TLS: use https:// or wss:// instead\n";

/// The server side of a TLS handshake on an accepted connection (the caller puts the
/// deadline on it). `None`: the client spoke plain HTTP and was told to use TLS.
pub(crate) async fn accept(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
) -> std::io::Result<Option<TlsStream<TcpStream>>> {
    // A TLS client opens with a handshake record (0x16); anything that looks like an
    // HTTP method gets a plain answer instead of a TLS alert it cannot read.
    let mut first = [0u8; 1];
    tcp.peek(&mut first).await?;
    if first[0].is_ascii_uppercase() {
        let mut tcp = tcp;
        tcp.write_all(PLAIN_HTTP_ANSWER).await?;
        let _ = tcp.shutdown().await;
        return Ok(None);
    }
    acceptor.accept(tcp).await.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gsv-gw-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn self_signed_is_made_once_and_reused() {
        let dir = temp_dir("reuse");
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let first = load(&TlsSetup::SelfSigned, &dir, listen).unwrap();
        assert_eq!(first.fingerprint.len(), 64);
        assert!(first
            .fingerprint
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        let again = load(&TlsSetup::SelfSigned, &dir, listen).unwrap();
        assert_eq!(first.fingerprint, again.fingerprint);
        assert_eq!(
            fingerprint_pem_file(&dir.join(CERT_FILE)).unwrap(),
            first.fingerprint
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // The same files work as --tls-cert/--tls-key.
        let files = TlsSetup::Files {
            cert: dir.join(CERT_FILE),
            key: dir.join(KEY_FILE),
        };
        assert_eq!(
            load(&files, &dir, listen).unwrap().fingerprint,
            first.fingerprint
        );
        // A damaged certificate is replaced (and the pin changes).
        std::fs::write(dir.join(CERT_FILE), "garbage").unwrap();
        let remade = load(&TlsSetup::SelfSigned, &dir, listen).unwrap();
        assert_ne!(remade.fingerprint, first.fingerprint);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn public_key_pin_is_the_hash_of_the_key_curl_sees() {
        use base64::Engine;
        let dir = temp_dir("spki");
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let tls = load(&TlsSetup::SelfSigned, &dir, listen).unwrap();
        let key_pem = std::fs::read_to_string(dir.join(KEY_FILE)).unwrap();
        let key = rcgen::KeyPair::from_pem(&key_pem).unwrap();
        let expected = format!(
            "sha256//{}",
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(
                rcgen::PublicKeyData::subject_public_key_info(&key)
            ))
        );
        assert_eq!(tls.public_key_pin.as_deref(), Some(expected.as_str()));
        assert_eq!(
            public_key_pin_pem_file(&dir.join(CERT_FILE)).unwrap(),
            expected
        );
        assert!(matches!(
            public_key_pin(b"not a certificate"),
            Err(TlsError::PublicKey(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_files_are_reported() {
        let dir = temp_dir("bad");
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let missing = TlsSetup::Files {
            cert: dir.join("nope.pem"),
            key: dir.join("nope.key"),
        };
        assert!(matches!(
            load(&missing, &dir, listen),
            Err(TlsError::Read { .. })
        ));
        std::fs::write(dir.join("empty.pem"), "hello\n").unwrap();
        let empty = TlsSetup::Files {
            cert: dir.join("empty.pem"),
            key: dir.join("empty.pem"),
        };
        assert!(matches!(
            load(&empty, &dir, listen),
            Err(TlsError::Pem { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn plain_http_answer_is_well_formed() {
        let text = std::str::from_utf8(PLAIN_HTTP_ANSWER).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 "));
        assert!(head.contains(&format!("Content-Length: {}\r\n", body.len())));
    }

    #[test]
    fn names_cover_loopback_and_a_specific_listen_ip() {
        let names = self_signed_names("10.1.2.3:8787".parse().unwrap());
        for n in ["localhost", "127.0.0.1", "::1", "10.1.2.3"] {
            assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
        }
        let names = self_signed_names("0.0.0.0:8787".parse().unwrap());
        assert!(!names.iter().any(|x| x == "0.0.0.0"));
    }
}
