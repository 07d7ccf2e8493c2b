//! Why installing or removing a node service failed.

use std::path::PathBuf;
use thiserror::Error;

/// A failed step of `gsv node install` / `gsv node uninstall`.
#[derive(Debug, Error)]
pub enum ServiceError {
    /// A unit file, a plist and a pid file's command line are text.
    #[error("{0} is not valid UTF-8: a service definition cannot name it")]
    NotUtf8(PathBuf),
    /// An argument a unit line or a plist string cannot hold.
    #[error("{0:?} contains a control character: a service definition cannot hold it")]
    ControlCharacter(String),
    #[error("{0}")]
    Usage(String),
    /// The service manager asked for with `--service` is not there.
    #[error("{manager} cannot run the node here: {why}")]
    Unavailable { manager: &'static str, why: String },
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// `systemctl`, `launchctl` or `loginctl` failed.
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
}

impl ServiceError {
    /// The stable code printed before the message (`error: CODE: message`).
    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::NotUtf8(_)
            | ServiceError::ControlCharacter(_)
            | ServiceError::Usage(_)
            | ServiceError::Unavailable { .. } => "invalid_args",
            ServiceError::Io { .. } | ServiceError::Spawn { .. } => "io",
            ServiceError::Command { .. } => "service_manager",
        }
    }

    /// The process exit code: 2 for usage, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self.code() {
            "invalid_args" => crate::exit::USAGE,
            _ => crate::exit::TOOL_ERROR,
        }
    }

    /// An I/O failure on `path`.
    pub fn io(what: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_owned();
        move |source| ServiceError::Io { what, path, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_exit_codes() {
        let cases = [
            (ServiceError::NotUtf8("x".into()), "invalid_args", 2),
            (
                ServiceError::ControlCharacter("a\nb".into()),
                "invalid_args",
                2,
            ),
            (
                ServiceError::Unavailable {
                    manager: "systemd",
                    why: "not running".into(),
                },
                "invalid_args",
                2,
            ),
            (
                ServiceError::io("write", std::path::Path::new("/x"))(std::io::Error::other(
                    "full",
                )),
                "io",
                1,
            ),
            (
                ServiceError::Command {
                    command: "systemctl start x".into(),
                    detail: "exit status 1".into(),
                },
                "service_manager",
                1,
            ),
        ];
        for (e, code, exit) in cases {
            assert_eq!((e.code(), e.exit_code()), (code, exit), "{e}");
        }
        assert_eq!(
            ServiceError::io("write", std::path::Path::new("/x"))(std::io::Error::other("full"))
                .to_string(),
            "cannot write /x: full"
        );
    }
}
