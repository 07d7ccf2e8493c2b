//! TLS settings for `wss://` gateways.
//!
//! Built once per process and shared by every connection: the operating system's root
//! certificates (plus `SSL_CERT_FILE` / `SSL_CERT_DIR`, which is how a node trusts a
//! gateway with a private CA), and the `ring` crypto provider chosen explicitly so no
//! process-wide default provider has to be installed.

use rustls::{ClientConfig, RootCertStore};
use std::sync::{Arc, OnceLock};
use tracing::{debug, warn};

/// The shared client configuration, or why it could not be built.
pub fn client_config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG.get_or_init(build).clone()
}

fn build() -> Result<Arc<ClientConfig>, String> {
    let loaded = rustls_native_certs::load_native_certs();
    for error in &loaded.errors {
        warn!(%error, "could not load some root certificates");
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(loaded.certs);
    debug!(added, ignored, "loaded root certificates");
    if roots.is_empty() {
        warn!("no root certificates found: wss:// connections will fail (set SSL_CERT_FILE)");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    #[test]
    fn builds_once() {
        let a = super::client_config().unwrap();
        let b = super::client_config().unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
    }
}
