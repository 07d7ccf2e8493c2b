//! Tokens shared by every replica: each one made or revoked on any replica (by
//! `gsv token create`/`revoke` on its data dir, the console, a node's enrollment, the
//! replica's own admin token) is written to the JetStream stream [`STREAM`], and every
//! replica applies the stream to its own store.
//!
//! - **Out**: every [`POLL`] the replica looks for tokens added to its store since it
//!   last looked (by SQLite row id, so a row written late by another process is never
//!   skipped) and for revocations, and publishes each as one message:
//!   `gsv.tokens.ID.created` (the whole row: kind, subject, hash of the secret —
//!   never the secret —, policy, role) and `gsv.tokens.ID.revoked`. The message id
//!   (`Nats-Msg-Id`) is `ID.created` / `ID.revoked`, so JetStream drops the copies
//!   other replicas publish of rows they imported; the stream keeps the last message
//!   of each subject, so a replica that joins later replays every token and every
//!   revocation.
//! - **In**: an ordered consumer reads the stream from its start and applies each
//!   message: an unknown token is inserted with its audit row (`token_created`, actor
//!   `ACTOR@REPLICA`), a revocation marks the token revoked (`token_revoked`) and cuts
//!   at once what the token holds on this replica ([`crate::revocation::cut`]).
//!   Applying is idempotent and monotonic: a token is never un-revoked, a row never
//!   overwritten.
//!
//! Labels, jobs and the audit log travel the same way on streams of their own
//! ([`super::labels`], [`super::jobs`], [`super::audit`]); the loops they all run are
//! [`super::replication`]'s.

use super::replication::{open_stream, read_for_ever, Batches, Kept, Rounds};
use super::Cluster;
use crate::audit::{self, AuditEvent};
use crate::operator::OperatorRole;
use crate::policy::PolicySpec;
use crate::state::Shared;
use crate::token::TokenKind;
use async_nats::jetstream::stream;
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The stream of token records.
pub const STREAM: &str = "GSV_TOKENS";
/// How often the replica looks for new tokens and revocations in its store.
const POLL: Duration = Duration::from_millis(250);
/// Rows read per look.
const BATCH: i64 = 500;
/// Longest wait for JetStream to acknowledge one message.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// A token as it travels: the stored row (the secret's hash, never the secret).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Created {
    pub id: String,
    pub kind: String,
    pub subject: String,
    /// The secret's hash, hex.
    pub hash: String,
    pub policy: Option<String>,
    pub created_at: i64,
    pub role: Option<String>,
    /// The replica that published it.
    pub origin: String,
}

/// A revocation as it travels.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Revoked {
    pub id: String,
    pub revoked_at: i64,
    pub origin: String,
}

/// Runs both directions until the gateway shuts down.
pub async fn replicate(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    let imported: Arc<Mutex<HashSet<String>>> = Arc::default();
    tokio::select! {
        _ = shared.shutdown.cancelled() => {}
        _ = publish_loop(&shared, &cluster, &imported) => {}
        _ = apply_loop(&shared, &cluster, &imported) => {}
    }
}

/// The stream, made if missing.
async fn stream(cluster: &Cluster) -> Result<stream::Stream, String> {
    open_stream(
        cluster,
        Kept {
            name: STREAM,
            subjects: "gsv.tokens.>",
            newest_only: true,
            max_age: None,
        },
    )
    .await
}

/// Out: publishes the store's new tokens and revocations.
async fn publish_loop(shared: &Arc<Shared>, cluster: &Cluster, imported: &Mutex<HashSet<String>>) {
    let mut last_rowid: i64 = 0;
    let mut revoked_since: i64 = 0;
    let mut published_revocations: HashSet<String> = HashSet::new();
    let mut rounds = Rounds::new(cluster, "tokens", POLL);
    loop {
        rounds.next(|| stream(cluster)).await;
        let from = last_rowid;
        let since = revoked_since.saturating_sub(60_000);
        let read = shared
            .store
            .blocking(move |store| store.with_conn(|c| read_changes(c, from, since)))
            .await;
        let (created, revoked) = match read {
            Ok(Ok(changes)) => changes,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cluster: cannot read tokens to publish");
                continue;
            }
            Err(_) => continue,
        };
        let known = |id: &str| imported.lock().map(|s| s.contains(id)).unwrap_or(false);
        let mut failed = false;
        for (rowid, mut row) in created {
            if !known(&row.id) {
                row.origin = cluster.replica.clone();
                let subject = format!("gsv.tokens.{}.created", row.id);
                if let Err(e) =
                    publish(cluster, &subject, &format!("{}.created", row.id), &row).await
                {
                    tracing::warn!(error = %e, "cluster: cannot publish a token; will try again");
                    failed = true;
                    break;
                }
            }
            last_rowid = rowid;
        }
        if failed {
            continue;
        }
        for (id, at) in revoked {
            if published_revocations.contains(&id) {
                continue;
            }
            let message = Revoked {
                id: id.clone(),
                revoked_at: at,
                origin: cluster.replica.clone(),
            };
            let subject = format!("gsv.tokens.{id}.revoked");
            if let Err(e) = publish(cluster, &subject, &format!("{id}.revoked"), &message).await {
                tracing::warn!(error = %e, "cluster: cannot publish a revocation; will try again");
                break;
            }
            revoked_since = revoked_since.max(at);
            published_revocations.insert(id);
        }
    }
}

/// Publishes `body` on `subject` of a stream under `message_id` (JetStream drops a
/// copy with the same id) and waits for JetStream's acknowledgement.
pub(super) async fn publish<T: Serialize>(
    cluster: &Cluster,
    subject: &str,
    message_id: &str,
    body: &T,
) -> Result<(), String> {
    let payload = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let ack = cluster
        .js_publish(subject, &payload, |m| m.message_id(message_id))
        .await?;
    match tokio::time::timeout(ACK_WAIT, ack).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no acknowledgement from JetStream".into()),
    }
}

type Changes = (Vec<(i64, Created)>, Vec<(String, i64)>);

/// Tokens stored after row `from`, and tokens revoked at or after `since`.
fn read_changes(
    c: &mut rusqlite::Connection,
    from: i64,
    since: i64,
) -> Result<Changes, crate::store::StoreError> {
    let mut stmt = c.prepare(
        "SELECT rowid, id, kind, subject, hash, policy, created_at, role FROM tokens \
         WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
    )?;
    let created = stmt
        .query_map(params![from, BATCH], |r| {
            let hash: Vec<u8> = r.get(4)?;
            Ok((
                r.get::<_, i64>(0)?,
                Created {
                    id: r.get(1)?,
                    kind: r.get(2)?,
                    subject: r.get(3)?,
                    hash: ::hex::encode(hash),
                    policy: r.get(5)?,
                    created_at: r.get(6)?,
                    role: r.get(7)?,
                    origin: String::new(),
                },
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut stmt = c.prepare(
        "SELECT id, revoked_at FROM tokens WHERE revoked_at IS NOT NULL AND revoked_at >= ?1",
    )?;
    let revoked = stmt
        .query_map(params![since], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((created, revoked))
}

/// In: applies the stream, from its start, for as long as the replica runs. The
/// consumer is made again (from the message after the last one applied) when it
/// fails and whenever the client reconnected, since a restarted server has lost it.
async fn apply_loop(shared: &Arc<Shared>, cluster: &Cluster, imported: &Mutex<HashSet<String>>) {
    read_for_ever("tokens", 1, |mut next| async move {
        let read = apply_stream(shared, cluster, imported, &mut next).await;
        (next, read)
    })
    .await
}

async fn apply_stream(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    imported: &Mutex<HashSet<String>>,
    next: &mut u64,
) -> Result<(), String> {
    if !cluster.connected() {
        return Ok(());
    }
    let stream = stream(cluster).await?;
    let mut batches = Batches::open(cluster, &stream, "gsv.tokens.>", *next).await?;
    loop {
        let read = batches.batch(BATCH as usize, || {}).await;
        *next = batches.next;
        let Some(messages) = read? else {
            return Ok(());
        };
        // Tokens come in bursts (a replica joining, a fleet enrolled): the ones in a
        // row are applied together, in one transaction; a revocation after them
        // waits for them.
        let mut created = Vec::new();
        for m in messages {
            let subject = m.subject.as_str();
            if subject.ends_with(".created") {
                match serde_json::from_slice::<Created>(&m.payload) {
                    Ok(row) if row.origin != cluster.replica => created.push(row),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(subject, error = %e, "cluster: unreadable token record skipped")
                    }
                }
            } else if subject.ends_with(".revoked") {
                insert_created(shared, imported, std::mem::take(&mut created)).await;
                match serde_json::from_slice::<Revoked>(&m.payload) {
                    Ok(rev) => apply_revocation(shared, rev).await,
                    Err(e) => {
                        tracing::warn!(subject, error = %e, "cluster: unreadable revocation skipped")
                    }
                }
            }
        }
        insert_created(shared, imported, created).await;
    }
}

/// Stores tokens made on other replicas (none: nothing to do).
async fn insert_created(shared: &Shared, imported: &Mutex<HashSet<String>>, batch: Vec<Created>) {
    if batch.is_empty() {
        return;
    }
    if let Ok(mut s) = imported.lock() {
        s.extend(batch.iter().map(|r| r.id.clone()));
    }
    let applied = shared
        .store
        .blocking(move |store| store.with_conn(|c| insert_all(c, &batch)))
        .await;
    if let Ok(Err(e)) = applied {
        tracing::warn!(error = %e, "cluster: tokens from another replica were not applied");
    }
}

/// Marks a token revoked on another replica revoked here and cuts what it holds.
async fn apply_revocation(shared: &Shared, rev: Revoked) {
    let applied = shared
        .store
        .blocking(move |store| store.with_conn(|c| revoke(c, &rev)))
        .await;
    match applied {
        Ok(Ok(Some(cut))) => crate::revocation::cut(shared, vec![cut]).await,
        Ok(Ok(None)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cluster: a revocation from another replica was not applied")
        }
        Err(_) => {}
    }
}

/// Why a record from the stream is not applied.
fn bad(what: &str) -> crate::store::StoreError {
    crate::store::StoreError::Policy(format!("token record from the cluster: {what}"))
}

/// Inserts a token made on another replica, with its audit row, unless it is known.
#[cfg(test)]
fn insert(c: &mut rusqlite::Connection, row: &Created) -> Result<(), crate::store::StoreError> {
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    insert_in(&tx, row)?;
    tx.commit()?;
    Ok(())
}

/// [`insert_in`] for each of `rows`, in one transaction; a row that is refused is
/// logged and skipped, the others are applied.
fn insert_all(
    c: &mut rusqlite::Connection,
    rows: &[Created],
) -> Result<(), crate::store::StoreError> {
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut applied = 0;
    for row in rows {
        match insert_in(&tx, row) {
            Ok(true) => applied += 1,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(token_id = ?row.id, error = %e, "cluster: a token from another replica was not applied")
            }
        }
    }
    tx.commit()?;
    if applied > 0 {
        tracing::info!(applied, "cluster: tokens from other replicas applied");
    }
    Ok(())
}

/// Inserts one token made on another replica and its audit row in `tx`, unless it is
/// known; whether it was new.
fn insert_in(
    tx: &rusqlite::Transaction<'_>,
    row: &Created,
) -> Result<bool, crate::store::StoreError> {
    if row.id.is_empty() || row.id.len() > 64 || !row.id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad("malformed id"));
    }
    if !super::valid_replica_name(&row.origin) {
        return Err(bad("malformed replica name"));
    }
    let kind = TokenKind::parse(&row.kind).ok_or_else(|| bad("unknown kind"))?;
    let role = match &row.role {
        Some(r) => Some(OperatorRole::parse(r).ok_or_else(|| bad("unknown role"))?),
        None => None,
    };
    let policy: Option<PolicySpec> = match &row.policy {
        Some(p) => Some(serde_json::from_str(p).map_err(|_| bad("unreadable policy"))?),
        None => None,
    };
    if (kind == TokenKind::Operator) != role.is_some() {
        return Err(bad(
            "an operator token needs a role, and only an operator token has one",
        ));
    }
    let hash = hex(&row.hash).ok_or_else(|| bad("malformed hash"))?;
    let known = tx
        .query_row(
            "SELECT 1 FROM tokens WHERE id = ?1",
            params![row.id],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if known {
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO tokens (id, kind, subject, hash, policy, created_at, role) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            row.id,
            row.kind,
            row.subject,
            hash,
            row.policy,
            row.created_at,
            row.role
        ],
    )?;
    let actor = format!("replica:{}", row.origin);
    let event = AuditEvent::TokenIssued {
        actor: &actor,
        token_id: &row.id,
        kind,
        subject: &row.subject,
        policy: policy.as_ref(),
        role,
    };
    audit::append_in(tx, &[(gsv_protocol::now_ms(), event.into())])?;
    tracing::debug!(token_id = ?row.id, origin = ?row.origin, "cluster: token from another replica applied");
    Ok(true)
}

/// Marks a token revoked on another replica as revoked here, with its audit row;
/// the token's `(id, kind)` when it was active here.
fn revoke(
    c: &mut rusqlite::Connection,
    rev: &Revoked,
) -> Result<Option<(String, String)>, crate::store::StoreError> {
    if !super::valid_replica_name(&rev.origin) {
        return Err(bad("malformed replica name"));
    }
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let kind: Option<String> = tx
        .query_row(
            "SELECT kind FROM tokens WHERE id = ?1 AND revoked_at IS NULL",
            params![rev.id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(kind) = kind else {
        return Ok(None);
    };
    tx.execute(
        "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
        params![rev.id, rev.revoked_at],
    )?;
    let actor = format!("replica:{}", rev.origin);
    let event = AuditEvent::TokenRevoked {
        actor: &actor,
        token_id: &rev.id,
    };
    audit::append_in(&tx, &[(gsv_protocol::now_ms(), event.into())])?;
    tx.commit()?;
    tracing::info!(token_id = ?rev.id, origin = ?rev.origin, "cluster: revocation from another replica applied");
    Ok(Some((rev.id.clone(), kind)))
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 256 {
        return None;
    }
    ::hex::decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (crate::store::Store, std::path::PathBuf) {
        let d = std::env::temp_dir().join(format!("gsv-cluster-{}", uuid::Uuid::new_v4()));
        (crate::store::Store::open(&d).unwrap(), d)
    }

    fn record(id: &str) -> Created {
        Created {
            id: id.to_owned(),
            kind: "agent".into(),
            subject: "bot".into(),
            hash: "00".repeat(32),
            policy: Some(r#"{"allow":["*"]}"#.into()),
            created_at: 1,
            role: None,
            origin: "b".into(),
        }
    }

    fn count(s: &crate::store::Store) -> i64 {
        s.with_conn(|c| Ok(c.query_row("SELECT count(*) FROM tokens", [], |r| r.get(0))?))
            .unwrap()
    }

    #[test]
    fn hostile_records_are_refused_and_good_ones_applied_once() {
        let (s, dir) = store();
        let before = count(&s);
        let mut bad = vec![record("not-hex!"), record(&"a".repeat(65))];
        let mut r = record("aa01");
        r.kind = "root".into();
        bad.push(r);
        let mut r = record("aa02");
        r.kind = "operator".into();
        bad.push(r);
        let mut r = record("aa03");
        r.hash = "xyz".into();
        bad.push(r);
        let mut r = record("aa04");
        r.policy = Some("{not json".into());
        bad.push(r);
        let mut r = record("aa06");
        r.origin = "b\u{1b}[31m".into();
        bad.push(r);
        for r in &bad {
            assert!(s.with_conn(|c| insert(c, r)).is_err(), "{r:?}");
        }
        assert_eq!(count(&s), before, "nothing applied");
        let good = record("aa05");
        s.with_conn(|c| insert(c, &good)).unwrap();
        s.with_conn(|c| insert(c, &good)).unwrap();
        assert_eq!(count(&s), before + 1, "applied once");
        // A revocation applies once, and a token is never un-revoked.
        let rev = Revoked {
            id: "aa05".into(),
            revoked_at: 5,
            origin: "c".into(),
        };
        assert_eq!(
            s.with_conn(|c| revoke(c, &rev)).unwrap(),
            Some(("aa05".into(), "agent".into()))
        );
        assert_eq!(s.with_conn(|c| revoke(c, &rev)).unwrap(), None);
        s.with_conn(|c| insert(c, &good)).unwrap();
        let revoked: Option<i64> = s
            .with_conn(|c| {
                Ok(
                    c.query_row("SELECT revoked_at FROM tokens WHERE id = 'aa05'", [], |r| {
                        r.get(0)
                    })?,
                )
            })
            .unwrap();
        assert_eq!(revoked, Some(5));
        let unknown = Revoked {
            id: "ffff".into(),
            revoked_at: 5,
            origin: "c".into(),
        };
        assert_eq!(s.with_conn(|c| revoke(c, &unknown)).unwrap(), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn hashes_travel_as_hex() {
        assert_eq!(hex("00ff10"), Some(vec![0, 255, 16]));
        assert_eq!(hex("0"), None);
        assert_eq!(hex("zz"), None);
    }
}
