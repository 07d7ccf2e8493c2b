//! The gateway tools: the fleet view's `fleet_nodes`, `fleet_tools`, `fleet_call`,
//! `fleet_use` and `fleet_release`,
//! a listing of the same small size whatever the fleet's, and `fleet_run`,
//! `fleet_jobs` and `fleet_job`, listed in both views.
//!
//! An agent finds machines with `fleet_nodes` (paged, narrowed by a selector), reads
//! the definitions of the tools it may call on one with `fleet_tools`, and calls one
//! with `fleet_call`, which is exactly the routed call of `{node}__{tool}` (the
//! handler sends it through the same path as a flat call). `fleet_run` runs one tool
//! on many nodes ([`super::fleet_run`]) and `fleet_jobs` / `fleet_job` read the kept
//! outcomes ([`super::fleet_jobs`]): nothing in the flat view does that, so the flat
//! view lists those three too. `fleet_use` / `fleet_release` put nodes in the
//! session's listing by namespace and take them out ([`super::fleet_use`]). This file holds the definitions, the parsing of the
//! fleet view's arguments and its two listing answers; every list is built from
//! [`super::nodes`], so nothing here shows more than the flat view would.

pub use super::fleet_answer::FleetError;
use super::fleet_answer::{parse, structured};
use super::nodes::{self, NodeCard, NODES_PAGE};
use super::view::Lens;
use crate::fleet::Fleet;
use gsv_protocol::names::{NamespacedName, NodeId, ToolName};
use gsv_protocol::selector::Selector;
use rmcp::model::{CallToolResult, Tool, ToolAnnotations};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

pub const FLEET_NODES: &str = "fleet_nodes";
pub const FLEET_TOOLS: &str = "fleet_tools";
pub const FLEET_CALL: &str = "fleet_call";
pub const FLEET_RUN: &str = "fleet_run";
pub const FLEET_JOBS: &str = "fleet_jobs";
pub const FLEET_JOB: &str = "fleet_job";
pub const FLEET_COPY: &str = "fleet_copy";
pub const FLEET_USE: &str = "fleet_use";
pub const FLEET_RELEASE: &str = "fleet_release";

/// One of the fleet view's tools, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetTool {
    Nodes,
    Tools,
    Call,
    Run,
    Jobs,
    Job,
    Copy,
    Use,
    Release,
}

impl FleetTool {
    pub fn from_name(name: &str) -> Option<FleetTool> {
        match name {
            FLEET_NODES => Some(FleetTool::Nodes),
            FLEET_TOOLS => Some(FleetTool::Tools),
            FLEET_CALL => Some(FleetTool::Call),
            FLEET_RUN => Some(FleetTool::Run),
            FLEET_JOBS => Some(FleetTool::Jobs),
            FLEET_JOB => Some(FleetTool::Job),
            FLEET_COPY => Some(FleetTool::Copy),
            FLEET_USE => Some(FleetTool::Use),
            FLEET_RELEASE => Some(FleetTool::Release),
            _ => None,
        }
    }

    /// Rounds down the whole-number counts of its arguments given with a fraction
    /// (`timeoutMs: 1500.5`), by the same rule as every node tool's
    /// (`crate::toolset::counts`).
    pub fn floor_counts(self, args: &mut Option<Map<String, Value>>) {
        use std::collections::HashMap;
        use std::sync::OnceLock;
        static COUNTS: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
        let counts = COUNTS.get_or_init(|| {
            definitions()
                .into_iter()
                .map(|t| {
                    let schema = Value::Object((*t.input_schema).clone());
                    (
                        t.name.to_string(),
                        crate::toolset::counts::of_schema(&schema),
                    )
                })
                .collect()
        });
        let Some(names) = counts.get(self.name()) else {
            return;
        };
        let Some(map) = args.take() else { return };
        let mut v = Value::Object(map);
        crate::toolset::counts::floor(names, &mut v);
        if let Value::Object(map) = v {
            *args = Some(map);
        }
    }

    /// Its name in `tools/list`.
    pub fn name(self) -> &'static str {
        match self {
            FleetTool::Nodes => FLEET_NODES,
            FleetTool::Tools => FLEET_TOOLS,
            FleetTool::Call => FLEET_CALL,
            FleetTool::Run => FLEET_RUN,
            FleetTool::Jobs => FLEET_JOBS,
            FleetTool::Job => FLEET_JOB,
            FleetTool::Copy => FLEET_COPY,
            FleetTool::Use => FLEET_USE,
            FleetTool::Release => FLEET_RELEASE,
        }
    }

    /// Whether the flat view lists it too: the tools that do what no `{node}__{tool}`
    /// does (run on many nodes, read kept jobs, copy between nodes).
    pub fn in_flat(self) -> bool {
        matches!(
            self,
            FleetTool::Run | FleetTool::Jobs | FleetTool::Job | FleetTool::Copy
        )
    }
}

const NODES_DESCRIPTION: &str = "List the machines (nodes) you can use: id, online, os, \
labels (set by operators), facts (reported by the node: os, arch, cpus, memoryBytes, ...) \
and the names of the tools you may call there. `select` narrows the list: comma-separated \
terms that must all hold, `key=value`, `key!=value`, `key` (has label), `id~GLOB`, \
`fact.KEY=VALUE` (e.g. `role=web,fact.os=linux`). Paged: pass `nextCursor` back as \
`cursor`. Then fleet_tools for a node's tool definitions, fleet_call to run one.";

const TOOLS_DESCRIPTION: &str = "Definitions (description, inputSchema, annotations) of \
the tools you may call on one node; `tools` limits them to some names (e.g. [\"Read\"]). \
Read a tool's inputSchema before calling it with fleet_call.";

const CALL_DESCRIPTION: &str = "Call one tool on one node and get its result: `node` and \
`tool` as fleet_nodes lists them, `args` an object matching the tool's inputSchema (see \
fleet_tools), `timeoutMs` the call's deadline (default: the tool's). Same rules as the \
tool itself: some calls wait for a human's approval; progress and cancellation work.";

const RUN_DESCRIPTION: &str = "Run one tool on every node `select` picks (as fleet_nodes; \
`id~*`: all) with the same `args`; `tool` is the bare name (e.g. Bash). `batch`: nodes at \
once, a count or \"N%\"; `failFast`: start no more after a failure. Answers a summary, \
then each node's result (long ones cut: fleet_job with the job id has them whole). \
Progress: one notification per node.";

const JOBS_DESCRIPTION: &str = "Your jobs (fleet_run runs, async calls), newest first: id, \
tool, selector, state, times. Paged by `limit` (default 50) and `offset`; `select` keeps \
those that ran on a node it picks.";

const COPY_DESCRIPTION: &str = "Copy a file from one node to another (or within one): \
`from` and `to` are NODE:PATH. The bytes go node to node through the gateway, not through \
you; checked by SHA-256 before the file is put in place; an interrupted copy resumes. \
Needs Read on the source node and Write on the destination.";

const JOB_DESCRIPTION: &str = "One job by `id`, with its whole kept result (for a \
fleet_run: every node's, uncut).";

/// The bytes of the gateway tools a flat listing leads with: those of
/// [`flat_definitions`] when `all` the node tools are listed, else every fleet tool.
pub fn listing_bytes(all: bool) -> usize {
    use std::sync::OnceLock;
    static BYTES: OnceLock<(usize, usize)> = OnceLock::new();
    let size = |tools: Vec<Tool>| serde_json::to_string(&tools).map_or(0, |s| s.len());
    let (flat, every) = *BYTES.get_or_init(|| (size(flat_definitions()), size(definitions())));
    if all {
        flat
    } else {
        every
    }
}

/// The fleet view's `tools/list`: these nine, always (and the tools of the nodes a
/// session uses, [`super::fleet_use`]).
pub fn definitions() -> Vec<Tool> {
    let tool = |name: &'static str, description: &'static str, schema: Value, ann: Value| {
        let schema = match schema {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut t = Tool::new(
            Cow::Borrowed(name),
            Cow::Borrowed(description),
            Arc::new(schema),
        );
        t.annotations = serde_json::from_value::<ToolAnnotations>(ann).ok();
        t
    };
    let read_only = json!({"readOnlyHint": true, "openWorldHint": false});
    vec![
        tool(
            FLEET_NODES,
            NODES_DESCRIPTION,
            json!({"type": "object", "properties": {
                "select": {"type": "string"},
                "cursor": {"type": "string"}
            }, "additionalProperties": false}),
            read_only.clone(),
        ),
        tool(
            FLEET_TOOLS,
            TOOLS_DESCRIPTION,
            json!({"type": "object", "properties": {
                "node": {"type": "string"},
                "tools": {"type": "array", "items": {"type": "string"}}
            }, "required": ["node"], "additionalProperties": false}),
            read_only.clone(),
        ),
        tool(
            FLEET_CALL,
            CALL_DESCRIPTION,
            json!({"type": "object", "properties": {
                "node": {"type": "string"},
                "tool": {"type": "string"},
                "args": {"type": "object"},
                "timeoutMs": {"type": "integer", "minimum": 1}
            }, "required": ["node", "tool"], "additionalProperties": false}),
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}),
        ),
        tool(
            FLEET_RUN,
            RUN_DESCRIPTION,
            json!({"type": "object", "properties": {
                "select": {"type": "string"},
                "tool": {"type": "string"},
                "args": {"type": "object"},
                "batch": {"type": ["integer", "string"]},
                "failFast": {"type": "boolean"},
                "timeoutMs": {"type": "integer", "minimum": 1}
            }, "required": ["select", "tool"], "additionalProperties": false}),
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}),
        ),
        tool(
            FLEET_JOBS,
            JOBS_DESCRIPTION,
            json!({"type": "object", "properties": {
                "limit": {"type": "integer", "minimum": 1},
                "offset": {"type": "integer", "minimum": 0},
                "select": {"type": "string"}
            }, "additionalProperties": false}),
            read_only.clone(),
        ),
        tool(
            FLEET_JOB,
            JOB_DESCRIPTION,
            json!({"type": "object", "properties": {
                "id": {"type": "string"}
            }, "required": ["id"], "additionalProperties": false}),
            read_only,
        ),
        tool(
            FLEET_COPY,
            COPY_DESCRIPTION,
            json!({"type": "object", "properties": {
                "from": {"type": "string"},
                "to": {"type": "string"}
            }, "required": ["from", "to"], "additionalProperties": false}),
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
        ),
        tool(
            FLEET_USE,
            super::fleet_use::USE_DESCRIPTION,
            json!({"type": "object", "properties": {
                "nodes": {"type": "array", "items": {"type": "string"}},
                "select": {"type": "string"}
            }, "additionalProperties": false}),
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
        ),
        tool(
            FLEET_RELEASE,
            super::fleet_use::RELEASE_DESCRIPTION,
            json!({"type": "object", "properties": {
                "nodes": {"type": "array", "items": {"type": "string"}},
                "all": {"type": "boolean"}
            }, "additionalProperties": false}),
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
        ),
    ]
}

/// The gateway tools the flat view lists before the nodes' tools (see
/// [`FleetTool::in_flat`]).
pub fn flat_definitions() -> Vec<Tool> {
    definitions()
        .into_iter()
        .filter(|t| FleetTool::from_name(&t.name).is_some_and(FleetTool::in_flat))
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodesArgs {
    select: Option<String>,
    cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsArgs {
    node: String,
    tools: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CallArgs {
    node: String,
    tool: String,
    #[serde(default)]
    args: Map<String, Value>,
    timeout_ms: Option<u64>,
}

/// A `fleet_call` as the routed call it stands for.
#[derive(Debug)]
pub struct CallTarget {
    /// `{node}__{tool}`.
    pub name: String,
    pub node: String,
    pub args: Value,
    pub timeout_ms: Option<u64>,
}

/// Validates `fleet_call`'s arguments (node id and tool name by gsv's name rules).
pub fn call_target(args: Option<Map<String, Value>>) -> Result<CallTarget, FleetError> {
    let a: CallArgs = parse(args)?;
    let node = NodeId::parse(&a.node).map_err(|reason| FleetError::Name {
        what: "node",
        value: a.node.clone(),
        reason,
    })?;
    let tool = ToolName::parse(&a.tool).map_err(|reason| FleetError::Name {
        what: "tool",
        value: a.tool.clone(),
        reason,
    })?;
    let name = NamespacedName::new(node, tool).to_string();
    Ok(CallTarget {
        name,
        node: a.node,
        args: Value::Object(a.args),
        timeout_ms: a.timeout_ms,
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodesPage<'a> {
    nodes: &'a [NodeCard],
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// `fleet_nodes`: a page of the nodes the session sees (narrowed by `select`).
pub fn nodes_answer(
    fleet: &Fleet,
    lens: &Lens,
    args: Option<Map<String, Value>>,
) -> Result<CallToolResult, FleetError> {
    let a: NodesArgs = parse(args)?;
    let select = a.select.as_deref().map(Selector::parse).transpose()?;
    let all = nodes::lens_nodes(fleet, lens, select.as_ref());
    let (page, next_cursor) = nodes::page(&all, a.cursor.as_deref(), NODES_PAGE)?;
    Ok(structured(&NodesPage {
        nodes: page,
        next_cursor,
    }))
}

/// One tool's full definition, as `fleet_tools` gives it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolDef<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a gsv_protocol::ToolAnnotations>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeTools<'a> {
    node: &'a str,
    online: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    os: Option<&'a str>,
    tools: Vec<ToolDef<'a>>,
}

/// `fleet_tools`: the definitions of the tools the session may call on one node.
pub fn tools_answer(
    fleet: &Fleet,
    lens: &Lens,
    args: Option<Map<String, Value>>,
) -> Result<CallToolResult, FleetError> {
    let a: ToolsArgs = parse(args)?;
    let nodes = nodes::lens_nodes(fleet, lens, None);
    let Some(card) = nodes.iter().find(|n| n.id == a.node) else {
        return Err(FleetError::NoNode(a.node));
    };
    let entries = nodes::lens_entries(fleet, lens, std::slice::from_ref(card));
    if let Some(wanted) = &a.tools {
        if let Some(missing) = wanted
            .iter()
            .find(|w| !entries.iter().any(|e| &e.tool == *w))
        {
            return Err(FleetError::NoTool(NamespacedName::join(&a.node, missing)));
        }
    }
    let tools = entries
        .iter()
        .filter(|e| a.tools.as_ref().is_none_or(|w| w.contains(&e.tool)))
        .map(|e| ToolDef {
            name: &e.tool,
            description: &e.description,
            input_schema: &e.input_schema,
            annotations: (e.annotations != gsv_protocol::ToolAnnotations::default())
                .then_some(&e.annotations),
        })
        .collect();
    Ok(structured(&NodeTools {
        node: &card.id,
        online: card.online,
        os: card.os.as_deref(),
        tools,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Option<Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    #[test]
    fn the_listing_is_small_and_constant() {
        let tools = definitions();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                FLEET_NODES,
                FLEET_TOOLS,
                FLEET_CALL,
                FLEET_RUN,
                FLEET_JOBS,
                FLEET_JOB,
                FLEET_COPY,
                FLEET_USE,
                FLEET_RELEASE
            ]
        );
        let flat: Vec<String> = flat_definitions()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(flat, [FLEET_RUN, FLEET_JOBS, FLEET_JOB, FLEET_COPY]);
        assert!(
            flat.iter().all(|n| !n.contains("__")),
            "never a node's name"
        );
        let bytes = serde_json::to_string(&json!({"tools": tools}))
            .unwrap()
            .len();
        assert!(bytes <= 6 * 1024, "the fleet listing is {bytes} bytes");
        eprintln!("fleet listing: {bytes} bytes");
        for t in &tools {
            assert!(FleetTool::from_name(&t.name).is_some());
        }
        assert_eq!(FleetTool::from_name("alpha__Read"), None);
    }

    #[test]
    fn call_targets_are_validated_names() {
        let t = call_target(args(
            json!({"node": "web1", "tool": "Read", "args": {"path": "a"}, "timeoutMs": 5}),
        ))
        .unwrap();
        assert_eq!(t.name, "web1__Read");
        assert_eq!(t.args, json!({"path": "a"}));
        assert_eq!(t.timeout_ms, Some(5));
        let t = call_target(args(json!({"node": "web1", "tool": "Read"}))).unwrap();
        assert_eq!(t.args, json!({}));
        for bad in [
            json!({"node": "Web_1", "tool": "Read"}),
            json!({"node": "web1", "tool": "a__b"}),
            json!({"node": "web1__x", "tool": "Read"}),
            json!({"node": "web1", "tool": "9x"}),
            json!({"node": "web1"}),
            json!({"node": "web1", "tool": "Read", "extra": 1}),
            json!({"node": "web1", "tool": "Read", "args": [1]}),
        ] {
            let e = call_target(args(bad.clone())).unwrap_err();
            let r = e.into_result().expect("a tool error, not a protocol error");
            assert_eq!(r.is_error, Some(true), "{bad}");
        }
    }

    #[test]
    fn unknown_names_are_protocol_errors() {
        let e = FleetError::NoTool("web1__Bash".into())
            .into_result()
            .unwrap_err();
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(
            e.message,
            super::super::result::not_found("web1__Bash").message
        );
    }
}
