//! Whether a selector picks a node: the one place MCP matches `?select=` and
//! `fleet_nodes {select}` against a node's labels and facts.
//!
//! Labels are the operator's ([`crate::labels::LabelBook`]), facts the node's own
//! report (`Runtime.facts`). Selectors only narrow what a session looks at; they never
//! widen what its token may call.

use gsv_protocol::inventory::{Facts, Labels};
use gsv_protocol::selector::Selector;

/// Whether `selector` picks node `id` with these labels and facts. A node that
/// reported no facts is matched as one with every fact absent (so `fact.os=linux`
/// does not pick it and `fact.os!=linux` does).
pub fn node_selected(
    selector: &Selector,
    id: &str,
    labels: &Labels,
    facts: Option<&Facts>,
) -> bool {
    match facts {
        Some(f) => selector.matches(id, labels, f),
        None => selector.matches(id, labels, &Facts::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_ids_and_facts_pick_nodes() {
        let mut labels = Labels::new();
        labels.insert("role".into(), "web".into());
        let facts = Facts {
            os: "linux".into(),
            ..Facts::default()
        };
        let s = |t: &str| Selector::parse(t).unwrap();
        assert!(node_selected(&s("role=web"), "web1", &labels, None));
        assert!(!node_selected(&s("role=db"), "web1", &labels, None));
        assert!(node_selected(
            &s("id~web*,fact.os=linux"),
            "web1",
            &labels,
            Some(&facts)
        ));
        assert!(!node_selected(&s("fact.os=linux"), "web1", &labels, None));
        assert!(node_selected(&s("fact.os!=linux"), "web1", &labels, None));
    }
}
