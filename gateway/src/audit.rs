//! The append-only, hash-chained audit log.
//!
//! Every connect, refusal, call, approval decision and token change becomes one row of
//! the `audit` table in `gsv.db`. Each row carries the hash of the previous row and a
//! hash over its own contents (sequence number included), so `gsv audit verify` finds
//! any row that was edited, deleted or reordered afterwards — with the gateway stopped,
//! straight from the database. It is tamper-evident, not tamper-proof: someone who can
//! write the database can also rewrite the whole chain after the last verification.
//!
//! The gateway never writes audit rows on the call path: `AuditLog::record` hands the
//! entry to a writer thread that appends batches in one transaction each. Nothing is
//! dropped: the hand-off queue is unbounded and drained as fast as SQLite commits.

use crate::store::{Store, StoreError};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::mpsc;

/// What kind of event a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    Connect,
    Disconnect,
    Refused,
    Call,
    Approval,
    Policy,
}

impl AuditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::Connect => "connect",
            AuditKind::Disconnect => "disconnect",
            AuditKind::Refused => "refused",
            AuditKind::Call => "call",
            AuditKind::Approval => "approval",
            AuditKind::Policy => "policy",
        }
    }
}

/// One entry to append.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub kind: AuditKind,
    /// Who acted: `agent:NAME`, `node:ID`, `admin`, `cli`, or a peer address.
    pub actor: String,
    pub node: Option<String>,
    pub tool: Option<String>,
    /// SHA-256 (hex) of the canonical JSON arguments.
    pub args_hash: Option<String>,
    /// The arguments themselves, only when the gateway runs with `--audit-args`.
    pub args: Option<String>,
    /// `ok`, `tool_error`, an error code, `approved`, `denied`...
    pub outcome: String,
    pub duration_ms: Option<u64>,
    pub detail: Option<Value>,
}

impl AuditEntry {
    pub fn new(kind: AuditKind, actor: impl Into<String>, outcome: impl Into<String>) -> Self {
        AuditEntry {
            kind,
            actor: actor.into(),
            node: None,
            tool: None,
            args_hash: None,
            args: None,
            outcome: outcome.into(),
            duration_ms: None,
            detail: None,
        }
    }
}

/// A stored row.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRow {
    pub seq: i64,
    pub ts: u64,
    #[serde(flatten)]
    pub entry: StoredEntry,
    pub prev_hash: String,
    pub hash: String,
}

/// The entry as read back (kind as text, so rows from newer versions still load).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredEntry {
    pub kind: String,
    pub actor: String,
    pub node: Option<String>,
    pub tool: Option<String>,
    pub args_hash: Option<String>,
    pub args: Option<String>,
    pub outcome: String,
    pub duration_ms: Option<u64>,
    pub detail: Option<String>,
}

/// Result of `verify`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    pub rows: u64,
    pub ok: bool,
    /// The first row that fails, and why.
    pub first_bad_seq: Option<i64>,
    pub problem: Option<String>,
}

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The table, created by the store's migration.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS audit (
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
);";

fn row_hash(prev: &str, seq: i64, ts: u64, e: &StoredEntry) -> String {
    // A JSON array is an unambiguous, stable encoding of the fields in order.
    let canonical = serde_json::json!([
        prev,
        seq,
        ts,
        e.kind,
        e.actor,
        e.node,
        e.tool,
        e.args_hash,
        e.args,
        e.outcome,
        e.duration_ms,
        e.detail
    ]);
    let mut h = Sha256::new();
    h.update(canonical.to_string().as_bytes());
    hex(&h.finalize())
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (hex) of a JSON value's canonical form (object keys sorted).
pub fn args_hash(args: &Value) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(args).unwrap_or_default());
    hex(&h.finalize())
}

fn stored(e: &AuditEntry) -> StoredEntry {
    StoredEntry {
        kind: e.kind.as_str().to_owned(),
        actor: e.actor.clone(),
        node: e.node.clone(),
        tool: e.tool.clone(),
        args_hash: e.args_hash.clone(),
        args: e.args.clone(),
        outcome: e.outcome.clone(),
        duration_ms: e.duration_ms,
        detail: e.detail.as_ref().map(|d| d.to_string()),
    }
}

/// Appends entries in one transaction, chaining from the current last row. Safe with
/// several writers (gateway and CLI): the transaction takes the write lock first.
pub fn append(conn: &mut Connection, entries: &[(u64, AuditEntry)]) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let last: Option<(i64, String)> = tx
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (mut seq, mut prev) = last.unwrap_or((0, GENESIS.to_owned()));
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO audit (seq, ts, kind, actor, node, tool, args_hash, args, outcome, duration_ms, detail, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?;
        for (ts, e) in entries {
            seq += 1;
            let s = stored(e);
            let hash = row_hash(&prev, seq, *ts, &s);
            stmt.execute(params![
                seq,
                *ts as i64,
                s.kind,
                s.actor,
                s.node,
                s.tool,
                s.args_hash,
                s.args,
                s.outcome,
                s.duration_ms.map(|d| d as i64),
                s.detail,
                prev,
                hash
            ])?;
            prev = hash;
        }
    }
    tx.commit()?;
    Ok(())
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRow> {
    Ok(AuditRow {
        seq: r.get(0)?,
        ts: r.get::<_, i64>(1)?.max(0) as u64,
        entry: StoredEntry {
            kind: r.get(2)?,
            actor: r.get(3)?,
            node: r.get(4)?,
            tool: r.get(5)?,
            args_hash: r.get(6)?,
            args: r.get(7)?,
            outcome: r.get(8)?,
            duration_ms: r.get::<_, Option<i64>>(9)?.map(|d| d.max(0) as u64),
            detail: r.get(10)?,
        },
        prev_hash: r.get(11)?,
        hash: r.get(12)?,
    })
}

const COLUMNS: &str =
    "seq, ts, kind, actor, node, tool, args_hash, args, outcome, duration_ms, detail, prev_hash, hash";

/// Walks the whole chain and reports the first row that does not verify.
pub fn verify(conn: &Connection) -> Result<VerifyReport, StoreError> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM audit ORDER BY seq"))?;
    let rows = stmt.query_map([], read_row)?;
    let mut prev = GENESIS.to_owned();
    let mut n = 0u64;
    for (expected_seq, row) in (1i64..).zip(rows) {
        let row = row?;
        n += 1;
        let bad = |problem: String| VerifyReport {
            rows: n,
            ok: false,
            first_bad_seq: Some(row.seq),
            problem: Some(problem),
        };
        if row.seq != expected_seq {
            return Ok(bad(format!(
                "row {} is missing (found {} next): a row was deleted",
                expected_seq, row.seq
            )));
        }
        if row.prev_hash != prev {
            return Ok(bad(format!(
                "row {} does not chain to the row before it",
                row.seq
            )));
        }
        if row_hash(&prev, row.seq, row.ts, &row.entry) != row.hash {
            return Ok(bad(format!(
                "row {} was modified after it was written",
                row.seq
            )));
        }
        prev = row.hash;
    }
    Ok(VerifyReport {
        rows: n,
        ok: true,
        first_bad_seq: None,
        problem: None,
    })
}

/// Rows after `after_seq`, oldest first, at most `limit`.
pub fn rows_after(
    conn: &Connection,
    after_seq: i64,
    limit: u32,
) -> Result<Vec<AuditRow>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![after_seq, limit], read_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The sequence number of the last row (0 when empty).
pub fn last_seq(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM audit", [], |r| r.get(0))?)
}

enum Msg {
    Entry(u64, AuditEntry),
    Flush(std::sync::mpsc::Sender<()>),
}

/// The gateway's handle to the writer thread.
#[derive(Clone)]
pub struct AuditLog {
    tx: mpsc::Sender<Msg>,
    /// Whether argument values are stored (`--audit-args`).
    pub store_args: bool,
}

impl AuditLog {
    /// Starts the writer thread on its own connection to the data directory's store.
    pub fn start(data_dir: &Path, store_args: bool) -> Result<AuditLog, StoreError> {
        let store = Store::open(data_dir)?;
        let (tx, rx) = mpsc::channel::<Msg>();
        std::thread::Builder::new()
            .name("gsv-audit".into())
            .spawn(move || writer(store, rx))
            .map_err(|e| StoreError::Policy(format!("cannot start the audit writer: {e}")))?;
        Ok(AuditLog { tx, store_args })
    }

    /// Queues an entry; never blocks.
    pub fn record(&self, entry: AuditEntry) {
        if self
            .tx
            .send(Msg::Entry(gsv_protocol::now_ms(), entry))
            .is_err()
        {
            tracing::error!("audit writer is gone; entry lost");
        }
    }

    /// Waits until everything queued so far is committed.
    pub async fn flush(&self) {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        if self.tx.send(Msg::Flush(done_tx)).is_ok() {
            let _ = tokio::task::spawn_blocking(move || done_rx.recv()).await;
        }
    }
}

fn writer(store: Store, rx: mpsc::Receiver<Msg>) {
    const BATCH: usize = 512;
    while let Ok(first) = rx.recv() {
        let mut batch = Vec::new();
        let mut waiters = Vec::new();
        let mut push = |m: Msg, batch: &mut Vec<(u64, AuditEntry)>| match m {
            Msg::Entry(ts, e) => batch.push((ts, e)),
            Msg::Flush(w) => waiters.push(w),
        };
        push(first, &mut batch);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(m) => push(m, &mut batch),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            // Retry a busy database a few times; an entry is never silently skipped.
            let mut attempt = 0;
            loop {
                match store.with_conn(|c| append(c, &batch)) {
                    Ok(()) => break,
                    Err(e) if attempt < 50 => {
                        attempt += 1;
                        tracing::warn!(error = %e, attempt, "audit append failed; retrying");
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    Err(e) => {
                        tracing::error!(error = %e, lost = batch.len(), "audit append failed for good");
                        break;
                    }
                }
            }
        }
        for w in waiters {
            let _ = w.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (Store, std::path::PathBuf) {
        let d = std::env::temp_dir().join(format!("gsv-audit-{}", uuid::Uuid::new_v4()));
        (Store::open(&d).unwrap(), d)
    }

    fn entry(i: u32) -> (u64, AuditEntry) {
        let mut e = AuditEntry::new(AuditKind::Call, "agent:t", "ok");
        e.node = Some("n".into());
        e.tool = Some(format!("T{i}"));
        (1000 + i as u64, e)
    }

    #[test]
    fn chain_verifies_and_detects_edits_and_deletions() {
        let (s, dir) = store();
        s.with_conn(|c| append(c, &[entry(1), entry(2), entry(3)]))
            .unwrap();
        s.with_conn(|c| append(c, &[entry(4)])).unwrap();
        let r = s.with_conn(|c| verify(c)).unwrap();
        assert!(r.ok, "{r:?}");
        assert_eq!(r.rows, 4);

        s.with_conn(|c| Ok(c.execute("UPDATE audit SET outcome = 'denied' WHERE seq = 2", [])?))
            .unwrap();
        let r = s.with_conn(|c| verify(c)).unwrap();
        assert!(!r.ok);
        assert_eq!(r.first_bad_seq, Some(2));
        s.with_conn(|c| Ok(c.execute("UPDATE audit SET outcome = 'ok' WHERE seq = 2", [])?))
            .unwrap();
        assert!(s.with_conn(|c| verify(c)).unwrap().ok);

        s.with_conn(|c| Ok(c.execute("DELETE FROM audit WHERE seq = 3", [])?))
            .unwrap();
        let r = s.with_conn(|c| verify(c)).unwrap();
        assert!(!r.ok);
        assert_eq!(r.first_bad_seq, Some(4));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn canonical_args_hash_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[1,2]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[1,2],  "b":1}"#).unwrap();
        assert_eq!(args_hash(&a), args_hash(&b));
        assert_ne!(
            args_hash(&a),
            args_hash(&serde_json::json!({"a": [2, 1], "b": 1}))
        );
    }
}
