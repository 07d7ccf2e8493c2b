//! `tools.changed` events for nodes held by other replicas: WebSocket agents hear of
//! a node that connects, is replaced or accepted, or goes away on any replica, as on
//! one gateway.
//!
//! The replica that holds the node knows its tools; it publishes the change on
//! [`SUBJECT`] with the node's tool names (those not hidden until accepted — names
//! only, which every replica lists anyway). Every other replica tells each of its own
//! agents whose policy may see one of those tools, exactly the rule a replica applies
//! to its own nodes (`Shared::tools_changed`). A `disconnected` from a replica that no
//! longer holds the node (it moved: the directory names another live replica, or
//! this one holds it) is not passed on: the node did not go away. A change passed on
//! also moves the directory's epoch, so this replica's MCP sessions gather the other
//! replicas' lists again and are told `list_changed` if theirs changed (tools
//! accepted on another replica change no directory entry).

use super::Cluster;
use crate::state::Shared;
use gsv_protocol::event::ToolsChanged;
use gsv_protocol::names::NamespacedName;
use gsv_protocol::EventName;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Where replicas say that a node's tools changed.
const SUBJECT: &str = "gsv.tools.changed";
/// Tool names one message carries at most (a node declares far fewer).
const MAX_TOOLS: usize = 1024;

/// One change as it travels.
#[derive(Debug, Serialize, Deserialize)]
struct Change {
    /// The replica that holds (or held) the node.
    origin: String,
    node: String,
    change: String,
    /// The node's tools an agent may be shown (not hidden until accepted).
    tools: Vec<String>,
}

impl Cluster {
    /// Tells the other replicas that `node`'s tools changed (in the background).
    pub fn tools_changed(&self, node: &str, tools: Vec<String>, change: &str) {
        let message = Change {
            origin: self.replica.clone(),
            node: node.to_owned(),
            change: change.to_owned(),
            tools,
        };
        let Ok(bytes) = serde_json::to_vec(&message) else {
            return;
        };
        let client = self.client();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = client.publish(SUBJECT, bytes.into()).await;
            });
        }
    }
}

/// Passes the other replicas' changes on to this replica's agents, until it stops.
pub async fn listen(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    loop {
        if let Ok(mut sub) = cluster.client().subscribe(SUBJECT).await {
            while let Some(m) = sub.next().await {
                match serde_json::from_slice::<Change>(&m.payload) {
                    Ok(c) => pass_on(&shared, &cluster, c),
                    Err(e) => tracing::debug!(error = %e, "cluster: unreadable tools change"),
                }
            }
        }
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Tells this replica's agents that may see one of the node's tools.
fn pass_on(shared: &Shared, cluster: &Cluster, c: Change) {
    let known = ["connected", "replaced", "disconnected", "accepted"];
    if c.origin == cluster.replica
        || !super::valid_replica_name(&c.origin)
        || gsv_protocol::NodeId::parse(&c.node).is_err()
        || !known.contains(&c.change.as_str())
        || c.tools.len() > MAX_TOOLS
    {
        return;
    }
    if c.change == "disconnected" && moved(shared, cluster, &c) {
        return;
    }
    // MCP sessions compare what they list again: a change the node directory does
    // not show (tools accepted on their replica) reaches them too.
    cluster.directory.changed(shared);
    let payload = ToolsChanged {
        node: c.node.clone(),
        change: c.change.clone(),
    };
    for a in shared.agents.iter() {
        let sees = a.policy.sees_all()
            || c.tools
                .iter()
                .any(|t| a.policy.maybe_visible(&NamespacedName::join(&c.node, t)));
        if sees {
            a.send_event(EventName::ToolsChanged, &payload);
        }
    }
}

/// Whether the node of a `disconnected` is held elsewhere now (here, or by a live
/// replica other than the one that says it went away).
fn moved(shared: &Shared, cluster: &Cluster, c: &Change) -> bool {
    shared.registry.get(&c.node).is_some()
        || cluster
            .directory
            .holder(cluster, &c.node)
            .is_some_and(|holder| holder != c.origin)
}
