//! What a node offers (its tools and capabilities) and what an operator accepted.
//!
//! The gateway remembers, per node id, the tools (each with its capability) and the
//! capabilities it accepted: everything at the node id's first registration (trust on
//! first use), and whatever an operator accepts later (`nodes.acceptTools`). A node
//! that comes back offering more is shown with [`UnacceptedOffer`] in `nodes.list`
//! and `nodes.show`; under `gsv gateway --pin-tools` its new tools stay hidden from
//! every agent until accepted. Tool names and descriptions come from the node:
//! untrusted, escape them before printing.

use crate::method::NodeSummary;
use serde::{Deserialize, Serialize};

/// Tools and capabilities a node offers that no operator accepted
/// (`NodeSummary.unaccepted`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnacceptedOffer {
    /// Bare tool names, sorted: tools the node did not offer when its offer was last
    /// accepted, or offers now with another capability.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Capability ids, sorted, the node did not declare when its offer was last
    /// accepted.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// The gateway runs with `--pin-tools`: these tools are hidden from every agent
    /// (absent from the lists, `not_found` when called) until accepted.
    #[serde(default)]
    pub hidden: bool,
}

impl UnacceptedOffer {
    /// Whether there is nothing unaccepted.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.capabilities.is_empty()
    }
}

/// Params of `nodes.show` and `nodes.acceptTools`: the node id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeIdParams {
    pub id: String,
}

/// One tool of a node as `nodes.show` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTool {
    /// The bare tool name.
    pub name: String,
    pub capability: String,
    #[serde(default)]
    pub description: String,
    /// Not accepted yet (see [`UnacceptedOffer::tools`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unaccepted: bool,
    /// Hidden from agents until accepted (`--pin-tools`); only operators see such
    /// tools here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

/// Result of `nodes.show` (also `GET /v1/nodes/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDetail {
    /// The node as `nodes.list` shows it to the same caller.
    pub node: NodeSummary,
    /// Its tools the caller may see, sorted by name, with their capability and
    /// description.
    pub tools: Vec<NodeTool>,
    /// The gateway's own gsv version.
    #[serde(default)]
    pub gateway_version: String,
}

/// Result of `nodes.acceptTools` (also `POST /v1/nodes/{id}/accept-tools`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceptToolsResult {
    pub node: String,
    /// What this acceptance added: the node's unaccepted tools and capabilities
    /// (empty when there was nothing to accept).
    pub accepted: UnacceptedOffer,
    /// Every tool the node offers now, all accepted.
    pub tools: Vec<String>,
    /// Every capability the node declares now, all accepted.
    pub capabilities: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_peers_still_parse_node_summaries() {
        // A summary from a gateway before versions and pinning.
        let old = r#"{"id":"lab","online":true,"since":1,"hostRole":"execution","capabilities":[],"tools":["Echo"],"runtime":{"hostOs":"linux","hostArch":"x86_64"}}"#;
        let s: NodeSummary = serde_json::from_str(old).expect("decodes");
        assert_eq!((s.version.as_str(), s.unaccepted.as_ref()), ("", None));
        let text = serde_json::to_string(&s).expect("encode");
        assert!(
            !text.contains("version") && !text.contains("unaccepted"),
            "{text}"
        );
        let list: crate::method::NodesListResult =
            serde_json::from_str(&format!(r#"{{"nodes":[{old}]}}"#)).expect("decodes");
        assert_eq!(list.gateway_version, "");
    }

    #[test]
    fn tool_flags_are_written_only_when_set() {
        let t = NodeTool {
            name: "Echo".into(),
            capability: "diagnostics.echo".into(),
            description: String::new(),
            unaccepted: false,
            hidden: false,
        };
        let text = serde_json::to_string(&t).expect("encode");
        assert_eq!(
            text,
            r#"{"name":"Echo","capability":"diagnostics.echo","description":""}"#
        );
        let back: NodeTool = serde_json::from_str(
            r#"{"name":"Echo","capability":"diagnostics.echo","unaccepted":true,"hidden":true}"#,
        )
        .expect("decode");
        assert!(back.unaccepted && back.hidden);
    }
}
