//! Which replicas are alive, and the cluster's state as operators see it.
//!
//! Every replica says hello on `gsv.replica.hello` each [`HELLO`] (its name and how
//! many nodes it holds) and listens to the others'; a replica not heard from for
//! [`GONE`] is no longer counted. [`Cluster::status`] is what `GET /v1/cluster`
//! answers: this replica, whether it is connected to NATS (`ok`) or not (`degraded`:
//! it serves the nodes it holds and catches up when NATS is back), and the replicas it
//! hears.

use super::Cluster;
use crate::state::Shared;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a replica says hello.
pub const HELLO: Duration = Duration::from_secs(1);
/// A replica silent this long is no longer counted.
pub const GONE: Duration = Duration::from_secs(4);

const SUBJECT: &str = "gsv.replica.hello";

#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    name: String,
    nodes: usize,
    /// Where its link is ([`super::link`]), if it offers one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    link: Option<super::link::LinkInfo>,
}

use crate::peers::{ClusterStatus, ReplicaSeen};

impl Cluster {
    /// The cluster as this replica sees it now.
    pub fn status(&self, own_nodes: usize) -> ClusterStatus {
        let mut replicas: Vec<ReplicaSeen> = self
            .peers
            .iter()
            .filter(|e| e.key() != &self.replica && e.value().0.elapsed() < GONE)
            .map(|e| ReplicaSeen {
                name: e.key().clone(),
                nodes: e.value().1,
                seen_ms_ago: e.value().0.elapsed().as_millis() as u64,
            })
            .collect();
        replicas.push(ReplicaSeen {
            name: self.replica.clone(),
            nodes: own_nodes,
            seen_ms_ago: 0,
        });
        replicas.sort_by(|a, b| a.name.cmp(&b.name));
        ClusterStatus {
            replica: self.replica.clone(),
            slot: self.slot.get().copied(),
            state: if self.connected() { "ok" } else { "degraded" }.to_owned(),
            replicas,
            directory: self.directory.len(),
        }
    }

    /// Whether replica `name` was heard from once and then not for [`GONE`] (one
    /// never heard from is not taken for gone; this one never is).
    pub fn gone(&self, name: &str) -> bool {
        name != self.replica
            && self
                .peers
                .get(name)
                .is_some_and(|e| e.value().0.elapsed() >= GONE)
    }

    /// The other replicas heard from lately, by name, sorted.
    fn live_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .peers
            .iter()
            .filter(|e| e.key() != &self.replica && e.value().0.elapsed() < GONE)
            .map(|e| e.key().clone())
            .collect();
        names.sort();
        names
    }

    /// The other replicas heard from lately.
    pub fn live_peers(&self) -> usize {
        self.peers
            .iter()
            .filter(|e| e.key() != &self.replica && e.value().0.elapsed() < GONE)
            .count()
    }
}

/// Says hello and listens, until the gateway shuts down.
pub async fn run(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    let listen = {
        let cluster = Arc::clone(&cluster);
        async move {
            loop {
                if let Ok(mut sub) = cluster.client().subscribe(SUBJECT).await {
                    while let Some(m) = sub.next().await {
                        if let Some(hello) = serde_json::from_slice::<Hello>(&m.payload)
                            .ok()
                            .filter(|h| super::valid_replica_name(&h.name))
                        {
                            if hello.name != cluster.replica {
                                cluster.links.heard(&hello.name, hello.link);
                            }
                            cluster
                                .peers
                                .insert(hello.name, (Instant::now(), hello.nodes));
                        }
                    }
                }
                tokio::time::sleep(HELLO).await;
            }
        }
    };
    let say = async {
        let mut tick = tokio::time::interval(HELLO);
        let mut was_connected = cluster.connected();
        let mut live = Vec::new();
        loop {
            tick.tick().await;
            // A replica gone (its nodes with it) or back changes what every replica
            // lists.
            let now = cluster.live_names();
            if now != live {
                live = now;
                cluster.directory.changed(&shared);
            }
            let connected = cluster.connected();
            if connected != was_connected {
                if connected {
                    tracing::info!("cluster: state ok");
                } else {
                    tracing::warn!(
                        "cluster: state degraded (NATS unreachable): serving the nodes held here"
                    );
                }
                was_connected = connected;
            }
            let hello = Hello {
                name: cluster.replica.clone(),
                nodes: shared.registry.online_count(),
                link: cluster.links.own.get().cloned(),
            };
            if let Ok(bytes) = serde_json::to_vec(&hello) {
                let _ = cluster.client().publish(SUBJECT, bytes.into()).await;
            }
        }
    };
    tokio::select! {
        _ = shared.shutdown.cancelled() => {}
        _ = listen => {}
        _ = say => {}
    }
}
