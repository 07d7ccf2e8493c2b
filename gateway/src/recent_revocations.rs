//! The agent tokens revoked recently, for nodes that connect later.
//!
//! A node that was offline when a token was revoked still runs that token's process
//! sessions; when it connects, the gateway tells it which agent tokens were revoked in
//! the last [`RECENT`] (`session_end`). Reading them costs a query, so the list is
//! cached for [`CACHE`]: a reconnect storm of thousands of nodes costs one query, not
//! one per node. It depends on the store only, so the gateway state can hold it.

use crate::store::Store;
use rusqlite::params;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far back a connecting node is told of revoked tokens.
pub const RECENT: Duration = Duration::from_secs(7 * 24 * 3600);
/// At most this many ids go to a connecting node (the most recent).
const MAX_IDS: usize = 1024;
/// How long a read list is reused.
const CACHE: Duration = Duration::from_secs(1);

/// The recently revoked agent token ids, read from the store at most once a second.
#[derive(Default)]
pub struct RecentRevocations {
    cached: tokio::sync::Mutex<Option<(Instant, Arc<Vec<String>>)>>,
}

impl RecentRevocations {
    /// The agent tokens revoked in the last [`RECENT`], newest first; `None` if the
    /// store could not be read (logged).
    pub async fn get(&self, store: &Arc<Store>) -> Option<Arc<Vec<String>>> {
        let mut cached = self.cached.lock().await;
        if let Some((at, ids)) = &*cached {
            if at.elapsed() < CACHE {
                return Some(Arc::clone(ids));
            }
        }
        let ids = Arc::new(read(store).await?);
        *cached = Some((Instant::now(), Arc::clone(&ids)));
        Some(ids)
    }

    /// Forgets what was read (a token was just revoked).
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }
}

async fn read(store: &Arc<Store>) -> Option<Vec<String>> {
    let since = gsv_protocol::now_ms().saturating_sub(RECENT.as_millis() as u64) as i64;
    let found = store
        .blocking(move |store| {
            store.with_conn(|c| {
                let mut stmt = c.prepare(
                    "SELECT id FROM tokens WHERE kind = 'agent' AND revoked_at IS NOT NULL \
                     AND revoked_at >= ?1 ORDER BY revoked_at DESC LIMIT ?2",
                )?;
                let rows =
                    stmt.query_map(params![since, MAX_IDS as i64], |r| r.get::<_, String>(0))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
        })
        .await;
    match found {
        Ok(Ok(ids)) => Some(ids),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read revoked tokens");
            None
        }
        Err(_) => None,
    }
}
