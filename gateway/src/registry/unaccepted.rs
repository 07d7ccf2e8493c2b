//! What nodes offer that no operator accepted, per node id: shown to operators, and
//! under `--pin-tools` hidden from agents.
//!
//! Kept apart from the node handles so it outlives reconnects and covers offline nodes
//! alike, and so accepting changes one entry, never a connection. The call path asks
//! [`Unaccepted::hides`] for every call; while no entry hides anything (the normal
//! case) that is one relaxed atomic load and no lookup.

use dashmap::DashMap;
use gsv_protocol::offer::UnacceptedOffer;
use gsv_protocol::NodeId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One node's unaccepted offer, and the digest of the whole offer it was found in (so
/// an acceptance clears it only if the node still offers what was accepted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffer {
    pub offer: UnacceptedOffer,
    pub digest: [u8; 32],
}

impl PendingOffer {
    /// Whether this entry hides `tool` from agents.
    pub fn hides(&self, tool: &str) -> bool {
        self.offer.hidden && self.offer.tools.iter().any(|t| t == tool)
    }
}

/// Every node's unaccepted offer.
#[derive(Default)]
pub struct Unaccepted {
    by_node: DashMap<NodeId, Arc<PendingOffer>>,
    /// At least the number of entries that hide tools: raised before such an entry
    /// goes in, lowered after it left, so it is never 0 while one is in the map.
    hiding: AtomicUsize,
}

impl Unaccepted {
    /// Sets (or with `None` clears) the node's entry.
    pub fn set(&self, node: NodeId, pending: Option<Arc<PendingOffer>>) {
        let old = match pending {
            Some(p) => {
                if p.offer.hidden {
                    self.hiding.fetch_add(1, Ordering::SeqCst);
                }
                self.by_node.insert(node, p)
            }
            None => self.by_node.remove(&node).map(|(_, p)| p),
        };
        self.left(old);
    }

    /// Clears the node's entry if it was found in the offer with `digest`; returns it.
    pub fn clear_if(&self, node: &str, digest: &[u8; 32]) -> Option<Arc<PendingOffer>> {
        let old = self
            .by_node
            .remove_if(node, |_, p| &p.digest == digest)
            .map(|(_, p)| p);
        self.left(old.clone());
        old
    }

    fn left(&self, old: Option<Arc<PendingOffer>>) {
        if old.is_some_and(|p| p.offer.hidden) {
            self.hiding.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub fn get(&self, node: &str) -> Option<Arc<PendingOffer>> {
        self.by_node.get(node).map(|e| e.value().clone())
    }

    /// Whether `tool` of `node` is hidden from agents.
    pub fn hides(&self, node: &str, tool: &str) -> bool {
        if self.hiding.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.by_node.get(node).is_some_and(|p| p.hides(tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(tools: &[&str], hidden: bool, digest: u8) -> Option<Arc<PendingOffer>> {
        Some(Arc::new(PendingOffer {
            offer: UnacceptedOffer {
                tools: tools.iter().map(|t| t.to_string()).collect(),
                capabilities: Vec::new(),
                hidden,
            },
            digest: [digest; 32],
        }))
    }

    #[test]
    fn hides_only_hidden_entries_and_clears_only_the_offer_accepted() {
        let u = Unaccepted::default();
        let lab = NodeId::parse("lab").expect("id");
        assert!(!u.hides("lab", "Echo"));
        u.set(lab.clone(), pending(&["Echo"], false, 1));
        assert!(!u.hides("lab", "Echo"), "flagged, not hidden");
        u.set(lab.clone(), pending(&["Echo"], true, 2));
        assert!(u.hides("lab", "Echo"));
        assert!(!u.hides("lab", "Read") && !u.hides("other", "Echo"));
        // An acceptance of an older offer does not clear what the node offers now.
        assert!(u.clear_if("lab", &[1; 32]).is_none());
        assert!(u.hides("lab", "Echo"));
        assert!(u.clear_if("lab", &[2; 32]).is_some());
        assert!(!u.hides("lab", "Echo"));
        assert_eq!(u.hiding.load(Ordering::SeqCst), 0);
        u.set(lab.clone(), pending(&["Echo"], true, 3));
        u.set(lab, None);
        assert_eq!(u.hiding.load(Ordering::SeqCst), 0);
    }
}
