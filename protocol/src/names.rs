//! Node ids, tool names and the `{node}__{tool}` namespaced form.
//!
//! The rules are chosen so a namespaced name is unambiguous: a node id can never
//! contain `_`, a tool name can never contain `__`, so splitting on the first `__`
//! always recovers both halves. Both fit in 64 characters, which agent APIs accept.

use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// Separator between node id and tool name.
pub const NAMESPACE_SEPARATOR: &str = "__";
/// Longest node id.
pub const MAX_NODE_ID_LEN: usize = 32;
/// Longest tool name.
pub const MAX_TOOL_NAME_LEN: usize = 31;
/// Longest namespaced name. Agent APIs cap function names at 64 characters; a 32-character
/// node id with a 31-character tool name would be 65, so that one combination is refused.
pub const MAX_NAMESPACED_LEN: usize = 64;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    #[error("node id {0:?} is invalid: use 1-32 characters of a-z, 0-9 and '-', starting with a letter or digit")]
    NodeId(String),
    #[error("tool name {0:?} is invalid: use 1-31 characters of A-Z, a-z, 0-9 and '_', starting with a letter, never containing '__'")]
    ToolName(String),
    #[error("{0:?} is not a namespaced tool name: expected {{node}}__{{tool}}")]
    Namespaced(String),
    #[error("namespaced name {0:?} is longer than 64 characters")]
    TooLong(String),
}

/// A validated node id (`^[a-z0-9][a-z0-9-]{0,31}$`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct NodeId(String);

impl NodeId {
    pub fn parse(s: &str) -> Result<NodeId, NameError> {
        let ok = !s.is_empty()
            && s.len() <= MAX_NODE_ID_LEN
            && s.bytes()
                .enumerate()
                .all(|(i, b)| b.is_ascii_lowercase() || b.is_ascii_digit() || (i > 0 && b == b'-'));
        if ok {
            Ok(NodeId(s.to_owned()))
        } else {
            Err(NameError::NodeId(s.to_owned()))
        }
    }

    /// Derives a node id from a host name: lower-cased, every other character mapped
    /// to `-`, leading dashes dropped, cut to 32 characters. Falls back to `node`.
    pub fn from_hostname(host: &str) -> NodeId {
        let mapped: String = host
            .chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_lowercase() || c.is_ascii_digit() {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let trimmed: String = mapped
            .trim_start_matches('-')
            .chars()
            .take(MAX_NODE_ID_LEN)
            .collect();
        NodeId::parse(&trimmed).unwrap_or_else(|_| NodeId("node".to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for NodeId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        NodeId::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::borrow::Borrow<str> for NodeId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for NodeId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A validated tool name (`^[A-Za-z][A-Za-z0-9_]{0,30}$`, no `__`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ToolName(String);

impl ToolName {
    pub fn parse(s: &str) -> Result<ToolName, NameError> {
        let bytes = s.as_bytes();
        let ok = !bytes.is_empty()
            && bytes.len() <= MAX_TOOL_NAME_LEN
            && bytes[0].is_ascii_alphabetic()
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
            && !s.contains(NAMESPACE_SEPARATOR);
        if ok {
            Ok(ToolName(s.to_owned()))
        } else {
            Err(NameError::ToolName(s.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ToolName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ToolName::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `{node}__{tool}`, split on the first `__`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NamespacedName {
    pub node: NodeId,
    pub tool: ToolName,
}

impl NamespacedName {
    pub fn new(node: NodeId, tool: ToolName) -> Self {
        NamespacedName { node, tool }
    }

    pub fn parse(s: &str) -> Result<NamespacedName, NameError> {
        if s.len() > MAX_NAMESPACED_LEN {
            return Err(NameError::TooLong(s.chars().take(80).collect()));
        }
        let (node, tool) = s
            .split_once(NAMESPACE_SEPARATOR)
            .ok_or_else(|| NameError::Namespaced(s.to_owned()))?;
        Ok(NamespacedName {
            node: NodeId::parse(node)?,
            tool: ToolName::parse(tool)?,
        })
    }

    /// Formats `{node}__{tool}` without building a `NamespacedName`.
    pub fn join(node: &str, tool: &str) -> String {
        let mut s = String::with_capacity(node.len() + 2 + tool.len());
        s.push_str(node);
        s.push_str(NAMESPACE_SEPARATOR);
        s.push_str(tool);
        s
    }
}

impl fmt::Display for NamespacedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.node, NAMESPACE_SEPARATOR, self.tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids() {
        for ok in ["laptop", "a", "0", "build-box-2", &"a".repeat(32)] {
            assert!(NodeId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-lead",
            "Laptop",
            "my_box",
            "my.box",
            "a b",
            &"a".repeat(33),
            "é",
        ] {
            assert!(NodeId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tool_names() {
        for ok in [
            "Bash",
            "net_diagnose",
            "a",
            "X9",
            &format!("A{}", "b".repeat(30)),
        ] {
            assert!(ToolName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "9lives",
            "_x",
            "a__b",
            "a-b",
            "a.b",
            &format!("A{}", "b".repeat(31)),
        ] {
            assert!(ToolName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn namespaced_splits_on_first_separator() {
        let n = NamespacedName::parse("laptop__net_diagnose").unwrap();
        assert_eq!(n.node.as_str(), "laptop");
        assert_eq!(n.tool.as_str(), "net_diagnose");
        assert_eq!(n.to_string(), "laptop__net_diagnose");
        // A tool name may not hold `__`, so the remainder after the first split is refused.
        assert!(NamespacedName::parse("laptop__a__b").is_err());
        assert!(NamespacedName::parse("laptop").is_err());
        assert!(NamespacedName::parse("__Bash").is_err());
        assert!(NamespacedName::parse("laptop__").is_err());
        let longest = format!("{}__A{}", "a".repeat(32), "b".repeat(29));
        assert_eq!(longest.len(), 64);
        assert!(NamespacedName::parse(&longest).is_ok());
        let too_long = format!("{}__A{}", "a".repeat(32), "b".repeat(30));
        assert_eq!(
            NamespacedName::parse(&too_long),
            Err(NameError::TooLong(too_long.clone()))
        );
    }

    #[test]
    fn hostname_mapping() {
        assert_eq!(
            NodeId::from_hostname("My-Laptop.local").as_str(),
            "my-laptop-local"
        );
        assert_eq!(NodeId::from_hostname("--x_y").as_str(), "x-y");
        assert_eq!(NodeId::from_hostname("").as_str(), "node");
        assert_eq!(NodeId::from_hostname(&"h".repeat(80)).as_str().len(), 32);
    }

    #[test]
    fn serde_validates() {
        assert!(serde_json::from_str::<NodeId>("\"ok-1\"").is_ok());
        assert!(serde_json::from_str::<NodeId>("\"Not_Ok\"").is_err());
        assert!(serde_json::from_str::<ToolName>("\"a__b\"").is_err());
    }
}
