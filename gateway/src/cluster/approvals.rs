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
//! Lists ([`list_everywhere`]): the replica asked gathers the first `offset + limit`
//! requests of every other replica on `gsv.approvals.list` ([`super::gather`]) and
//! merges them with its own: newest first, totals and per-agent counts summed.

use super::Cluster;
use crate::approvals::{AgentCount, ApprovalError, ApprovalRequest, ListPage, ListQuery, Verdict};
use crate::state::Shared;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

const SUBJECT: &str = "gsv.approvals.decide";
const LIST_SUBJECT: &str = "gsv.approvals.list";
/// The most requests one replica sends for a list (the page's end, `offset + limit`):
/// a page further than that is cut short.
const MAX_LISTED: u32 = 5_000;
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

/// `approvals.list` in cluster mode: this replica's requests and every other
/// replica's, as one page (the caller was judged an operator already).
pub async fn list_everywhere(shared: &Shared, query: ListQuery) -> Result<ListPage, ApprovalError> {
    let Some(cluster) = &shared.cluster else {
        return shared.approvals.list(query).await;
    };
    let limit = query.limit.clamp(1, crate::approvals::MAX_PAGE);
    let upto = query.offset.saturating_add(limit).min(MAX_LISTED);
    let ask = ListAsk {
        all: query.all,
        upto,
        origin: cluster.replica.clone(),
    };
    let (local, remote) = tokio::join!(
        shared.approvals.page(query.all, upto, 0),
        super::gather::gather(cluster, LIST_SUBJECT, "operator", &ask, |l: &Listed| {
            super::valid_replica_name(&l.replica)
        })
    );
    let pages = std::iter::once(local?).chain(remote.into_iter().map(|l| l.page));
    Ok(merge(pages, query.offset, limit))
}

/// One page out of several replicas' first requests: newest first (then by id),
/// `offset` skipped, `limit` kept; totals and per-agent counts summed, fewest first.
fn merge(pages: impl Iterator<Item = ListPage>, offset: u32, limit: u32) -> ListPage {
    let mut all = Vec::new();
    let mut total = 0;
    let mut by_agent: std::collections::BTreeMap<String, u64> = Default::default();
    for page in pages {
        total += page.total;
        for a in page.by_agent {
            *by_agent.entry(a.agent).or_default() += a.count;
        }
        all.extend(page.approvals);
    }
    all.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    let approvals = all
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect();
    let mut by_agent: Vec<AgentCount> = by_agent
        .into_iter()
        .map(|(agent, count)| AgentCount { agent, count })
        .collect();
    by_agent.sort_by(|a, b| a.count.cmp(&b.count).then_with(|| a.agent.cmp(&b.agent)));
    ListPage {
        approvals,
        total,
        offset: u64::from(offset),
        by_agent,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, agent: &str, at: u64) -> ApprovalRequest {
        serde_json::from_value(serde_json::json!({
            "id": id, "agent": agent, "tokenId": "00ff", "node": "n1", "tool": "Echo",
            "argsHash": "", "summary": "", "reason": "", "state": "pending",
            "createdAt": at, "expiresAt": at + 1000, "decidedAt": null, "decidedBy": null
        }))
        .expect("a request")
    }

    fn page(requests: Vec<ApprovalRequest>) -> ListPage {
        let mut by_agent: std::collections::BTreeMap<String, u64> = Default::default();
        for r in &requests {
            *by_agent.entry(r.agent.clone()).or_default() += 1;
        }
        ListPage {
            total: requests.len() as u64,
            approvals: requests,
            offset: 0,
            by_agent: by_agent
                .into_iter()
                .map(|(agent, count)| AgentCount { agent, count })
                .collect(),
        }
    }

    #[test]
    fn pages_of_several_replicas_merge_newest_first_with_summed_counts() {
        let a = page(vec![request("a3", "x", 30), request("a1", "x", 10)]);
        let b = page(vec![request("b4", "y", 40), request("b2", "x", 20)]);
        let merged = merge([a, b].into_iter(), 1, 2);
        let ids: Vec<&str> = merged.approvals.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a3", "b2"]);
        assert_eq!((merged.total, merged.offset), (4, 1));
        let counts: Vec<(&str, u64)> = merged
            .by_agent
            .iter()
            .map(|c| (c.agent.as_str(), c.count))
            .collect();
        assert_eq!(counts, [("y", 1), ("x", 3)]);
    }
}
