//! What can go wrong between a node and the host it works on over SSH or through a
//! container engine, as one enum with a stable code for each kind.

use gsv_protocol::{ErrorCode, ErrorShape};

/// A failure of the remote host's plumbing (not of the command or file a tool was
/// asked about: those are tool results).
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The `--ssh` or `--ssh-option` value is not usable.
    #[error("{0}")]
    BadTarget(String),
    /// The host's key is not in known_hosts, or differs from the one recorded there.
    #[error(
        "the SSH host key of {host} is unknown or changed; gsv never accepts a host key \
         silently: check it and add it to known_hosts (ssh-keyscan, or ssh to it once by \
         hand). ssh said: {detail}"
    )]
    HostKey { host: String, detail: String },
    /// Authentication was refused.
    #[error("SSH authentication to {host} was refused: {detail}")]
    Auth { host: String, detail: String },
    /// The host cannot be reached now (the master connection is down).
    #[error("the host {host} is not reachable now: {detail}")]
    Unreachable { host: String, detail: String },
    /// The container is not there or not running.
    #[error("the container {name} is not running: {detail}")]
    ContainerDown { name: String, detail: String },
    /// A program the node needs is missing on the host, or there is no POSIX shell.
    #[error("{0}")]
    Unsupported(String),
    /// The host answered out of step with the protocol (its shell printed something
    /// unexpected); the channel was dropped.
    #[error("the host's shell answered out of step: {0}")]
    Protocol(String),
    /// The shell was gone before the request reached it (nothing ran; the request
    /// may be sent again on another shell).
    #[error("the host's shell was gone: {0}")]
    Gone(String),
    /// Spawning or talking to the local ssh or engine program failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The call's deadline passed or it was cancelled while waiting on the host.
    #[error("the call ended before the host answered")]
    Cancelled,
}

impl RemoteError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        RemoteError::Io {
            what: what.into(),
            source,
        }
    }

    /// The protocol error code a call that hit this gets.
    pub fn code(&self) -> ErrorCode {
        match self {
            RemoteError::Unreachable { .. } | RemoteError::ContainerDown { .. } => {
                ErrorCode::NodeOffline
            }
            // The host is there but will not have us: offline for calls, and not a
            // thing a retry fixes (see `shape`).
            RemoteError::HostKey { .. } | RemoteError::Auth { .. } => ErrorCode::NodeOffline,
            RemoteError::Cancelled => ErrorCode::Cancelled,
            RemoteError::BadTarget(_) => ErrorCode::InvalidArgs,
            RemoteError::Unsupported(_)
            | RemoteError::Protocol(_)
            | RemoteError::Gone(_)
            | RemoteError::Io { .. } => ErrorCode::Internal,
        }
    }

    /// The error a call that hit this answers with.
    pub fn shape(&self) -> ErrorShape {
        let mut shape = ErrorShape::new(self.code(), self.to_string());
        if matches!(self, RemoteError::HostKey { .. } | RemoteError::Auth { .. }) {
            shape.retryable = false;
        }
        shape
    }
}
