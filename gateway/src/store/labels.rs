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

    /// The rows set at or after `since` (ms): node id, labels, when, by whom. A row
    /// that does not decode is left out (logged).
    pub fn changed_node_labels(
        &self,
        since: u64,
    ) -> Result<Vec<(String, Labels, u64, String)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT node, labels, updated_at, updated_by FROM node_labels WHERE updated_at >= ?1",
        )?;
        let since = i64::try_from(since).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![since], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (node, text, at, by) = row?;
            match decode(&node, &text) {
                Ok(labels) => out.push((node, labels, u64::try_from(at).unwrap_or(0), by)),
                Err(e) => tracing::warn!(node_id = %node, error = %e, "stored labels unreadable"),
            }
        }
        Ok(out)
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
/// checking them. An empty set is kept as a row of its own (`{}`, with when and by
/// whom): in cluster mode a removal travels to the other replicas like any change
/// (`crate::cluster::labels`), and a node once labelled stays known.
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
        // Cleared: kept as an empty set, with when (a removal that can travel).
        let all = store.all_node_labels().expect("all");
        assert_eq!(all.len(), 1);
        assert!(all[0].1.as_ref().expect("decodes").is_empty());
        assert!(store.node_labels("web1").expect("read").is_empty());
        let changed = store.changed_node_labels(3).expect("changed");
        assert_eq!(changed.len(), 1);
        assert_eq!((changed[0].2, changed[0].3.as_str()), (3, "operator"));
        assert!(store.changed_node_labels(4).expect("changed").is_empty());
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
