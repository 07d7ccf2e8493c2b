//! Why the gateway would not serve the installer script or a gsv build.

use crate::error::WireError;
use gsv_protocol::names::NameError;
use gsv_protocol::ErrorCode;
use std::path::PathBuf;
use thiserror::Error;

/// A refused `GET /v1/install/{id}` or `GET /v1/dist/{target}`.
#[derive(Debug, Error)]
pub enum InstallError {
    #[error(transparent)]
    NodeId(#[from] NameError),
    /// The URL the script would give the new machine comes from the request's `Host`.
    #[error("the request has no usable Host header (expected host or host:port)")]
    BadHost,
    /// Scripts and binaries travel over TLS, except to a client on loopback.
    #[error("the installer is served over TLS only (or over plain HTTP to loopback): start the gateway with --tls-self-signed or --tls-cert/--tls-key")]
    PlainHttpOffLoopback,
    #[error("{0:?} is not a build name (OS-ARCH, e.g. linux-x86_64)")]
    BadTarget(String),
    #[error("the gateway has no gsv build for {target} (it has: {available}); put one in its data directory as dist/{target}")]
    UnknownTarget { target: String, available: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

impl WireError for InstallError {
    fn code(&self) -> ErrorCode {
        match self {
            InstallError::NodeId(_) | InstallError::BadHost | InstallError::BadTarget(_) => {
                ErrorCode::InvalidArgs
            }
            InstallError::PlainHttpOffLoopback => ErrorCode::Forbidden,
            InstallError::UnknownTarget { .. } => ErrorCode::NotFound,
            InstallError::Read { .. } | InstallError::Task(_) => ErrorCode::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_code_and_status() {
        let cases = [
            (
                InstallError::NodeId(NameError::NodeId("Bad_Id".into())),
                ErrorCode::InvalidArgs,
                400,
            ),
            (InstallError::BadHost, ErrorCode::InvalidArgs, 400),
            (
                InstallError::BadTarget("../x".into()),
                ErrorCode::InvalidArgs,
                400,
            ),
            (
                InstallError::PlainHttpOffLoopback,
                ErrorCode::Forbidden,
                403,
            ),
            (
                InstallError::UnknownTarget {
                    target: "linux-riscv64".into(),
                    available: "linux-x86_64".into(),
                },
                ErrorCode::NotFound,
                404,
            ),
            (
                InstallError::Read {
                    path: "/x".into(),
                    source: std::io::Error::other("gone"),
                },
                ErrorCode::Internal,
                500,
            ),
        ];
        for (e, code, status) in cases {
            assert_eq!(e.to_shape().code, code, "{e}");
            assert_eq!(e.status().as_u16(), status, "{e}");
        }
        let unknown = InstallError::UnknownTarget {
            target: "linux-riscv64".into(),
            available: "linux-x86_64".into(),
        };
        assert_eq!(
            unknown.to_string(),
            "the gateway has no gsv build for linux-riscv64 (it has: linux-x86_64); put one in its data directory as dist/linux-riscv64"
        );
    }
}
