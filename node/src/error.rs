//! The errors that stop a node for good.
//!
//! Almost nothing is fatal: once a node has registered, every failure just reconnects.
//! What remains is what retrying cannot fix (a bad address, a refused token, a broken
//! tool set), and each carries the process exit code the CLI should use.

use crate::registry::RegistryError;
use gsv_protocol::endpoint::EndpointError;
use gsv_protocol::{ErrorCode, ErrorShape};
use thiserror::Error;

/// Why [`crate::run`] gave up.
#[derive(Debug, Error)]
pub enum NodeError {
    /// `--gateway` could not be parsed.
    #[error("bad gateway address: {0}")]
    Gateway(#[from] EndpointError),
    /// The gateway refused the first connect of this process (wrong token, node id
    /// bound to another token, bad connect parameters, no common protocol version).
    #[error("the gateway refused this node: {0}{hint}", hint = refusal_hint(.0))]
    Refused(ErrorShape),
    /// The tools this node was asked to offer do not form a valid set.
    #[error("invalid tool set: {0}")]
    Registry(#[from] RegistryError),
    /// The gateway closed the live connection because another process connected with
    /// this node id, or because this node's token was revoked.
    #[error("the gateway closed this node's connection for good: {0}")]
    Evicted(String),
    /// TLS could not be set up for a `wss://` gateway (unreadable `--ca`, bad `--pin`).
    #[error("TLS setup failed: {0}")]
    Tls(#[from] gsv_transport::tls::TlsError),
    /// A plain `ws://` / `http://` gateway that is not on loopback, without
    /// `--insecure`: refused before any connection is attempted.
    #[error("refusing to connect to {url}: the node token would travel unencrypted to a non-loopback address; use https:// or wss:// (or --insecure on a network you trust)")]
    Insecure { url: String },
    /// The gateway's certificate was rejected on the first attempt of this process
    /// (pin mismatch, unknown issuer, wrong name).
    #[error("{0} (check --pin / --ca: `gsv gateway` prints its certificate's fingerprint)")]
    Certificate(String),
    /// The host an SSH-backed node works on refused it on the first attempt (its host
    /// key is unknown or changed, the login was refused), or `--ssh` is unusable.
    #[error("{0}")]
    Remote(#[from] crate::remote::RemoteError),
}

impl NodeError {
    /// The process exit code for this error (DESIGN §4): 3 auth, 2 usage, 4 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            NodeError::Gateway(_) | NodeError::Registry(_) => 2,
            NodeError::Refused(shape) => match shape.code {
                ErrorCode::Unauthorized | ErrorCode::Forbidden => 3,
                ErrorCode::InvalidArgs | ErrorCode::UnsupportedProtocol => 2,
                _ => 4,
            },
            NodeError::Tls(_) | NodeError::Insecure { .. } => 2,
            NodeError::Certificate(_) => 3,
            NodeError::Evicted(_) => 3,
            NodeError::Remote(crate::remote::RemoteError::BadTarget(_)) => 2,
            NodeError::Remote(
                crate::remote::RemoteError::HostKey { .. }
                | crate::remote::RemoteError::Auth { .. },
            ) => 3,
            NodeError::Remote(_) => 4,
        }
    }
}

/// Whether a refusal on the first attempt should stop the node instead of retrying.
pub(crate) fn is_fatal_refusal(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::Unauthorized
            | ErrorCode::Forbidden
            | ErrorCode::InvalidArgs
            | ErrorCode::UnsupportedProtocol
    )
}

fn refusal_hint(shape: &ErrorShape) -> &'static str {
    match shape.code {
        ErrorCode::Unauthorized => {
            " (check the node token: --token / GSV_TOKEN, made with `gsv token create node ID`)"
        }
        ErrorCode::Forbidden => {
            " (a node token is bound to one node id: check --id / GSV_NODE_ID matches the token)"
        }
        ErrorCode::UnsupportedProtocol => " (the gateway and this node need compatible versions)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        let refused = |code| NodeError::Refused(ErrorShape::new(code, "m"));
        assert_eq!(refused(ErrorCode::Unauthorized).exit_code(), 3);
        assert_eq!(refused(ErrorCode::Forbidden).exit_code(), 3);
        assert_eq!(refused(ErrorCode::InvalidArgs).exit_code(), 2);
        assert_eq!(refused(ErrorCode::UnsupportedProtocol).exit_code(), 2);
        assert_eq!(refused(ErrorCode::Internal).exit_code(), 4);
        let bad = gsv_protocol::endpoint::Gateway::parse("ftp://x").unwrap_err();
        assert_eq!(NodeError::from(bad).exit_code(), 2);
        let insecure = NodeError::Insecure {
            url: "ws://10.0.0.1:1/v1/node".into(),
        };
        assert_eq!(insecure.exit_code(), 2);
        assert!(insecure.to_string().contains("refusing to connect"));
        assert_eq!(NodeError::Certificate("mismatch".into()).exit_code(), 3);
        assert_eq!(
            NodeError::from(gsv_transport::tls::TlsError::Conflict).exit_code(),
            2
        );
    }

    #[test]
    fn refusal_message_names_the_code_and_a_hint() {
        let e = NodeError::Refused(ErrorShape::new(ErrorCode::Unauthorized, "invalid token"));
        let text = e.to_string();
        assert!(text.contains("unauthorized: invalid token"), "{text}");
        assert!(text.contains("GSV_TOKEN"), "{text}");
    }

    #[test]
    fn fatal_codes() {
        assert!(is_fatal_refusal(ErrorCode::Unauthorized));
        assert!(is_fatal_refusal(ErrorCode::UnsupportedProtocol));
        assert!(!is_fatal_refusal(ErrorCode::RateLimited));
        assert!(!is_fatal_refusal(ErrorCode::Internal));
    }
}
