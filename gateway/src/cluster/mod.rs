//! Cluster mode (`gsv gateway --cluster nats://…`): gateway replicas joined by NATS
//! with JetStream, so the fleet does not depend on one gateway process.
//!
//! Each replica keeps its own SQLite store as today; what replicas must agree on is
//! carried by JetStream and applied to every replica's store: [`tokens`] (tokens and
//! their revocations, so a token made or revoked on one replica holds on all of
//! them), [`labels`], [`jobs`] (read and cancelled through any replica) and
//! [`audit`] (one chain of every replica's audit rows). Without `--cluster` nothing here runs: one gateway, SQLite, no NATS.
//!
//! The replica connects in the background and keeps reconnecting (NATS's own
//! client reconnects with backoff): a replica whose NATS is down keeps serving what
//! it holds, and catches up from the streams when NATS is back.

pub mod approvals;
pub mod audit;
pub mod calls;
pub mod directory;
mod gather;
pub mod jobs;
pub mod labels;
pub mod link;
pub mod listing;
pub mod presence;
mod replication;
mod resume;
pub mod slot;
pub mod tokens;
pub mod tool_events;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How a replica reaches NATS.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    /// `nats://HOST:PORT` URLs (or `tls://…`); any one of them will do.
    pub urls: Vec<String>,
    /// A NATS credentials file (JWT and NKey seed).
    pub creds: Option<PathBuf>,
    /// A PEM file of CA certificates that NATS's TLS certificate must chain to.
    pub ca: Option<PathBuf>,
    /// This replica's name (default: a name made once and kept in the data dir).
    pub replica: Option<String>,
    /// Where the other replicas reach this one's link (`--cluster-advertise`:
    /// `ws://HOST:PORT` or `wss://…`); by default the listen address unless it is a
    /// wildcard ([`link`]).
    pub advertise: Option<String>,
}

/// Why a replica could not join.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("--cluster: {0}")]
    Config(String),
    #[error("cannot read the NATS credentials file {path}: {source}")]
    Creds {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot reach NATS at {urls}: {message}")]
    Connect { urls: String, message: String },
}

/// A replica's link to the cluster.
pub struct Cluster {
    /// This replica's name.
    pub replica: String,
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    /// How many times the client has (re)connected: a consumer made before the last
    /// reconnection may be gone with a restarted server.
    connects: Arc<AtomicU64>,
    /// The replicas heard from, with when and how many nodes they hold
    /// ([`presence`]).
    peers: dashmap::DashMap<String, (std::time::Instant, usize)>,
    /// Calls crossing replicas ([`calls`]).
    pub(crate) calls: calls::CallBook,
    /// Which replica holds which node ([`directory`]).
    pub(crate) directory: directory::Directory,
    /// This replica's slot ([`slot`]), once claimed.
    pub slot: std::sync::OnceLock<u64>,
    /// Direct links to the other replicas, for forwarded calls ([`link`]).
    pub links: link::Links,
    /// Questions out to every other replica ([`gather`]).
    pub(crate) asks: gather::Asks,
}

impl Cluster {
    /// Connects to NATS (in the background when it cannot be reached now: the client
    /// keeps trying).
    pub async fn connect(config: &ClusterConfig, replica: String) -> Result<Cluster, ClusterError> {
        if config.urls.is_empty() {
            return Err(ClusterError::Config("no NATS URL given".into()));
        }
        for url in &config.urls {
            let ok = ["nats://", "tls://", "ws://", "wss://"]
                .iter()
                .any(|s| url.starts_with(s));
            if !ok {
                return Err(ClusterError::Config(format!(
                    "{url:?} is not a NATS URL (nats://HOST:PORT or tls://HOST:PORT)"
                )));
            }
        }
        let connects = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&connects);
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("gsv-gateway {replica}"))
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .event_callback(move |event| {
                let counter = Arc::clone(&counter);
                async move {
                    match event {
                        async_nats::Event::Connected => {
                            counter.fetch_add(1, Ordering::SeqCst);
                            tracing::info!("cluster: connected to NATS")
                        }
                        async_nats::Event::Disconnected => {
                            tracing::warn!(
                                "cluster: NATS connection lost; serving what this replica holds"
                            )
                        }
                        other => tracing::debug!(event = %other, "cluster: NATS event"),
                    }
                }
            });
        if let Some(path) = &config.creds {
            options =
                options
                    .credentials_file(path)
                    .await
                    .map_err(|source| ClusterError::Creds {
                        path: path.clone(),
                        source,
                    })?;
        }
        if let Some(ca) = &config.ca {
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        let urls = config.urls.join(",");
        let client =
            options
                .connect(config.urls.as_slice())
                .await
                .map_err(|e| ClusterError::Connect {
                    urls: urls.clone(),
                    message: e.to_string(),
                })?;
        let js = async_nats::jetstream::new(client.clone());
        Ok(Cluster {
            replica,
            client,
            js,
            connects,
            peers: dashmap::DashMap::new(),
            calls: calls::CallBook::default(),
            directory: directory::Directory::default(),
            slot: std::sync::OnceLock::new(),
            links: link::Links::default(),
            asks: gather::Asks::default(),
        })
    }

    /// Whether the replica is connected to NATS now.
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    pub(crate) fn client(&self) -> async_nats::Client {
        self.client.clone()
    }

    pub(crate) fn jetstream(&self) -> &async_nats::jetstream::Context {
        &self.js
    }

    /// The number of (re)connections so far.
    pub(crate) fn connects(&self) -> u64 {
        self.connects.load(Ordering::SeqCst)
    }
}

/// The messages of `stream` under `filter`, in order, from sequence `next` on (an
/// ordered consumer: made again by the caller after a failure or a reconnection).
pub(crate) async fn replay(
    stream: &async_nats::jetstream::stream::Stream,
    filter: &str,
    next: u64,
) -> Result<async_nats::jetstream::consumer::pull::Ordered, String> {
    use async_nats::jetstream::consumer;
    stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: filter.to_owned(),
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: next,
            },
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?
        .messages()
        .await
        .map_err(|e| e.to_string())
}

/// The token another replica authenticated (looked up here by id, [`crate::store::Store::active_by_id`])
/// and the policy its calls and listings are judged by here.
pub(crate) fn caller_policy(
    found: Result<
        Result<Option<crate::store::TokenRecord>, crate::store::StoreError>,
        tokio::task::JoinError,
    >,
) -> Result<(crate::store::TokenRecord, crate::policy::Policy), gsv_protocol::ErrorShape> {
    use crate::token::TokenKind;
    use gsv_protocol::{ErrorCode, ErrorShape};
    let record = match found {
        Ok(Ok(Some(r))) => r,
        Ok(Ok(None)) => {
            return Err(ErrorShape::new(
                ErrorCode::Unauthorized,
                "the caller's token is unknown or revoked on the replica that holds the node",
            ))
        }
        _ => {
            return Err(ErrorShape::new(
                ErrorCode::Internal,
                "cannot read the caller's token",
            ))
        }
    };
    let policy = match record.kind {
        TokenKind::Admin => crate::policy::Policy::full_access(),
        TokenKind::Operator => crate::policy::Policy::view_only(),
        TokenKind::Agent => {
            crate::policy::Policy::compile(&record.policy.clone().unwrap_or_default())
                .map_err(|e| ErrorShape::new(ErrorCode::Internal, e.to_string()))?
        }
        TokenKind::Node | TokenKind::Join => {
            return Err(ErrorShape::new(
                ErrorCode::Unauthorized,
                "a node token cannot call tools",
            ))
        }
    };
    Ok((record, policy))
}

/// Whether `n` is a replica name (1 to 64 letters, digits, `-`, `_`): what a replica
/// accepts from the others before it names them in its audit log, logs or lists.
pub fn valid_replica_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// This replica's name: the one given, else the one kept in `data_dir/replica`
/// (made at the first start in cluster mode: the host name and a random suffix).
pub fn replica_name(
    given: Option<&str>,
    data_dir: &std::path::Path,
) -> Result<String, ClusterError> {
    let valid = valid_replica_name;
    if let Some(name) = given {
        return if valid(name) {
            Ok(name.to_owned())
        } else {
            Err(ClusterError::Config(format!(
                "replica name {name:?} must be 1 to 64 letters, digits, '-' or '_'"
            )))
        };
    }
    let path = data_dir.join("replica");
    if let Ok(kept) = std::fs::read_to_string(&path) {
        let kept = kept.trim();
        if valid(kept) {
            return Ok(kept.to_owned());
        }
    }
    let host: String = gethostname::gethostname()
        .to_string_lossy()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let name = format!(
        "{}-{}",
        if host.is_empty() { "gsv" } else { &host },
        &suffix[..8]
    );
    std::fs::write(&path, format!("{name}\n")).map_err(|e| {
        ClusterError::Config(format!(
            "cannot keep the replica name in {}: {e}",
            path.display()
        ))
    })?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_names_are_checked_and_kept() {
        let dir = std::env::temp_dir().join(format!("gsv-replica-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(replica_name(Some("a-1"), &dir).unwrap(), "a-1");
        assert!(replica_name(Some("a b"), &dir).is_err());
        assert!(replica_name(Some(""), &dir).is_err());
        let made = replica_name(None, &dir).unwrap();
        assert_eq!(replica_name(None, &dir).unwrap(), made, "kept");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
