//! What can go wrong between an agent and the gateway.

use gsv_protocol::ErrorShape;
use thiserror::Error;

/// Client-side failures.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("{0}")]
    Url(#[from] gsv_protocol::endpoint::EndpointError),
    #[error("cannot reach the gateway at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// `--ca` / `--pin` could not be used (unreadable file, malformed pin).
    #[error("{0}")]
    Tls(#[from] gsv_transport::tls::TlsError),
    /// The gateway's certificate was rejected (pin mismatch, untrusted issuer...).
    #[error("{url}: {reason}")]
    Certificate { url: String, reason: String },
    /// The gateway answered with an error.
    #[error("{0}")]
    Remote(ErrorShape),
    #[error("connection to the gateway closed")]
    Closed,
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A local file of a copy could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A copied file did not arrive as it was sent (a SHA-256 mismatch, a file that
    /// changed while it was read); nothing was put in place.
    #[error("{0}")]
    Integrity(String),
}

impl ClientError {
    /// The gateway's error, when it sent one.
    pub fn remote(&self) -> Option<&ErrorShape> {
        match self {
            ClientError::Remote(e) => Some(e),
            _ => None,
        }
    }
}
