//! Which replica holds which node: a JetStream key-value bucket ([`BUCKET`], node id →
//! replica name and the node process's instance) that every replica writes for the
//! nodes it holds and reads whole. The instance lets a forwarding replica describe a
//! call completely before it leaves ([`super::calls`]), so it can ask the node's next
//! holder for it should the holder die, without waiting for the holder's word.
//!
//! A call for a node held elsewhere goes to that replica's own subject
//! (`gsv.replica.NAME.call`, one subscription per replica, [`super::calls`]); before
//! this bucket each replica subscribed once per node it held, which cost memory per
//! node in every replica and in the NATS server. Each replica
//!
//! - puts an entry when a node connects to it and, when the node leaves, deletes the
//!   entry only if it is still the one it wrote (`delete_expect_revision`: a node that
//!   has meanwhile connected to another replica keeps that replica's entry);
//! - watches the whole bucket into a local map, so a lookup costs no NATS round trip;
//! - writes its nodes again whenever it reconnects to NATS (the server may have
//!   restarted without its storage), and once caught up removes entries that name it
//!   for nodes it does not hold (left by an earlier run of it).
//!
//! An entry naming a replica that is not heard from ([`Cluster::gone`]) counts as no
//! entry: its nodes are offline until they connect elsewhere, which rewrites them.

use super::Cluster;
use crate::state::Shared;
use async_nats::jetstream::kv;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The bucket's name.
pub const BUCKET: &str = "GSV_NODES";
/// How long a failed write or watch waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// The cluster's node → replica map as this replica reads it.
#[derive(Default)]
pub struct Directory {
    /// Every entry of the bucket: node id → replica name, node instance.
    holders: dashmap::DashMap<String, Entry>,
    /// The entries this replica wrote, with their revision.
    mine: dashmap::DashMap<String, u64>,
    /// Whether the watch has caught up with the bucket at least once.
    caught_up: std::sync::atomic::AtomicBool,
    /// The bucket, once reached: asked directly for a node the map does not have yet
    /// ([`Directory::fetch`]).
    store: std::sync::OnceLock<kv::Store>,
    /// Bumped whenever the nodes of other replicas change (an entry of another replica
    /// written, an entry removed, a replica gone or back): MCP sessions gather those
    /// nodes again then, to tell their clients that the lists changed.
    epoch: std::sync::atomic::AtomicU64,
}

/// How long a direct look-up in the bucket may take.
const FETCH_WAIT: Duration = Duration::from_secs(1);

/// One node's entry: the replica that holds it, and the node process it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub replica: String,
    /// The node's `instance` (empty when it gave none this entry can carry).
    pub instance: String,
}

/// Longest node instance an entry carries.
const MAX_INSTANCE: usize = 128;

impl Entry {
    /// As stored: `REPLICA` then, on a second line, the instance.
    fn encode(&self) -> Vec<u8> {
        format!("{}\n{}", self.replica, self.instance).into_bytes()
    }

    /// From the stored form; `None` when it is not one a replica writes.
    fn decode(bytes: &[u8]) -> Option<Entry> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (replica, instance) = text.split_once('\n').unwrap_or((text, ""));
        if !super::valid_replica_name(replica) || !valid_instance(instance) {
            return None;
        }
        Some(Entry {
            replica: replica.to_owned(),
            instance: instance.to_owned(),
        })
    }
}

/// The subject `node`'s entry is stored under, which its seal names.
fn kv_subject(node: &str) -> String {
    format!("$KV.{BUCKET}.{node}")
}

/// `node`'s entry as a replica sealed it; `None` for one no replica sealed for that
/// node (or not one a replica writes).
fn sealed_entry(cluster: &Cluster, node: &str, value: &[u8]) -> Option<Entry> {
    Entry::decode(&cluster.open_stored(&kv_subject(node), value)?)
}

/// Whether an entry can carry `instance` (short, printable ASCII).
fn valid_instance(instance: &str) -> bool {
    instance.len() <= MAX_INSTANCE && instance.bytes().all(|b| b.is_ascii_graphic())
}

impl Directory {
    /// The replica that holds `node`, if one that is alive says so.
    pub fn holder(&self, cluster: &Cluster, node: &str) -> Option<String> {
        self.entry(cluster, node).map(|e| e.replica)
    }

    /// `node`'s entry, if a replica that is alive holds it.
    pub fn entry(&self, cluster: &Cluster, node: &str) -> Option<Entry> {
        let entry = self.holders.get(node)?.value().clone();
        (entry.replica == cluster.replica || !cluster.gone(&entry.replica)).then_some(entry)
    }

    /// `node`'s entry read from the bucket itself, for a node the map does not have
    /// (its watch lags behind a burst of writes: thousands of nodes registering):
    /// one round trip to NATS, only on a miss. Kept in the map when found.
    pub async fn fetch(&self, cluster: &Cluster, node: &str) -> Option<Entry> {
        if let Some(e) = self.entry(cluster, node) {
            return Some(e);
        }
        let store = self.store.get()?;
        let got = tokio::time::timeout(FETCH_WAIT, store.get(node)).await;
        let entry = sealed_entry(cluster, node, &got.ok()?.ok()??)?;
        self.holders.insert(node.to_owned(), entry);
        self.entry(cluster, node)
    }

    /// See [`Directory::epoch`]'s field.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The other replicas' nodes changed: the epoch moves, and MCP sessions look.
    pub(super) fn changed(&self, shared: &Shared) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        shared.tools_epoch.send_modify(|e| *e = e.wrapping_add(1));
    }

    /// Entries in the local map (for tests and the status page).
    pub fn len(&self) -> usize {
        self.holders.len()
    }

    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }
}

/// The bucket (made on first use; every replica asks for the same configuration).
///
/// Its stream is made here as a key-value bucket's stream is (`KV_NAME`, subjects
/// `$KV.NAME.>`, one message per key, roll-ups allowed, deletes only through the
/// bucket, direct gets): the client's own `create_key_value` first asks for the
/// account's details in a form older servers (Debian's 2.9) do not answer.
async fn bucket(cluster: &Cluster) -> Result<kv::Store, String> {
    use async_nats::jetstream::stream;
    let js = cluster.jetstream();
    js.get_or_create_stream(stream::Config {
        name: format!("KV_{BUCKET}"),
        subjects: vec![format!("$KV.{BUCKET}.>")],
        max_messages_per_subject: 1,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    js.get_key_value(BUCKET).await.map_err(|e| e.to_string())
}

/// Runs the directory for this replica: writes its nodes' entries as they come and go,
/// and watches the bucket.
pub async fn run(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    let Some(changes) = shared.registry.watch() else {
        return;
    };
    let store = loop {
        match bucket(&cluster).await {
            Ok(store) => {
                let _ = cluster.directory.store.set(store.clone());
                break store;
            }
            Err(e) => {
                tracing::debug!(error = %e, "cluster: node directory not reachable yet");
                tokio::select! {
                    _ = shared.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    };
    let writer = write(
        Arc::clone(&shared),
        Arc::clone(&cluster),
        store.clone(),
        changes,
    );
    let reader = watch(Arc::clone(&shared), Arc::clone(&cluster), store);
    tokio::select! {
        _ = shared.shutdown.cancelled() => {}
        _ = async { tokio::join!(writer, reader) } => {}
    }
}

/// Puts and deletes this replica's entries, and writes them all again after each
/// reconnection to NATS.
async fn write(
    shared: Arc<Shared>,
    cluster: Arc<Cluster>,
    store: kv::Store,
    mut changes: tokio::sync::mpsc::UnboundedReceiver<(gsv_protocol::NodeId, bool)>,
) {
    let mut connects = cluster.connects();
    let mut again = tokio::time::interval(RETRY);
    loop {
        tokio::select! {
            change = changes.recv() => {
                let Some((id, online)) = change else { return };
                let id = id.to_string();
                if online {
                    put(&shared, &cluster, &store, &id).await;
                } else if let Some((_, revision)) = cluster.directory.mine.remove(&id) {
                    // Only if it is still ours: a node already connected elsewhere keeps
                    // that replica's entry.
                    let _ = store.delete_expect_revision(&id, Some(revision)).await;
                }
            }
            _ = again.tick() => {
                let now = cluster.connects();
                if now != connects && cluster.connected() {
                    connects = now;
                    let held: Vec<String> =
                        shared.registry.all().iter().map(|n| n.id.to_string()).collect();
                    tracing::info!(nodes = held.len(), "cluster: writing this replica's nodes to the directory again");
                    for id in held {
                        put(&shared, &cluster, &store, &id).await;
                    }
                }
            }
        }
    }
}

/// Writes `node` → this replica and the node's instance (a failure is written again
/// at the next reconnection).
async fn put(shared: &Shared, cluster: &Cluster, store: &kv::Store, node: &str) {
    let Some(instance) = shared.registry.get(node).map(|n| n.instance.clone()) else {
        // Gone again already: its departure follows.
        return;
    };
    let entry = Entry {
        replica: cluster.replica.clone(),
        instance: if valid_instance(&instance) {
            instance
        } else {
            String::new()
        },
    };
    let Ok(sealed) = cluster.seal_for(&kv_subject(node), &entry.encode()) else {
        return;
    };
    match store.put(node, sealed.into()).await {
        Ok(revision) => {
            tracing::debug!(node_id = %node, revision, "cluster: directory entry written");
            cluster.directory.mine.insert(node.to_owned(), revision);
        }
        Err(e) => {
            tracing::debug!(node_id = %node, error = %e, "cluster: cannot write the node's directory entry")
        }
    }
}

/// Mirrors the bucket into the local map; once caught up the first time, removes the
/// entries that name this replica for nodes it does not hold.
async fn watch(shared: Arc<Shared>, cluster: Arc<Cluster>, store: kv::Store) {
    loop {
        match store.watch_with_history(">").await {
            Ok(mut entries) => {
                // What the bucket held when this watch began, rebuilt from it.
                let mut fresh: Option<HashMap<String, String>> = Some(HashMap::new());
                while let Some(entry) = entries.next().await {
                    let Ok(entry) = entry else { break };
                    if apply(&cluster, &mut fresh, &entry) {
                        cluster.directory.changed(&shared);
                    }
                    if entry.delta == 0 {
                        if let Some(snapshot) = fresh.take() {
                            settle(&shared, &cluster, &store, snapshot).await;
                        }
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "cluster: cannot watch the node directory"),
        }
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = tokio::time::sleep(RETRY) => {}
        }
    }
}

/// One entry of the watch into the map (while catching up, into the snapshot too);
/// whether it changed another replica's nodes.
fn apply(
    cluster: &Cluster,
    fresh: &mut Option<HashMap<String, String>>,
    entry: &kv::Entry,
) -> bool {
    let node = entry.key.as_str();
    tracing::debug!(node_id = %node, operation = ?entry.operation, revision = entry.revision, delta = entry.delta, "cluster: directory entry seen");
    if gsv_protocol::NodeId::parse(node).is_err() {
        return false;
    }
    match entry.operation {
        kv::Operation::Put => {
            let Some(held) = sealed_entry(cluster, node, &entry.value) else {
                return false;
            };
            if let Some(snapshot) = fresh {
                snapshot.insert(node.to_owned(), held.replica.clone());
            }
            let mine = held.replica == cluster.replica;
            cluster.directory.holders.insert(node.to_owned(), held);
            if mine {
                cluster
                    .directory
                    .mine
                    .entry(node.to_owned())
                    .and_modify(|r| *r = (*r).max(entry.revision));
            }
            !mine
        }
        kv::Operation::Delete | kv::Operation::Purge => {
            if let Some(snapshot) = fresh {
                snapshot.remove(node);
            }
            cluster
                .directory
                .holders
                .remove(node)
                .is_some_and(|(_, held)| held.replica != cluster.replica)
        }
    }
}

/// The watch caught up: entries the bucket no longer has leave the map, and this
/// replica's entries for nodes it does not hold leave the bucket.
async fn settle(
    shared: &Shared,
    cluster: &Cluster,
    store: &kv::Store,
    snapshot: HashMap<String, String>,
) {
    cluster
        .directory
        .holders
        .retain(|node, _| snapshot.contains_key(node));
    let first = !cluster.directory.caught_up.swap(true, Ordering::SeqCst);
    if !first {
        return;
    }
    for (node, replica) in snapshot {
        if replica == cluster.replica
            && shared.registry.get(&node).is_none()
            && !cluster.directory.mine.contains_key(&node)
        {
            if let Ok(Some(entry)) = store.entry(node.clone()).await {
                let _ = store
                    .delete_expect_revision(&node, Some(entry.revision))
                    .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_the_replica_and_the_instance_and_odd_ones_are_refused() {
        let e = Entry {
            replica: "gw-a".into(),
            instance: "3f2a9c1e-77b0-4c1d-9d2e-0a1b2c3d4e5f".into(),
        };
        assert_eq!(Entry::decode(&e.encode()), Some(e));
        // An entry an older replica wrote: its name alone.
        assert_eq!(
            Entry::decode(b"gw-b"),
            Some(Entry {
                replica: "gw-b".into(),
                instance: String::new()
            })
        );
        for bad in [
            &b"gw a"[..],
            b"gw-a\ninst ance",
            b"gw-a\ninst\nance",
            b"\xff\xfe",
            b"",
            b"gw-a\n\x1b[31m",
        ] {
            assert_eq!(Entry::decode(bad), None, "{bad:?}");
        }
        let long = format!("gw-a\n{}", "x".repeat(MAX_INSTANCE + 1));
        assert_eq!(Entry::decode(long.as_bytes()), None);
    }
}
