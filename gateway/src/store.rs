//! The embedded SQLite store: tokens, hashed at rest.
//!
//! The gateway reads tokens from the database at every authentication, so
//! `gsv token create` (another process writing the same file) takes effect at once, with
//! no reload. WAL mode and a busy timeout let both processes use the file together.

use crate::policy::PolicySpec;
use crate::token::{self, TokenKind};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
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
}

/// A valid, unrevoked token as found at authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub kind: TokenKind,
    /// Node id (node tokens), agent name (agent tokens) or `admin`.
    pub subject: String,
    pub policy: Option<PolicySpec>,
}

/// What redeeming a join token came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeem {
    /// The node's new credential (shown once, in `hello-ok`).
    Credential { token: String, id: String },
    /// The node id already has an active credential.
    AlreadyEnrolled,
    /// The join token was used by another connection first.
    AlreadyUsed,
}

/// One row of `gsv token list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    pub id: String,
    pub kind: String,
    pub subject: String,
    pub policy: Option<PolicySpec>,
    pub created_at: u64,
    pub revoked_at: Option<u64>,
}

const SCHEMA_VERSION: i64 = 3;

/// The database handle. One connection behind a mutex: every query is a point lookup
/// or a single insert, far cheaper than the network round trip around it.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// Admits [`STORE_THREADS`] queries at a time to the blocking pool ([`Store::blocking`]).
    gate: Arc<tokio::sync::Semaphore>,
}

/// Most blocking-pool threads busy with the store at once. The one connection
/// serializes queries anyway; without this bound a wave of connects (a fleet
/// reconnecting after a restart) would start a thread per connect, each waiting on the
/// mutex and each holding a stack and an allocator heap of its own for the pool's
/// 10 s keep-alive.
pub const STORE_THREADS: usize = 4;

impl Store {
    /// Opens (creating if needed) `gsv.db` in `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        crate::datadir::ensure_dir(data_dir).map_err(|source| StoreError::Dir {
            path: data_dir.to_owned(),
            source,
        })?;
        let path = data_dir.join(crate::datadir::DB_FILE);
        let conn = Connection::open(&path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        migrate(&conn)?;
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
            gate: Arc::new(tokio::sync::Semaphore::new(STORE_THREADS)),
        })
    }

    /// Runs `f` with the store on tokio's blocking pool, at most [`STORE_THREADS`] at a
    /// time; callers beyond that wait here, as tasks, not as threads.
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Store) -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        // The semaphore is never closed, so a permit always comes.
        let permit = Arc::clone(&self.gate).acquire_owned().await.ok();
        let store = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f(&store)
        })
        .await
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

    /// Mints and stores a token; returns the full token string (shown once) and its id.
    /// Unaudited: commands issue tokens through [`crate::tokens`], which records them.
    pub fn create_token(
        &self,
        kind: TokenKind,
        subject: &str,
        policy: Option<&PolicySpec>,
    ) -> Result<(String, String), StoreError> {
        insert_token(&self.conn(), kind, subject, policy)
    }

    /// Checks a presented token. `Ok(None)` if it is malformed, unknown, revoked or
    /// its secret does not match.
    pub fn verify(&self, presented: &str) -> Result<Option<TokenRecord>, StoreError> {
        let Some(parsed) = token::parse(presented) else {
            return Ok(None);
        };
        let row = self
            .conn()
            .query_row(
                "SELECT kind, subject, hash, policy FROM tokens WHERE id = ?1 AND revoked_at IS NULL",
                params![parsed.id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                },
            )
            .optional()?;
        let Some((kind, subject, hash, policy)) = row else {
            return Ok(None);
        };
        if TokenKind::parse(&kind) != Some(parsed.kind) || !parsed.matches(&hash) {
            return Ok(None);
        }
        let policy = policy
            .map(|p| serde_json::from_str::<PolicySpec>(&p))
            .transpose()
            .map_err(|e| StoreError::Policy(e.to_string()))?;
        Ok(Some(TokenRecord {
            id: parsed.id.to_owned(),
            kind: parsed.kind,
            subject,
            policy,
        }))
    }

    /// Exchanges a join token for a node credential, once. Refused when the node id
    /// already has an active credential (revoke it first to enroll again) — the join
    /// token then stays usable — or when the join token was used meanwhile.
    pub fn redeem_join(&self, join_id: &str, node_id: &str) -> Result<Redeem, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let enrolled: i64 = tx.query_row(
            "SELECT COUNT(*) FROM tokens WHERE kind = 'node' AND subject = ?1 AND revoked_at IS NULL",
            params![node_id],
            |r| r.get(0),
        )?;
        if enrolled > 0 {
            return Ok(Redeem::AlreadyEnrolled);
        }
        let used = tx.execute(
            "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND kind = 'join' AND revoked_at IS NULL",
            params![join_id, now_ms() as i64],
        )?;
        if used == 0 {
            return Ok(Redeem::AlreadyUsed);
        }
        let t = token::generate(TokenKind::Node);
        tx.execute(
            "INSERT INTO tokens (id, kind, subject, hash, policy, created_at) VALUES (?1, 'node', ?2, ?3, NULL, ?4)",
            params![t.id, node_id, &t.hash[..], now_ms() as i64],
        )?;
        tx.commit()?;
        Ok(Redeem::Credential {
            token: t.token,
            id: t.id,
        })
    }

    /// Every token, newest first.
    pub fn list_tokens(&self) -> Result<Vec<TokenInfo>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, kind, subject, policy, created_at, revoked_at FROM tokens ORDER BY created_at DESC, id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, kind, subject, policy, created, revoked) = row?;
            out.push(TokenInfo {
                id,
                kind,
                subject,
                policy: policy.and_then(|p| serde_json::from_str(&p).ok()),
                created_at: created.max(0) as u64,
                revoked_at: revoked.map(|r| r.max(0) as u64),
            });
        }
        Ok(out)
    }

    /// Revokes a token by id. `Ok(false)` if there is no such unrevoked token.
    pub fn revoke(&self, id: &str) -> Result<bool, StoreError> {
        revoke_token(&self.conn(), id)
    }
}

/// Mints a token and inserts it through `conn` (a connection or a transaction).
pub(crate) fn insert_token(
    conn: &Connection,
    kind: TokenKind,
    subject: &str,
    policy: Option<&PolicySpec>,
) -> Result<(String, String), StoreError> {
    let t = token::generate(kind);
    let policy_json = policy
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Policy(e.to_string()))?;
    conn.execute(
        "INSERT INTO tokens (id, kind, subject, hash, policy, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![t.id, kind.as_str(), subject, &t.hash[..], policy_json, now_ms() as i64],
    )?;
    Ok((t.token, t.id))
}

/// Revokes the active token `id` through `conn`; whether there was one.
pub(crate) fn revoke_token(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    let n = conn.execute(
        "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
        params![id, now_ms() as i64],
    )?;
    Ok(n > 0)
}

fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew(version));
    }
    if version < 1 {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS tokens (
                id TEXT PRIMARY KEY,
                kind TEXT NOT NULL CHECK (kind IN ('admin', 'node', 'agent')),
                subject TEXT NOT NULL,
                hash BLOB NOT NULL,
                policy TEXT,
                created_at INTEGER NOT NULL,
                revoked_at INTEGER
            );
            PRAGMA user_version = 1;",
        )?;
    }
    if version < 3 {
        // Version 3 adds one-time join tokens: widen the kind check (SQLite cannot
        // alter a CHECK constraint, so the table is rebuilt).
        conn.execute_batch(
            "CREATE TABLE tokens_v3 (
                id TEXT PRIMARY KEY,
                kind TEXT NOT NULL CHECK (kind IN ('admin', 'node', 'join', 'agent')),
                subject TEXT NOT NULL,
                hash BLOB NOT NULL,
                policy TEXT,
                created_at INTEGER NOT NULL,
                revoked_at INTEGER
            );
            INSERT INTO tokens_v3 SELECT id, kind, subject, hash, policy, created_at, revoked_at FROM tokens;
            DROP TABLE tokens;
            ALTER TABLE tokens_v3 RENAME TO tokens;",
        )?;
    }
    if version < 2 {
        conn.execute_batch(&format!(
            "{}\n{}\nPRAGMA user_version = 2;",
            crate::audit::SCHEMA,
            crate::approvals::SCHEMA
        ))?;
    }
    if version < SCHEMA_VERSION {
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    Ok(())
}

fn now_ms() -> u64 {
    gsv_protocol::now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("gsv-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_runs_at_most_store_threads_at_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let store = Arc::new(Store::open(&temp_dir()).unwrap());
        let (tok, _) = store.create_token(TokenKind::Node, "n1", None).unwrap();
        let now = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut calls = Vec::new();
        for _ in 0..32 {
            let (store, now, most, tok) = (store.clone(), now.clone(), most.clone(), tok.clone());
            calls.push(tokio::spawn(async move {
                store
                    .blocking(move |s| {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
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
        };
        let (tok, _) = a.create_token(TokenKind::Agent, "ci", Some(&spec)).unwrap();
        let rec = b.verify(&tok).unwrap().unwrap();
        assert_eq!(rec.policy, Some(spec));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
