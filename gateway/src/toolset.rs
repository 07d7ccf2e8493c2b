//! Tool sets declared by nodes, validated once and interned.
//!
//! Most nodes of a fleet declare the exact same tools. The gateway compiles each
//! distinct set (names, capabilities, JSON Schema validators) once and shares it by
//! `Arc` between every node that declares it, keyed by a hash of its canonical JSON:
//! a node then costs one pointer for its tools, not a copy of twelve schemas.

pub(crate) mod counts;
mod error;

pub use error::{ArgsError, DeclarationError};

use dashmap::DashMap;
use gsv_protocol::capability::{self, CapabilityError};
use gsv_protocol::names::{NamespacedName, MAX_NAMESPACED_LEN};
use gsv_protocol::tool_class::ToolClasses;
use gsv_protocol::{CapabilityId, NodeId, ToolDef, ToolName};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::sync::{Arc, Weak};

/// One validated tool with its compiled argument validator.
pub struct ToolSpec {
    pub def: ToolDef,
    /// A built-in id, or a third party's (`x.<vendor>.<name>`), which the gateway
    /// treats as opaque.
    pub capability: CapabilityId,
    /// What the tool can do, from its capability (`class:` entries of a policy).
    pub classes: ToolClasses,
    validator: jsonschema::Validator,
    /// The whole-number arguments that are counts ([`counts`]).
    counts: Vec<String>,
    /// About how many bytes its definition takes in an MCP listing, before the node's
    /// name is added (`auto` weighs a listing by this, without building it).
    pub listed_bytes: usize,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.def.name)
            .finish()
    }
}

impl ToolSpec {
    /// Rounds down each whole-number count in `args` given with a fraction
    /// ([`counts`]); whether anything changed.
    pub fn floor_counts(&self, args: &mut Value) -> bool {
        counts::floor(&self.counts, args)
    }

    /// Checks call arguments against the tool's schema; the error names the JSON
    /// pointer of the first failing value.
    pub fn validate_args(&self, args: &Value) -> Result<(), ArgsError> {
        match self.validator.validate(args) {
            Ok(()) => Ok(()),
            Err(e) => {
                let path = e.instance_path().to_string();
                Err(ArgsError {
                    tool: self.def.name.clone(),
                    path: if path.is_empty() {
                        "/".to_owned()
                    } else {
                        path
                    },
                    reason: e.to_string(),
                })
            }
        }
    }
}

/// The tools of one node (shared by every node that declares the same).
#[derive(Debug)]
pub struct ToolSet {
    pub tools: Vec<Arc<ToolSpec>>,
    pub capabilities: Vec<String>,
}

impl ToolSet {
    pub fn get(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.tools.iter().find(|t| t.def.name == name)
    }
}

/// The bytes of `def` as an MCP listing carries it (name twice: as the name and in
/// the title), without the node's name.
fn listed_bytes(def: &ToolDef) -> usize {
    let body = serde_json::json!({
        "description": def.description,
        "inputSchema": def.input_schema,
        "annotations": def.annotations,
    });
    serde_json::to_string(&body).map_or(0, |s| s.len()) + 2 * def.name.len() + 24
}

/// Validates a node's declaration and compiles it.
fn build(
    node: &NodeId,
    defs: Vec<ToolDef>,
    caps: Vec<String>,
) -> Result<ToolSet, DeclarationError> {
    if defs.len() > gsv_protocol::limits::MAX_TOOLS_PER_NODE {
        return Err(DeclarationError::TooManyTools { count: defs.len() });
    }
    let mut declared = HashSet::new();
    for c in &caps {
        capability::check(c).map_err(|e| match e {
            CapabilityError::Unknown(_) => DeclarationError::UnknownCapability {
                capability: c.clone(),
            },
            reason @ CapabilityError::Vendor { .. } => {
                DeclarationError::MalformedCapability { reason }
            }
        })?;
        declared.insert(c.as_str());
    }
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(defs.len());
    for def in defs {
        let name = def.name.clone();
        ToolName::parse(&name).map_err(|reason| DeclarationError::BadToolName {
            tool: name.clone(),
            reason,
        })?;
        if node.as_str().len() + 2 + name.len() > MAX_NAMESPACED_LEN {
            return Err(DeclarationError::NameTooLong {
                full: NamespacedName::join(node.as_str(), &name),
                tool: name,
            });
        }
        if !seen.insert(name.clone()) {
            return Err(DeclarationError::Duplicate { tool: name });
        }
        let capability = capability::check(&def.capability).map_err(|e| match e {
            CapabilityError::Unknown(_) => DeclarationError::ToolUnknownCapability {
                tool: name.clone(),
                capability: def.capability.clone(),
            },
            reason @ CapabilityError::Vendor { .. } => DeclarationError::ToolMalformedCapability {
                tool: name.clone(),
                reason,
            },
        })?;
        if !caps.is_empty() && !declared.contains(def.capability.as_str()) {
            return Err(DeclarationError::CapabilityNotListed {
                tool: name,
                capability: def.capability.clone(),
            });
        }
        if !def.input_schema.is_object() {
            return Err(DeclarationError::SchemaNotObject { tool: name });
        }
        let validator = jsonschema::validator_for(&def.input_schema).map_err(|e| {
            DeclarationError::BadSchema {
                tool: name.clone(),
                reason: e.to_string(),
            }
        })?;
        tools.push(Arc::new(ToolSpec {
            counts: counts::of_schema(&def.input_schema),
            listed_bytes: listed_bytes(&def),
            def,
            classes: ToolClasses::of(&capability),
            capability,
            validator,
        }));
    }
    let mut capabilities = if caps.is_empty() {
        tools
            .iter()
            .map(|t| t.capability.as_str().to_owned())
            .collect()
    } else {
        caps
    };
    capabilities.sort();
    capabilities.dedup();
    Ok(ToolSet {
        tools,
        capabilities,
    })
}

/// Distinct tool sets in use, by hash of their canonical JSON.
#[derive(Default)]
pub struct Interner {
    sets: DashMap<[u8; 32], Weak<ToolSet>>,
}

impl Interner {
    /// Validates and returns the shared set for this declaration, compiling it only if
    /// no live node declares the same. The node id is part of validation (name length)
    /// but not of the key: the key covers exactly what validation reads from the
    /// declaration, plus the namespaced-length check, which only fails for long ids.
    pub fn intern(
        &self,
        node: &NodeId,
        defs: Vec<ToolDef>,
        caps: Vec<String>,
    ) -> Result<Arc<ToolSet>, DeclarationError> {
        let key = {
            let mut h = Sha256::new();
            h.update(serde_json::to_vec(&(&defs, &caps)).unwrap_or_default());
            let digest: [u8; 32] = h.finalize().into();
            digest
        };
        if let Some(set) = self.sets.get(&key).and_then(|w| w.upgrade()) {
            // Same declaration: only the length rule depends on the node id.
            for t in &set.tools {
                if node.as_str().len() + 2 + t.def.name.len() > MAX_NAMESPACED_LEN {
                    return Err(DeclarationError::NameTooLong {
                        full: NamespacedName::join(node.as_str(), &t.def.name),
                        tool: t.def.name.clone(),
                    });
                }
            }
            return Ok(set);
        }
        let set = Arc::new(build(node, defs, caps)?);
        self.sets.insert(key, Arc::downgrade(&set));
        Ok(set)
    }

    /// Drops entries whose sets no node uses any more.
    pub fn sweep(&self) {
        self.sets.retain(|_, w| w.strong_count() > 0);
    }

    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::WireError;
    use gsv_protocol::ErrorCode;
    use serde_json::json;

    fn def(name: &str, cap: &str) -> ToolDef {
        serde_json::from_value(json!({
            "name": name,
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            "capability": cap
        }))
        .unwrap()
    }

    fn node(id: &str) -> NodeId {
        NodeId::parse(id).unwrap()
    }

    #[test]
    fn identical_declarations_share_one_set() {
        let i = Interner::default();
        let a = i
            .intern(&node("a"), vec![def("Read", "filesystem.read")], vec![])
            .unwrap();
        let b = i
            .intern(&node("b"), vec![def("Read", "filesystem.read")], vec![])
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.capabilities, vec!["filesystem.read".to_owned()]);
        drop((a, b));
        i.sweep();
        assert!(i.is_empty());
    }

    #[test]
    fn bad_declarations_are_refused_with_the_tool_named() {
        let i = Interner::default();
        let n = node("a");
        let cases = [
            (vec![def("a__b", "filesystem.read")], vec![]),
            (vec![def("Read", "filesystem.nope")], vec![]),
            (
                vec![
                    def("Read", "filesystem.read"),
                    def("Read", "filesystem.read"),
                ],
                vec![],
            ),
            (
                vec![def("Read", "filesystem.read")],
                vec!["made.up".to_owned()],
            ),
        ];
        for (defs, caps) in cases {
            let e = i.intern(&n, defs, caps).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgs, "{e}");
        }
        let mut bad_schema = def("Read", "filesystem.read");
        bad_schema.input_schema = json!({"type": 12});
        assert!(i.intern(&n, vec![bad_schema], vec![]).is_err());
    }

    #[test]
    fn third_party_capabilities_are_accepted_by_form_and_kept_opaque() {
        let i = Interner::default();
        let n = node("a");
        let set = i
            .intern(
                &n,
                vec![
                    def("Deploy", "x.acme.deploy"),
                    def("Read", "filesystem.read"),
                ],
                vec![],
            )
            .unwrap();
        assert_eq!(set.capabilities, ["filesystem.read", "x.acme.deploy"]);
        assert_eq!(
            set.get("Deploy").unwrap().capability,
            CapabilityId::Vendor("x.acme.deploy".into())
        );
        for bad in ["x.Acme.deploy", "x.acme", "x.acme.deploy.now"] {
            let e = i.intern(&n, vec![def("Deploy", bad)], vec![]).unwrap_err();
            assert!(
                matches!(e, DeclarationError::ToolMalformedCapability { .. }),
                "{bad}: {e}"
            );
            assert_eq!(e.code(), ErrorCode::InvalidArgs);
            assert!(e.to_string().contains("x.<vendor>.<name>"), "{e}");
            let e = i
                .intern(&n, vec![def("Read", "filesystem.read")], vec![bad.into()])
                .unwrap_err();
            assert!(
                matches!(e, DeclarationError::MalformedCapability { .. }),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn argument_errors_carry_the_path() {
        let i = Interner::default();
        let set = i
            .intern(&node("a"), vec![def("Read", "filesystem.read")], vec![])
            .unwrap();
        let spec = set.get("Read").unwrap();
        assert!(spec.validate_args(&json!({"path": "x"})).is_ok());
        let e = spec.validate_args(&json!({"path": 5})).unwrap_err();
        assert_eq!(e.to_shape().details, Some(json!({"path": "/path"})));
        let e = spec.validate_args(&json!({})).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgs);
        assert_eq!(e.path, "/");
    }
}
