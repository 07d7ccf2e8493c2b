//! The labels of every node id, in memory: what selectors (`nodes.list`, `/mcp?select=`,
//! `fleet_nodes`) match against without a store query per node.
//!
//! The store stays the truth. Labels can be written by another process (`gsv token
//! create node … --label` opens the database directly while the gateway runs), so the
//! book re-reads a node id's row whenever that node registers, and an operator's change
//! through the gateway writes the store first and the book after.

use crate::store::{Store, StoreError};
use dashmap::DashMap;
use gsv_protocol::inventory::Labels;
use std::sync::Arc;

/// Labels by node id.
#[derive(Default)]
pub struct LabelBook {
    by_node: DashMap<String, Arc<Labels>>,
}

impl LabelBook {
    /// Every stored node id's labels. A row that does not decode is left out (logged):
    /// that node shows no labels until an operator sets them again.
    pub fn load(store: &Store) -> Result<LabelBook, StoreError> {
        let book = LabelBook::default();
        for (node, labels) in store.all_node_labels()? {
            match labels {
                Ok(l) => {
                    book.remember(&node, l);
                }
                Err(e) => tracing::warn!(node_id = %node, error = %e, "stored labels unreadable"),
            }
        }
        Ok(book)
    }

    /// The labels of `node` (empty when it has none).
    pub fn get(&self, node: &str) -> Arc<Labels> {
        self.by_node
            .get(node)
            .map(|l| Arc::clone(&l))
            .unwrap_or_default()
    }

    /// Re-reads `node`'s labels from the store (at every registration).
    pub async fn refresh(&self, store: &Arc<Store>, node: &str) -> Result<Arc<Labels>, StoreError> {
        let id = node.to_owned();
        let labels = store.blocking(move |s| s.node_labels(&id)).await??;
        Ok(self.remember(node, labels))
    }

    /// Stores `labels` as `node`'s (replacing them), then remembers them.
    pub async fn set(
        &self,
        store: &Arc<Store>,
        node: &str,
        labels: Labels,
        by: &str,
    ) -> Result<Arc<Labels>, StoreError> {
        let (id, by, stored) = (node.to_owned(), by.to_owned(), labels.clone());
        store
            .blocking(move |s| s.set_node_labels(&id, &stored, &by, gsv_protocol::now_ms()))
            .await??;
        Ok(self.remember(node, labels))
    }

    /// Remembers `labels` as `node`'s (already stored by the caller).
    pub(crate) fn remember(&self, node: &str, labels: Labels) -> Arc<Labels> {
        if labels.is_empty() {
            self.by_node.remove(node);
            return Arc::default();
        }
        let labels = Arc::new(labels);
        self.by_node.insert(node.to_owned(), Arc::clone(&labels));
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_book_follows_the_store() {
        let dir = std::env::temp_dir().join(format!("gsv-labelbook-{}", uuid::Uuid::new_v4()));
        let store = Arc::new(Store::open(&dir).expect("open"));
        let prod: Labels = [("env".to_owned(), "prod".to_owned())].into();
        store.set_node_labels("web1", &prod, "cli", 1).expect("set");
        let book = LabelBook::load(&store).expect("load");
        assert_eq!(*book.get("web1"), prod);
        assert!(book.get("db1").is_empty());
        // Written by another process: seen at the node's next registration.
        let staging: Labels = [("env".to_owned(), "staging".to_owned())].into();
        store
            .set_node_labels("web1", &staging, "cli", 2)
            .expect("set");
        assert_eq!(*book.get("web1"), prod);
        book.refresh(&store, "web1").await.expect("refresh");
        assert_eq!(*book.get("web1"), staging);
        // Set through the gateway: store first, then memory; empty removes.
        book.set(&store, "web1", Labels::new(), "operator")
            .await
            .expect("set");
        assert!(book.get("web1").is_empty());
        assert!(store.node_labels("web1").expect("read").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
