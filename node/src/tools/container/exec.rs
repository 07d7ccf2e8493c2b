//! `container_exec`: run an argv inside a running container, no shell, and get its
//! stdout, stderr and exit code. Needs an operator's approval by default (its
//! posture, [`crate::guards::posture`]); the approval request shows the exact
//! command line ([`Tool::plan`]).
//!
//! The runtime's argv is `exec [--user U] [--workdir W] [--env K=V]… -- CONTAINER
//! ARGV…`: every option comes from a validated field, the `--` ends the runtime's
//! options, and after the container name the runtime passes everything on to the
//! command unread. No `-i`/`-t`: stdin is closed, nothing can prompt.

use super::{
    container_ref, container_schema, resolve, run, runtime_schema, user, ContainerArgsError,
};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::host_run::quote;
use crate::tools::output;
use gsv_protocol::limits::MAX_CALL_TIMEOUT_MS;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::time::Duration;

/// Most entries of `argv`.
pub const MAX_EXEC_ARGS: usize = 1024;
/// Most bytes of `argv` together.
pub const MAX_EXEC_ARGV_BYTES: usize = 256 * 1024;
/// Most variables in `env`.
pub const MAX_EXEC_ENV: usize = 64;
/// Most bytes kept of each output stream.
pub const MAX_EXEC_OUTPUT: usize = 1024 * 1024;
/// Milliseconds a command may run when `timeout` is not given.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// One validated `container_exec` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    pub container: String,
    pub argv: Vec<String>,
    pub user: Option<String>,
    pub workdir: Option<String>,
    pub env: Vec<(String, String)>,
    pub timeout_ms: u64,
    pub runtime: Option<String>,
}

impl ExecRequest {
    pub fn parse(value: &Value) -> Result<ExecRequest, ContainerArgsError> {
        let a = Args::new(
            value,
            &[
                "container",
                "argv",
                "user",
                "workdir",
                "env",
                "timeout",
                "runtime",
            ],
        )?;
        let container = container_ref(a.required_str("container")?)?;
        let shape = || {
            ContainerArgsError::Shape(format!(
                "\"argv\" must be an array of 1 to {MAX_EXEC_ARGS} strings (the command and its arguments; no shell), argv[0] not empty"
            ))
        };
        let list = value
            .get("argv")
            .and_then(Value::as_array)
            .filter(|l| !l.is_empty() && l.len() <= MAX_EXEC_ARGS)
            .ok_or_else(shape)?;
        let mut argv = Vec::with_capacity(list.len());
        let mut total = 0;
        for item in list {
            let s = item
                .as_str()
                .filter(|s| !s.contains('\0'))
                .ok_or_else(shape)?;
            total += s.len() + 1;
            argv.push(s.to_owned());
        }
        if argv[0].is_empty() {
            return Err(shape());
        }
        if total > MAX_EXEC_ARGV_BYTES {
            return Err(ContainerArgsError::Shape(format!(
                "\"argv\" is longer than {MAX_EXEC_ARGV_BYTES} bytes in all"
            )));
        }
        let user = a.str("user")?.map(user).transpose()?;
        let workdir = match a.str("workdir")? {
            Some(w) if !w.starts_with('/') || w.contains('\0') || w.len() > 4096 => {
                return Err(ContainerArgsError::Shape(format!(
                    "\"workdir\" must be an absolute path inside the container, got {w:?}"
                )))
            }
            other => other.map(str::to_owned),
        };
        let mut env = Vec::new();
        if let Some(v) = value.get("env").filter(|v| !v.is_null()) {
            let bad = || {
                ContainerArgsError::Shape(format!(
                    "\"env\" must be an object of at most {MAX_EXEC_ENV} variables: names of [A-Za-z0-9_] not starting with a digit, string values without NUL"
                ))
            };
            let map = v
                .as_object()
                .filter(|m| m.len() <= MAX_EXEC_ENV)
                .ok_or_else(bad)?;
            for (k, v) in map {
                let name_ok = k
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                let value = v.as_str().filter(|s| !s.contains('\0'));
                match (name_ok, value) {
                    (true, Some(value)) => env.push((k.clone(), value.to_owned())),
                    _ => return Err(bad()),
                }
            }
        }
        let timeout_ms = a
            .u64_in("timeout", 1, MAX_CALL_TIMEOUT_MS)?
            .unwrap_or(DEFAULT_TIMEOUT_MS);
        let runtime = a.str("runtime")?.map(str::to_owned);
        super::runtime::requested(runtime.as_deref())?;
        Ok(ExecRequest {
            container,
            argv,
            user,
            workdir,
            env,
            timeout_ms,
            runtime,
        })
    }

    /// The runtime's arguments for this call.
    pub fn runtime_args(&self) -> Vec<String> {
        let mut args = vec!["exec".to_owned()];
        if let Some(u) = &self.user {
            args.extend(["--user".to_owned(), u.clone()]);
        }
        if let Some(w) = &self.workdir {
            args.extend(["--workdir".to_owned(), w.clone()]);
        }
        for (k, v) in &self.env {
            args.extend(["--env".to_owned(), format!("{k}={v}")]);
        }
        args.push("--".to_owned());
        args.push(self.container.clone());
        args.extend(self.argv.iter().cloned());
        args
    }
}

/// `container_exec`'s structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutput {
    pub runtime: &'static str,
    pub container: String,
    pub argv: Vec<String>,
    /// The command's exit code (the runtime's own failures use 125-127); absent when
    /// it was killed.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    #[serde(skip_serializing_if = "crate::tools::output::is_false")]
    pub truncated: bool,
    #[serde(skip_serializing_if = "crate::tools::output::is_false")]
    pub timed_out: bool,
}

/// The `container_exec` tool.
pub struct ContainerExec;

#[async_trait::async_trait]
impl Tool for ContainerExec {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "container_exec".to_owned(),
            description: "Run an argv in a running container, without a shell: stdout, \
                          stderr, exit code."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "container": container_schema(),
                    "argv": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "maxItems": MAX_EXEC_ARGS,
                        "description": "e.g. [\"nginx\", \"-t\"]."
                    },
                    "user": {"type": "string", "minLength": 1, "maxLength": 64, "description": "user, user:group, uid or uid:gid."},
                    "workdir": {"type": "string", "minLength": 1, "description": "Absolute, in the container."},
                    "env": {"type": "object", "maxProperties": MAX_EXEC_ENV, "additionalProperties": {"type": "string"}, "description": "Variables for the command."},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_CALL_TIMEOUT_MS, "description": "Milliseconds (default 60000)."},
                    "runtime": runtime_schema()
                },
                "required": ["container", "argv"],
                "additionalProperties": false
            }),
            capability: Capability::ContainerExec.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Run in container", false, true, false, false),
            default_timeout_ms: Some(DEFAULT_TIMEOUT_MS + 30_000),
            requires_bins: super::runtime::BINS
                .iter()
                .map(|b| (*b).to_owned())
                .collect(),
            requires_approval: true,
        }
    }

    async fn plan(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let request = ExecRequest::parse(args).ok()?;
        let runtime = resolve(request.runtime.as_deref(), ctx)
            .map(|rt| rt.kind.name())
            .unwrap_or("docker");
        let line = std::iter::once(runtime.to_owned())
            .chain(request.runtime_args().iter().map(|a| quote(a)))
            .collect::<Vec<_>>()
            .join(" ");
        Some(format!("would run: {line}"))
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let request = match ExecRequest::parse(&args) {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("container_exec: {e}")),
        };
        let rt = match resolve(request.runtime.as_deref(), &ctx) {
            Ok(rt) => rt,
            Err(e) => return ToolResult::error(format!("container_exec: {e}")),
        };
        tracing::info!(
            runtime = rt.kind.name(),
            container = %request.container,
            program = %request.argv[0],
            "running a command in a container"
        );
        let timeout = Duration::from_millis(request.timeout_ms);
        let out = match run(&rt, request.runtime_args(), timeout, MAX_EXEC_OUTPUT, &ctx).await {
            Ok(out) => out,
            Err(e) => return ToolResult::error(format!("container_exec: {e}")),
        };
        let result = ExecOutput {
            runtime: rt.kind.name(),
            container: request.container,
            argv: request.argv,
            exit_code: out.status,
            stdout: out.stdout_text(),
            stderr: out.stderr_text(),
            truncated: out.stdout_truncated || out.stderr_truncated,
            timed_out: out.timed_out,
        };
        if out.timed_out {
            return output::error_with(
                format!(
                    "container_exec: the command did not finish within {} ms and was stopped",
                    request.timeout_ms
                ),
                &result,
            );
        }
        output::structured(&result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_argv_ends_options_before_the_container() {
        let r = ExecRequest::parse(&json!({
            "container": "web",
            "argv": ["ls", "--privileged", "-l"],
            "user": "1000:1000",
            "workdir": "/srv",
            "env": {"A_1": "x y"}
        }))
        .unwrap();
        assert_eq!(
            r.runtime_args(),
            [
                "exec",
                "--user",
                "1000:1000",
                "--workdir",
                "/srv",
                "--env",
                "A_1=x y",
                "--",
                "web",
                "ls",
                "--privileged",
                "-l"
            ]
        );
    }

    #[test]
    fn bad_calls_are_refused() {
        for (args, needle) in [
            (
                json!({"container": "--privileged", "argv": ["ls"]}),
                "must not start with '-'",
            ),
            (
                json!({"container": "web", "argv": []}),
                "\"argv\" must be an array",
            ),
            (
                json!({"container": "web", "argv": [""]}),
                "\"argv\" must be an array",
            ),
            (
                json!({"container": "web", "argv": "ls -l"}),
                "\"argv\" must be an array",
            ),
            (
                json!({"container": "web", "argv": ["ls"], "user": "-0"}),
                "must not start with '-'",
            ),
            (
                json!({"container": "web", "argv": ["ls"], "workdir": "rel"}),
                "absolute",
            ),
            (
                json!({"container": "web", "argv": ["ls"], "env": {"A=B": "x"}}),
                "\"env\"",
            ),
            (
                json!({"container": "web", "argv": ["ls"], "runtime": "lxc"}),
                "\"runtime\"",
            ),
            (
                json!({"container": "web", "argv": ["ls"], "shell": true}),
                "unknown argument",
            ),
        ] {
            let e = ExecRequest::parse(&args).unwrap_err().to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }
}
