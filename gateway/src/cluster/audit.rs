//! The audit log of the whole cluster as one chain: every replica publishes its own
//! log's rows to the stream [`STREAM`] and applies the stream, in its order, to its
//! copy of the cluster chain ([`crate::audit::cluster_chain`]).
//!
//! - **Out**: every [`POLL`] (at once again while there is a backlog) the replica reads
//!   the rows of its log after the last one JetStream acknowledged (`audit_published`
//!   in `cluster_meta`, so a restart or a NATS outage resumes where it stopped) and
//!   publishes them in order on `gsv.audit.REPLICA`, up to 64 rows a message, all
//!   of a round before waiting for their acknowledgements; a message's id is the hash
//!   of its last row, so one published again after a lost acknowledgement is dropped
//!   by JetStream. Rows written while NATS is
//!   unreachable wait in the replica's log, which is where they are kept anyway:
//!   nothing is lost, the cluster chain has them once NATS is back.
//! - **In**: an ordered consumer reads the stream from the message after the last one
//!   applied (`audit_applied`, written in the same transaction as the rows); each
//!   record is checked ([`cluster_chain::check`]: its fields must give its hash) and
//!   appended unless it was applied before. A stream that was made again (NATS lost
//!   its store) is read from its start; rows already in the chain are not appended
//!   twice.

use super::replication::{open_stream, read_for_ever, Batches, Kept, Rounds};
use super::Cluster;
use crate::audit::cluster_chain::{self, Record};
use crate::state::Shared;
use async_nats::jetstream::stream;
use rusqlite::TransactionBehavior;
use std::sync::Arc;
use std::time::Duration;

/// The stream of every replica's audit rows.
pub const STREAM: &str = "GSV_AUDIT";
/// How often the replica looks for new rows of its log.
const POLL: Duration = Duration::from_millis(250);
/// Rows published per round, and records applied per transaction, at most.
const BATCH: usize = 500;
/// How long a round waits for JetStream's acknowledgements.
const ACK_WAIT: Duration = Duration::from_secs(10);
/// `cluster_meta` names.
const PUBLISHED: &str = "audit_published";
const APPLIED: &str = "audit_applied";

/// Runs both directions until the gateway shuts down.
pub async fn replicate(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    // Which replica this data directory's own rows are from, for `gsv audit verify`.
    let name = cluster.replica.clone();
    let _ = shared
        .store
        .blocking(move |s| s.with_conn(|c| cluster_chain::set_meta(c, "replica", &name)))
        .await;
    tokio::select! {
        _ = shared.shutdown.cancelled() => {}
        _ = publish_loop(&shared, &cluster) => {}
        _ = apply_loop(&shared, &cluster) => {}
    }
}

/// The stream, made if missing.
async fn stream(cluster: &Cluster) -> Result<stream::Stream, String> {
    open_stream(
        cluster,
        Kept {
            name: STREAM,
            subjects: "gsv.audit.>",
            newest_only: false,
            max_age: None,
        },
    )
    .await
}

/// Out: publishes this replica's new log rows.
async fn publish_loop(shared: &Arc<Shared>, cluster: &Cluster) {
    let mut rounds = Rounds::new(cluster, "audit", POLL);
    loop {
        rounds.next(|| stream(cluster)).await;
        let replica = cluster.replica.clone();
        let read = shared
            .store
            .blocking(move |s| {
                s.with_conn(|c| {
                    let after = cluster_chain::meta_number(c, PUBLISHED)?;
                    let Some(chain) = cluster_chain::own_chain(c)? else {
                        return Ok((None, Vec::new()));
                    };
                    let rows = crate::audit::rows_after(c, after as i64, BATCH as u32)?;
                    let last = rows.last().map(|r| (r.seq, rows.len() == BATCH));
                    let records = rows
                        .into_iter()
                        .filter(|r| !echoes_another_replica(&r.entry.actor))
                        .map(|r| Record::of_row(&replica, &chain, r))
                        .collect::<Vec<_>>();
                    Ok((last, records))
                })
            })
            .await;
        let (last_read, records) = match read {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cluster: cannot read audit rows to publish");
                continue;
            }
            Err(_) => continue,
        };
        let Some((last_read, full)) = last_read else {
            continue;
        };
        let done = publish_all(cluster, records).await;
        // Everything read is published when every message was acknowledged (rows
        // left out count as published).
        let upto = if done.error.is_none() {
            Some(last_read)
        } else {
            done.last
        };
        if let Some(last) = upto {
            let saved = shared
                .store
                .blocking(move |s| {
                    s.with_conn(|c| cluster_chain::set_meta(c, PUBLISHED, &last.to_string()))
                })
                .await;
            if !matches!(saved, Ok(Ok(()))) {
                tracing::warn!("cluster: cannot keep how far the audit log was published");
            }
        }
        if let Some(e) = done.error {
            tracing::warn!(error = %e, "cluster: publishing audit rows failed; will try again");
        } else {
            rounds.backlog = full;
        }
    }
}

/// Whether a row of this replica's log records taking in what another replica did
/// (a token made or revoked there: actor `replica:NAME`): the other replica's own row
/// is in the cluster chain already, so the echo is not published — else every replica
/// would add a row per token for every replica.
fn echoes_another_replica(actor: &str) -> bool {
    actor.starts_with("replica:")
}

/// What a round of publishing achieved.
struct Published {
    /// The last row (of this replica's log) acknowledged with every row before it.
    last: Option<i64>,
    /// Why the round stopped short, if it did.
    error: Option<String>,
}

/// Records per message, at most.
const PER_MESSAGE: usize = 64;

/// `records` as the messages they travel in: up to [`PER_MESSAGE`] records and
/// [`cluster_chain::MAX_RECORD`] bytes each, in order; a record larger than that alone
/// travels [`Record::cut`]. Each message is a JSON array, with the rows of the log
/// it ends with.
fn messages(records: Vec<Record>) -> Vec<(i64, String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut chunk: Vec<Vec<u8>> = Vec::new();
    let mut size = 0;
    let mut last = (0, String::new());
    let flush = |chunk: &mut Vec<Vec<u8>>, last: &(i64, String), out: &mut Vec<_>| {
        if chunk.is_empty() {
            return;
        }
        let mut body = b"[".to_vec();
        body.extend(chunk.join(&b","[..]));
        body.push(b']');
        out.push((last.0, last.1.clone(), body));
        chunk.clear();
    };
    for record in records {
        let mut one = serde_json::to_vec(&record).unwrap_or_default();
        if one.len() > cluster_chain::MAX_RECORD {
            one = serde_json::to_vec(&record.clone().cut()).unwrap_or_default();
        }
        if chunk.len() == PER_MESSAGE || size + one.len() > cluster_chain::MAX_RECORD {
            flush(&mut chunk, &last, &mut out);
            size = 0;
        }
        size += one.len() + 1;
        chunk.push(one);
        last = (record.rseq, record.rhash);
    }
    flush(&mut chunk, &last, &mut out);
    out
}

/// Publishes `records` in order, then waits for their acknowledgements in order. A
/// message's id is the hash of its last row: one sent again after a lost
/// acknowledgement is dropped by JetStream (and a row that travels twice anyway is
/// applied once).
async fn publish_all(cluster: &Cluster, records: Vec<Record>) -> Published {
    let subject = format!("gsv.audit.{}", cluster.replica);
    let mut pending = Vec::new();
    let mut error = None;
    for (rseq, id, payload) in messages(records) {
        let sent = cluster
            .js_publish(&subject, &payload, |m| m.message_id(&id))
            .await;
        match sent {
            Ok(ack) => pending.push((rseq, ack)),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let mut last = None;
    for (rseq, ack) in pending {
        match tokio::time::timeout(ACK_WAIT, ack).await {
            Ok(Ok(_)) => last = Some(rseq),
            Ok(Err(e)) => {
                error = Some(e.to_string());
                break;
            }
            Err(_) => {
                error = Some("no acknowledgement from JetStream".into());
                break;
            }
        }
    }
    Published { last, error }
}

/// In: applies the stream for as long as the replica runs; read again after a
/// failure and whenever the client reconnected.
async fn apply_loop(shared: &Arc<Shared>, cluster: &Cluster) {
    // Where to go on from is kept in the store (with the rows applied).
    read_for_ever("audit", 0, |at| async move {
        (at, apply_stream(shared, cluster).await)
    })
    .await
}

async fn apply_stream(shared: &Arc<Shared>, cluster: &Cluster) -> Result<(), String> {
    if !cluster.connected() {
        return Ok(());
    }
    let stream = stream(cluster).await?;
    let applied = shared
        .store
        .blocking(|s| s.with_conn(|c| cluster_chain::meta_number(c, APPLIED)))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let last = stream.cached_info().state.last_sequence;
    let from = if applied > last {
        tracing::warn!(
            applied,
            last,
            "cluster: the audit stream is shorter than what this replica applied (made again?); reading it from its start"
        );
        1
    } else {
        applied + 1
    };
    let mut batches = Batches::open(cluster, &stream, "gsv.audit.>", from).await?;
    while let Some(messages) = batches.batch(BATCH, || {}).await? {
        let upto = batches.next.saturating_sub(1);
        let mut batch = Vec::new();
        for m in messages {
            match serde_json::from_slice::<Vec<Record>>(&m.payload) {
                Ok(records) => {
                    for r in records {
                        match cluster_chain::check(&r) {
                            Ok(()) => batch.push(r),
                            Err(why) => tracing::warn!(
                                subject = %m.subject,
                                why,
                                "cluster: audit record refused"
                            ),
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(subject = %m.subject, error = %e, "cluster: unreadable audit record skipped")
                }
            }
        }
        let applied = shared
            .store
            .blocking(move |s| {
                s.with_conn(|c| {
                    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let n = cluster_chain::apply(&tx, &batch)?;
                    cluster_chain::set_meta(&tx, APPLIED, &upto.to_string())?;
                    tx.commit()?;
                    Ok(n)
                })
            })
            .await;
        match applied {
            Ok(Ok(n)) => tracing::debug!(applied = n, upto, "cluster: audit rows applied"),
            Ok(Err(e)) => return Err(format!("cannot apply audit rows: {e}")),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rseq: i64, args: usize) -> Record {
        Record {
            replica: "a".into(),
            chain: "0".repeat(64),
            rseq,
            rprev: "0".repeat(64),
            rhash: format!("{rseq:064x}"),
            cut: false,
            ts: 1,
            kind: "call".into(),
            actor: "agent:x".into(),
            node: None,
            tool: None,
            args_hash: None,
            args: Some("x".repeat(args)),
            outcome: "ok".into(),
            duration_ms: None,
            detail: Some("{}".into()),
        }
    }

    #[test]
    fn rows_travel_in_order_a_few_dozen_a_message_and_a_huge_one_cut() {
        let mut records: Vec<Record> = (1..=130).map(|i| record(i, 10)).collect();
        records.push(record(131, cluster_chain::MAX_RECORD + 1));
        records.push(record(132, 10));
        let out = messages(records);
        let decoded: Vec<Vec<Record>> = out
            .iter()
            .map(|(_, _, body)| serde_json::from_slice(body).expect("a JSON array"))
            .collect();
        let sizes: Vec<usize> = decoded.iter().map(Vec::len).collect();
        assert_eq!(sizes, [64, 64, 4]);
        let rseqs: Vec<i64> = decoded.iter().flatten().map(|r| r.rseq).collect();
        assert_eq!(rseqs, (1..=132).collect::<Vec<_>>());
        // Each message says the last row it holds, and its id is that row's hash.
        for ((rseq, id, _), d) in out.iter().zip(&decoded) {
            let last = d.last().expect("rows");
            assert_eq!((*rseq, id.as_str()), (last.rseq, last.rhash.as_str()));
        }
        let huge = decoded
            .iter()
            .flatten()
            .find(|r| r.rseq == 131)
            .expect("131");
        assert!(huge.cut && huge.args.is_none() && huge.detail.is_none());
        assert!(out
            .iter()
            .all(|(_, _, b)| b.len() <= cluster_chain::MAX_RECORD + 2));
        // Large rows fill a message by size before count.
        let big: Vec<Record> = (1..=4)
            .map(|i| record(i, cluster_chain::MAX_RECORD / 3))
            .collect();
        assert_eq!(messages(big).len(), 2);
    }
}
