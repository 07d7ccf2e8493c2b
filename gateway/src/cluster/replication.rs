//! The two loops every kind of state the replicas share runs (tokens, labels, jobs,
//! the audit chain), written once: publishing what changed in this replica's store,
//! round after round ([`Rounds`]), and applying a stream in batches ([`Batches`],
//! [`read_for_ever`]); and the stream itself, made the same way for each
//! ([`open_stream`]). Each kind keeps what is its own — what a round reads and
//! publishes, how a batch is checked and applied —; the waiting, the NATS connection,
//! making the stream, reading it again after a failure or a reconnection and gathering
//! the messages already here into one batch live here.

use super::Cluster;
use async_nats::jetstream::consumer::pull::Ordered;
use async_nats::jetstream::stream::{self, Stream};
use async_nats::jetstream::Message;
use futures_util::{FutureExt, StreamExt};
use std::future::Future;
use std::time::Duration;
use tokio::time::{Interval, MissedTickBehavior};

/// How long a stream whose reading failed waits before it is read again.
const AGAIN: Duration = Duration::from_millis(500);
/// How often a stream being read with nothing new checks whether NATS reconnected
/// meanwhile (a restarted server lost the consumer).
const CHECK: Duration = Duration::from_millis(500);

/// How a shared stream keeps what is published on it.
pub(super) struct Kept {
    pub name: &'static str,
    /// `gsv.KIND.>` or `gsv.KIND.*`.
    pub subjects: &'static str,
    /// Only the newest message of each subject (a record's last state) is kept.
    pub newest_only: bool,
    /// Messages older than this are dropped (`None`: kept for good).
    pub max_age: Option<Duration>,
}

/// The stream `kept` describes, made if it is missing: on file, a message published
/// twice within 2 minutes (a retry after a failure) kept once.
pub(super) async fn open_stream(cluster: &Cluster, kept: Kept) -> Result<Stream, String> {
    cluster
        .jetstream()
        .get_or_create_stream(stream::Config {
            name: kept.name.to_owned(),
            subjects: vec![kept.subjects.to_owned()],
            max_messages_per_subject: if kept.newest_only { 1 } else { 0 },
            max_age: kept.max_age.unwrap_or_default(),
            storage: stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())
}

/// The publishing side's rounds: one every poll, at once again while a round left a
/// backlog, each only with NATS connected and the kind's stream made.
pub(super) struct Rounds<'a> {
    cluster: &'a Cluster,
    /// The kind of state, for the logs.
    what: &'static str,
    tick: Interval,
    made: bool,
    /// Set by a round that left work behind: the next one starts at once.
    pub backlog: bool,
}

impl<'a> Rounds<'a> {
    pub fn new(cluster: &'a Cluster, what: &'static str, poll: Duration) -> Self {
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Rounds {
            cluster,
            what,
            tick,
            made: false,
            backlog: false,
        }
    }

    /// Waits until the next round may run: the poll passed (not while a backlog is
    /// left), NATS is connected and the stream is made (`make`, until it once worked).
    pub async fn next<F>(&mut self, make: impl Fn() -> F)
    where
        F: Future<Output = Result<Stream, String>>,
    {
        loop {
            if !std::mem::take(&mut self.backlog) {
                self.tick.tick().await;
            }
            if !self.cluster.connected() {
                continue;
            }
            if !self.made {
                match make().await {
                    Ok(_) => self.made = true,
                    Err(e) => {
                        tracing::warn!(state = self.what, error = %e, "cluster: cannot make the stream; will try again");
                        continue;
                    }
                }
            }
            return;
        }
    }
}

/// Reads a stream for as long as the replica runs: `read` is one reading (typically
/// over [`Batches`]) from a stream sequence on, giving back the sequence to go on
/// from; it runs again after the reading ended (NATS reconnected) or failed (then
/// logged), half a second later.
pub(super) async fn read_for_ever<F>(what: &'static str, from: u64, mut read: impl FnMut(u64) -> F)
where
    F: Future<Output = (u64, Result<(), String>)>,
{
    let mut next = from;
    loop {
        let (went_to, outcome) = read(next).await;
        next = went_to;
        if let Err(e) = outcome {
            tracing::warn!(state = what, error = %e, "cluster: reading a shared stream failed; starting again");
        }
        tokio::time::sleep(AGAIN).await;
    }
}

/// One reading of a stream, in batches, from a sequence on, until the stream ends or
/// NATS reconnects.
pub(super) struct Batches<'a> {
    cluster: &'a Cluster,
    /// [`Cluster::connects`] when the reading began.
    connects: u64,
    messages: Ordered,
    check: Interval,
    /// The stream sequence after the last message taken.
    pub next: u64,
    /// An error met while a batch was gathered: returned at the next call.
    failed: Option<String>,
}

impl<'a> Batches<'a> {
    /// Reads `stream`'s messages under `filter` from sequence `from` on.
    pub async fn open(
        cluster: &'a Cluster,
        stream: &Stream,
        filter: &str,
        from: u64,
    ) -> Result<Batches<'a>, String> {
        let connects = cluster.connects();
        let messages = super::replay(stream, filter, from).await?;
        let mut check = tokio::time::interval(CHECK);
        check.tick().await;
        Ok(Batches {
            cluster,
            connects,
            messages,
            check,
            next: from,
            failed: None,
        })
    }

    /// The next batch: waits for a message, then takes those already here, up to
    /// `max`. `Ok(None)` when the stream ended or NATS reconnected since the reading
    /// began (read it again from [`Batches::next`]). `idle` is called each time half a
    /// second passes with nothing to read.
    pub async fn batch(
        &mut self,
        max: usize,
        mut idle: impl FnMut(),
    ) -> Result<Option<Vec<Message>>, String> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let first = loop {
            tokio::select! {
                m = self.messages.next() => break m,
                _ = self.check.tick() => {
                    idle();
                    if self.cluster.connects() != self.connects {
                        return Ok(None);
                    }
                }
            }
        };
        let Some(first) = first else {
            return Ok(None);
        };
        let first = first.map_err(|e| e.to_string())?;
        let mut batch = Vec::new();
        batch.extend(self.took(first));
        while batch.len() < max {
            match self.messages.next().now_or_never() {
                Some(Some(Ok(m))) => batch.extend(self.took(m)),
                Some(Some(Err(e))) => {
                    self.failed = Some(e.to_string());
                    break;
                }
                Some(None) | None => break,
            }
        }
        Ok(Some(batch))
    }

    /// A message read: the sequence goes past it, and it is opened — one no replica
    /// sealed for its subject is dropped here, before any kind's code sees it.
    fn took(&mut self, mut m: Message) -> Option<Message> {
        if let Ok(info) = m.info() {
            self.next = info.stream_sequence + 1;
        }
        let plain = self
            .cluster
            .open_stored(m.message.subject.as_str(), &m.message.payload)?;
        m.message.payload = plain.into();
        Some(m)
    }
}
