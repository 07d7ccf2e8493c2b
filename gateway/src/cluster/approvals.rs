//! Approvals decided on any replica: a call waits for its approval on the replica
//! that routes it (the one holding its node), and an operator may decide on another.
//!
//! A decision for a request this replica does not know ([`decide_elsewhere`]) is sent
//! on `gsv.approvals.decide`; every replica listens ([`serve`]), and only the one
//! that opened the request (its row is in that replica's store) decides it, exactly as
//! its own operators would — audit row, events, the waiting call released — and
//! answers with the decided request or the refusal. No answer within [`WAIT`] means no
//! replica has it: `not_found`, as on one gateway.
//!
//! Lists ([`pages`]): the replica asked gathers the first `offset + limit` requests
//! of every other replica on `gsv.approvals.list` ([`super::gather`]); the fleet floor
//! merges them with its own (`crate::fleet`).

use super::Cluster;
use crate::approvals::{ApprovalError, ApprovalRequest, ListPage, Verdict};
use crate::state::Shared;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

const SUBJECT: &str = "gsv.approvals.decide";
const LIST_SUBJECT: &str = "gsv.approvals.list";
/// The most requests one replica sends for a list (the page's end, `offset + limit`):
/// a page further than that is cut short.
pub const MAX_LISTED: u32 = crate::approvals::MAX_LISTED_EVERYWHERE;
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

#[derive(Debug, Serialize, Deserialize)]
struct ListAsk {
    all: bool,
    /// The page's end: how many of its newest requests each replica sends.
    upto: u32,
    origin: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Listed {
    replica: String,
    page: ListPage,
}

/// The first `upto` requests (pending only unless `all`) of every other replica, a
/// page each (the caller was judged an operator already).
pub async fn pages(cluster: &Cluster, all: bool, upto: u32) -> Vec<ListPage> {
    let ask = ListAsk {
        all,
        upto: upto.min(MAX_LISTED),
        origin: cluster.replica.clone(),
    };
    super::gather::gather(cluster, LIST_SUBJECT, "operator", &ask, |l: &Listed| {
        super::valid_replica_name(&l.replica)
    })
    .await
    .into_iter()
    .map(|l| l.page)
    .collect()
}

/// Answers the other replicas' list requests with this replica's first requests.
async fn serve_lists(shared: &Arc<Shared>, cluster: &Arc<Cluster>) {
    loop {
        if let Ok(mut sub) = cluster.client().subscribe(LIST_SUBJECT).await {
            while let Some(message) = sub.next().await {
                let (Some(reply), Ok(ask)) = (
                    message.reply.clone(),
                    serde_json::from_slice::<ListAsk>(&message.payload),
                ) else {
                    continue;
                };
                if ask.origin == cluster.replica {
                    continue;
                }
                let (shared, cluster) = (Arc::clone(shared), Arc::clone(cluster));
                tokio::spawn(async move {
                    let upto = ask.upto.min(MAX_LISTED);
                    let Ok(page) = shared.approvals.page(ask.all, upto, 0).await else {
                        return;
                    };
                    let listed = Listed {
                        replica: cluster.replica.clone(),
                        page,
                    };
                    if let Ok(payload) = serde_json::to_vec(&listed) {
                        let _ = cluster.client().publish(reply, payload.into()).await;
                    }
                });
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Decides, for other replicas, the requests this one opened, and answers their list
/// requests.
pub async fn serve(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    tokio::join!(
        serve_decisions(&shared, &cluster),
        serve_lists(&shared, &cluster)
    );
}

/// Decides, for other replicas, the requests this one opened.
async fn serve_decisions(shared: &Arc<Shared>, cluster: &Arc<Cluster>) {
    loop {
        match cluster.client().subscribe(SUBJECT).await {
            Ok(mut sub) => {
                while let Some(message) = sub.next().await {
                    let shared = Arc::clone(shared);
                    let cluster = Arc::clone(cluster);
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
