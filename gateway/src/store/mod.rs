//! The embedded SQLite store: the database file, its one connection and its schema.
//!
//! The store owns the schema ([`migrations`]); features that keep rows in it (the
//! audit log, approvals, tokens) use the store, never the reverse. Token rows are
//! queried in [`tokens`], hashed at rest; what each node was accepted offering in
//! [`offers`].
//!
//! The gateway reads tokens from the database at every authentication, so
//! `gsv token create` (another process writing the same file) takes effect at once, with
//! no reload. WAL mode and a busy timeout let both processes use the file together.

pub mod job_copies;
mod jobs;
mod labels;
mod migrations;
mod offers;
mod pool;
mod tokens;

pub(crate) use labels::{read_node_labels, write_node_labels};
pub use migrations::SCHEMA_VERSION;
pub use offers::{AcceptedOffer, Offer};
pub use pool::STORE_THREADS;
pub(crate) use tokens::{insert_operator_token, insert_token, revoke_token};
pub use tokens::{Redeem, TokenInfo, TokenRecord};

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Store failures.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot create data directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("database schema version {0} is newer than this gsv understands")]
    TooNew(i64),
    #[error("stored policy is corrupt: {0}")]
    Policy(String),
    #[error("stored offer of node {node} is corrupt: {reason}")]
    Offer { node: String, reason: String },
    #[error("labels of node {node} are invalid: {reason}")]
    Labels { node: String, reason: String },
    #[error("stored job {id} is corrupt: {reason}")]
    Job { id: String, reason: String },
    #[error("store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The database handle. One connection behind a mutex: every query is a point lookup
/// or a single insert, far cheaper than the network round trip around it.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) `gsv.db` in `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        crate::datadir::ensure_dir(data_dir).map_err(|source| StoreError::Dir {
            path: data_dir.to_owned(),
            source,
        })?;
        let path = data_dir.join(crate::datadir::DB_FILE);
        let mut conn = Connection::open(&path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Free space in a page is zeroed as it is freed, and a b-tree page set up for
        // new rows is zeroed whole: otherwise SQLite writes whatever its page buffer
        // held into the file — bytes of rows deleted, or stale process memory in a
        // buffer fresh from the allocator (`tests/e2e_install.rs` once found a join
        // token's secret in the WAL, where no row holds it). `FAST` adds no I/O.
        conn.pragma_update(None, "secure_delete", "FAST")?;
        migrations::migrate(&mut conn)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // The database and SQLite's WAL and shared-memory files hold token hashes
            // and the audit log: owner only.
            for suffix in ["", "-wal", "-shm"] {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
            }
        }
        Ok(Store {
            conn: Mutex::new(conn),
            path,
        })
    }

    /// Runs `f` with the store on one of the store's threads ([`pool`]), at most
    /// [`STORE_THREADS`] at a time; callers beyond that wait as tasks, not as threads.
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Store) -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let store = Arc::clone(self);
        pool::run(move || f(&store)).await
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` with the connection (audit and approvals use it directly).
    pub fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn();
        f(&mut conn)
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (each
        // statement is atomic), so a poisoned lock is still safe to use.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicySpec;
    use crate::token::TokenKind;

    fn temp_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("gsv-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_runs_at_most_store_threads_at_once_on_as_many_threads() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let store = Arc::new(Store::open(&temp_dir()).unwrap());
        let (tok, _) = store.create_token(TokenKind::Node, "n1", None).unwrap();
        let now = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut calls = Vec::new();
        for _ in 0..32 {
            let (store, now, most, tok) = (store.clone(), now.clone(), most.clone(), tok.clone());
            let threads = threads.clone();
            calls.push(tokio::spawn(async move {
                store
                    .blocking(move |s| {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        threads.lock().unwrap().insert(std::thread::current().id());
                        most.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        let found = s.verify(&tok).map(|r| r.is_some());
                        now.fetch_sub(1, Ordering::SeqCst);
                        found
                    })
                    .await
            }));
        }
        for c in calls {
            assert!(matches!(c.await, Ok(Ok(Ok(true)))));
        }
        let most = most.load(Ordering::SeqCst);
        assert!((1..=STORE_THREADS).contains(&most), "{most} at once");
        // A wave of queries does not grow the threads that run them.
        let used = threads.lock().unwrap().len();
        assert!((1..=STORE_THREADS).contains(&used), "{used} threads");
    }

    #[test]
    fn create_verify_revoke() {
        let dir = temp_dir();
        let store = Store::open(&dir).unwrap();
        let (tok, id) = store.create_token(TokenKind::Node, "laptop", None).unwrap();
        let rec = store.verify(&tok).unwrap().unwrap();
        assert_eq!(rec.kind, TokenKind::Node);
        assert_eq!(rec.subject, "laptop");
        assert_eq!(rec.id, id);
        // A tampered secret, a wrong kind prefix and garbage are all refused.
        let tampered = format!("{}x", &tok[..tok.len() - 1]);
        assert!(store.verify(&tampered).unwrap().is_none());
        assert!(store
            .verify(&tok.replacen("_node_", "_agent_", 1))
            .unwrap()
            .is_none());
        assert!(store.verify("nonsense").unwrap().is_none());
        assert!(store.revoke(&id).unwrap());
        assert!(!store.revoke(&id).unwrap());
        assert!(store.verify(&tok).unwrap().is_none());
        let list = store.list_tokens().unwrap();
        assert_eq!(list.len(), 1);
        assert!(list[0].revoked_at.is_some());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn agent_policy_round_trips_and_second_process_sees_new_tokens() {
        let dir = temp_dir();
        let a = Store::open(&dir).unwrap();
        let b = Store::open(&dir).unwrap();
        let spec = PolicySpec {
            allow: vec!["*".into()],
            deny: vec!["x__*".into()],
            confirm: vec![],
            self_confirm: true,
            ..PolicySpec::default()
        };
        let (tok, _) = a.create_token(TokenKind::Agent, "ci", Some(&spec)).unwrap();
        let rec = b.verify(&tok).unwrap().unwrap();
        assert_eq!(rec.policy, Some(spec));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
