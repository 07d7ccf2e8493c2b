//! Queries on the `node_labels` table: the labels an operator gave each node id.
//!
//! One row per node id with labels, as sorted JSON text, with when and by whom they
//! were last set. Written by `gsv token create node … --label` (the enrollment, before
//! the node ever connects) and by the gateway when an operator relabels a node; the
//! gateway keeps a copy in memory (`crate::labels`).

use super::{Store, StoreError};
use gsv_protocol::inventory::{check_labels, Labels};
use rusqlite::{params, Connection, OptionalExtension};

/// One row of `node_labels` as [`Store::all_node_labels`] reads it: the node id, and
/// its labels or why they do not decode.
pub type StoredLabels = (String, Result<Labels, StoreError>);

impl Store {
    /// The labels of `node` (empty when it has none). A row that does not decode or
    /// breaks the label rules is an error, not an empty set: labels may select what an
    /// agent reaches, so a corrupt row must not silently widen or narrow it.
    pub fn node_labels(&self, node: &str) -> Result<Labels, StoreError> {
        read_node_labels(&self.conn(), node)
    }

    /// Every node id's labels, each read on its own: a row that does not decode is
    /// returned as its error.
    pub fn all_node_labels(&self) -> Result<Vec<StoredLabels>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT node, labels FROM node_labels")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (node, text) = row?;
            let labels = decode(&node, &text);
            out.push((node, labels));
        }
        Ok(out)
    }

    /// Replaces the labels of `node` (an empty set removes the row).
    pub fn set_node_labels(
        &self,
        node: &str,
        labels: &Labels,
        by: &str,
        at: u64,
    ) -> Result<(), StoreError> {
        write_node_labels(&self.conn(), node, labels, by, at)
    }

    /// Whether the gateway knows `node` from its store: an active node or join token
    /// is bound to it, or an operator gave it labels.
    pub fn knows_node(&self, node: &str) -> Result<bool, StoreError> {
        let known: bool = self.conn().query_row(
            "SELECT EXISTS (SELECT 1 FROM tokens WHERE subject = ?1 AND kind IN ('node', 'join') AND revoked_at IS NULL)
                 OR EXISTS (SELECT 1 FROM node_labels WHERE node = ?1)",
            params![node],
            |r| r.get(0),
        )?;
        Ok(known)
    }
}

/// The labels of `node` read through `conn` (a connection or a transaction).
pub(crate) fn read_node_labels(conn: &Connection, node: &str) -> Result<Labels, StoreError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT labels FROM node_labels WHERE node = ?1",
            params![node],
            |r| r.get(0),
        )
        .optional()?;
    text.map(|t| decode(node, &t))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// Replaces the labels of `node` through `conn` (a connection or a transaction), after
/// checking them; an empty set removes the row.
pub(crate) fn write_node_labels(
    conn: &Connection,
    node: &str,
    labels: &Labels,
    by: &str,
    at: u64,
) -> Result<(), StoreError> {
    check_labels(labels).map_err(|e| StoreError::Labels {
        node: node.to_owned(),
        reason: e.to_string(),
    })?;
    if labels.is_empty() {
        conn.execute("DELETE FROM node_labels WHERE node = ?1", params![node])?;
        return Ok(());
    }
    let text = serde_json::to_string(labels).map_err(|e| StoreError::Labels {
        node: node.to_owned(),
        reason: e.to_string(),
    })?;
    conn.execute(
        "INSERT INTO node_labels (node, labels, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(node) DO UPDATE SET labels = ?2, updated_at = ?3, updated_by = ?4",
        params![node, text, i64::try_from(at).unwrap_or(i64::MAX), by],
    )?;
    Ok(())
}

fn decode(node: &str, text: &str) -> Result<Labels, StoreError> {
    let corrupt = |reason: String| StoreError::Labels {
        node: node.to_owned(),
        reason,
    };
    let labels: Labels = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
    check_labels(&labels).map_err(|e| corrupt(e.to_string()))?;
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn labels_are_stored_replaced_removed_and_checked() {
        let dir = std::env::temp_dir().join(format!("gsv-labels-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&dir).expect("open");
        assert_eq!(store.node_labels("web1").expect("read"), Labels::new());
        let prod = labels(&[("env", "prod"), ("role", "web")]);
        store.set_node_labels("web1", &prod, "cli", 1).expect("set");
        assert_eq!(store.node_labels("web1").expect("read"), prod);
        let staging = labels(&[("env", "staging")]);
        store
            .set_node_labels("web1", &staging, "operator", 2)
            .expect("replace");
        assert_eq!(store.node_labels("web1").expect("read"), staging);
        let all = store.all_node_labels().expect("all");
        assert_eq!(all.len(), 1);
        store
            .set_node_labels("web1", &Labels::new(), "operator", 3)
            .expect("clear");
        assert!(store.all_node_labels().expect("all").is_empty());
        // Bad labels never reach the table.
        let bad = labels(&[("Env", "x")]);
        assert!(matches!(
            store.set_node_labels("web1", &bad, "cli", 4),
            Err(StoreError::Labels { .. })
        ));
        // A row edited by hand into something invalid is an error, not an empty set.
        store
            .conn()
            .execute(
                "INSERT INTO node_labels (node, labels, updated_at, updated_by) VALUES ('db1', '{\"a b\":\"x\"}', 0, 'x')",
                [],
            )
            .expect("insert");
        assert!(matches!(
            store.node_labels("db1"),
            Err(StoreError::Labels { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
