//! What `--cluster` adds to a starting gateway: joining (NATS, the link other replicas
//! dial, a slot of call ids), then this replica's part of the cluster running in the
//! gateway's background tasks (replication, the answers it gives the others, presence).

use super::{Cluster, ClusterConfig, ClusterError};
use crate::registry::CallIds;
use crate::state::Shared;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a starting replica waits for NATS (and for its slot) before it starts
/// degraded.
const PATIENCE: Duration = Duration::from_secs(10);

/// Joins the cluster `config` names as the replica of the gateway on `addr` (TLS
/// pinned by `tls_fingerprint`, if it serves TLS), its calls given ids of `call_ids`.
/// NATS refusing the replica's credentials stops it here, with a clear error; NATS
/// unreachable does not (the replica starts degraded and keeps trying).
pub async fn join(
    config: &ClusterConfig,
    data_dir: &Path,
    addr: SocketAddr,
    tls_fingerprint: Option<&str>,
    call_ids: Arc<CallIds>,
) -> Result<Arc<Cluster>, ClusterError> {
    let replica = super::replica_name(config.replica.as_deref(), data_dir)?;
    tracing::info!(replica = %replica, nats = %config.urls.join(","), "cluster mode: joining");
    let joined = Cluster::connect(config, replica, call_ids.clone()).await?;
    let joining = Instant::now();
    joined.first_connection(PATIENCE).await?;
    // Where the other replicas reach this one's link (`cluster::link`).
    let scheme = if tls_fingerprint.is_some() {
        "wss"
    } else {
        "ws"
    };
    let base = match &config.advertise {
        Some(url) if url.starts_with("ws://") || url.starts_with("wss://") => {
            Some(url.trim_end_matches('/').to_owned())
        }
        Some(url) => {
            return Err(ClusterError::Config(format!(
                "--cluster-advertise {url:?} is not a ws:// or wss:// URL"
            )))
        }
        None if !addr.ip().is_unspecified() => Some(format!("{scheme}://{addr}")),
        None => None,
    };
    if let Some(base) = base {
        joined.links.offer(
            format!("{base}/v1/replica"),
            tls_fingerprint.map(str::to_owned),
        );
    }
    // Call ids no other replica gives out, before the first call.
    match super::slot::claim(&joined, data_dir, PATIENCE.saturating_sub(joining.elapsed())).await
    {
        Some(slot) => {
            call_ids.partition(slot, super::slot::SLOTS);
            let _ = joined.slot.set(slot);
            tracing::info!(slot, "cluster: replica slot");
        }
        None => tracing::warn!(
            "cluster: no replica slot (NATS unreachable at this first start): this replica's call ids may meet another's until it restarts with NATS up"
        ),
    }
    Ok(Arc::new(joined))
}

/// Runs this replica's part of the cluster in the gateway's background tasks: they end
/// when the gateway shuts down.
pub fn run(shared: &Arc<Shared>, cluster: &Arc<Cluster>) {
    let tasks = &shared.background;
    let (s, c) = (shared, cluster);
    tasks.spawn(super::tokens::replicate(s.clone(), c.clone()));
    tasks.spawn(super::labels::replicate(s.clone(), c.clone()));
    tasks.spawn(super::audit::replicate(s.clone(), c.clone()));
    tasks.spawn(super::jobs::replicate(s.clone(), c.clone()));
    tasks.spawn(super::calls::serve(s.clone(), c.clone()));
    tasks.spawn(super::directory::run(s.clone(), c.clone()));
    tasks.spawn(super::approvals::serve(s.clone(), c.clone()));
    tasks.spawn(super::presence::run(s.clone(), c.clone()));
    tasks.spawn(super::calls::listen(c.clone()));
    tasks.spawn(super::tool_events::listen(s.clone(), c.clone()));
    tasks.spawn(super::listing::serve(s.clone(), c.clone()));
}
