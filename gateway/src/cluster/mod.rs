//! Cluster mode (`gsv gateway --cluster nats://…`): gateway replicas joined by NATS
//! with JetStream, so the fleet does not depend on one gateway process.
//!
//! Each replica keeps its own SQLite store as today; what replicas must agree on is
//! carried by JetStream and applied to every replica's store: [`tokens`] (tokens and
//! their revocations, so a token made or revoked on one replica holds on all of
//! them), [`labels`], [`jobs`] (read and cancelled through any replica) and
//! [`audit`] (one chain of every replica's audit rows). Without `--cluster` nothing here runs: one gateway, SQLite, no NATS.
//!
//! Everything on the bus is sealed with the cluster key (`--cluster-key-file`,
//! required): [`seal`] is the one envelope, [`bus::Bus`] the only way to core NATS,
//! [`Cluster::js_publish`] and [`replication::Batches`] the ways in and out of
//! JetStream. A NATS client without the key reads nothing in clear and makes no
//! replica act.
//!
//! The replica connects in the background and keeps reconnecting (NATS's own
//! client reconnects with backoff): a replica whose NATS is down keeps serving what
//! it holds, and catches up from the streams when NATS is back.

pub mod approvals;
pub mod audit;
pub(crate) mod bus;
pub mod call_book;
pub mod calls;
pub mod directory;
mod gather;
pub mod jobs;
pub mod labels;
pub mod link;
pub mod listing;
pub mod peers;
pub mod presence;
mod replication;
mod resume;
pub mod seal;
pub mod slot;
mod start;
pub use start::{join, run};
pub mod tokens;
pub mod tool_events;

pub use crate::config::ClusterConfig;
use crate::registry::CallIds;
pub use crate::replica::valid_replica_name;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    #[error("cannot read the NATS nkey seed file {path}: {message}")]
    Nkey { path: PathBuf, message: String },
    #[error("--cluster-key-file: {0}")]
    Key(#[from] seal::KeyError),
    #[error("cannot reach NATS at {urls}: {message}")]
    Connect { urls: String, message: String },
    #[error("NATS refused this replica's credentials ({0}): give it the NATS user's --cluster-creds or --cluster-nkey")]
    Refused(String),
}

/// A replica's link to the cluster.
pub struct Cluster {
    /// This replica's name.
    pub replica: String,
    client: async_nats::Client,
    /// Core NATS, every payload sealed ([`bus`]).
    bus: bus::Bus,
    /// The cluster key's envelope ([`seal`]).
    seal: Arc<seal::Seal>,
    js: async_nats::jetstream::Context,
    /// What NATS said when it refused this replica's credentials, if it did.
    refused: Arc<std::sync::Mutex<Option<String>>>,
    /// How many times the client has (re)connected: a consumer made before the last
    /// reconnection may be gone with a restarted server.
    connects: Arc<AtomicU64>,
    /// The replicas heard from, with when and how many nodes they hold
    /// ([`presence`]).
    peers: dashmap::DashMap<String, (std::time::Instant, usize)>,
    /// Calls crossing replicas ([`calls`]).
    pub(crate) calls: call_book::CallBook,
    /// Which replica holds which node ([`directory`]).
    pub(crate) directory: directory::Directory,
    /// This replica's slot ([`slot`]), once claimed.
    pub slot: std::sync::OnceLock<u64>,
    /// Direct links to the other replicas, for forwarded calls ([`link`]).
    pub links: link::Links,
    /// Questions out to every other replica ([`gather`]).
    pub(crate) asks: gather::Asks,
    /// The gateway's call ids, partitioned by this replica's slot.
    pub(crate) call_ids: Arc<CallIds>,
}

impl Cluster {
    /// Connects to NATS (in the background when it cannot be reached now: the client
    /// keeps trying).
    /// `call_ids` are the gateway's: a call forwarded from here is given one of them.
    pub async fn connect(
        config: &ClusterConfig,
        replica: String,
        call_ids: Arc<CallIds>,
    ) -> Result<Cluster, ClusterError> {
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
        let Some(key) = &config.key else {
            return Err(ClusterError::Config(
                "cluster mode needs the cluster key every replica holds: --cluster-key-file FILE (32 random bytes or more, mode 0600; docs/operations.md, Cluster mode)".into(),
            ));
        };
        let seal = Arc::new(seal::Seal::load(key)?);
        let connects = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&connects);
        let refused: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let said = Arc::clone(&refused);
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("gsv-gateway {replica}"))
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .event_callback(move |event| {
                let counter = Arc::clone(&counter);
                let said = Arc::clone(&said);
                async move {
                    match event {
                        async_nats::Event::Connected => {
                            counter.fetch_add(1, Ordering::SeqCst);
                            if let Ok(mut s) = said.lock() {
                                *s = None;
                            }
                            tracing::info!("cluster: connected to NATS")
                        }
                        async_nats::Event::ClientError(async_nats::ClientError::Other(e))
                            if refusal(&e) =>
                        {
                            tracing::error!(error = %e, "cluster: NATS refused this replica's credentials (--cluster-creds, --cluster-nkey)");
                            if let Ok(mut s) = said.lock() {
                                *s = Some(e);
                            }
                        }
                        async_nats::Event::ServerError(
                            e @ async_nats::ServerError::AuthorizationViolation,
                        ) => {
                            tracing::error!(error = %e, "cluster: NATS refused this replica's credentials (--cluster-creds, --cluster-nkey)");
                            if let Ok(mut s) = said.lock() {
                                *s = Some(e.to_string());
                            }
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
        if let Some(path) = &config.nkey {
            let seed = std::fs::read_to_string(path).map_err(|e| ClusterError::Nkey {
                path: path.clone(),
                message: e.to_string(),
            })?;
            let seed = seed.trim().to_owned();
            if !seed.starts_with("SU") {
                return Err(ClusterError::Nkey {
                    path: path.clone(),
                    message: "not a NATS user's nkey seed (one line starting with SU)".into(),
                });
            }
            options = options.nkey(seed);
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
        let bus = bus::Bus::new(client.clone(), Arc::clone(&seal));
        Ok(Cluster {
            replica,
            client,
            bus,
            seal,
            js,
            refused,
            connects,
            peers: dashmap::DashMap::new(),
            calls: call_book::CallBook::default(),
            directory: directory::Directory::default(),
            slot: std::sync::OnceLock::new(),
            links: link::Links::default(),
            asks: gather::Asks::default(),
            call_ids,
        })
    }

    /// Whether the replica is connected to NATS now.
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Core NATS, sealed: the only way cluster code publishes, asks and subscribes.
    pub(crate) fn client(&self) -> bus::Bus {
        self.bus.clone()
    }

    /// JetStream, to make and look up streams and buckets. Messages go out through
    /// [`Cluster::js_publish`] and come back in through [`replication::Batches`] or
    /// [`Cluster::open_stored`]: never a payload of its own.
    pub(crate) fn jetstream(&self) -> &async_nats::jetstream::Context {
        &self.js
    }

    /// Publishes `payload` on a stream's `subject`, sealed; `with` adds the message's
    /// options (its id, an expected sequence). The acknowledgement is the caller's to
    /// wait for.
    pub(crate) async fn js_publish(
        &self,
        subject: &str,
        payload: &[u8],
        with: impl FnOnce(
            async_nats::jetstream::message::PublishMessage,
        ) -> async_nats::jetstream::message::PublishMessage,
    ) -> Result<async_nats::jetstream::context::PublishAckFuture, String> {
        let sealed = self
            .seal
            .seal(subject, payload)
            .map_err(|e| e.to_string())?;
        let message =
            with(async_nats::jetstream::message::PublishMessage::build().payload(sealed.into()));
        self.js
            .send_publish(subject.to_owned(), message)
            .await
            .map_err(|e| e.to_string())
    }

    /// What a message read back from JetStream (published on `subject`) says, if a
    /// replica sealed it for that subject; `None` (logged, counted) otherwise.
    pub(crate) fn open_stored(&self, subject: &str, payload: &[u8]) -> Option<Vec<u8>> {
        match self.seal.open(subject, payload, seal::Taken::Stored) {
            Ok(plain) => Some(plain),
            Err(e) => {
                bus::refused(subject, &e);
                None
            }
        }
    }

    /// Seals `payload` for `subject` (a bucket's entry: `$KV.BUCKET.KEY`).
    pub(crate) fn seal_for(&self, subject: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
        self.seal.seal(subject, payload).map_err(|e| e.to_string())
    }

    /// Messages refused at the envelope so far (not a replica's, replayed, stale).
    pub fn refused_messages(&self) -> u64 {
        self.seal.refused()
    }

    /// Waits up to `patience` for the first connection: `Err` when NATS refused this
    /// replica's credentials meanwhile (a misconfiguration, not an outage); `Ok` when
    /// connected, or when NATS could not be reached (the replica starts degraded and
    /// keeps trying, as before).
    pub async fn first_connection(&self, patience: Duration) -> Result<(), ClusterError> {
        let started = std::time::Instant::now();
        while started.elapsed() < patience {
            if self.connected() {
                return Ok(());
            }
            let said = self.refused.lock().ok().and_then(|s| s.clone());
            if let Some(said) = said {
                return Err(ClusterError::Refused(said));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// The number of (re)connections so far.
    pub(crate) fn connects(&self) -> u64 {
        self.connects.load(Ordering::SeqCst)
    }
}

/// Whether a connection error says NATS refused the credentials.
fn refusal(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    e.contains("authorization") || e.contains("authentication")
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
