//! The cluster's one audit chain: every replica's audit rows, in one order that every
//! replica agrees on, hash-chained again.
//!
//! Each replica keeps its own log as on one gateway (the `audit` table, its own
//! chain): nothing on the call path changes. In cluster mode each replica also publishes
//! every row of its log, in order, to a JetStream stream (`crate::cluster::audit`), and
//! applies that stream, in the stream's order, to the `cluster_audit` table: one row per
//! published row, chained from the one before it whichever replica it came from. Every
//! replica applies the same messages in the same order by the same rule, so every
//! replica holds the same chain, row for row and hash for hash; `gsv audit verify`
//! checks it with the replica's own log, from any replica's data directory.
//!
//! A record carries its row as the replica that wrote it stored it (its place and hash
//! in that replica's chain, and the hash before it), so whoever applies it recomputes
//! the row's own hash: a record whose fields do not give its hash is refused. A row
//! already applied (same replica, same hash: a record published twice) is not applied
//! again. A row larger than a NATS message may be travels without its arguments and
//! detail (`cut`); then its own hash cannot be recomputed and only the cluster chain
//! vouches for it.

use super::{row_hash, sha256_json, AuditRow, HashedFields, StoredEntry, GENESIS};
use crate::store::StoreError;
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

/// Largest record published whole, bytes (NATS's default `max_payload` is 1 MiB).
pub const MAX_RECORD: usize = 900 * 1024;

/// One row of a replica's log as it travels.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The replica whose log the row is from.
    pub replica: String,
    /// The hash of that log's first row: which run of the replica's data directory.
    pub chain: String,
    /// The row's place, the hash before it and its hash in that log.
    pub rseq: i64,
    pub rprev: String,
    pub rhash: String,
    /// Arguments and detail left out (the row was too large to travel whole).
    #[serde(default)]
    pub cut: bool,
    pub ts: u64,
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

impl Record {
    /// The record of a row of this replica's log.
    pub fn of_row(replica: &str, chain: &str, row: AuditRow) -> Record {
        let e = row.entry;
        Record {
            replica: replica.to_owned(),
            chain: chain.to_owned(),
            rseq: row.seq,
            rprev: row.prev_hash,
            rhash: row.hash,
            cut: false,
            ts: row.ts,
            kind: e.kind,
            actor: e.actor,
            node: e.node,
            tool: e.tool,
            args_hash: e.args_hash,
            args: e.args,
            outcome: e.outcome,
            duration_ms: e.duration_ms,
            detail: e.detail,
        }
    }

    /// The same record without its arguments and detail.
    pub fn cut(mut self) -> Record {
        self.cut = true;
        self.args = None;
        self.detail = None;
        self
    }

    fn stored(&self) -> StoredEntry {
        StoredEntry {
            kind: self.kind.clone(),
            actor: self.actor.clone(),
            node: self.node.clone(),
            tool: self.tool.clone(),
            args_hash: self.args_hash.clone(),
            args: self.args.clone(),
            outcome: self.outcome.clone(),
            duration_ms: self.duration_ms,
            detail: self.detail.clone(),
        }
    }

    /// Whether the row's fields give the hash its replica stored it with.
    fn own_hash_holds(&self) -> bool {
        let e = self.stored();
        row_hash(
            &self.rprev,
            self.rseq,
            self.ts,
            &HashedFields::of_stored(&e),
        ) == self.rhash
    }
}

fn is_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why a record from the stream is refused, if it is.
pub fn check(r: &Record) -> Result<(), String> {
    if !crate::replica::valid_replica_name(&r.replica) {
        return Err("malformed replica name".into());
    }
    if !is_hash(&r.chain) || !is_hash(&r.rprev) || !is_hash(&r.rhash) {
        return Err("malformed hash".into());
    }
    if r.rseq < 1 || r.ts > i64::MAX as u64 || r.duration_ms.is_some_and(|d| d > i64::MAX as u64) {
        return Err("number out of range".into());
    }
    if !r.cut && !r.own_hash_holds() {
        return Err("its fields do not give its hash".into());
    }
    Ok(())
}

/// The hash of a row of the cluster chain.
fn cluster_hash(prev: &str, cseq: i64, r: &Record) -> String {
    let e = r.stored();
    let f = HashedFields::of_stored(&e);
    sha256_json(&(
        (
            prev, cseq, &r.replica, &r.chain, r.rseq, &r.rprev, &r.rhash, r.cut,
        ),
        (
            r.ts,
            f.kind,
            f.actor,
            f.node,
            f.tool,
            f.args_hash,
            f.args,
            f.outcome,
            f.duration_ms,
            f.detail,
        ),
    ))
}

/// A number kept in `cluster_meta` (0 when absent).
pub fn meta_number(c: &Connection, name: &str) -> Result<u64, StoreError> {
    let v: Option<String> = c
        .query_row(
            "SELECT value FROM cluster_meta WHERE name = ?1",
            params![name],
            |r| r.get(0),
        )
        .optional()?;
    Ok(v.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// Keeps a value in `cluster_meta`.
pub fn set_meta(c: &Connection, name: &str, value: &str) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO cluster_meta (name, value) VALUES (?1, ?2)
         ON CONFLICT(name) DO UPDATE SET value = excluded.value",
        params![name, value],
    )?;
    Ok(())
}

/// A text kept in `cluster_meta`.
pub fn meta_text(c: &Connection, name: &str) -> Result<Option<String>, StoreError> {
    Ok(c.query_row(
        "SELECT value FROM cluster_meta WHERE name = ?1",
        params![name],
        |r| r.get(0),
    )
    .optional()?)
}

/// The hash of this replica's first log row (`None` while the log is empty).
pub fn own_chain(c: &Connection) -> Result<Option<String>, StoreError> {
    Ok(
        c.query_row("SELECT hash FROM audit WHERE seq = 1", [], |r| r.get(0))
            .optional()?,
    )
}

/// Appends the records not applied before to the cluster chain, in order; how many were
/// appended. Records are checked first by the caller ([`check`]).
pub fn apply(tx: &Transaction<'_>, records: &[Record]) -> Result<usize, StoreError> {
    let last: Option<(i64, String)> = tx
        .prepare_cached("SELECT cseq, hash FROM cluster_audit ORDER BY cseq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (mut cseq, mut prev) = last.unwrap_or((0, GENESIS.to_owned()));
    let mut seen =
        tx.prepare_cached("SELECT 1 FROM cluster_audit WHERE replica = ?1 AND rhash = ?2")?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO cluster_audit (cseq, replica, chain, rseq, rprev, rhash, cut, ts, kind, actor, node, tool, args_hash, args, outcome, duration_ms, detail, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
    )?;
    let mut applied = 0;
    for r in records {
        if seen.exists(params![r.replica, r.rhash])? {
            continue;
        }
        cseq += 1;
        let hash = cluster_hash(&prev, cseq, r);
        insert.execute(params![
            cseq,
            r.replica,
            r.chain,
            r.rseq,
            r.rprev,
            r.rhash,
            r.cut,
            r.ts as i64,
            r.kind,
            r.actor,
            r.node,
            r.tool,
            r.args_hash,
            r.args,
            r.outcome,
            r.duration_ms.map(|d| d as i64),
            r.detail,
            prev,
            hash
        ])?;
        prev = hash;
        applied += 1;
    }
    Ok(applied)
}

/// What `gsv audit verify` says of the cluster chain.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReport {
    pub rows: u64,
    pub ok: bool,
    /// The last row's hash: the same on every replica that applied as many rows.
    pub head: String,
    pub first_bad_seq: Option<i64>,
    pub problem: Option<String>,
}

/// Walks the cluster chain (`None` when it is empty: not in cluster mode). Each row must
/// chain to the one before it and hash to what it says; each row not `cut` must give
/// its replica's hash; each row from this replica's own log (its name and first row)
/// must be that log's row.
pub fn verify(c: &Connection) -> Result<Option<ClusterReport>, StoreError> {
    let own_name = meta_text(c, "replica")?;
    let own_chain = own_chain(c)?;
    let mut local = c.prepare("SELECT hash FROM audit WHERE seq = ?1")?;
    let mut stmt = c.prepare(
        "SELECT cseq, replica, chain, rseq, rprev, rhash, cut, ts, kind, actor, node, tool, args_hash, args, outcome, duration_ms, detail, prev_hash, hash
         FROM cluster_audit ORDER BY cseq",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            Record {
                replica: r.get(1)?,
                chain: r.get(2)?,
                rseq: r.get(3)?,
                rprev: r.get(4)?,
                rhash: r.get(5)?,
                cut: r.get(6)?,
                ts: r.get::<_, i64>(7)?.max(0) as u64,
                kind: r.get(8)?,
                actor: r.get(9)?,
                node: r.get(10)?,
                tool: r.get(11)?,
                args_hash: r.get(12)?,
                args: r.get(13)?,
                outcome: r.get(14)?,
                duration_ms: r.get::<_, Option<i64>>(15)?.map(|d| d.max(0) as u64),
                detail: r.get(16)?,
            },
            r.get::<_, String>(17)?,
            r.get::<_, String>(18)?,
        ))
    })?;
    let mut prev = GENESIS.to_owned();
    let mut n = 0u64;
    for (expected, row) in (1i64..).zip(rows) {
        let (cseq, record, prev_hash, hash) = row?;
        n += 1;
        let bad = |problem: String| {
            Ok(Some(ClusterReport {
                rows: n,
                ok: false,
                head: String::new(),
                first_bad_seq: Some(cseq),
                problem: Some(problem),
            }))
        };
        if cseq != expected {
            return bad(format!(
                "cluster row {expected} is missing (found {cseq} next)"
            ));
        }
        if prev_hash != prev {
            return bad(format!(
                "cluster row {cseq} does not chain to the row before it"
            ));
        }
        if cluster_hash(&prev, cseq, &record) != hash {
            return bad(format!(
                "cluster row {cseq} was modified after it was written"
            ));
        }
        if !record.cut && !record.own_hash_holds() {
            return bad(format!(
                "cluster row {cseq} does not give the hash replica {} wrote it with",
                record.replica
            ));
        }
        let own = own_name.as_deref() == Some(record.replica.as_str())
            && own_chain.as_deref() == Some(record.chain.as_str());
        if own {
            let mine: Option<String> = local
                .query_row(params![record.rseq], |r| r.get(0))
                .optional()?;
            if mine.as_deref() != Some(record.rhash.as_str()) {
                return bad(format!(
                    "cluster row {cseq} is not row {} of this replica's own log",
                    record.rseq
                ));
            }
        }
        prev = hash;
    }
    if n == 0 {
        return Ok(None);
    }
    Ok(Some(ClusterReport {
        rows: n,
        ok: true,
        head: prev,
        first_bad_seq: None,
        problem: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{append, AuditEvent};
    use crate::store::Store;
    use rusqlite::TransactionBehavior;

    fn store() -> Store {
        let dir = std::env::temp_dir().join(format!("gsv-cluster-chain-{}", uuid::Uuid::new_v4()));
        Store::open(&dir).expect("open")
    }

    /// Rows of a store's own log as records of `replica`.
    fn records_of(s: &Store, replica: &str) -> Vec<Record> {
        s.with_conn(|c| {
            let chain = own_chain(c)?.expect("a first row");
            Ok(super::super::rows_after(c, 0, 100)?
                .into_iter()
                .map(|r| Record::of_row(replica, &chain, r))
                .collect::<Vec<_>>())
        })
        .expect("rows")
    }

    fn apply_to(s: &Store, records: &[Record]) -> usize {
        s.with_conn(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let n = apply(&tx, records)?;
            tx.commit()?;
            Ok(n)
        })
        .expect("applied")
    }

    fn log_some(s: &Store, who: &str, n: usize) {
        let entries: Vec<_> = (0..n)
            .map(|i| {
                (
                    1_000 + i as u64,
                    AuditEvent::TokenRevoked {
                        actor: who,
                        token_id: &format!("{i:016x}"),
                    }
                    .into(),
                )
            })
            .collect();
        s.with_conn(|c| append(c, &entries)).expect("append");
    }

    #[test]
    fn every_replica_applying_the_same_records_holds_the_same_chain_and_tampering_shows() {
        let (a, b) = (store(), store());
        log_some(&a, "alice", 3);
        log_some(&b, "bob", 2);
        let mut stream = records_of(&a, "a");
        stream.extend(records_of(&b, "b"));
        for r in &stream {
            assert_eq!(check(r), Ok(()));
        }
        // A record published twice is applied once.
        stream.push(stream[1].clone());
        a.with_conn(|c| set_meta(c, "replica", "a")).expect("meta");
        b.with_conn(|c| set_meta(c, "replica", "b")).expect("meta");
        assert_eq!(apply_to(&a, &stream), 5);
        assert_eq!(apply_to(&b, &stream), 5);
        assert_eq!(apply_to(&b, &stream), 0);
        let ra = a.with_conn(|c| verify(c)).expect("verify").expect("rows");
        let rb = b.with_conn(|c| verify(c)).expect("verify").expect("rows");
        assert!(ra.ok && rb.ok, "{ra:?} {rb:?}");
        assert_eq!((ra.rows, &ra.head), (5, &rb.head));

        // An edited cluster row is found.
        b.with_conn(|c| {
            c.execute(
                "UPDATE cluster_audit SET actor = 'mallory' WHERE cseq = 2",
                [],
            )?;
            Ok(())
        })
        .expect("edit");
        let rb = b.with_conn(|c| verify(c)).expect("verify").expect("rows");
        assert_eq!((rb.ok, rb.first_bad_seq), (false, Some(2)));

        // This replica's own log rewritten whole (its own chain then verifies) no
        // longer matches the cluster's copy of it.
        a.with_conn(|c| {
            c.execute(
                "UPDATE audit SET hash = 'x' || substr(hash, 2) WHERE seq = 3",
                [],
            )?;
            Ok(())
        })
        .expect("edit");
        let ra = a.with_conn(|c| verify(c)).expect("verify").expect("rows");
        assert_eq!((ra.ok, ra.first_bad_seq), (false, Some(3)), "{ra:?}");
    }

    #[test]
    fn hostile_records_are_refused_and_a_cut_record_still_chains() {
        let a = store();
        log_some(&a, "alice", 1);
        let good = records_of(&a, "a").remove(0);
        let mut forged = good.clone();
        forged.actor = "someone else".into();
        assert!(check(&forged).is_err());
        let mut named = good.clone();
        named.replica = "bad name!".into();
        assert!(check(&named).is_err());
        let mut hashed = good.clone();
        hashed.rhash = "zz".into();
        assert!(check(&hashed).is_err());
        let cut = good.clone().cut();
        assert_eq!(check(&cut), Ok(()));
        let b = store();
        assert_eq!(apply_to(&b, &[cut]), 1);
        let r = b.with_conn(|c| verify(c)).expect("verify").expect("rows");
        assert!(r.ok, "{r:?}");
        // Not in cluster mode: no cluster chain to report.
        assert!(a.with_conn(|c| verify(c)).expect("verify").is_none());
    }
}
