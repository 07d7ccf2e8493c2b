//! Which certificates a TLS gateway may present to an agent.

use std::path::PathBuf;

/// Which certificates an `https://` / `wss://` gateway may present. The default
/// (neither set) trusts the system's root certificates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM file whose certificates are the only trusted roots (`--ca`).
    pub ca: Option<PathBuf>,
    /// SHA-256 fingerprint of the gateway's leaf certificate (`--pin`): only it is
    /// checked, not the chain or name.
    pub pin: Option<String>,
}
