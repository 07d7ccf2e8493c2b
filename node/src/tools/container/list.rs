//! `container_list`: the node's containers (running ones, or all with `all: true`) as
//! records, from `ps --no-trunc --format '{{json .}}'`.
//!
//! docker prints one JSON object per line with string fields (`ID`, `Names`,
//! `Image`, `State`, `Status`, `CreatedAt`, `Ports`); podman's objects use `Id`,
//! `Names` as an array, `Created` as a Unix time (`CreatedAt` is relative there) and
//! `Ports` as an array of objects.
//! [`parse`] reads both into one [`Container`] shape.

use super::{resolve, run, runtime_schema, ContainerArgsError, READ_TIMEOUT};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};

/// Most containers listed.
pub const MAX_CONTAINERS: usize = 1000;
/// Most bytes of `ps` output read.
pub const MAX_PS_BYTES: usize = 4 * 1024 * 1024;

/// One container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub id: String,
    /// The first name (docker and podman list several only in odd cases).
    pub name: String,
    pub image: String,
    /// `running`, `exited`, `created`, `paused`…
    pub state: String,
    /// The runtime's human status (`Up 3 hours`, `Exited (0) 2 days ago`).
    pub status: String,
    /// When it was created, as the runtime says it.
    pub created: String,
    /// Published ports, as the runtime writes them (`0.0.0.0:8080->80/tcp`).
    pub ports: String,
}

/// `container_list`'s structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListOutput {
    pub runtime: &'static str,
    pub containers: Vec<Container>,
    /// More than [`MAX_CONTAINERS`] (or too much output): the list was cut.
    #[serde(skip_serializing_if = "crate::tools::output::is_false")]
    pub truncated: bool,
}

/// Reads `ps --format '{{json .}}'` output (docker's or podman's shape). Lines that
/// are not JSON objects are skipped.
pub fn parse(text: &str) -> Vec<Container> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
        .map(|v| Container {
            id: field(&v, &["ID", "Id"]),
            name: names(&v),
            image: field(&v, &["Image"]),
            state: field(&v, &["State"]),
            status: field(&v, &["Status"]),
            created: created(&v),
            ports: ports(v.get("Ports")),
        })
        .collect()
}

/// The first of `keys` present, as text (numbers written out).
fn field(v: &Value, keys: &[&str]) -> String {
    keys.iter()
        .find_map(|k| match v.get(*k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        })
        .unwrap_or_default()
}

/// When the container was created: docker's `CreatedAt` text as it is; podman's
/// `Created` Unix time written the way docker writes it (its own `CreatedAt` is
/// relative, "2 hours ago").
fn created(v: &Value) -> String {
    if let Some(secs) = v.get("Created").and_then(Value::as_i64) {
        if let Some(t) = chrono::DateTime::from_timestamp(secs, 0) {
            return t.format("%Y-%m-%d %H:%M:%S +0000 UTC").to_string();
        }
    }
    field(v, &["CreatedAt", "Created"])
}

fn names(v: &Value) -> String {
    match v.get("Names") {
        Some(Value::String(s)) => s.split(',').next().unwrap_or_default().to_owned(),
        Some(Value::Array(a)) => a
            .iter()
            .find_map(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

fn ports(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|p| {
                let host_ip = field(p, &["host_ip", "hostIP"]);
                let host = field(p, &["host_port", "hostPort"]);
                let inner = field(p, &["container_port", "containerPort"]);
                let proto = field(p, &["protocol"]);
                let ip = if host_ip.is_empty() {
                    "0.0.0.0".to_owned()
                } else {
                    host_ip
                };
                format!("{ip}:{host}->{inner}/{proto}")
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    }
}

/// The `container_list` tool.
pub struct ContainerList;

#[async_trait::async_trait]
impl Tool for ContainerList {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "container_list".to_owned(),
            description: "List the node's running containers: id, name, image, state, \
                          status, created, ports."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "all": {"type": "boolean", "description": "Stopped ones too."},
                    "runtime": runtime_schema()
                },
                "additionalProperties": false
            }),
            capability: Capability::ContainerRead.as_str().to_owned(),
            annotations: ToolAnnotations::hints("List containers", true, false, true, false),
            default_timeout_ms: Some(60_000),
            requires_bins: super::runtime::BINS
                .iter()
                .map(|b| (*b).to_owned())
                .collect(),
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        match list(&args, &ctx).await {
            Ok(r) => r,
            Err(e) => ToolResult::error(format!("container_list: {e}")),
        }
    }
}

async fn list(args: &Value, ctx: &ToolContext) -> Result<ToolResult, ContainerArgsError> {
    let a = Args::new(args, &["all", "runtime"])?;
    let all = a.bool("all")?.unwrap_or(false);
    let rt = resolve(a.str("runtime")?, ctx)?;
    let mut argv = vec!["ps".to_owned(), "--no-trunc".to_owned()];
    if all {
        argv.push("--all".to_owned());
    }
    argv.extend(["--format".to_owned(), "{{json .}}".to_owned()]);
    let out = match run(&rt, argv, READ_TIMEOUT, MAX_PS_BYTES, ctx).await {
        Ok(out) => out,
        Err(e) => return Ok(ToolResult::error(format!("container_list: {e}"))),
    };
    if !out.success() {
        return Ok(ToolResult::error(format!(
            "container_list: {} ps failed: {}",
            rt.kind.name(),
            out.failure()
        )));
    }
    let mut containers = parse(&out.stdout_text());
    let truncated = out.stdout_truncated || containers.len() > MAX_CONTAINERS;
    containers.truncate(MAX_CONTAINERS);
    tracing::debug!(
        runtime = rt.kind.name(),
        count = containers.len(),
        "listed containers"
    );
    Ok(output::structured(&ListOutput {
        runtime: rt.kind.name(),
        containers,
        truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_and_podman_lines_are_read_alike() {
        let docker = r#"{"Command":"\"nginx -g\"","CreatedAt":"2024-05-01 10:00:00 +0000 UTC","ID":"abc123","Image":"nginx:1.25","Names":"web,alias","Ports":"0.0.0.0:8080->80/tcp","State":"running","Status":"Up 2 hours"}
not json
{"Id":"def456","Names":["db"],"Image":"postgres:16","State":"exited","Status":"Exited (0) 1 day ago","CreatedAt":"2 days ago","Created":1714557600,"Ports":[{"host_ip":"","container_port":5432,"host_port":15432,"range":1,"protocol":"tcp"}]}"#;
        let c = parse(docker);
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0],
            Container {
                id: "abc123".into(),
                name: "web".into(),
                image: "nginx:1.25".into(),
                state: "running".into(),
                status: "Up 2 hours".into(),
                created: "2024-05-01 10:00:00 +0000 UTC".into(),
                ports: "0.0.0.0:8080->80/tcp".into(),
            }
        );
        assert_eq!(c[1].id, "def456");
        assert_eq!(c[1].name, "db");
        assert_eq!(c[1].created, "2024-05-01 10:00:00 +0000 UTC");
        assert_eq!(c[1].ports, "0.0.0.0:15432->5432/tcp");
    }
}
