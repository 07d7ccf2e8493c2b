//! Node and tool lists across replicas: `nodes.list`, `GET /v1/nodes`, `tools.list`
//! and `GET /v1/tools` on any replica show the nodes (each with the replica it is
//! connected to) and tools every replica holds.
//!
//! The replica asked sends the caller's token id and selector on `gsv.nodes.list`
//! with a reply inbox ([`gather`]); every other replica answers ([`serve`]) with the
//! *online* nodes it holds that this token may see there (its own policy check and
//! the selector, exactly as for its own callers). Answers are collected until every
//! replica heard from lately ([`super::presence`]) has answered, or half a second has
//! passed, then merged with the local list by the fleet floor (`crate::fleet`): a node
//! online elsewhere replaces this replica's memory of it as offline.

use super::Cluster;
use crate::state::Shared;
use gsv_protocol::method::{NodeSummary, ToolEntry};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

const SUBJECT: &str = "gsv.nodes.list";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ask {
    token_id: String,
    select: Option<String>,
    origin: String,
    /// `tools` for tool entries, `show` for one node's detail (`node`); nodes
    /// otherwise.
    #[serde(default)]
    what: Option<String>,
    #[serde(default)]
    node: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Listed {
    replica: String,
    #[serde(default)]
    nodes: Vec<NodeSummary>,
    #[serde(default)]
    tools: Vec<ToolEntry>,
    #[serde(default)]
    detail: Option<gsv_protocol::offer::NodeDetail>,
}

/// The online nodes the other replicas hold that `token_id` may see (`select`
/// applied there).
pub async fn gather(cluster: &Cluster, token_id: &str, select: Option<&str>) -> Vec<NodeSummary> {
    ask(cluster, token_id, select, None)
        .await
        .into_iter()
        .flat_map(|listed| {
            let replica = listed.replica;
            listed.nodes.into_iter().map(move |mut n| {
                n.replica = Some(replica.clone());
                n
            })
        })
        .collect()
}

/// Node `node` as the replica that holds it shows it to `token_id` (`nodes.show`),
/// if another replica holds it online.
pub async fn show_elsewhere(
    cluster: &Cluster,
    token_id: &str,
    node: &str,
) -> Option<gsv_protocol::offer::NodeDetail> {
    ask_about(cluster, token_id, None, Some("show"), Some(node))
        .await
        .into_iter()
        .find_map(|listed| {
            let replica = listed.replica;
            listed.detail.map(|mut d| {
                d.node.replica = Some(replica);
                d
            })
        })
}

/// The tools of the online nodes the other replicas hold that `token_id` may see.
pub async fn gather_tools(cluster: &Cluster, token_id: &str) -> Vec<ToolEntry> {
    ask(cluster, token_id, None, Some("tools"))
        .await
        .into_iter()
        .flat_map(|listed| listed.tools)
        .collect()
}

/// Asks every other replica and gathers their answers.
async fn ask(
    cluster: &Cluster,
    token_id: &str,
    select: Option<&str>,
    what: Option<&str>,
) -> Vec<Listed> {
    ask_about(cluster, token_id, select, what, None).await
}

/// [`ask`] about one node.
async fn ask_about(
    cluster: &Cluster,
    token_id: &str,
    select: Option<&str>,
    what: Option<&str>,
    node: Option<&str>,
) -> Vec<Listed> {
    let question = Ask {
        token_id: token_id.to_owned(),
        select: select.map(str::to_owned),
        origin: cluster.replica.clone(),
        what: what.map(str::to_owned),
        node: node.map(str::to_owned),
    };
    super::gather::gather(cluster, SUBJECT, token_id, &question, |l: &Listed| {
        super::valid_replica_name(&l.replica)
    })
    .await
}

/// Lists this replica builds for the others at once; the next question waits (in
/// the NATS subscription) until one is sent.
const ANSWERS_AT_ONCE: usize = 16;

/// Answers the other replicas' list requests with the online nodes held here.
pub async fn serve(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    let answering = Arc::new(tokio::sync::Semaphore::new(ANSWERS_AT_ONCE));
    loop {
        if let Ok(mut sub) = cluster.client().subscribe(SUBJECT).await {
            while let Some(message) = sub.next().await {
                let Ok(turn) = Arc::clone(&answering).acquire_owned().await else {
                    return;
                };
                let shared = Arc::clone(&shared);
                let cluster = Arc::clone(&cluster);
                tokio::spawn(async move {
                    answer(&shared, &cluster, message).await;
                    drop(turn);
                });
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn answer(shared: &Arc<Shared>, cluster: &Cluster, message: async_nats::Message) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    let Ok(ask) = serde_json::from_slice::<Ask>(&message.payload) else {
        return;
    };
    if ask.origin == cluster.replica {
        return;
    }
    let token_id = ask.token_id.clone();
    let found = shared
        .store
        .blocking(move |store| store.active_by_id(&token_id))
        .await;
    // A token this replica does not accept sees nothing here.
    let wants_tools = ask.what.as_deref() == Some("tools");
    let mut tools = Vec::new();
    let mut detail = None;
    let nodes = match super::caller_policy(found) {
        Ok((_, policy)) if ask.what.as_deref() == Some("show") => {
            // Only the replica that holds the node online tells.
            detail = ask
                .node
                .as_deref()
                .and_then(|id| crate::inventory::show_node(shared, &policy, id).ok())
                .filter(|d| d.node.online);
            Vec::new()
        }
        Ok((_, policy)) if wants_tools => {
            tools = shared
                .registry
                .tool_entries(|n, c| policy.visible(n, c))
                .into_iter()
                .filter(|t| t.online)
                .collect();
            Vec::new()
        }
        Ok((_, policy)) => {
            let selector = ask
                .select
                .as_deref()
                .and_then(|s| crate::inventory::parse_selector(s).ok());
            crate::inventory::visible_nodes(
                shared,
                &crate::inventory::viewer(&policy),
                selector.as_ref(),
            )
            .into_iter()
            .filter(|n| n.online)
            .collect()
        }
        Err(_) => Vec::new(),
    };
    let listed = Listed {
        replica: cluster.replica.clone(),
        nodes,
        tools,
        detail,
    };
    if let Ok(payload) = serde_json::to_vec(&listed) {
        shared.metrics.list_answers.inc();
        let _ = cluster.client().publish(reply, payload.into()).await;
    }
}
