//! `paths.resolve`: what the paths of a call name on its node, asked before an
//! operator decides on the call.
//!
//! An agent writes `docs/notes.txt`; what that names is the node's business: a
//! symlink the agent planted may make it `/home/u/.ssh/authorized_keys`. So when a
//! file tool's call waits for approval, the gateway asks the node to resolve its paths
//! the way the file tools will (workspace, every symlink, `..`), shows the result on
//! the question, and sends the approved call with the resolved absolute path, so what
//! the operator read is what runs.

use serde::{Deserialize, Serialize};

/// Most paths one request may ask about.
pub const MAX_PATHS: usize = 8;

/// Params of `paths.resolve`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolveParams {
    /// The paths as the call gives them (relative: the node's workspace).
    pub paths: Vec<String>,
}

/// Result of `paths.resolve`: one entry per asked path, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolveResult {
    pub paths: Vec<Resolved>,
}

/// What one path names on the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    /// The path as asked.
    pub asked: String,
    /// Absolute, every symlink of its existing part resolved and `..` collapsed (when
    /// `resolved`); else the node's lexical resolution, or empty when it has none.
    pub path: String,
    /// `path` comes from the file system itself (its existing part canonicalized).
    pub resolved: bool,
    /// Something stands at `path` now.
    pub exists: bool,
    /// What stands there: `file`, `dir`, `symlink` (dangling) or `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `kind: symlink`: where the (dangling) link points, as it is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Why the node could not resolve it (the file tools would refuse it, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
