//! Enrolling without serving: one connect that exchanges the join token for the node's
//! credential, then a clean close.
//!
//! `gsv node install` enrolls before it installs anything, so a spent join token, a
//! wrong pin or an unreachable gateway stops it with nothing written. The connect is
//! the node's real one (same tools, capabilities and runtime facts as the service
//! that follows), so the gateway sees no difference between this first registration
//! and a first start. Nothing touches the disk before the gateway has answered: the
//! login-profile baseline is left to the service's first start, and the credential is
//! written (0600, in a 0700 directory) only once it has been received.

use crate::config::NodeConfig;
use crate::error::NodeError;
use crate::registry::Registry;
use crate::runner::prepare;
use gsv_protocol::ErrorShape;
use gsv_transport::ConnectError;
use std::path::PathBuf;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

/// What one enrollment came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enrollment {
    /// The gateway exchanged the join token for a credential, stored in this file
    /// (`None`: the configuration has no data directory; the credential was dropped).
    Enrolled { credential_file: Option<PathBuf> },
    /// The token was already a node credential: the gateway accepted it, nothing new.
    Accepted,
}

/// Why enrolling failed. Nothing was written.
#[derive(Debug, Error)]
pub enum EnrollError {
    /// Before any connection: a bad address, plain `ws://` off loopback, TLS setup,
    /// the tool set.
    #[error(transparent)]
    Setup(#[from] NodeError),
    #[error("the gateway refused the enrollment: {}{hint}", .0.message, hint = refusal_hint(.0))]
    Refused(ErrorShape),
    #[error("{0} (check --pin / --ca: `gsv gateway` prints its certificate's fingerprint)")]
    Certificate(String),
    #[error("cannot reach the gateway at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("enrolled, but cannot store the credential in {path}: {source}")]
    Store {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("stopped before the gateway answered")]
    Stopped,
}

fn refusal_hint(shape: &ErrorShape) -> &'static str {
    match shape.code {
        gsv_protocol::ErrorCode::Unauthorized => {
            " (a join token works once: make a new one on the gateway with `gsv token create node ID --install`)"
        }
        _ => "",
    }
}

impl EnrollError {
    /// The stable code printed before the message (`error: CODE: message`).
    pub fn code(&self) -> &'static str {
        match self {
            EnrollError::Setup(NodeError::Refused(s)) | EnrollError::Refused(s) => s.code.as_str(),
            EnrollError::Setup(NodeError::Certificate(_)) | EnrollError::Certificate(_) => {
                "certificate"
            }
            EnrollError::Setup(_) => "invalid_args",
            EnrollError::Unreachable { .. } => "unreachable",
            EnrollError::Store { .. } => "internal",
            EnrollError::Stopped => "cancelled",
        }
    }

    /// The process exit code (DESIGN §4): 3 auth and certificates, 2 usage, 4
    /// unreachable, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            EnrollError::Setup(e) => e.exit_code(),
            EnrollError::Refused(s) => NodeError::Refused(s.clone()).exit_code(),
            EnrollError::Certificate(_) => 3,
            EnrollError::Unreachable { .. } => 4,
            EnrollError::Store { .. } | EnrollError::Stopped => 1,
        }
    }
}

/// Connects once with `config`'s token and, if the gateway exchanges it for a
/// credential, stores that as `node-<id>.credential` in `config.data_dir`.
pub async fn enroll(
    config: NodeConfig,
    shutdown: CancellationToken,
) -> Result<Enrollment, EnrollError> {
    let credential_file = config
        .data_dir
        .as_ref()
        .map(|d| d.join(crate::credential::file_name(&config.id)));
    let mut config = config;
    // Nothing on disk before the answer: no baseline, no credential file yet.
    config.data_dir = None;
    config.login_profile_baseline = None;
    config.accept_login_profile = false;
    let registry = Registry::standard(&config).map_err(NodeError::from)?;
    let Some(ready) = prepare(config, registry, None, &shutdown).await? else {
        return Err(EnrollError::Stopped);
    };
    let node = ready.node.clone();
    let attempt = async {
        let mut ws =
            gsv_transport::dial(&ready.url, ready.tls, node.config.connect_timeout).await?;
        let hello = gsv_transport::handshake(&mut ws, |nonce| node.connect_params(nonce)).await?;
        let _ = ws.close(None).await;
        Ok::<_, ConnectError>(hello)
    };
    let hello = tokio::select! {
        _ = shutdown.cancelled() => Err(EnrollError::Stopped),
        r = attempt => r.map_err(|e| match e {
            ConnectError::Refused(shape) => EnrollError::Refused(shape),
            ConnectError::Certificate(reason) => EnrollError::Certificate(reason),
            other => EnrollError::Unreachable {
                url: ready.url.clone(),
                reason: other.to_string(),
            },
        }),
    };
    node.registry.shutdown().await;
    let Some(credential) = hello?.credential else {
        return Ok(Enrollment::Accepted);
    };
    if let Some(path) = &credential_file {
        crate::private_file::write_private(path, format!("{credential}\n").as_bytes()).map_err(
            |source| EnrollError::Store {
                path: path.clone(),
                source,
            },
        )?;
        tracing::info!(file = %path.display(), "enrolled: node credential stored");
    }
    Ok(Enrollment::Enrolled { credential_file })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::ErrorCode;

    #[test]
    fn codes_and_exit_codes() {
        let refused =
            EnrollError::Refused(ErrorShape::new(ErrorCode::Unauthorized, "invalid token"));
        assert_eq!((refused.code(), refused.exit_code()), ("unauthorized", 3));
        assert!(
            refused.to_string().contains("a join token works once"),
            "{refused}"
        );
        let forbidden = EnrollError::Refused(ErrorShape::new(ErrorCode::Forbidden, "enrolled"));
        assert_eq!((forbidden.code(), forbidden.exit_code()), ("forbidden", 3));
        let cert = EnrollError::Certificate("certificate fingerprint mismatch".into());
        assert_eq!((cert.code(), cert.exit_code()), ("certificate", 3));
        let far = EnrollError::Unreachable {
            url: "wss://gw:1/v1/node".into(),
            reason: "refused".into(),
        };
        assert_eq!((far.code(), far.exit_code()), ("unreachable", 4));
        let insecure = EnrollError::Setup(NodeError::Insecure {
            url: "ws://10.0.0.1:1".into(),
        });
        assert_eq!((insecure.code(), insecure.exit_code()), ("invalid_args", 2));
    }

    #[tokio::test]
    async fn an_unreachable_gateway_writes_nothing() {
        let dir = std::env::temp_dir().join(format!("gsv-enroll-{}", uuid::Uuid::new_v4()));
        // A port nobody listens on: bind one, then drop it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = NodeConfig::new(
            format!("http://127.0.0.1:{port}"),
            gsv_protocol::NodeId::parse("n1").unwrap(),
            "gsv_join_x_y".into(),
            std::env::temp_dir(),
        );
        config.data_dir = Some(dir.clone());
        let e = enroll(config, CancellationToken::new()).await.unwrap_err();
        assert!(matches!(e, EnrollError::Unreachable { .. }), "{e}");
        assert!(!dir.exists(), "nothing may be written");
    }
}
