//! The replicas' side of core NATS, sealed: [`Bus`] is the only way cluster code
//! publishes, asks and subscribes, and it passes every payload through the one
//! envelope ([`super::seal`]) — sealed for its subject on the way out, opened (and
//! dropped with a warning when it is not a replica's, or is replayed) on the way in.
//! Call sites keep `async_nats`'s shapes (`publish`, `send_request`, `subscribe` and
//! `next`), so no subject can be written or read around it by mistake.
//!
//! JetStream goes through the same envelope at its own two doors:
//! [`super::Cluster::js_publish`] out, [`super::replication::Batches`] (and the slot
//! and directory readers) in.

use super::seal::{Seal, SealError, Taken};
use async_nats::subject::ToSubject;
use async_nats::{
    Message, PublishError, PublishErrorKind, Request, RequestError, RequestErrorKind,
};
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How long a request waits for its answer when it names no timeout (NATS's own
/// default).
pub(crate) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Core NATS for the replicas: every payload sealed with the cluster key.
#[derive(Clone)]
pub(crate) struct Bus {
    client: async_nats::Client,
    seal: Arc<Seal>,
}

impl Bus {
    pub(super) fn new(client: async_nats::Client, seal: Arc<Seal>) -> Bus {
        Bus { client, seal }
    }

    fn sealed(&self, subject: &str, payload: &[u8]) -> Result<Bytes, PublishError> {
        self.seal
            .seal(subject, payload)
            .map(Bytes::from)
            .map_err(|e| PublishError::with_source(PublishErrorKind::Send, e))
    }

    /// Publishes `payload` on `subject`, sealed.
    pub async fn publish<S: ToSubject>(
        &self,
        subject: S,
        payload: Bytes,
    ) -> Result<(), PublishError> {
        let subject = subject.to_subject();
        let body = self.sealed(subject.as_str(), &payload)?;
        self.client.publish(subject, body).await
    }

    /// Publishes `payload` on `subject` with a reply subject, sealed.
    pub async fn publish_with_reply<S: ToSubject, R: ToSubject>(
        &self,
        subject: S,
        reply: R,
        payload: Bytes,
    ) -> Result<(), PublishError> {
        let subject = subject.to_subject();
        let body = self.sealed(subject.as_str(), &payload)?;
        self.client.publish_with_reply(subject, reply, body).await
    }

    /// A request whose payload is sealed; its answer is the first message on the
    /// request's own inbox that a replica sealed for it (one that is not is dropped
    /// and the wait goes on, so a forged answer cannot fail the request), within the
    /// request's timeout ([`REQUEST_TIMEOUT`] when it names none).
    pub async fn send_request<S: ToSubject>(
        &self,
        subject: S,
        request: Request,
    ) -> Result<Message, RequestError> {
        let subject = subject.to_subject();
        let payload = request.payload.unwrap_or_default();
        let body = self
            .seal
            .seal(subject.as_str(), &payload)
            .map_err(|e| RequestError::with_source(RequestErrorKind::Other, e))?;
        let inbox = request.inbox.unwrap_or_else(|| self.client.new_inbox());
        let mut answers = self.client.subscribe(inbox.clone()).await?;
        self.client
            .publish_with_reply(subject, inbox, body.into())
            .await?;
        let answer = async {
            loop {
                let Some(mut m) = answers.next().await else {
                    return Err(RequestError::with_source(
                        RequestErrorKind::Other,
                        "the answers' subscription ended",
                    ));
                };
                if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
                    return Err(RequestError::with_source(
                        RequestErrorKind::NoResponders,
                        "no responders",
                    ));
                }
                match self.seal.open(m.subject.as_str(), &m.payload, Taken::Reply) {
                    Ok(plain) => {
                        m.payload = plain.into();
                        return Ok(m);
                    }
                    Err(e) => refused(m.subject.as_str(), &e),
                }
            }
        };
        match request.timeout.unwrap_or(Some(REQUEST_TIMEOUT)) {
            Some(wait) => tokio::time::timeout(wait, answer)
                .await
                .map_err(|e| RequestError::with_source(RequestErrorKind::TimedOut, e))?,
            None => answer.await,
        }
    }

    /// A subscription whose messages are opened; those that are not a replica's, or
    /// were taken already, are dropped.
    pub async fn subscribe<S: ToSubject>(
        &self,
        subject: S,
    ) -> Result<Subscription, async_nats::SubscribeError> {
        let subject = subject.to_subject();
        let filter = subject.to_string();
        let inner = self.client.subscribe(subject).await?;
        Ok(Subscription {
            inner,
            filter,
            seal: Arc::clone(&self.seal),
        })
    }

    pub async fn flush(&self) -> Result<(), async_nats::client::FlushError> {
        self.client.flush().await
    }

    pub fn server_info(&self) -> async_nats::ServerInfo {
        self.client.server_info()
    }

    /// A new inbox subject (for a gather's replies).
    pub fn new_inbox(&self) -> String {
        self.client.new_inbox()
    }
}

/// A sealed subscription: [`Subscription::next`] gives the opened messages only.
pub(crate) struct Subscription {
    inner: async_nats::Subscriber,
    filter: String,
    seal: Arc<Seal>,
}

impl Subscription {
    /// The next message a replica sealed for its subject, opened (its payload the
    /// plain one); `None` when the subscription ended.
    pub async fn next(&mut self) -> Option<Message> {
        loop {
            let mut m = self.inner.next().await?;
            let taken = Taken::Live {
                filter: &self.filter,
            };
            match self.seal.open(m.subject.as_str(), &m.payload, taken) {
                Ok(plain) => {
                    m.payload = plain.into();
                    return Some(m);
                }
                Err(e) => refused(m.subject.as_str(), &e),
            }
        }
    }
}

/// Logs a message refused at the envelope (counted by the seal,
/// `gsv_cluster_refused_messages`): a warning at most once a second, so a flood of
/// forgeries cannot flood the log; the rest at debug level.
pub(super) fn refused(subject: &str, e: &SealError) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    if LAST.swap(now, Ordering::Relaxed) != now {
        tracing::warn!(subject, reason = e.reason(), error = %e, "cluster: a message on NATS that no replica sealed for its subject (or a replay) was dropped");
    } else {
        tracing::debug!(subject, reason = e.reason(), error = %e, "cluster: a message on NATS was dropped");
    }
}
