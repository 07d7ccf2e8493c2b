//! Jobs seen from every replica: a job started through one replica (`tools.call`
//! with `async: true`, a fan-out) is listed, read and cancelled through any of them,
//! and its outcome outlives the replica that ran it.
//!
//! - **Out**: every [`POLL`] the replica reads the changes of its own jobs (a trigger
//!   records each start and end, `crate::store::job_copies`) and publishes each job as
//!   it is then on `gsv.jobs.ID` of the stream [`STREAM`] (the last message of each
//!   job kept, for the retention period of the replica that made the stream), message
//!   id `ID.STATE`. How far it got is kept in its store.
//! - **In**: an ordered consumer reads the stream from its start and applies each
//!   checked copy: a job not known is inserted with its owner; a copy still running
//!   takes the state it ended in; own jobs are never touched.
//! - **Cancel**: a copy is cancelled by its owner: the replica asked sends the id on
//!   `gsv.jobcancel.OWNER` and answers with the job as the owner has it then.
//!
//! The outcome of a job larger than a NATS message may be travels without it: the copy
//! says which replica has it.

use super::replication::{open_stream, read_for_ever, Batches, Kept, Rounds};
use super::Cluster;
use crate::state::Shared;
use crate::store::job_copies::{self, JobCopy};
use async_nats::jetstream::stream;
use gsv_protocol::job::Job;
use gsv_protocol::{ErrorCode, ErrorShape};
use rusqlite::TransactionBehavior;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The stream of jobs.
pub const STREAM: &str = "GSV_JOBS";
/// How often the replica looks for changed jobs of its own.
const POLL: Duration = Duration::from_millis(250);
/// Changes published per round, copies applied per transaction, at most.
const BATCH: usize = 500;
/// Largest copy published whole, bytes (NATS's default `max_payload` is 1 MiB).
const MAX_COPY: usize = 900 * 1024;
/// How long a round waits for JetStream's acknowledgements.
const ACK_WAIT: Duration = Duration::from_secs(10);
/// How long a cancel waits for the owner's answer.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// `cluster_meta` name of the last change published.
const PUBLISHED: &str = "jobs_published";

/// Runs both directions and the cancel service until the gateway shuts down.
pub async fn replicate(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    tokio::select! {
        _ = shared.shutdown.cancelled() => {}
        _ = publish_loop(&shared, &cluster) => {}
        _ = apply_loop(&shared, &cluster) => {}
        _ = serve_cancels(&shared, &cluster) => {}
    }
}

/// The stream, made if missing (its age limit is this replica's job retention).
async fn stream(shared: &Shared, cluster: &Cluster) -> Result<stream::Stream, String> {
    open_stream(
        cluster,
        Kept {
            name: STREAM,
            subjects: "gsv.jobs.*",
            newest_only: true,
            max_age: Some(shared.config.job_retention),
        },
    )
    .await
}

/// Out: publishes the changes of this replica's own jobs.
async fn publish_loop(shared: &Arc<Shared>, cluster: &Cluster) {
    let mut rounds = Rounds::new(cluster, "jobs", POLL);
    loop {
        rounds.next(|| stream(shared, cluster)).await;
        let owner = cluster.replica.clone();
        let read = shared
            .store
            .blocking(move |s| {
                s.with_conn(|c| {
                    let after = crate::audit::cluster_chain::meta_number(c, PUBLISHED)?;
                    job_copies::own_changes(c, after as i64, BATCH as u32, &owner)
                })
            })
            .await;
        let (last, copies) = match read {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cluster: cannot read jobs to publish");
                continue;
            }
            Err(_) => continue,
        };
        let full = copies.len() == BATCH;
        if let Err(e) = publish_all(cluster, copies).await {
            tracing::warn!(error = %e, "cluster: publishing jobs failed; will try again");
            continue;
        }
        let saved = shared
            .store
            .blocking(move |s| {
                s.with_conn(|c| {
                    crate::audit::cluster_chain::set_meta(c, PUBLISHED, &last.to_string())?;
                    job_copies::forget_changes(c, last)
                })
            })
            .await;
        if !matches!(saved, Ok(Ok(()))) {
            tracing::warn!("cluster: cannot keep how far the jobs were published");
        }
        rounds.backlog = full;
    }
}

/// Publishes every copy, then waits for all their acknowledgements.
async fn publish_all(cluster: &Cluster, copies: Vec<JobCopy>) -> Result<(), String> {
    let mut pending = Vec::with_capacity(copies.len());
    for copy in copies {
        let mut payload = serde_json::to_vec(&copy).map_err(|e| e.to_string())?;
        if payload.len() > MAX_COPY {
            payload = serde_json::to_vec(&copy.clone().cut()).map_err(|e| e.to_string())?;
        }
        let id = format!("{}.{}", copy.id, copy.state);
        let ack = cluster
            .js_publish(&format!("gsv.jobs.{}", copy.id), &payload, |m| {
                m.message_id(id)
            })
            .await?;
        pending.push(ack);
    }
    for ack in pending {
        match tokio::time::timeout(ACK_WAIT, ack).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no acknowledgement from JetStream".into()),
        }
    }
    Ok(())
}

/// In: applies the stream, from its start, for as long as the replica runs.
async fn apply_loop(shared: &Arc<Shared>, cluster: &Cluster) {
    read_for_ever("jobs", 1, |mut next| async move {
        let read = apply_stream(shared, cluster, &mut next).await;
        (next, read)
    })
    .await
}

async fn apply_stream(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    next: &mut u64,
) -> Result<(), String> {
    if !cluster.connected() {
        return Ok(());
    }
    let stream = stream(shared, cluster).await?;
    let mut batches = Batches::open(cluster, &stream, "gsv.jobs.*", *next).await?;
    loop {
        let read = batches.batch(BATCH, || {}).await;
        *next = batches.next;
        let Some(messages) = read? else {
            return Ok(());
        };
        let mut batch = Vec::new();
        for m in messages {
            match serde_json::from_slice::<JobCopy>(&m.payload) {
                Ok(j) if j.owner == cluster.replica => {}
                Ok(j) => match job_copies::check(&j) {
                    Ok(()) => batch.push(j),
                    Err(why) => {
                        tracing::warn!(subject = %m.subject, why, "cluster: job copy refused")
                    }
                },
                Err(e) => {
                    tracing::warn!(subject = %m.subject, error = %e, "cluster: unreadable job copy skipped")
                }
            }
        }
        if !batch.is_empty() {
            let applied = shared
                .store
                .blocking(move |s| {
                    s.with_conn(|c| {
                        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                        let share = job_copies::Share {
                            jobs: crate::jobs::MAX_JOBS_PER_TOKEN,
                            bytes: crate::jobs::MAX_STORED_BYTES_PER_TOKEN,
                        };
                        let n = job_copies::apply(&tx, &batch, share)?;
                        tx.commit()?;
                        Ok(n)
                    })
                })
                .await;
            match applied {
                Ok(Ok(n)) if n > 0 => shared.changes.send(crate::changes::Topic::Jobs),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cluster: jobs from other replicas were not applied")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: jobs from other replicas were not applied")
                }
            }
        }
    }
}

/// A cancel sent to a job's owner.
#[derive(Serialize, Deserialize)]
struct Cancel {
    id: String,
}

/// The owner's answer.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Cancelled {
    Ok(Box<Job>),
    Error(ErrorShape),
}

/// Cancels, for other replicas, jobs this one runs. The replica that asks has judged
/// the caller already (its copy of the job and the caller's authority).
async fn serve_cancels(shared: &Arc<Shared>, cluster: &Cluster) {
    let subject = format!("gsv.jobcancel.{}", cluster.replica);
    loop {
        match cluster.client().subscribe(subject.clone()).await {
            Ok(mut sub) => {
                while let Some(message) = sub.next().await {
                    let Some(reply) = message.reply.clone() else {
                        continue;
                    };
                    let Ok(ask) = serde_json::from_slice::<Cancel>(&message.payload) else {
                        continue;
                    };
                    let shared = Arc::clone(shared);
                    let client = cluster.client().clone();
                    tokio::spawn(async move {
                        let owner = crate::jobs::Reader {
                            token_id: "",
                            admin: true,
                            read_only: false,
                            policy: None,
                        };
                        let answer = match crate::jobs::cancel(&shared, owner, &ask.id).await {
                            Ok(job) => Cancelled::Ok(Box::new(job)),
                            Err(e) => Cancelled::Error(e.to_shape()),
                        };
                        if let Ok(payload) = serde_json::to_vec(&answer) {
                            let _ = client.publish(reply, payload.into()).await;
                        }
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "cluster: cannot listen for job cancels"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Asks `owner` to cancel its job `id`; the job as it is then.
pub async fn cancel_at(cluster: &Cluster, owner: &str, id: &str) -> Result<Job, ErrorShape> {
    let unreachable = || {
        ErrorShape::new(
            ErrorCode::Timeout,
            format!("replica {owner}, which runs job {id}, did not answer the cancel: try again"),
        )
    };
    let payload = serde_json::to_vec(&Cancel { id: id.to_owned() }).map_err(|_| unreachable())?;
    let reply = cluster
        .client()
        .send_request(
            format!("gsv.jobcancel.{owner}"),
            async_nats::Request::new()
                .payload(payload.into())
                .timeout(Some(CANCEL_WAIT)),
        )
        .await
        .map_err(|_| unreachable())?;
    match serde_json::from_slice::<Cancelled>(&reply.payload) {
        Ok(Cancelled::Ok(job)) => Ok(*job),
        Ok(Cancelled::Error(e)) => Err(e),
        Err(_) => Err(unreachable()),
    }
}
