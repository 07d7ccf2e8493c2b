//! What a node offers, compared with what was accepted for its node id.
//!
//! A node declares its tools (each with one capability) and capabilities at every
//! `connect`. The gateway keeps, per node id, the offer it accepted (the store's
//! `node_offers` table):
//!
//! - **Trust on first use.** The first registration of a node id is accepted as it is
//!   and audited (`node.tools_accepted`, `firstUse`). Enrolling a node is the
//!   operator's decision to trust it; what it offers then is what was enrolled.
//! - **Later additions are new.** A registration that offers a tool the accepted offer
//!   lacks (or offers it with another capability), or declares a capability it lacks,
//!   is audited (`node.tools_changed`, with the difference) and flagged in `nodes.list`
//!   until an operator accepts it (`gsv nodes accept-tools ID`, audited). Without
//!   `--pin-tools` the new tools are callable at once; with it they are hidden from
//!   every agent (absent from every list, `not_found` when called) until accepted,
//!   while the tools already accepted keep working.
//! - **What disappears is simply gone.** A tool or capability the node no longer
//!   offers leaves the accepted offer at once (and is named in the audited
//!   difference): offering it again later makes it new again.
//!
//! - **A tool's definition is part of what was accepted.** Its description, input
//!   schema, annotations and approval posture are kept as a digest with the accepted
//!   offer: a registration that offers an accepted tool with another definition offers
//!   it anew (flagged, audited, and hidden until accepted under `--pin-tools`), so a
//!   node cannot reword what agents read of a pinned tool, or widen what its schema
//!   lets through, unseen. An offer accepted before gsv kept definitions takes the
//!   definitions of the next registration as accepted (trust on first use again).

mod error;

pub use error::OfferError;

use crate::audit::{AuditEvent, AuditLog};
use crate::registry::{NodeHandle, PendingOffer};
use crate::store::{Offer, Store};
use crate::toolset::ToolSet;
use dashmap::DashMap;
use gsv_protocol::offer::UnacceptedOffer;
use gsv_protocol::NodeId;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `accepted_by` of an offer accepted at the node id's first registration.
pub const FIRST_USE: &str = "first-use";

/// What `set` offers.
pub fn offer_of(set: &ToolSet) -> Offer {
    Offer {
        tools: set
            .tools
            .iter()
            .map(|t| (t.def.name.clone(), t.def.capability.clone()))
            .collect(),
        capabilities: set.capabilities.iter().cloned().collect(),
        definitions: set
            .tools
            .iter()
            .map(|t| (t.def.name.clone(), definition_digest(&t.def)))
            .collect(),
    }
}

/// The hex SHA-256 of what agents read of a tool and what it lets through: its
/// description, input schema, annotations and approval posture.
fn definition_digest(def: &gsv_protocol::ToolDef) -> String {
    let shown = serde_json::json!({
        "description": def.description,
        "inputSchema": def.input_schema,
        "annotations": def.annotations,
        "requiresApproval": def.requires_approval,
    });
    let digest = Sha256::digest(serde_json::to_vec(&shown).unwrap_or_default());
    hex::encode(digest)
}

/// Whether `offered` offers tool `name` as `accepted` accepted it: the same
/// capability, and the same definition where the accepted offer knows it.
fn same_tool(accepted: &Offer, offered: &Offer, name: &str) -> bool {
    accepted.tools.contains_key(name)
        && accepted.tools.get(name) == offered.tools.get(name)
        && accepted
            .definitions
            .get(name)
            .is_none_or(|d| offered.definitions.get(name) == Some(d))
}

/// SHA-256 of the offer's JSON (its maps are sorted, so equal offers hash equal).
pub fn digest(offer: &Offer) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(offer).unwrap_or_default());
    h.finalize().into()
}

/// How an offer differs from the accepted one. Every list is sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfferDiff {
    /// Tools not accepted, or accepted with another capability.
    pub added_tools: Vec<String>,
    /// Accepted tools the node no longer offers.
    pub removed_tools: Vec<String>,
    pub added_capabilities: Vec<String>,
    pub removed_capabilities: Vec<String>,
}

impl OfferDiff {
    pub fn between(accepted: &Offer, offered: &Offer) -> OfferDiff {
        OfferDiff {
            added_tools: offered
                .tools
                .keys()
                .filter(|name| !same_tool(accepted, offered, name))
                .cloned()
                .collect(),
            removed_tools: accepted
                .tools
                .keys()
                .filter(|name| !offered.tools.contains_key(*name))
                .cloned()
                .collect(),
            added_capabilities: offered
                .capabilities
                .difference(&accepted.capabilities)
                .cloned()
                .collect(),
            removed_capabilities: accepted
                .capabilities
                .difference(&offered.capabilities)
                .cloned()
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.added_tools.is_empty()
            && self.removed_tools.is_empty()
            && self.added_capabilities.is_empty()
            && self.removed_capabilities.is_empty()
    }

    /// The additions, as `nodes.list` shows them (`None` when nothing was added).
    pub fn unaccepted(&self, hidden: bool) -> Option<UnacceptedOffer> {
        let offer = UnacceptedOffer {
            tools: self.added_tools.clone(),
            capabilities: self.added_capabilities.clone(),
            hidden,
        };
        (!offer.is_empty()).then_some(offer)
    }
}

/// `accepted` less what `offered` no longer has: a tool stays only with the
/// capability it is offered with now (its accepted definition kept, or taken from
/// `offered` when the accepted offer did not know it), a capability only if still
/// declared.
fn still_offered(accepted: &Offer, offered: &Offer) -> Offer {
    let tools: BTreeMap<String, String> = accepted
        .tools
        .iter()
        .filter(|(name, cap)| offered.tools.get(*name) == Some(cap))
        .map(|(n, c)| (n.clone(), c.clone()))
        .collect();
    let definitions = tools
        .keys()
        .filter_map(|name| {
            accepted
                .definitions
                .get(name)
                .or_else(|| offered.definitions.get(name))
                .map(|d| (name.clone(), d.clone()))
        })
        .collect();
    Offer {
        tools,
        capabilities: accepted
            .capabilities
            .intersection(&offered.capabilities)
            .cloned()
            .collect(),
        definitions,
    }
}

/// What comparing a registration's offer with the accepted one came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    /// The node offers what was accepted.
    Unchanged,
    /// The node id's first registration: its offer is now the accepted one.
    FirstUse(Offer),
    /// The offer differs; what it no longer has has left the accepted offer.
    Changed(OfferDiff),
}

/// A registration's [`Review`], and the digest of the offer it reviewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewed {
    pub review: Review,
    pub digest: [u8; 32],
}

impl Reviewed {
    /// The node's entry in [`crate::registry::Unaccepted`]: its additions, if any.
    pub fn pending(&self, hidden: bool) -> Option<Arc<PendingOffer>> {
        let Review::Changed(diff) = &self.review else {
            return None;
        };
        diff.unaccepted(hidden).map(|offer| {
            Arc::new(PendingOffer {
                offer,
                digest: self.digest,
            })
        })
    }
}

/// The accepted offers the gateway has looked at, by digest: a node that registers
/// offering exactly its accepted offer (every reconnect, normally) costs no store
/// query. The store stays the truth; this only remembers it.
#[derive(Default)]
pub struct Offers {
    accepted: DashMap<NodeId, [u8; 32]>,
}

impl Offers {
    /// Remembers that `node`'s offer `digest` was accepted (the store holds it).
    pub fn accepted(&self, node: NodeId, digest: [u8; 32]) {
        self.accepted.insert(node, digest);
    }

    /// Remembers every accepted offer in the store, so the nodes that reconnect after a
    /// gateway restart offering what was accepted (normally all) cost no query.
    pub fn load(store: &Store) -> Result<Offers, crate::store::StoreError> {
        let offers = Offers::default();
        for (node, offer) in store.accepted_offers()? {
            match (NodeId::parse(&node), offer) {
                (Ok(id), Ok(offer)) => {
                    offers.accepted.insert(id, digest(&offer));
                }
                (_, Err(e)) => {
                    tracing::warn!(node_id = %node, error = %e, "stored offer unreadable")
                }
                (Err(_), _) => {
                    tracing::warn!(node_id = %node, "stored offer of an invalid node id")
                }
            }
        }
        Ok(offers)
    }

    /// Compares what `node` offers in this registration (`set`) with its accepted
    /// offer: records a first registration as accepted, and drops from the accepted
    /// offer what the node no longer has.
    pub async fn review(
        &self,
        store: &Arc<Store>,
        node: &NodeId,
        set: &ToolSet,
    ) -> Result<Reviewed, OfferError> {
        let offered = offer_of(set);
        let digest = digest(&offered);
        if self
            .accepted
            .get(node.as_str())
            .is_some_and(|a| *a == digest)
        {
            return Ok(Reviewed {
                review: Review::Unchanged,
                digest,
            });
        }
        let id = node.to_string();
        let (review, record) = store
            .blocking(move |s| {
                let Some(accepted) = s.accepted_offer(&id)? else {
                    s.accept_offer(&id, &offered, FIRST_USE, gsv_protocol::now_ms())?;
                    return Ok((Review::FirstUse(offered.clone()), offered));
                };
                let diff = OfferDiff::between(&accepted.offer, &offered);
                let kept = still_offered(&accepted.offer, &offered);
                if kept != accepted.offer {
                    s.accept_offer(&id, &kept, &accepted.accepted_by, accepted.accepted_at)?;
                }
                let review = match diff.is_empty() {
                    true => Review::Unchanged,
                    false => Review::Changed(diff),
                };
                Ok::<_, crate::store::StoreError>((review, kept))
            })
            .await??;
        self.accepted.insert(node.clone(), self::digest(&record));
        Ok(Reviewed { review, digest })
    }
}

/// Audits and logs a registration's review (after its `connect` row).
pub fn record_review(audit: &AuditLog, handle: &NodeHandle, reviewed: &Reviewed, hidden: bool) {
    let node = handle.id.as_str();
    match &reviewed.review {
        Review::Unchanged => {}
        Review::FirstUse(offer) => {
            let tools: Vec<String> = offer.tools.keys().cloned().collect();
            let capabilities: Vec<String> = offer.capabilities.iter().cloned().collect();
            audit.record(AuditEvent::NodeToolsAccepted {
                by: FIRST_USE,
                node,
                tools: &tools,
                capabilities: &capabilities,
                first_use: true,
            });
        }
        Review::Changed(diff) => {
            // Debug-formatted: names from the node, escaped.
            tracing::warn!(
                added_tools = ?diff.added_tools,
                removed_tools = ?diff.removed_tools,
                added_capabilities = ?diff.added_capabilities,
                removed_capabilities = ?diff.removed_capabilities,
                hidden = hidden && !diff.added_tools.is_empty(),
                "node offers other tools than were accepted"
            );
            audit.record(AuditEvent::NodeToolsChanged {
                node,
                conn_id: &handle.conn_id,
                diff,
                hidden: hidden && !diff.added_tools.is_empty(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(tools: &[(&str, &str)], caps: &[&str]) -> Offer {
        Offer {
            tools: tools
                .iter()
                .map(|(n, c)| (n.to_string(), c.to_string()))
                .collect(),
            capabilities: caps.iter().map(|c| c.to_string()).collect(),
            definitions: BTreeMap::new(),
        }
    }

    #[test]
    fn additions_removals_and_a_changed_capability() {
        let accepted = offer(
            &[("Read", "filesystem.read"), ("Bash", "shell.exec")],
            &["filesystem.read", "shell.exec"],
        );
        let offered = offer(
            &[("Read", "shell.exec"), ("Echo", "diagnostics.echo")],
            &["diagnostics.echo", "shell.exec"],
        );
        let d = OfferDiff::between(&accepted, &offered);
        assert_eq!(d.added_tools, ["Echo", "Read"], "a new capability is new");
        assert_eq!(d.removed_tools, ["Bash"]);
        assert_eq!(d.added_capabilities, ["diagnostics.echo"]);
        assert_eq!(d.removed_capabilities, ["filesystem.read"]);
        // What stays accepted: nothing of Read (its capability changed), nor Bash.
        assert_eq!(
            still_offered(&accepted, &offered),
            offer(&[], &["shell.exec"])
        );
        let u = d.unaccepted(true).expect("additions");
        assert_eq!((u.tools.len(), u.hidden), (2, true));
        assert!(OfferDiff::between(&accepted, &accepted).is_empty());
        let only_removed = OfferDiff::between(&accepted, &offer(&[], &[]));
        assert!(!only_removed.is_empty() && only_removed.unaccepted(true).is_none());
    }

    fn set(interner: &crate::toolset::Interner, tools: &[(&str, &str)]) -> Arc<ToolSet> {
        let defs = tools
            .iter()
            .map(|(name, cap)| {
                serde_json::from_value(serde_json::json!({
                    "name": name, "inputSchema": {"type": "object"}, "capability": cap
                }))
                .expect("tool def")
            })
            .collect();
        let node = NodeId::parse("lab").expect("id");
        interner.intern(&node, defs, Vec::new()).expect("valid set")
    }

    #[tokio::test]
    async fn first_use_then_additions_then_removals_and_a_restart() {
        let dir = std::env::temp_dir().join(format!("gsv-offers-{}", uuid::Uuid::new_v4()));
        let store = Arc::new(Store::open(&dir).expect("store"));
        let interner = crate::toolset::Interner::default();
        let lab = NodeId::parse("lab").expect("id");
        let read = set(&interner, &[("Read", "filesystem.read")]);
        let more = set(
            &interner,
            &[("Read", "filesystem.read"), ("Echo", "diagnostics.echo")],
        );
        let offers = Offers::default();
        let r = offers.review(&store, &lab, &read).await.expect("review");
        assert!(matches!(r.review, Review::FirstUse(_)));
        assert_eq!(r.pending(true), None);
        let r = offers.review(&store, &lab, &read).await.expect("review");
        assert_eq!(r.review, Review::Unchanged);
        let r = offers.review(&store, &lab, &more).await.expect("review");
        let Review::Changed(diff) = &r.review else {
            panic!("{r:?}")
        };
        assert_eq!(diff.added_tools, ["Echo"]);
        let pending = r.pending(true).expect("pending");
        assert!(pending.hides("Echo") && !pending.hides("Read"));
        // Not accepted: the next registration is changed again, also for a gateway
        // that starts afresh from the store.
        let again = Offers::load(&store).expect("load");
        let r = again.review(&store, &lab, &more).await.expect("review");
        assert!(matches!(r.review, Review::Changed(_)));
        // Read goes: removed from the accepted offer, so it is new when it comes back.
        let echo = set(&interner, &[("Echo", "diagnostics.echo")]);
        let r = offers.review(&store, &lab, &echo).await.expect("review");
        let Review::Changed(diff) = &r.review else {
            panic!("{r:?}")
        };
        assert_eq!(
            (diff.removed_tools.as_slice(), diff.added_tools.as_slice()),
            (&["Read".to_owned()][..], &["Echo".to_owned()][..])
        );
        let stored = store.accepted_offer("lab").expect("read").expect("row");
        assert!(stored.offer.tools.is_empty());
        assert_eq!(stored.accepted_by, FIRST_USE);
        let r = offers.review(&store, &lab, &read).await.expect("review");
        let Review::Changed(diff) = &r.review else {
            panic!("{r:?}")
        };
        assert_eq!(diff.added_tools, ["Read"]);
        // A row that does not decode is skipped at load, and refused at review.
        store
            .with_conn(|c| {
                c.execute("UPDATE node_offers SET tools = 'nope'", [])?;
                Ok(())
            })
            .expect("corrupt");
        let fresh = Offers::load(&store).expect("load skips it");
        assert!(fresh.review(&store, &lab, &read).await.is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_changed_definition_is_offered_anew_and_an_old_row_learns_it() {
        let with = |d: &str| {
            let mut o = offer(&[("Read", "filesystem.read")], &["filesystem.read"]);
            o.definitions.insert("Read".into(), d.into());
            o
        };
        // Same capability, another definition: offered anew, the accepted one kept.
        let diff = OfferDiff::between(&with("d1"), &with("d2"));
        assert_eq!(diff.added_tools, ["Read"]);
        assert_eq!(still_offered(&with("d1"), &with("d2")), with("d1"));
        // The same definition: nothing new.
        assert!(OfferDiff::between(&with("d1"), &with("d1")).is_empty());
        // A row from before definitions were kept takes the offered one, quietly.
        let old = offer(&[("Read", "filesystem.read")], &["filesystem.read"]);
        assert!(OfferDiff::between(&old, &with("d2")).is_empty());
        assert_eq!(still_offered(&old, &with("d2")), with("d2"));
    }

    #[test]
    fn digests_follow_the_offer_not_its_order() {
        let a = offer(&[("A", "x"), ("B", "y")], &["x", "y"]);
        let b = offer(&[("B", "y"), ("A", "x")], &["y", "x"]);
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(
            digest(&a),
            digest(&offer(&[("A", "y"), ("B", "y")], &["x", "y"]))
        );
    }
}
