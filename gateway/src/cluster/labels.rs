//! Node labels shared by every replica: labels set on any replica (an operator's
//! `gsv nodes label`, the console, `POST /v1/nodes/{id}/labels`, or an enrollment's
//! `gsv token create node … --label` on its data dir) hold on all of them, so a
//! selector picks the same nodes whichever replica the agent asks and whichever
//! replica holds each node.
//!
//! - **Out**: every [`POLL`] the replica reads the `node_labels` rows changed lately
//!   (by `updated_at`) and publishes each one it did not publish or apply in that form
//!   already, as `gsv.labels.NODE` on the stream [`STREAM`] (the whole set, when and by
//!   whom it was set; message id `NODE.AT`). The stream keeps the last message of each
//!   node, so a replica that joins later replays every node's current labels. Labels
//!   removed stay as an empty row (`store::labels`), so a removal travels too.
//! - **In**: an ordered consumer reads the stream from its start; a record is applied
//!   when it is newer than the replica's row (`updated_at`; on a tie, the larger set as
//!   text wins, so every replica picks the same one), in one transaction per batch with
//!   a `node.labels_changed` audit row (`by` is `BY@REPLICA`), then the replica's
//!   in-memory copy ([`crate::labels::LabelBook`]) follows. Records are checked first
//!   (node id, label rules, replica name, the setter's name): a hostile record is
//!   skipped, never applied.
//!
//! The publisher waits until the replica has read the stream once, so a starting
//! replica does not publish again what the others already have.

use super::replication::{open_stream, read_for_ever, Batches, Kept, Rounds};
use super::Cluster;
use crate::audit::{self, AuditEvent};
use crate::state::Shared;
use async_nats::jetstream::stream;
use gsv_protocol::inventory::{check_labels, Labels};
use gsv_protocol::names::NodeId;
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The stream of node labels.
pub const STREAM: &str = "GSV_LABELS";
/// How often the replica looks for changed labels in its store.
const POLL: Duration = Duration::from_millis(250);
/// How far back (ms of `updated_at`) each look reads, for rows written late by
/// another process.
const LOOK_BACK_MS: u64 = 60_000;
/// Records applied per transaction, at most.
const BATCH: usize = 500;
/// Longest name of whoever set labels (an operator's name, `admin-api`, …).
const MAX_BY: usize = 256;
/// How long the publisher waits for the first full read of the stream at most.
const CATCH_UP: Duration = Duration::from_secs(10);

/// One node's labels as they travel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub node: String,
    /// The whole set (empty: the node's labels were removed).
    pub labels: Labels,
    /// When they were set, ms since the epoch.
    pub at: u64,
    /// Who set them.
    pub by: String,
    /// The replica that published it.
    pub origin: String,
}

/// The form of each node's labels this replica published or applied last: `(at,
/// labels as text)`.
type Seen = Mutex<HashMap<String, (u64, String)>>;

/// Runs both directions until the gateway shuts down.
pub async fn replicate(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    let seen: Arc<Seen> = Arc::default();
    let caught_up = AtomicBool::new(false);
    tokio::select! {
        _ = shared.shutdown.cancelled() => {}
        _ = publish_loop(&shared, &cluster, &seen, &caught_up) => {}
        _ = apply_loop(&shared, &cluster, &seen, &caught_up) => {}
    }
}

/// The stream, made if missing.
async fn stream(cluster: &Cluster) -> Result<stream::Stream, String> {
    open_stream(
        cluster,
        Kept {
            name: STREAM,
            subjects: "gsv.labels.>",
            newest_only: true,
            max_age: None,
        },
    )
    .await
}

/// The labels as the text they are compared by.
fn text(labels: &Labels) -> String {
    serde_json::to_string(labels).unwrap_or_default()
}

/// Out: publishes the store's changed labels.
async fn publish_loop(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    seen: &Seen,
    caught_up: &AtomicBool,
) {
    let started = Instant::now();
    let mut newest: u64 = 0;
    let mut rounds = Rounds::new(cluster, "labels", POLL);
    loop {
        rounds.next(|| stream(cluster)).await;
        if !caught_up.load(Ordering::SeqCst) && started.elapsed() < CATCH_UP {
            continue;
        }
        let since = newest.saturating_sub(LOOK_BACK_MS);
        let read = shared
            .store
            .blocking(move |store| store.changed_node_labels(since))
            .await;
        let rows = match read {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cluster: cannot read labels to publish");
                continue;
            }
            Err(_) => continue,
        };
        for (node, labels, at, by) in rows {
            newest = newest.max(at);
            let form = (at, text(&labels));
            let known = seen
                .lock()
                .map(|s| s.get(&node) == Some(&form))
                .unwrap_or(false);
            if known {
                continue;
            }
            let record = Record {
                node: node.clone(),
                labels,
                at,
                by,
                origin: cluster.replica.clone(),
            };
            let subject = format!("gsv.labels.{node}");
            let id = format!("{node}.{at}");
            if let Err(e) = super::tokens::publish(cluster, &subject, &id, &record).await {
                tracing::warn!(error = %e, "cluster: cannot publish labels; will try again");
                break;
            }
            if let Ok(mut s) = seen.lock() {
                s.insert(node, form);
            }
        }
    }
}

/// In: applies the stream, from its start, for as long as the replica runs; the
/// consumer is made again after a failure and whenever the client reconnected.
async fn apply_loop(shared: &Arc<Shared>, cluster: &Cluster, seen: &Seen, caught_up: &AtomicBool) {
    read_for_ever("labels", 1, |mut next| async move {
        let read = apply_stream(shared, cluster, seen, caught_up, &mut next).await;
        (next, read)
    })
    .await
}

async fn apply_stream(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    seen: &Seen,
    caught_up: &AtomicBool,
    next: &mut u64,
) -> Result<(), String> {
    if !cluster.connected() {
        return Ok(());
    }
    let stream = stream(cluster).await?;
    let mut batches = Batches::open(cluster, &stream, "gsv.labels.>", *next).await?;
    loop {
        // Nothing for a while: whatever the stream had is read.
        let read = batches
            .batch(BATCH, || caught_up.store(true, Ordering::SeqCst))
            .await;
        *next = batches.next;
        let Some(messages) = read? else {
            return Ok(());
        };
        let mut batch = Vec::new();
        for m in messages {
            if m.info().is_ok_and(|info| info.pending == 0) {
                caught_up.store(true, Ordering::SeqCst);
            }
            match serde_json::from_slice::<Record>(&m.payload) {
                Ok(r) if r.origin != cluster.replica => batch.push(r),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(subject = %m.subject, error = %e, "cluster: unreadable label record skipped")
                }
            }
        }
        if batch.is_empty() {
            continue;
        }
        let applied = shared
            .store
            .blocking(move |store| store.with_conn(|c| apply_all(c, batch)))
            .await;
        let applied = match applied {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cluster: labels from another replica were not applied");
                continue;
            }
            Err(_) => continue,
        };
        if let Ok(mut s) = seen.lock() {
            for r in &applied {
                s.insert(r.node.clone(), (r.at, text(&r.labels)));
            }
        }
        if !applied.is_empty() {
            for r in applied {
                shared.labels.remember(&r.node, r.labels);
            }
            shared.changes.send(crate::changes::Topic::Nodes);
        }
    }
}

/// Why a record from the stream is not applied.
fn bad(what: &str) -> crate::store::StoreError {
    crate::store::StoreError::Policy(format!("label record from the cluster: {what}"))
}

/// Checks a record from the stream.
fn check(r: &Record) -> Result<(), crate::store::StoreError> {
    NodeId::parse(&r.node).map_err(|_| bad("malformed node id"))?;
    check_labels(&r.labels).map_err(|e| bad(&e.to_string()))?;
    if !super::valid_replica_name(&r.origin) {
        return Err(bad("malformed replica name"));
    }
    if r.by.is_empty() || r.by.len() > MAX_BY || r.by.chars().any(char::is_control) {
        return Err(bad("malformed setter name"));
    }
    if r.at > i64::MAX as u64 {
        return Err(bad("time out of range"));
    }
    Ok(())
}

/// Applies each record of `batch` that is newer than this replica's row, in one
/// transaction with its audit row; the records applied. A record that is refused is
/// logged and skipped.
fn apply_all(
    c: &mut rusqlite::Connection,
    batch: Vec<Record>,
) -> Result<Vec<Record>, crate::store::StoreError> {
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut applied = Vec::new();
    for r in batch {
        if let Err(e) = check(&r) {
            tracing::warn!(node_id = ?r.node, error = %e, "cluster: labels from another replica refused");
            continue;
        }
        let local: Option<(i64, String)> = tx
            .query_row(
                "SELECT updated_at, labels FROM node_labels WHERE node = ?1",
                params![r.node],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let incoming = text(&r.labels);
        let newer = match &local {
            None => !r.labels.is_empty(),
            Some((at, t)) => {
                let at = u64::try_from(*at).unwrap_or(0);
                r.at > at || (r.at == at && incoming > *t)
            }
        };
        if !newer {
            continue;
        }
        // A row that no longer decodes is replaced (and its audit row says so).
        let before = crate::store::read_node_labels(&tx, &r.node).unwrap_or_default();
        let by = format!("{}@{}", r.by, r.origin);
        crate::store::write_node_labels(&tx, &r.node, &r.labels, &by, r.at)?;
        if before != r.labels {
            let event = AuditEvent::NodeLabelsChanged {
                by: &by,
                node: &r.node,
                before: &before,
                after: &r.labels,
            };
            audit::append_in(&tx, &[(gsv_protocol::now_ms(), event.into())])?;
        }
        applied.push(r);
    }
    tx.commit()?;
    if !applied.is_empty() {
        tracing::info!(
            applied = applied.len(),
            "cluster: labels from other replicas applied"
        );
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn record(node: &str, set: &[(&str, &str)], at: u64) -> Record {
        Record {
            node: node.to_owned(),
            labels: labels(set),
            at,
            by: "operator".to_owned(),
            origin: "a".to_owned(),
        }
    }

    fn apply(store: &Store, batch: Vec<Record>) -> usize {
        store
            .with_conn(|c| apply_all(c, batch))
            .expect("applied")
            .len()
    }

    #[test]
    fn newer_wins_ties_go_the_same_way_everywhere_and_hostile_records_are_refused() {
        let dir = std::env::temp_dir().join(format!("gsv-cluster-labels-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&dir).expect("open");
        store
            .set_node_labels("web1", &labels(&[("env", "prod")]), "cli", 100)
            .expect("set");
        // Older: ignored. Newer: applied, audited with the replica's name.
        assert_eq!(
            apply(&store, vec![record("web1", &[("env", "old")], 50)]),
            0
        );
        assert_eq!(
            apply(&store, vec![record("web1", &[("env", "dev")], 200)]),
            1
        );
        assert_eq!(
            store.node_labels("web1").expect("read"),
            labels(&[("env", "dev")])
        );
        // A tie: the larger set as text wins, whichever arrives first.
        assert_eq!(apply(&store, vec![record("web1", &[("env", "a")], 200)]), 0);
        assert_eq!(apply(&store, vec![record("web1", &[("env", "z")], 200)]), 1);
        // A removal travels as an empty set, and is newer than what it removes.
        assert_eq!(apply(&store, vec![record("web1", &[], 300)]), 1);
        assert!(store.node_labels("web1").expect("read").is_empty());
        assert_eq!(apply(&store, vec![record("web1", &[("env", "z")], 200)]), 0);
        // An empty set for a node never labelled here changes nothing.
        assert_eq!(apply(&store, vec![record("db1", &[], 300)]), 0);
        // Hostile records: skipped, the rest of the batch applied.
        let bad_node = record("bad node", &[("env", "x")], 400);
        let bad_label = record("web2", &[("Env", "x")], 400);
        let mut bad_origin = record("web2", &[("env", "x")], 400);
        bad_origin.origin = "a.b>".into();
        let mut bad_by = record("web2", &[("env", "x")], 400);
        bad_by.by = "op\u{1b}[31m".into();
        let mut far = record("web2", &[("env", "x")], 400);
        far.at = u64::MAX;
        let good = record("web3", &[("role", "db")], 400);
        let n = apply(
            &store,
            vec![bad_node, bad_label, bad_origin, bad_by, far, good],
        );
        assert_eq!(n, 1);
        assert!(store.node_labels("web2").expect("read").is_empty());
        assert_eq!(
            store.node_labels("web3").expect("read"),
            labels(&[("role", "db")])
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
