//! The handshake: `challenge` → `connect` → `hello-ok`.
//!
//! Nothing else is accepted on a connection until it completes, so everything a peer
//! must prove or declare (protocol range, role, credential, and for nodes their tools and
//! runtime) travels in the one `connect` request.

use crate::limits::Limits;
use crate::tool::ToolDef;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which side of the gateway a peer is on. Must match the endpoint it dialled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Node,
    Agent,
}

/// How a node wants to be used (from the reference's host roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostRole {
    /// A general-purpose host offering the standard tool set.
    #[default]
    Execution,
    /// A host kept for specific tools; never the primary execution host.
    Specialized,
}

/// Payload of the server's first frame, the `challenge` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub nonce: String,
}

/// The credential in `connect`. `nonce` echoes the challenge, binding the connect to
/// this connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    pub token: String,
    pub nonce: String,
}

/// Facts about the node's host. Environment variables are reported by name only.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    /// `linux`, `macos` or `windows`.
    pub host_os: String,
    pub host_arch: String,
    #[serde(default)]
    pub host_env: Vec<String>,
    #[serde(default)]
    pub host_bin_status: BTreeMap<String, bool>,
    #[serde(default)]
    pub host_bin_status_updated_at: u64,
    /// Present only when the node's login profile differs from the baseline it
    /// recorded at enrollment (or at its last `--accept-login-profile`). Older nodes
    /// never send it; older gateways ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_profile: Option<Box<LoginProfileChange>>,
    /// What the node reports about its host (self-reported; see
    /// [`crate::inventory`]), refreshed on every `node.probe`. Absent from older nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Box<crate::inventory::Facts>>,
}

/// Most entries of [`LoginProfileChange::changed`] a gateway keeps.
pub const MAX_LOGIN_PROFILE_CHANGES: usize = 64;
/// Longest entry of [`LoginProfileChange::changed`] a gateway keeps, in bytes.
pub const MAX_LOGIN_PROFILE_NAME: usize = 1024;

/// A node's report that the files its login shell reads (or `BASH_ENV`/`ENV`) are not
/// what they were when it recorded its baseline: whatever changed there runs before
/// every command of its Bash tool. Text from a node: untrusted, escape before printing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginProfileChange {
    /// What differs, as the node names it: `~/.profile`, `/etc/profile`, `$BASH_ENV`.
    pub changed: Vec<String>,
    /// When the baseline was recorded (ms since the epoch; 0 when unknown).
    #[serde(default)]
    pub since: u64,
    /// When the node last compared (ms since the epoch).
    #[serde(default)]
    pub checked_at: u64,
}

impl LoginProfileChange {
    /// This report cut to [`MAX_LOGIN_PROFILE_CHANGES`] entries of at most
    /// [`MAX_LOGIN_PROFILE_NAME`] bytes each, what a gateway keeps of it.
    pub fn bounded(mut self) -> LoginProfileChange {
        self.changed.truncate(MAX_LOGIN_PROFILE_CHANGES);
        for name in &mut self.changed {
            truncate_on_char(name, MAX_LOGIN_PROFILE_NAME);
        }
        self
    }
}

/// Cuts `text` to at most `max` bytes, on a character boundary.
pub(crate) fn truncate_on_char(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

/// What a node declares about itself in `connect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// Validated by the gateway (see `NodeId`), so the error can name the problem.
    pub id: String,
    pub tools: Vec<ToolDef>,
    /// Every capability id the node's tools declare.
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub host_role: HostRole,
    pub runtime: Runtime,
    /// Random, fixed for the life of the node process: tells the gateway whether a
    /// reconnecting node is the same process (which still knows its calls and events)
    /// or a restarted one. Absent from older nodes: then never the same.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance: String,
    /// The node journals its calls in its data directory: a restarted process of the
    /// same node answers `tool.invoke` with `resume: true` for the calls the previous
    /// process journaled (the kept result, the re-adopted command's result when it
    /// ends, or an error saying it was lost), so the gateway may ask it again instead
    /// of failing the call. Absent (false) from nodes that keep no journal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub journal: bool,
}

/// Who the client is, for logs and `gsv nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientInfo {
    pub name: String,
    pub version: String,
}

/// Longest `client.version` a gateway keeps, in bytes.
pub const MAX_CLIENT_VERSION: usize = 64;

impl ClientInfo {
    /// The version cut to [`MAX_CLIENT_VERSION`] bytes: what a gateway keeps of it.
    pub fn bounded_version(&self) -> String {
        let mut v = self.version.clone();
        truncate_on_char(&mut v, MAX_CLIENT_VERSION);
        v
    }
}

/// Params of the `connect` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectParams {
    pub min_protocol: u32,
    pub max_protocol: u32,
    pub role: Role,
    pub auth: Auth,
    #[serde(default)]
    pub client: ClientInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeInfo>,
    /// A second connection that carries bulk work only (a file transfer's chunks),
    /// served below calls; absent on an ordinary connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<LaneParams>,
}

/// `connect.lane`: what a bulk lane is for.
///
/// An agent's bulk lane is an ordinary agent connection that the gateway serves on
/// threads below calls (`gsv cp` opens its connection this way). A node's bulk lane
/// carries only the binary frames (chunks) of the transfers the node says, in its
/// `transfer.open` answer, go on it; it joins the node's ordinary connection of the
/// same `instance` and ends with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneParams {
    pub kind: LaneKind,
    /// A node's lane: the `instance` of the ordinary connection it joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// The kinds of lane (only one so far).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LaneKind {
    Bulk,
}

/// Result of a successful `connect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloOk {
    /// Always `"hello-ok"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub protocol: u32,
    pub conn_id: String,
    pub limits: Limits,
    /// Only when a node enrolled with a one-time join token: the long-lived node
    /// credential it must use from now on (and store; it is shown once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// The gateway's gsv version. Empty (absent on the wire) from older gateways.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gateway_version: String,
}

impl HelloOk {
    pub fn new(protocol: u32, conn_id: String, limits: Limits) -> Self {
        HelloOk {
            kind: "hello-ok".to_owned(),
            protocol,
            conn_id,
            limits,
            credential: None,
            gateway_version: String::new(),
        }
    }
}

/// Picks the highest version in both `[min, max]` and the range this build supports.
pub fn negotiate(min: u32, max: u32) -> Option<u32> {
    let hi = max.min(crate::PROTOCOL_VERSION);
    let lo = min.max(crate::MIN_PROTOCOL_VERSION);
    (lo <= hi).then_some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_profile_is_optional_and_bounded() {
        let old: Runtime = serde_json::from_str(r#"{"hostOs":"linux","hostArch":"x86_64"}"#)
            .expect("a runtime without loginProfile decodes");
        assert_eq!(old.login_profile, None);
        let text = serde_json::to_string(&old).expect("encode");
        assert!(!text.contains("loginProfile"), "{text}");
        let new: Runtime = serde_json::from_str(
            r#"{"hostOs":"linux","hostArch":"x86_64","loginProfile":{"changed":["~/.profile"],"since":5}}"#,
        )
        .expect("decode");
        let lp = new.login_profile.expect("loginProfile");
        assert_eq!(lp.changed, ["~/.profile"]);
        assert_eq!((lp.since, lp.checked_at), (5, 0));
        let big = LoginProfileChange {
            changed: (0..100).map(|_| "é".repeat(600)).collect(),
            since: 1,
            checked_at: 2,
        }
        .bounded();
        assert_eq!(big.changed.len(), MAX_LOGIN_PROFILE_CHANGES);
        assert!(big
            .changed
            .iter()
            .all(|n| n.len() <= MAX_LOGIN_PROFILE_NAME));
    }

    #[test]
    fn client_versions_are_bounded_and_hello_ok_names_the_gateway_version() {
        let c = ClientInfo {
            name: "n".into(),
            version: "é".repeat(100),
        };
        let v = c.bounded_version();
        assert!(v.len() <= MAX_CLIENT_VERSION && v.chars().all(|ch| ch == 'é'));
        let mut hello = HelloOk::new(1, "c".into(), Limits::standard(1, 1));
        let text = serde_json::to_string(&hello).expect("encode");
        assert!(!text.contains("gatewayVersion"), "{text}");
        hello.gateway_version = "0.1.0".into();
        let text = serde_json::to_string(&hello).expect("encode");
        assert!(text.contains(r#""gatewayVersion":"0.1.0""#), "{text}");
        let old: HelloOk = serde_json::from_str(&text.replace(r#","gatewayVersion":"0.1.0""#, ""))
            .expect("an older hello-ok decodes");
        assert_eq!(old.gateway_version, "");
    }

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(1, 1), Some(1));
        assert_eq!(negotiate(1, 9), Some(crate::PROTOCOL_VERSION));
        assert_eq!(negotiate(2, 9), None);
        assert_eq!(negotiate(0, 0), None);
        assert_eq!(negotiate(3, 1), None);
    }
}
