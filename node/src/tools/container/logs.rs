//! `container_logs`: the last lines a container wrote, stdout and stderr apart, from
//! `logs --tail N [--since S] [--timestamps] -- CONTAINER`.
//!
//! `tail` is always passed (default [`DEFAULT_TAIL`], at most [`MAX_TAIL`]) so a
//! chatty container cannot flood the call, and each stream is cut at
//! [`MAX_LOG_BYTES`] on top of that (`truncated` says so). `since` is a duration or
//! a timestamp the runtime understands (`10m`, `2024-05-01T10:00:00Z`, a Unix time),
//! checked for its characters only.

use super::{
    container_ref, container_schema, resolve, run, runtime_schema, ContainerArgsError, READ_TIMEOUT,
};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};

/// Lines asked for when `tail` is not given.
pub const DEFAULT_TAIL: u64 = 200;
/// Most lines `tail` may ask for.
pub const MAX_TAIL: u64 = 10_000;
/// Most bytes kept of each stream.
pub const MAX_LOG_BYTES: usize = 1024 * 1024;
/// Longest `since`.
const MAX_SINCE_LEN: usize = 64;

/// `container_logs`' structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsOutput {
    pub runtime: &'static str,
    pub container: String,
    /// What the container wrote to its stdout.
    pub stdout: String,
    /// What the container wrote to its stderr.
    pub stderr: String,
    #[serde(skip_serializing_if = "crate::tools::output::is_false")]
    pub truncated: bool,
}

/// The `container_logs` tool.
pub struct ContainerLogs;

#[async_trait::async_trait]
impl Tool for ContainerLogs {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "container_logs".to_owned(),
            description: "A container's recent logs, stdout and stderr apart.".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "container": container_schema(),
                    "tail": {"type": "integer", "minimum": 0, "maximum": MAX_TAIL, "description": "Lines from the end (default 200)."},
                    "since": {"type": "string", "minLength": 1, "maxLength": MAX_SINCE_LEN, "description": "A duration (10m, 2h) or a timestamp (2024-05-01T10:00:00Z)."},
                    "timestamps": {"type": "boolean", "description": "Prefix each line with its time."},
                    "runtime": runtime_schema()
                },
                "required": ["container"],
                "additionalProperties": false
            }),
            capability: Capability::ContainerRead.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Container logs", true, false, true, false),
            default_timeout_ms: Some(60_000),
            requires_bins: super::runtime::BINS
                .iter()
                .map(|b| (*b).to_owned())
                .collect(),
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        match logs(&args, &ctx).await {
            Ok(r) => r,
            Err(e) => ToolResult::error(format!("container_logs: {e}")),
        }
    }
}

/// A `since` value: `[A-Za-z0-9:.+-]`, not starting with `-`.
fn since(value: &str) -> Result<String, ContainerArgsError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || ":.+-".contains(c);
    if value.starts_with('-') {
        return Err(ContainerArgsError::Option {
            field: "since",
            value: value.to_owned(),
        });
    }
    if value.is_empty() || value.len() > MAX_SINCE_LEN || !value.chars().all(ok) {
        return Err(ContainerArgsError::Shape(format!(
            "\"since\" must be a duration (10m) or a timestamp (2024-05-01T10:00:00Z), got {value:?}"
        )));
    }
    Ok(value.to_owned())
}

async fn logs(args: &Value, ctx: &ToolContext) -> Result<ToolResult, ContainerArgsError> {
    let a = Args::new(
        args,
        &["container", "tail", "since", "timestamps", "runtime"],
    )?;
    let container = container_ref(a.required_str("container")?)?;
    let tail = a.u64_in("tail", 0, MAX_TAIL)?.unwrap_or(DEFAULT_TAIL);
    let since = a.str("since")?.map(since).transpose()?;
    let timestamps = a.bool("timestamps")?.unwrap_or(false);
    let rt = resolve(a.str("runtime")?, ctx)?;
    let mut argv = vec!["logs".to_owned(), "--tail".to_owned(), tail.to_string()];
    if let Some(s) = since {
        argv.extend(["--since".to_owned(), s]);
    }
    if timestamps {
        argv.push("--timestamps".to_owned());
    }
    argv.extend(["--".to_owned(), container.clone()]);
    let out = match run(&rt, argv, READ_TIMEOUT, MAX_LOG_BYTES, ctx).await {
        Ok(out) => out,
        Err(e) => return Ok(ToolResult::error(format!("container_logs: {e}"))),
    };
    if !out.success() {
        return Ok(ToolResult::error(format!(
            "container_logs: {} logs {container} failed: {}",
            rt.kind.name(),
            out.failure()
        )));
    }
    Ok(output::structured(&LogsOutput {
        runtime: rt.kind.name(),
        container,
        stdout: out.stdout_text(),
        stderr: out.stderr_text(),
        truncated: out.stdout_truncated || out.stderr_truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_time_never_an_option() {
        assert_eq!(since("10m").unwrap(), "10m");
        assert_eq!(
            since("2024-05-01T10:00:00+02:00").unwrap(),
            "2024-05-01T10:00:00+02:00"
        );
        assert!(matches!(
            since("--follow"),
            Err(ContainerArgsError::Option { .. })
        ));
        assert!(since("1 day").is_err());
    }
}
