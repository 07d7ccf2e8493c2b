//! Request methods and their params and results.
//!
//! `Method` is a closed enum: a `req` frame's method string is decoded into it once, and
//! every handler matches on the enum. Params stay raw JSON until the handler for that
//! method decodes them into the struct below, so a bad param is answered with the
//! request's own id.

use crate::handshake::{HostRole, LoginProfileChange, Runtime};
use crate::offer::UnacceptedOffer;
use crate::tool::ToolAnnotations;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;

/// Every request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Method {
    /// Client → gateway, the handshake request.
    #[serde(rename = "connect")]
    Connect,
    /// Agent → gateway: tools this agent may call.
    #[serde(rename = "tools.list")]
    ToolsList,
    /// Agent → gateway: call a namespaced tool.
    #[serde(rename = "tools.call")]
    ToolsCall,
    /// Agent → gateway: run one tool on every node a selector picks
    /// ([`crate::fanout`]).
    #[serde(rename = "tools.fanout")]
    ToolsFanout,
    /// Agent → gateway: connected and known nodes.
    #[serde(rename = "nodes.list")]
    NodesList,
    /// Operator (admin token) → gateway: approval requests.
    #[serde(rename = "approvals.list")]
    ApprovalsList,
    /// Operator (admin token) → gateway: approve or deny one request.
    #[serde(rename = "approvals.decide")]
    ApprovalsDecide,
    /// Agent → gateway: one node's tools, capabilities and version.
    #[serde(rename = "nodes.show")]
    NodesShow,
    /// Operator (admin token) → gateway: accept what a node offers now.
    #[serde(rename = "nodes.acceptTools")]
    NodesAcceptTools,
    /// Operator (admin token) → gateway: set or remove a node's labels.
    #[serde(rename = "nodes.label")]
    NodesLabel,
    /// Agent → gateway: the caller's jobs (every token's for an admin token).
    #[serde(rename = "jobs.list")]
    JobsList,
    /// Agent → gateway: one job with its outcome.
    #[serde(rename = "jobs.get")]
    JobsGet,
    /// Agent → gateway: cancel a running job.
    #[serde(rename = "jobs.cancel")]
    JobsCancel,
    /// Gateway → node: run one tool.
    #[serde(rename = "tool.invoke")]
    ToolInvoke,
    /// Gateway → node: re-probe binaries on the node's PATH.
    #[serde(rename = "node.probe")]
    NodeProbe,
    /// Gateway → node: end the process sessions of these (revoked) tokens.
    #[serde(rename = "sessions.end")]
    SessionsEnd,
    /// Agent → gateway → node: open a file transfer ([`crate::transfer`]).
    #[serde(rename = "transfer.open")]
    TransferOpen,
    /// Agent → gateway → node: every byte of a `put` was sent; check and place it.
    #[serde(rename = "transfer.finish")]
    TransferFinish,
    /// Agent → gateway → node: end a transfer early.
    #[serde(rename = "transfer.cancel")]
    TransferCancel,
    /// Agent → gateway: bytes of a `get` written (relayed to the node as the event).
    #[serde(rename = "transfer.credit")]
    TransferCredit,
    /// Agent → gateway: copy a file from one node to another (or within one node).
    #[serde(rename = "transfer.copy")]
    TransferCopy,
    /// Agent → gateway → node: list a directory tree for `gsv cp -r`
    /// ([`crate::transfer::tree`]).
    #[serde(rename = "transfer.list")]
    TransferList,
    /// Agent → gateway → node: make a tree's directories or symlinks, or settle its
    /// directories' modes and mtimes.
    #[serde(rename = "transfer.place")]
    TransferPlace,
    /// Gateway → node: what the paths of a call waiting for approval name on the node
    /// ([`crate::resolve`]), for the operator's question.
    #[serde(rename = "paths.resolve")]
    PathsResolve,
    /// A method this build does not know.
    #[serde(other)]
    Unknown,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Connect => "connect",
            Method::ToolsList => "tools.list",
            Method::ToolsCall => "tools.call",
            Method::ToolsFanout => "tools.fanout",
            Method::NodesList => "nodes.list",
            Method::ApprovalsList => "approvals.list",
            Method::ApprovalsDecide => "approvals.decide",
            Method::NodesShow => "nodes.show",
            Method::NodesAcceptTools => "nodes.acceptTools",
            Method::NodesLabel => "nodes.label",
            Method::JobsList => "jobs.list",
            Method::JobsGet => "jobs.get",
            Method::JobsCancel => "jobs.cancel",
            Method::ToolInvoke => "tool.invoke",
            Method::NodeProbe => "node.probe",
            Method::SessionsEnd => "sessions.end",
            Method::TransferOpen => "transfer.open",
            Method::TransferFinish => "transfer.finish",
            Method::TransferCancel => "transfer.cancel",
            Method::TransferCredit => "transfer.credit",
            Method::TransferCopy => "transfer.copy",
            Method::TransferList => "transfer.list",
            Method::TransferPlace => "transfer.place",
            Method::PathsResolve => "paths.resolve",
            Method::Unknown => "unknown",
        }
    }
}

/// Params of `tools.call`. `args` stays raw: the gateway validates it and forwards the
/// exact bytes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCallParams {
    pub name: String,
    #[serde(default = "empty_object")]
    pub args: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Answer at once with a job id (`AsyncCallResult`) and keep the call's outcome
    /// in that job (`jobs.get`), whether or not the caller stays.
    #[serde(default, rename = "async", skip_serializing_if = "std::ops::Not::not")]
    pub is_async: bool,
}

pub(crate) fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).expect("`{}` is valid JSON")
}

/// Params of `tool.invoke`, as the gateway sends them to a node. Borrowed for encoding.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInvokeOut<'a> {
    pub tool: &'a str,
    pub args: &'a RawValue,
    pub timeout_ms: u64,
    /// The id of the approval request an operator approved for this exact call, when
    /// the call needed one (policy `confirm`, or the node asked with
    /// `approval_required`). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<&'a str>,
    /// Set when the gateway asks again, on a new connection of the same node process,
    /// for a call it first sent on a connection that dropped: the node answers from
    /// what it remembers of that id (the running call's result when it ends, or the
    /// kept result) and runs the call only if that id never reached it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
    /// Who the call is made for. Process sessions the call starts belong to this token;
    /// Process acts only on the caller's own sessions unless the caller is an operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<InvokeCallerOut<'a>>,
}

/// [`InvokeCaller`] as the gateway writes it (borrowed: no copy per call).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeCallerOut<'a> {
    pub token_id: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
}

/// Who a call is made for, as a node needs to know it (`tool.invoke.caller`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeCaller {
    /// The caller's token id (public, like the ids `gsv token list` shows).
    pub token_id: String,
    /// The admin token: an operator sees and acts on every session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
}

/// Params of `tool.invoke`, as the node decodes them.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInvokeParams {
    pub tool: String,
    #[serde(default)]
    pub args: Value,
    pub timeout_ms: u64,
    /// See [`ToolInvokeOut::approval`].
    #[serde(default)]
    pub approval: Option<String>,
    /// See [`ToolInvokeOut::resume`].
    #[serde(default)]
    pub resume: bool,
    /// See [`ToolInvokeOut::caller`].
    #[serde(default)]
    pub caller: Option<InvokeCaller>,
}

/// Params of `sessions.end`: the tokens whose process sessions the node ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsEndParams {
    pub token_ids: Vec<String>,
}

/// Result of `sessions.end`: how many running sessions were told to stop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsEndResult {
    pub ended: u64,
}

/// Params of `node.probe`. An empty list re-probes everything the node tracks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeParams {
    #[serde(default)]
    pub bins: Vec<String>,
}

/// Result of `node.probe`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeResult {
    pub host_bin_status: BTreeMap<String, bool>,
    pub host_bin_status_updated_at: u64,
    /// The node compared its login profile with its baseline again: present when they
    /// differ (see [`Runtime::login_profile`]), absent when they match or from older
    /// nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_profile: Option<Box<LoginProfileChange>>,
    /// The node's facts as it reads them now (self-reported); they replace the ones
    /// the gateway shows for it. Absent from older nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Box<crate::inventory::Facts>>,
}

/// One tool as an agent sees it (`tools.list`, `GET /v1/tools`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    /// Namespaced: `{node}__{tool}`.
    pub name: String,
    pub node: String,
    pub tool: String,
    pub description: String,
    pub input_schema: Value,
    pub capability: String,
    pub annotations: ToolAnnotations,
    /// Whether a call needs an operator's approval (the tool's approval posture, as
    /// the node declares it); absent when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_approval: bool,
    /// Whether the node is connected now.
    pub online: bool,
}

/// Result of `tools.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsListResult {
    pub tools: Vec<ToolEntry>,
}

/// One node as `nodes.list` and `GET /v1/nodes` describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    pub id: String,
    pub online: bool,
    /// When the current connection was made (online) or when it closed (offline).
    pub since: u64,
    pub host_role: HostRole,
    pub capabilities: Vec<String>,
    pub tools: Vec<String>,
    pub runtime: Runtime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_addr: Option<String>,
    /// The gsv version the node reported in `connect` (`client.version`); empty when
    /// it sent none. Absent from older gateways.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// What the node offers that no operator has accepted yet. Absent when there is
    /// nothing, and from older gateways.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unaccepted: Option<UnacceptedOffer>,
    /// The labels an operator gave the node (never the node itself). Absent when it
    /// has none, and from older gateways.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: crate::inventory::Labels,
    /// Cluster mode: the gateway replica the node is connected to (the one that
    /// answered, for an offline node). Absent from a gateway on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

/// Params of `nodes.list` (also the query of `GET /v1/nodes`): `{}` lists every node
/// the caller may see; `select` keeps those the selector matches (see
/// [`crate::selector`]). A selector only narrows what the caller may see.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesListParams {
    /// A selector as text (`env=prod,fact.os=linux`); parsed by the gateway, so a bad
    /// one is answered with the term that is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
}

/// Body of `POST /v1/nodes/{id}/labels` (the id is in the path): labels to set (each
/// replacing the key's value) and keys to remove. Removing a key the node does not
/// carry is not an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelsChange {
    #[serde(default)]
    pub set: crate::inventory::Labels,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// Params of `nodes.label`: the node id and the change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodesLabelParams {
    pub id: String,
    #[serde(default)]
    pub set: crate::inventory::Labels,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// Result of `nodes.label` and `POST /v1/nodes/{id}/labels`: the node's labels now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLabelsResult {
    pub id: String,
    pub labels: crate::inventory::Labels,
}

/// Result of `nodes.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesListResult {
    pub nodes: Vec<NodeSummary>,
    /// The gateway's own gsv version, to compare with each node's `version`. Empty
    /// from older gateways.
    #[serde(default)]
    pub gateway_version: String,
}

/// An operator's answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approve,
    Deny,
}

/// One approval request as stored and shown (`approvals.list`, `approvals.decide`,
/// `approval.requested`, `GET /v1/approvals`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    pub id: String,
    pub agent: String,
    pub token_id: String,
    pub node: String,
    pub tool: String,
    pub args_hash: String,
    /// What the operator is asked, e.g. `laptop__Bash: rm -r build/`.
    pub summary: String,
    /// Why approval is needed (the policy's confirm glob, a tool's own rule).
    pub reason: String,
    /// What the call would do, as the node's tool said before it ran (its dry-run
    /// plan: e.g. the packages an install would add). Text from the node: escape it
    /// wherever a person reads it. Absent when the tool gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// A fan-out's one request: every node it will run on (in id order); `node` is
    /// then the fan-out's selector. Absent for a single call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    pub created_at: u64,
    pub expires_at: u64,
    /// `pending`, `approved`, `denied` or `expired`.
    pub state: String,
    pub decided_at: Option<u64>,
    pub decided_by: Option<String>,
    /// Every argument of the call, as canonical JSON text (object keys sorted: what
    /// `argsHash` is the SHA-256 of), while the request is pending and the call waits.
    /// Absent once decided, after a gateway restart, and when over 64 KiB (the summary
    /// then names every argument, long strings cut visibly). Text from an agent: escape
    /// it wherever a person reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<String>,
}

/// The page size of `approvals.list` when none is asked for.
pub const DEFAULT_APPROVALS_PAGE: u32 = 50;

/// Params of `approvals.list` (also the query of `GET /v1/approvals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApprovalsListParams {
    /// Every state, not only pending.
    pub all: bool,
    /// Page size (the gateway clamps it to 1–500; default 50).
    pub limit: u32,
    /// Requests skipped, newest first.
    pub offset: u32,
}

impl Default for ApprovalsListParams {
    fn default() -> Self {
        ApprovalsListParams {
            all: false,
            limit: DEFAULT_APPROVALS_PAGE,
            offset: 0,
        }
    }
}

/// Result of `approvals.list`: one page of approval requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalsListResult {
    pub approvals: Vec<ApprovalRequest>,
    /// How many requests match the query in all.
    pub total: u64,
    /// How many were skipped before this page.
    pub offset: u64,
    /// How many matching requests each agent has, fewest first.
    pub by_agent: Vec<AgentCount>,
}

/// One agent's number of matching approval requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCount {
    pub agent: String,
    pub count: u64,
}

/// Params of `approvals.decide`. The result is the updated [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsDecideParams {
    pub decision: Verdict,
    /// The approval request's id.
    pub id: String,
}

/// Body of `POST /v1/approvals/{id}` (the id is in the path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    pub decision: Verdict,
}

/// Params of a method that takes none (`tools.list`, `nodes.list`): `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoParams {}

/// Body of `GET /v1/sessions`: the background process sessions of the nodes asked,
/// and the nodes whose answer failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionsPage {
    pub errors: Vec<NodeFailure>,
    /// Items of the Process tool's `list`, each with `node` added.
    pub sessions: Vec<Value>,
}

/// A node that could not answer `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFailure {
    /// The tool's error text, or the protocol error as `code: message`.
    pub error: String,
    pub node: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_params_round_trip() {
        let p: ApprovalsListParams = serde_json::from_str("{}").unwrap();
        assert_eq!(p, ApprovalsListParams::default());
        let text = serde_json::to_string(&ApprovalsDecideParams {
            id: "ab12".into(),
            decision: Verdict::Approve,
        })
        .unwrap();
        assert_eq!(text, r#"{"decision":"approve","id":"ab12"}"#);
    }

    #[test]
    fn unknown_methods_decode_as_unknown() {
        let m: Method = serde_json::from_str("\"tools.destroy\"").unwrap();
        assert_eq!(m, Method::Unknown);
        let m: Method = serde_json::from_str("\"tools.call\"").unwrap();
        assert_eq!(m, Method::ToolsCall);
    }

    #[test]
    fn call_params_keep_args_verbatim() {
        let p: ToolsCallParams =
            serde_json::from_str(r#"{"name":"a__B","args":{"x": [1, 2]}}"#).unwrap();
        assert_eq!(p.args.get(), r#"{"x": [1, 2]}"#);
        let p: ToolsCallParams = serde_json::from_str(r#"{"name":"a__B"}"#).unwrap();
        assert_eq!(p.args.get(), "{}");
    }

    #[test]
    fn invoke_approval_is_optional_on_the_wire() {
        let args = RawValue::from_string("{}".into()).unwrap();
        let mut out = ToolInvokeOut {
            tool: "Bash",
            args: &args,
            timeout_ms: 5,
            approval: None,
            resume: false,
            caller: None,
        };
        let text = serde_json::to_string(&out).unwrap();
        assert_eq!(text, r#"{"tool":"Bash","args":{},"timeoutMs":5}"#);
        let p: ToolInvokeParams = serde_json::from_str(&text).unwrap();
        assert_eq!(p.approval, None);
        out.approval = Some("ab12");
        let p: ToolInvokeParams =
            serde_json::from_str(&serde_json::to_string(&out).unwrap()).unwrap();
        assert_eq!(p.approval.as_deref(), Some("ab12"));
        assert!(!p.resume);
        out.resume = true;
        let text = serde_json::to_string(&out).unwrap();
        assert!(text.ends_with(r#","resume":true}"#), "{text}");
        let p: ToolInvokeParams = serde_json::from_str(&text).unwrap();
        assert!(p.resume);
        assert_eq!(p.caller, None);
        let caller = InvokeCaller {
            token_id: "0123456789ab".into(),
            operator: false,
        };
        out.caller = Some(InvokeCallerOut {
            token_id: &caller.token_id,
            operator: caller.operator,
        });
        let text = serde_json::to_string(&out).unwrap();
        assert!(
            text.contains(r#""caller":{"tokenId":"0123456789ab"}"#),
            "{text}"
        );
        let p: ToolInvokeParams = serde_json::from_str(&text).unwrap();
        assert_eq!(p.caller, Some(caller));
    }
}
