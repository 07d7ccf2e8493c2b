//! Approvals decided on any replica: a call waits for its approval on the replica
//! that routes it (the one holding its node), and an operator may decide on another.
//!
//! A decision for a request this replica does not know ([`decide_elsewhere`]) is sent
//! on `gsv.approvals.decide`; every replica listens ([`serve`]), and only the one
//! that opened the request (its row is in that replica's store) decides it, exactly as
//! its own operators would — audit row, events, the waiting call released — and
//! answers with the decided request or the refusal. No answer within [`WAIT`] means no
//! replica has it: `not_found`, as on one gateway.

use super::Cluster;
use crate::approvals::{ApprovalError, ApprovalRequest, Verdict};
use crate::state::Shared;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

const SUBJECT: &str = "gsv.approvals.decide";
/// How long the deciding replica waits for the one that holds the request.
const WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Serialize, Deserialize)]
struct Decide {
    id: String,
    verdict: Verdict,
    by: String,
    origin: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Answer {
    Ok(Box<ApprovalRequest>),
    NotFound,
    AlreadyDecided,
    Expired,
    Failed(String),
}

/// Asks the replica that holds request `id` to decide it. `None` when no replica
/// answers (nobody holds it, or NATS is down).
pub async fn decide_elsewhere(
    cluster: &Cluster,
    id: &str,
    verdict: Verdict,
    by: &str,
) -> Option<Result<ApprovalRequest, ApprovalError>> {
    if !cluster.connected() {
        return None;
    }
    let body = Decide {
        id: id.to_owned(),
        verdict,
        by: by.to_owned(),
        origin: cluster.replica.clone(),
    };
    let payload = serde_json::to_vec(&body).ok()?;
    let reply = cluster
        .client()
        .send_request(
            SUBJECT,
            async_nats::Request::new()
                .payload(payload.into())
                .timeout(Some(WAIT)),
        )
        .await
        .ok()?;
    let id = id.to_owned();
    Some(
        match serde_json::from_slice::<Answer>(&reply.payload).ok()? {
            Answer::Ok(request) => Ok(*request),
            Answer::NotFound => Err(ApprovalError::NotFound { id }),
            Answer::AlreadyDecided => Err(ApprovalError::AlreadyDecided { id }),
            Answer::Expired => Err(ApprovalError::Expired { id }),
            Answer::Failed(message) => Err(ApprovalError::Store(crate::store::StoreError::Policy(
                message,
            ))),
        },
    )
}

/// Decides, for other replicas, the requests this one opened.
pub async fn serve(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    loop {
        match cluster.client().subscribe(SUBJECT).await {
            Ok(mut sub) => {
                while let Some(message) = sub.next().await {
                    let shared = Arc::clone(&shared);
                    let cluster = Arc::clone(&cluster);
                    tokio::spawn(async move { answer(&shared, &cluster, message).await });
                }
            }
            Err(e) => tracing::warn!(error = %e, "cluster: cannot listen for approval decisions"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn answer(shared: &Shared, cluster: &Cluster, message: async_nats::Message) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    let Ok(ask) = serde_json::from_slice::<Decide>(&message.payload) else {
        return;
    };
    // Only the replica that opened the request answers.
    if ask.origin == cluster.replica
        || !super::valid_replica_name(&ask.origin)
        || !shared.approvals.knows(&ask.id).await
    {
        return;
    }
    let by = format!("{}@{}", ask.by, ask.origin);
    let answer = match shared.decide_here(&ask.id, ask.verdict, &by).await {
        Ok(request) => Answer::Ok(Box::new(request)),
        Err(ApprovalError::NotFound { .. }) => Answer::NotFound,
        Err(ApprovalError::AlreadyDecided { .. }) => Answer::AlreadyDecided,
        Err(ApprovalError::Expired { .. }) => Answer::Expired,
        Err(e) => Answer::Failed(e.to_string()),
    };
    if let Ok(payload) = serde_json::to_vec(&answer) {
        let _ = cluster.client().publish(reply, payload.into()).await;
    }
}
