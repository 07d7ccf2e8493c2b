//! Asking every other replica at once and gathering their answers: the node and tool
//! lists ([`super::listing`]) and the approval lists ([`super::approvals`]).
//!
//! The question goes out once on a subject every replica listens to, with a reply
//! inbox; answers are collected until every replica heard from lately
//! ([`super::presence`]) has answered, or [`WAIT`] has passed: a replica that is slow
//! or gone leaves the list short rather than holding the caller.

use super::Cluster;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;

/// Longest wait for the other replicas' answers.
pub const WAIT: Duration = Duration::from_millis(500);

/// Sends `question` on `subject` and returns the answers that decode and pass `valid`.
pub async fn gather<T: DeserializeOwned>(
    cluster: &Cluster,
    subject: &'static str,
    question: &impl Serialize,
    valid: impl Fn(&T) -> bool,
) -> Vec<T> {
    if !cluster.connected() {
        return Vec::new();
    }
    // Every replica heard from lately is waited for; none heard yet (this replica
    // just started) still gets a short wait.
    let peers = cluster.live_peers();
    let wait = if peers == 0 { WAIT / 2 } else { WAIT };
    let client = cluster.client();
    let inbox = client.new_inbox();
    let Ok(mut replies) = client.subscribe(inbox.clone()).await else {
        return Vec::new();
    };
    let Ok(payload) = serde_json::to_vec(question) else {
        return Vec::new();
    };
    if client
        .publish_with_reply(subject, inbox, payload.into())
        .await
        .is_err()
    {
        return Vec::new();
    }
    let mut answers = Vec::new();
    let deadline = tokio::time::sleep(wait);
    tokio::pin!(deadline);
    while peers == 0 || answers.len() < peers {
        tokio::select! {
            _ = &mut deadline => break,
            m = replies.next() => match m {
                Some(m) => {
                    if let Some(answer) = serde_json::from_slice::<T>(&m.payload)
                        .ok()
                        .filter(|a| valid(a))
                    {
                        answers.push(answer);
                    }
                }
                None => break,
            }
        }
    }
    answers
}
