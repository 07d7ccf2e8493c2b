//! What crosses replicas for one forwarded call, and what a replica keeps of the calls
//! in flight between them: the messages (the call, the holder's word, the answer) and
//! the book of waiting callers that answers, progress and holders' words are handed
//! to, whether they come over NATS or a replica link ([`super::calls`],
//! [`super::link`]).

use super::Cluster;
use crate::reattach::Dispatch;
use crate::registry::ProgressSink;
use gsv_protocol::event::CallProgress;
use gsv_protocol::ErrorShape;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Where replica `replica` takes the calls forwarded to it.
pub(super) fn call_subject(replica: &str) -> String {
    format!("gsv.replica.{replica}.call")
}

/// A forwarded call.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Forwarded {
    pub token_id: String,
    pub name: String,
    pub args: Box<RawValue>,
    pub timeout_ms: Option<u64>,
    /// Names this call's cancel subject.
    pub key: String,
    /// Where to publish the call's progress events, if the caller wants them.
    pub progress_to: Option<String>,
    /// Where the holder says that it holds the call (its name; for a call asked for
    /// again, whose holder the asker does not know) and describes a call it sends with
    /// an approval it got.
    #[serde(default)]
    pub holder_to: Option<String>,
    pub origin: String,
    /// The call id the node gets the call under, given by the forwarding replica
    /// (ids are unique across replicas): it describes the call by this id before it
    /// leaves, so it can ask the node's next holder for it if the holder dies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<u64>,
    /// Not a new call: the one an earlier holder sent its node, asked for again
    /// ([`super::resume`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Dispatch>,
}

/// The holder's word on a forwarded call: its name, so the forwarding replica can
/// stop waiting if it dies; or, before a call with an approval got here leaves for the
/// node, how it is sent, so the forwarding replica can ask the node's next holder for
/// it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Holder {
    pub holder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<Dispatch>,
}

/// What the holder answers. `audited`: the holder routed the call and wrote its
/// audit row (the forwarding replica then writes none: one call, one row in the
/// cluster's chain); absent (an older holder) or `false`, the forwarding replica
/// writes the row.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Answer {
    Ok {
        result: Box<RawValue>,
        progress: usize,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        audited: bool,
    },
    Err {
        error: ErrorShape,
        progress: usize,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        audited: bool,
    },
}

impl Answer {
    pub(super) fn err(error: ErrorShape) -> Answer {
        Answer::Err {
            error,
            progress: 0,
            audited: false,
        }
    }
}

/// How long the holder keeps a forwarded caller's policy (a revocation applied here
/// forgets it at once).
pub const POLICY_TTL: Duration = Duration::from_secs(30);

/// A token's record and the policy it is judged by.
pub(super) type Judged = Arc<(crate::store::TokenRecord, crate::policy::Policy)>;

/// What one replica keeps for calls crossing replicas.
#[derive(Default)]
pub struct CallBook {
    /// Calls forwarded from here that want progress: their sink and how many events
    /// reached it.
    pub(super) progress: dashmap::DashMap<String, (ProgressSink, Arc<AtomicUsize>)>,
    /// Calls running here for another replica, by key.
    pub(super) running: dashmap::DashMap<String, CancellationToken>,
    /// Callers' tokens looked up here, with when.
    pub(super) policies: dashmap::DashMap<String, (Instant, Judged)>,
    /// Calls forwarded from here: the replica that said it holds each.
    pub(super) holders: dashmap::DashMap<String, String>,
    /// Calls forwarded from here and sent to their node: how (to ask again).
    pub(super) dispatches: dashmap::DashMap<String, Dispatch>,
    /// Calls forwarded from here and not answered yet, by key.
    pub(super) waiting: dashmap::DashMap<String, ()>,
    /// Calls sent on a link ([`super::link`]), waiting for their answer (on the link,
    /// or on NATS at [`answer_subject`]), by key.
    pub(super) answers: dashmap::DashMap<String, tokio::sync::oneshot::Sender<Answer>>,
}

/// Where a call sent on a link is answered on NATS when its link fails first.
pub(super) fn answer_subject(origin: &str, key: &str) -> String {
    format!("gsv.answer.{origin}.{key}")
}

/// Hands the answer to the call `key`, sent on a link, to its waiting caller.
pub(super) fn answered(cluster: &Cluster, key: &str, answer: Answer) {
    if let Some((_, tx)) = cluster.calls.answers.remove(key) {
        let _ = tx.send(answer);
    }
}

/// A progress event of the call `key`, forwarded from here, to its caller.
pub(super) fn progressed(cluster: &Cluster, key: &str, progress: Option<CallProgress>) {
    let Some(entry) = cluster.calls.progress.get(key) else {
        return;
    };
    if let Some(p) = progress {
        let _ = entry.0.try_send(p);
    }
    entry.1.fetch_add(1, Ordering::SeqCst);
}

/// The holder's word on the call `key`, forwarded from here and still waiting.
pub(super) fn held(cluster: &Cluster, key: &str, word: Holder) {
    if !cluster.calls.waiting.contains_key(key) || !super::valid_replica_name(&word.holder) {
        return;
    }
    if let Some(d) = word.dispatch {
        cluster.calls.dispatches.insert(key.to_owned(), d);
    }
    cluster.calls.holders.insert(key.to_owned(), word.holder);
}

impl CallBook {
    /// Forgets a token's policy (it was revoked).
    pub fn forget(&self, token_id: &str) {
        self.policies.remove(token_id);
    }
}
