//! Each replica's slot: a number from 0 to [`SLOTS`]−1 no other replica has, so the
//! call ids replicas give out never meet.
//!
//! A node remembers the ids of the calls it ran (its ledger: an id seen before is never
//! run again, its kept result is answered instead). On one gateway ids are unique by
//! construction ([`crate::registry`]: time-based, increasing); two replicas counting the
//! same way from nearly the same start could give one id to two different calls, and a
//! node that moved from one to the other would answer the second with the first's
//! result. With a slot, a replica's ids are all ≡ slot (mod [`SLOTS`]).
//!
//! Slots are claimed in the JetStream stream [`STREAM`] (one subject per slot, one
//! message each): a replica takes the first slot whose subject is empty with a publish
//! that expects it empty (so two replicas can never both win it), or the slot that
//! already names it. The slot is kept in the data directory (`replica-slot`) so a
//! replica that restarts while NATS is down keeps it.

use super::Cluster;
use async_nats::jetstream::stream;
use std::path::Path;
use std::time::Duration;

/// Replicas a cluster can have.
pub const SLOTS: u64 = 64;
/// The stream of slot claims.
pub const STREAM: &str = "GSV_SLOTS";
const KEPT: &str = "replica-slot";

/// This replica's slot: the one kept in `data_dir`, else one claimed now (waiting for
/// NATS up to `patience`). `None`: no slot could be had (NATS unreachable at a first
/// start, or every slot taken).
pub async fn claim(cluster: &Cluster, data_dir: &Path, patience: Duration) -> Option<u64> {
    if let Some(kept) = std::fs::read_to_string(data_dir.join(KEPT))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .filter(|s| *s < SLOTS)
    {
        return Some(kept);
    }
    let started = std::time::Instant::now();
    loop {
        match try_claim(cluster).await {
            Ok(Some(slot)) => {
                if let Err(e) = std::fs::write(data_dir.join(KEPT), format!("{slot}\n")) {
                    tracing::warn!(error = %e, "cluster: cannot keep the replica's slot in the data dir");
                }
                return Some(slot);
            }
            Ok(None) => {
                tracing::error!("cluster: all {SLOTS} replica slots are taken");
                return None;
            }
            Err(e) if started.elapsed() >= patience => {
                tracing::warn!(error = %e, "cluster: no replica slot yet");
                return None;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

async fn try_claim(cluster: &Cluster) -> Result<Option<u64>, String> {
    if !cluster.connected() {
        return Err("not connected to NATS".into());
    }
    let js = cluster.jetstream();
    let stream = js
        .get_or_create_stream(stream::Config {
            name: STREAM.to_owned(),
            subjects: vec!["gsv.slots.*".to_owned()],
            max_messages_per_subject: 1,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    for slot in 0..SLOTS {
        let subject = format!("gsv.slots.{slot}");
        match stream.get_last_raw_message_by_subject(&subject).await {
            // A claim no replica sealed holds the slot for nobody, and is not ours.
            Ok(m) => {
                let claimed = cluster.open_stored(m.subject.as_str(), &m.payload);
                if claimed.as_deref() == Some(cluster.replica.as_bytes()) {
                    return Ok(Some(slot));
                }
            }
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
                let claim = cluster
                    .js_publish(&subject, cluster.replica.as_bytes(), |m| {
                        m.expected_last_subject_sequence(0)
                    })
                    .await?;
                if claim.await.is_ok() {
                    return Ok(Some(slot));
                }
                // Another replica won it meanwhile: the next one.
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(None)
}
