//! The database schema, as an ordered list of versioned migrations.
//!
//! Every `CREATE TABLE`, `ALTER` and index statement of the gateway's database lives
//! here, so the store owns its schema and the features that keep rows in it (the audit
//! log, approvals, tokens) depend on the store, never the reverse. A database records
//! the last migration applied in `PRAGMA user_version`; opening it applies the ones
//! after, each in its own transaction together with the version bump, and refuses a
//! database written by a newer gsv ([`StoreError::TooNew`]).

use super::StoreError;
use rusqlite::Connection;

/// One step of the schema: applying `sql` to a database at version `version - 1`
/// brings it to `version`.
struct Migration {
    version: i64,
    sql: &'static str,
}

/// Every migration, in order; versions are 1, 2, 3, … without gaps. Append only: a
/// released migration is never edited, since databases out there already ran it.
const MIGRATIONS: &[Migration] = &[
    // 1: tokens, hashed at rest.
    Migration {
        version: 1,
        sql: "CREATE TABLE IF NOT EXISTS tokens (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('admin', 'node', 'agent')),
            subject TEXT NOT NULL,
            hash BLOB NOT NULL,
            policy TEXT,
            created_at INTEGER NOT NULL,
            revoked_at INTEGER
        );",
    },
    // 2: the hash-chained audit log and the approval queue.
    Migration {
        version: 2,
        sql: "CREATE TABLE IF NOT EXISTS audit (
            seq INTEGER PRIMARY KEY,
            ts INTEGER NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            node TEXT,
            tool TEXT,
            args_hash TEXT,
            args TEXT,
            outcome TEXT NOT NULL,
            duration_ms INTEGER,
            detail TEXT,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS approvals (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            token_id TEXT NOT NULL,
            node TEXT NOT NULL,
            tool TEXT NOT NULL,
            args_hash TEXT NOT NULL,
            summary TEXT NOT NULL,
            reason TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            state TEXT NOT NULL,
            decided_at INTEGER,
            decided_by TEXT
        );",
    },
    // 3: one-time join tokens. SQLite cannot alter a CHECK constraint, so the tokens
    // table is rebuilt with the wider kind check.
    Migration {
        version: 3,
        sql: "CREATE TABLE tokens_v3 (
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
    },
    // 4: what each node id was accepted offering (tools with their capability, and
    // capabilities, as JSON), so a node that comes back offering more is flagged.
    Migration {
        version: 4,
        sql: "CREATE TABLE IF NOT EXISTS node_offers (
            node TEXT PRIMARY KEY,
            tools TEXT NOT NULL,
            capabilities TEXT NOT NULL,
            accepted_at INTEGER NOT NULL,
            accepted_by TEXT NOT NULL
        );",
    },
    // 5: the labels operators give node ids (`store::labels`).
    Migration {
        version: 5,
        sql: "CREATE TABLE IF NOT EXISTS node_labels (
            node TEXT PRIMARY KEY,
            labels TEXT NOT NULL,
            updated_at INTEGER NOT NULL,
            updated_by TEXT NOT NULL
        );",
    },
    // 6: the dry-run plan a node's tool gives with its approval request.
    Migration {
        version: 6,
        sql: "ALTER TABLE approvals ADD COLUMN plan TEXT;",
    },
    // 7: jobs, the calls whose outcome the gateway keeps (`store::jobs`).
    Migration {
        version: 7,
        sql: "CREATE TABLE IF NOT EXISTS jobs (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            token_id TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'call',
            selector TEXT,
            state TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            finished_at INTEGER,
            result TEXT,
            error TEXT
        );
        CREATE INDEX IF NOT EXISTS jobs_by_token ON jobs (token_id, created_at);
        CREATE INDEX IF NOT EXISTS jobs_by_age ON jobs (created_at);",
    },
    // 8: the nodes a fan-out's one approval request covers (a JSON list).
    Migration {
        version: 8,
        sql: "ALTER TABLE approvals ADD COLUMN nodes TEXT;",
    },
    // 9: how a running job's call was sent to its node, so a restarted gateway can ask
    // the node for it again (`crate::reattach`); the bytes a finished job keeps (its
    // result or error), for the per-token and total size caps; the nodes a job ran on (a
    // JSON list), for `jobs.list --select`.
    Migration {
        version: 9,
        sql: "ALTER TABLE jobs ADD COLUMN dispatch TEXT;
        ALTER TABLE jobs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE jobs ADD COLUMN nodes TEXT;",
    },
    // 10: operator tokens and their role (`approver` or `viewer`). The kind check is
    // widened by rebuilding the table, as in 3.
    Migration {
        version: 10,
        sql: "CREATE TABLE tokens_v10 (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('admin', 'node', 'join', 'agent', 'operator')),
            subject TEXT NOT NULL,
            hash BLOB NOT NULL,
            policy TEXT,
            created_at INTEGER NOT NULL,
            revoked_at INTEGER,
            role TEXT CHECK (role IS NULL OR role IN ('approver', 'viewer')),
            CHECK ((kind = 'operator') = (role IS NOT NULL))
        );
        INSERT INTO tokens_v10 SELECT id, kind, subject, hash, policy, created_at, revoked_at, NULL FROM tokens;
        DROP TABLE tokens;
        ALTER TABLE tokens_v10 RENAME TO tokens;",
    },
    // 11: cluster mode's one audit chain (`audit::cluster_chain`) and what a replica
    // keeps of its place in the shared streams.
    Migration {
        version: 11,
        sql: "CREATE TABLE IF NOT EXISTS cluster_audit (
            cseq INTEGER PRIMARY KEY,
            replica TEXT NOT NULL,
            chain TEXT NOT NULL,
            rseq INTEGER NOT NULL,
            rprev TEXT NOT NULL,
            rhash TEXT NOT NULL,
            cut INTEGER NOT NULL DEFAULT 0,
            ts INTEGER NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            node TEXT,
            tool TEXT,
            args_hash TEXT,
            args TEXT,
            outcome TEXT NOT NULL,
            duration_ms INTEGER,
            detail TEXT,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        );
        CREATE UNIQUE INDEX IF NOT EXISTS cluster_audit_once ON cluster_audit (replica, rhash);
        CREATE TABLE IF NOT EXISTS cluster_meta (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );",
    },
    // 12: cluster mode's copies of the other replicas' jobs (`owner`: the replica that
    // runs the job; NULL for this gateway's own) and the changes of this gateway's own
    // jobs, in order, for the replica to publish (`store::job_copies`).
    Migration {
        version: 12,
        sql: "ALTER TABLE jobs ADD COLUMN owner TEXT;
        CREATE TABLE IF NOT EXISTS job_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL
        );
        CREATE TRIGGER IF NOT EXISTS jobs_started AFTER INSERT ON jobs WHEN NEW.owner IS NULL
        BEGIN
            INSERT INTO job_changes (id) VALUES (NEW.id);
        END;
        CREATE TRIGGER IF NOT EXISTS jobs_ended AFTER UPDATE OF state ON jobs
        WHEN NEW.owner IS NULL AND NEW.state != OLD.state
        BEGIN
            INSERT INTO job_changes (id) VALUES (NEW.id);
        END;",
    },
    // 13: what each accepted tool's definition was (its description, schema,
    // annotations and approval posture, as a digest), so a pinned tool cannot be
    // reworded or widened after acceptance unseen (`crate::offers`).
    Migration {
        version: 13,
        sql: "ALTER TABLE node_offers ADD COLUMN definitions TEXT NOT NULL DEFAULT '{}';",
    },
];

/// The schema version this gsv writes: the last migration's.
pub const SCHEMA_VERSION: i64 = 13;

/// Brings the database to [`SCHEMA_VERSION`], one migration (and its version bump) per
/// transaction, so a failure leaves the database at the last version fully applied.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version = user_version(conn)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew(version));
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > version) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated between our read and the lock.
        let now = user_version(&tx)?;
        if now > SCHEMA_VERSION {
            return Err(StoreError::TooNew(now));
        }
        if now >= m.version {
            continue;
        }
        tx.execute_batch(m.sql)?;
        tx.pragma_update(None, "user_version", m.version)?;
        tx.commit()?;
    }
    Ok(())
}

fn user_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, TokenRecord};
    use crate::token::{self, TokenKind};
    use rusqlite::params;
    use std::path::{Path, PathBuf};

    /// The schema as gsv wrote it at version 1 (commit 107135e).
    const V1: &str = "CREATE TABLE IF NOT EXISTS tokens (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('admin', 'node', 'agent')),
        subject TEXT NOT NULL,
        hash BLOB NOT NULL,
        policy TEXT,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    );
    PRAGMA user_version = 1;";

    /// What version 2 (commit 36293df) added to version 1: the audit log and approvals,
    /// as `audit.rs` and `approvals.rs` then declared them.
    const V2_ADDED: &str = "CREATE TABLE IF NOT EXISTS audit (
        seq INTEGER PRIMARY KEY,
        ts INTEGER NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT NOT NULL,
        node TEXT,
        tool TEXT,
        args_hash TEXT,
        args TEXT,
        outcome TEXT NOT NULL,
        duration_ms INTEGER,
        detail TEXT,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS approvals (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        token_id TEXT NOT NULL,
        node TEXT NOT NULL,
        tool TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        summary TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        state TEXT NOT NULL,
        decided_at INTEGER,
        decided_by TEXT
    );
    PRAGMA user_version = 2;";

    fn temp_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("gsv-migrate-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn raw(dir: &Path) -> Connection {
        Connection::open(dir.join(crate::datadir::DB_FILE)).unwrap()
    }

    /// Writes a token row the way the old code did; returns the token string.
    fn old_token(
        conn: &Connection,
        kind: TokenKind,
        subject: &str,
        policy: Option<&str>,
    ) -> String {
        let t = token::generate(kind);
        conn.execute(
            "INSERT INTO tokens (id, kind, subject, hash, policy, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 1000)",
            params![t.id, kind.as_str(), subject, &t.hash[..], policy],
        )
        .unwrap();
        t.token
    }

    fn columns(conn: &Connection, table: &str) -> Vec<String> {
        let mut stmt = conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .unwrap();
        let cols = stmt.query_map([], |r| r.get::<_, String>(1)).unwrap();
        cols.map(|c| c.unwrap()).collect()
    }

    /// After the upgrade: current version, every table with its columns, join tokens
    /// accepted by the kind check.
    fn check_current(store: &Store) {
        store
            .with_conn(|c| {
                assert_eq!(user_version(c)?, SCHEMA_VERSION);
                for (table, col) in [
                    ("tokens", "revoked_at"),
                    ("tokens", "role"),
                    ("audit", "hash"),
                    ("approvals", "decided_by"),
                    ("node_offers", "accepted_by"),
                ] {
                    assert!(columns(c, table).iter().any(|n| n == col), "{table}.{col}");
                }
                Ok(())
            })
            .unwrap();
        let (join, _) = store.create_token(TokenKind::Join, "join", None).unwrap();
        assert!(store.verify(&join).unwrap().is_some());
        let (op, _) = store
            .with_conn(|c| {
                crate::store::insert_operator_token(
                    c,
                    "alice",
                    crate::operator::OperatorRole::Viewer,
                )
            })
            .unwrap();
        let rec = store.verify(&op).unwrap().expect("operator token valid");
        assert_eq!(rec.role, Some(crate::operator::OperatorRole::Viewer));
    }

    fn verified(store: &Store, tok: &str) -> TokenRecord {
        store.verify(tok).unwrap().expect("old token still valid")
    }

    #[test]
    fn version_1_database_keeps_its_tokens() {
        let dir = temp_dir();
        let (node, agent) = {
            let c = raw(&dir);
            c.execute_batch(V1).unwrap();
            let node = old_token(&c, TokenKind::Node, "laptop", None);
            let agent = old_token(
                &c,
                TokenKind::Agent,
                "ci",
                Some(r#"{"allow":["*"],"deny":[],"confirm":[]}"#),
            );
            (node, agent)
        };
        let store = Store::open(&dir).unwrap();
        check_current(&store);
        assert_eq!(verified(&store, &node).subject, "laptop");
        let a = verified(&store, &agent);
        assert_eq!((a.kind, a.subject.as_str()), (TokenKind::Agent, "ci"));
        assert_eq!(a.policy.map(|p| p.allow), Some(vec!["*".to_owned()]));
        // The tokens carried over keep their rows (created_at included).
        assert!(
            store
                .list_tokens()
                .unwrap()
                .iter()
                .filter(|t| t.created_at == 1000)
                .count()
                == 2
        );
        drop(store);
        // Opening again is a no-op.
        check_current(&Store::open(&dir).unwrap());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn version_2_database_keeps_tokens_audit_and_approvals() {
        let dir = temp_dir();
        let (node, revoked) = {
            let c = raw(&dir);
            c.execute_batch(V1).unwrap();
            c.execute_batch(V2_ADDED).unwrap();
            let node = old_token(&c, TokenKind::Node, "laptop", None);
            let revoked = old_token(&c, TokenKind::Admin, "admin", None);
            c.execute(
                "UPDATE tokens SET revoked_at = 2000 WHERE kind = 'admin'",
                [],
            )
            .unwrap();
            c.execute(
                "INSERT INTO audit (seq, ts, kind, actor, outcome, prev_hash, hash) VALUES (1, 5, 'auth', 'ci', 'ok', 'p', 'h')",
                [],
            )
            .unwrap();
            c.execute(
                "INSERT INTO approvals (id, agent, token_id, node, tool, args_hash, summary, reason, created_at, expires_at, state)
                 VALUES ('ap1', 'ci', 't1', 'laptop', 'shell', 'x', 's', 'r', 1, 2, 'pending')",
                [],
            )
            .unwrap();
            (node, revoked)
        };
        let store = Store::open(&dir).unwrap();
        check_current(&store);
        assert_eq!(verified(&store, &node).subject, "laptop");
        assert!(
            store.verify(&revoked).unwrap().is_none(),
            "revocation survives"
        );
        store
            .with_conn(|c| {
                let audit: (i64, String) =
                    c.query_row("SELECT seq, actor FROM audit", [], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?;
                assert_eq!(audit, (1, "ci".to_owned()));
                let state: String =
                    c.query_row("SELECT state FROM approvals WHERE id = 'ap1'", [], |r| {
                        r.get(0)
                    })?;
                assert_eq!(state, "pending");
                Ok(())
            })
            .unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// What version 3 (commit 7ec61bd) did to version 2: join tokens, by rebuilding the
    /// tokens table with the wider kind check.
    const V3_CHANGED: &str = "CREATE TABLE tokens_v3 (
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
    ALTER TABLE tokens_v3 RENAME TO tokens;
    PRAGMA user_version = 3;";

    #[test]
    fn version_3_database_gains_node_offers_and_keeps_the_rest() {
        let dir = temp_dir();
        let join = {
            let c = raw(&dir);
            c.execute_batch(V1).unwrap();
            c.execute_batch(V2_ADDED).unwrap();
            c.execute_batch(V3_CHANGED).unwrap();
            c.execute(
                "INSERT INTO audit (seq, ts, kind, actor, outcome, prev_hash, hash) VALUES (1, 5, 'connect', 'node:lab', 'ok', 'p', 'h')",
                [],
            )
            .unwrap();
            old_token(&c, TokenKind::Join, "lab", None)
        };
        let store = Store::open(&dir).unwrap();
        check_current(&store);
        assert_eq!(verified(&store, &join).kind, TokenKind::Join);
        // No node has an accepted offer yet: each is trusted on its next first use.
        assert_eq!(store.accepted_offer("lab").unwrap(), None);
        let offer = crate::store::Offer {
            tools: [("Echo".to_owned(), "diagnostics.echo".to_owned())].into(),
            capabilities: ["diagnostics.echo".to_owned()].into(),
            definitions: [("Echo".to_owned(), "d1".to_owned())].into(),
        };
        store.accept_offer("lab", &offer, "first-use", 7).unwrap();
        let got = store.accepted_offer("lab").unwrap().expect("stored");
        assert_eq!(
            (got.offer, got.accepted_by.as_str(), got.accepted_at),
            (offer, "first-use", 7)
        );
        store
            .with_conn(|c| {
                let n: i64 = c.query_row("SELECT COUNT(*) FROM audit", [], |r| r.get(0))?;
                assert_eq!(n, 1);
                Ok(())
            })
            .unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn database_from_the_future_is_refused() {
        let dir = temp_dir();
        raw(&dir)
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        assert!(matches!(
            Store::open(&dir),
            Err(StoreError::TooNew(v)) if v == SCHEMA_VERSION + 1
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn versions_are_consecutive_and_end_at_schema_version() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
    }
}
