//! The container tools: `container_list`, `container_logs` (read-only, capability
//! `container.read`) and `container_exec` (capability `container.exec`, needs an
//! operator's approval by default), over docker or podman, whichever the node has.
//!
//! An agent would otherwise run `docker ps` through Bash and parse a table, or run
//! `docker exec` through a shell where one stray option (`--privileged`, `-u root`
//! smuggled into a name) changes what happens. These tools build the runtime's argv
//! themselves from validated values ([`ContainerArgsError`] says what is refused):
//! a container reference or user never starts with `-` and is limited to the
//! characters runtimes accept; the command of `container_exec` is an argv passed
//! after the container (the runtime stops reading options there), never a shell
//! string. The runtime runs as [`crate::tools::host_run`] describes: found on the
//! node's own `PATH` at call time, no shell, bounded output, killed with its process
//! group when the call ends early.

pub mod exec;
pub mod list;
pub mod logs;
pub mod runtime;

pub use exec::ContainerExec;
pub use list::ContainerList;
pub use logs::ContainerLogs;

use crate::tool::ToolContext;
use crate::tools::host_run::{self, HostCommand, HostOutput};
use runtime::Runtime;
use serde_json::{json, Value};
use std::time::Duration;
use thiserror::Error;

/// Longest container name or id.
pub const MAX_REF_LEN: usize = 128;
/// How long `ps` and `logs` may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a container tool's arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ContainerArgsError {
    #[error("{0}")]
    Shape(String),
    #[error("{field:?} must not start with '-' (it would be read as an option), got {value:?}")]
    Option { field: &'static str, value: String },
    #[error("{field:?} must be 1 to {max} characters from [A-Za-z0-9_.-]{extra}, got {value:?}")]
    Chars {
        field: &'static str,
        max: usize,
        extra: &'static str,
        value: String,
    },
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
}

impl From<String> for ContainerArgsError {
    fn from(message: String) -> Self {
        ContainerArgsError::Shape(message)
    }
}

fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.-".contains(c)
}

/// A container name or id: `[A-Za-z0-9_.-]`, not starting with `-`.
pub fn container_ref(value: &str) -> Result<String, ContainerArgsError> {
    checked("container", value, MAX_REF_LEN, "", plain)
}

/// `user`, `user:group`, `uid` or `uid:gid`.
pub fn user(value: &str) -> Result<String, ContainerArgsError> {
    checked("user", value, 64, " and one ':'", |c| plain(c) || c == ':')?;
    if value.matches(':').count() > 1 || value.ends_with(':') || value.contains(":-") {
        return Err(ContainerArgsError::Chars {
            field: "user",
            max: 64,
            extra: " and one ':'",
            value: value.to_owned(),
        });
    }
    Ok(value.to_owned())
}

fn checked(
    field: &'static str,
    value: &str,
    max: usize,
    extra: &'static str,
    ok: impl Fn(char) -> bool,
) -> Result<String, ContainerArgsError> {
    if value.starts_with('-') {
        return Err(ContainerArgsError::Option {
            field,
            value: short(value),
        });
    }
    if value.is_empty() || value.len() > max || !value.chars().all(ok) {
        return Err(ContainerArgsError::Chars {
            field,
            max,
            extra,
            value: short(value),
        });
    }
    Ok(value.to_owned())
}

/// `value` cut short for messages.
fn short(value: &str) -> String {
    if value.chars().count() <= 60 {
        return value.to_owned();
    }
    value.chars().take(60).collect::<String>() + "…"
}

/// The `runtime` property every container tool's schema has.
fn runtime_schema() -> Value {
    json!({
        "type": "string",
        "enum": ["docker", "podman"],
        "description": "Default: docker if installed, else podman."
    })
}

/// The `container` property.
fn container_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_REF_LEN,
        "description": "Name or id."
    })
}

/// Resolves the runtime for a call.
fn resolve(want: Option<&str>, ctx: &ToolContext) -> Result<Runtime, ContainerArgsError> {
    let want = runtime::requested(want)?;
    Ok(runtime::detect(want, &ctx.workspace)?)
}

/// Runs `runtime args…` bounded by `timeout` and the call's deadline.
async fn run(
    rt: &Runtime,
    args: Vec<String>,
    timeout: Duration,
    max_output: usize,
    ctx: &ToolContext,
) -> Result<HostOutput, host_run::HostRunError> {
    let budget = ctx
        .remaining()
        .saturating_sub(Duration::from_millis(500))
        .max(Duration::from_millis(100));
    let mut command = HostCommand::new(&rt.path, args, timeout.min(budget), max_output);
    // A container's stderr is its output too, not just the runtime's complaints.
    command.max_stderr = max_output;
    host_run::run(&command, &ctx.cancel).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_never_become_options() {
        assert_eq!(container_ref("web-1_a.b").unwrap(), "web-1_a.b");
        let e = container_ref("--privileged").unwrap_err();
        assert!(e.to_string().contains("must not start with '-'"), "{e}");
        for bad in ["", "a b", "a;b", "a/b", "a=b", &"x".repeat(MAX_REF_LEN + 1)] {
            assert!(container_ref(bad).is_err(), "{bad}");
        }
        assert_eq!(user("1000:1000").unwrap(), "1000:1000");
        assert_eq!(user("www-data").unwrap(), "www-data");
        for bad in ["-u", "root:", "a:b:c", "a:-x", "a b"] {
            assert!(user(bad).is_err(), "{bad}");
        }
    }
}
