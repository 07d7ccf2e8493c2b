//! Jobs shared between cluster replicas: the changes of this gateway's own jobs, in
//! order, to publish; and the copies of the jobs other replicas run.
//!
//! A trigger records each own job that starts or changes state in `job_changes`
//! (migration 12), so the job code writes its rows as on one gateway and the replica
//! publishes what changed (`crate::cluster::jobs`). Copies carry the replica that
//! runs them in `owner`; the job code reads them like its own (`jobs.get`,
//! `jobs.list` from any replica), never marks them lost at start nor asks a node for
//! them, and cancels them through their owner.

use super::{Store, StoreError};
use gsv_protocol::job::{JobKind, JobState};
use gsv_protocol::{ErrorCode, ErrorShape};
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Longest agent name, tool name or selector a copy may carry.
const MAX_TEXT: usize = 4096;

/// A job as it travels between replicas.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobCopy {
    pub id: String,
    /// The replica that runs it.
    pub owner: String,
    pub agent: String,
    pub token_id: String,
    pub name: String,
    pub kind: String,
    pub select: Option<String>,
    /// The nodes it runs on, a JSON list as stored.
    pub nodes: Option<String>,
    pub state: String,
    pub created_at: u64,
    pub finished_at: Option<u64>,
    /// The result (JSON) or error (an error shape, JSON) as stored.
    pub result: Option<String>,
    pub error: Option<String>,
    /// Result and error left out: too large to travel.
    #[serde(default)]
    pub cut: bool,
}

impl JobCopy {
    /// The same copy without its result and error.
    pub fn cut(mut self) -> JobCopy {
        self.cut = true;
        self.result = None;
        self.error = None;
        self
    }
}

fn is_hex_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn plain(s: &str) -> bool {
    s.len() <= MAX_TEXT && !s.chars().any(char::is_control)
}

/// Why a copy from the cluster is refused, if it is.
pub fn check(j: &JobCopy) -> Result<(), String> {
    if !is_hex_id(&j.id) || !is_hex_id(&j.token_id) {
        return Err("malformed job or token id".into());
    }
    if !crate::replica::valid_replica_name(&j.owner) {
        return Err("malformed replica name".into());
    }
    if !plain(&j.agent) || !plain(&j.name) || !j.select.as_deref().is_none_or(plain) {
        return Err("malformed agent, tool or selector".into());
    }
    if JobState::parse(&j.state).is_none() || JobKind::parse(&j.kind).is_none() {
        return Err("unknown state or kind".into());
    }
    if j.created_at > i64::MAX as u64 || j.finished_at.is_some_and(|t| t > i64::MAX as u64) {
        return Err("time out of range".into());
    }
    if let Some(nodes) = &j.nodes {
        serde_json::from_str::<Vec<String>>(nodes).map_err(|_| "malformed node list")?;
    }
    if let Some(r) = &j.result {
        RawValue::from_string(r.clone()).map_err(|_| "malformed result")?;
    }
    if let Some(e) = &j.error {
        serde_json::from_str::<ErrorShape>(e).map_err(|_| "malformed error")?;
    }
    Ok(())
}

/// The changes of own jobs after `after` (at most `limit`), each job as it is now; the
/// last change read (`after` when none). A job deleted since it changed is skipped.
pub fn own_changes(
    c: &Connection,
    after: i64,
    limit: u32,
    owner: &str,
) -> Result<(i64, Vec<JobCopy>), StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT c.seq, j.id, j.agent, j.token_id, j.name, j.kind, j.selector, j.nodes, j.state, j.created_at, j.finished_at, j.result, j.error
         FROM job_changes c LEFT JOIN jobs j ON j.id = c.id AND j.owner IS NULL
         WHERE c.seq > ?1 ORDER BY c.seq LIMIT ?2",
    )?;
    let mut rows = stmt.query(params![after, limit])?;
    let mut last = after;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        last = r.get(0)?;
        let Some(id) = r.get::<_, Option<String>>(1)? else {
            continue;
        };
        out.push(JobCopy {
            id,
            owner: owner.to_owned(),
            agent: r.get(2)?,
            token_id: r.get(3)?,
            name: r.get(4)?,
            kind: r.get(5)?,
            select: r.get(6)?,
            nodes: r.get(7)?,
            state: r.get(8)?,
            created_at: r.get::<_, i64>(9)?.max(0) as u64,
            finished_at: r.get::<_, Option<i64>>(10)?.map(|t| t.max(0) as u64),
            result: r.get(11)?,
            error: r.get(12)?,
            cut: false,
        });
    }
    Ok((last, out))
}

/// Forgets the changes up to `upto` (published).
pub fn forget_changes(c: &Connection, upto: i64) -> Result<(), StoreError> {
    c.execute("DELETE FROM job_changes WHERE seq <= ?1", params![upto])?;
    Ok(())
}

/// A token's share of the jobs a gateway keeps: how many, and how many bytes of
/// results and errors (`crate::jobs::MAX_JOBS_PER_TOKEN`,
/// `crate::jobs::MAX_STORED_BYTES_PER_TOKEN`).
#[derive(Debug, Clone, Copy)]
pub struct Share {
    pub jobs: usize,
    pub bytes: usize,
}

/// Applies copies (checked by the caller): a job not known here is inserted; a copy
/// that is still running here takes the state it ended in. Own jobs, copies of
/// another owner and jobs already ended are left alone. Then each token a copy
/// belongs to is held to its `share` here, own jobs and copies together (its oldest
/// finished ones go first), so a token running jobs through many replicas does not
/// hold many shares of each one's store, nor push other tokens' jobs out of it. How
/// many rows changed.
pub fn apply(tx: &Transaction<'_>, copies: &[JobCopy], share: Share) -> Result<usize, StoreError> {
    let mut known = tx.prepare_cached("SELECT owner, state FROM jobs WHERE id = ?1")?;
    let mut changed = 0;
    let tokens: std::collections::BTreeSet<&str> =
        copies.iter().map(|j| j.token_id.as_str()).collect();
    for j in copies {
        let (result, error) = if j.cut {
            let why = ErrorShape::new(
                ErrorCode::TooLarge,
                format!(
                    "this job's outcome is kept on replica {} only (too large to share between replicas): read it there",
                    j.owner
                ),
            );
            (None, serde_json::to_string(&why).ok())
        } else {
            (j.result.clone(), j.error.clone())
        };
        let bytes = result.as_ref().or(error.as_ref()).map_or(0, String::len) as i64;
        let here: Option<(Option<String>, String)> = known
            .query_row(params![j.id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        match here {
            None => {
                tx.execute(
                    "INSERT INTO jobs (id, agent, token_id, name, state, created_at, finished_at, result, error, kind, selector, nodes, bytes, owner)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                    params![
                        j.id,
                        j.agent,
                        j.token_id,
                        j.name,
                        j.state,
                        j.created_at as i64,
                        j.finished_at.map(|t| t as i64),
                        result,
                        error,
                        j.kind,
                        j.select,
                        j.nodes,
                        bytes,
                        j.owner
                    ],
                )?;
                changed += 1;
            }
            Some((Some(owner), state))
                if owner == j.owner && state == "running" && j.state != "running" =>
            {
                tx.execute(
                    "UPDATE jobs SET state = ?2, finished_at = ?3, result = ?4, error = ?5, bytes = ?6 WHERE id = ?1",
                    params![
                        j.id,
                        j.state,
                        j.finished_at.map(|t| t as i64),
                        result,
                        error,
                        bytes
                    ],
                )?;
                changed += 1;
            }
            Some(_) => {}
        }
    }
    for token in tokens {
        hold_to_share(tx, token, share)?;
    }
    Ok(changed)
}

/// Deletes `token`'s oldest finished jobs beyond its share of rows, then of bytes.
fn hold_to_share(tx: &Transaction<'_>, token: &str, share: Share) -> Result<(), StoreError> {
    let running: i64 = tx.query_row(
        "SELECT COUNT(*) FROM jobs WHERE token_id = ?1 AND state = 'running'",
        params![token],
        |r| r.get(0),
    )?;
    let finished_kept = (share.jobs as i64 - running.max(0)).max(0);
    tx.execute(
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE token_id = ?1 AND state != 'running' ORDER BY created_at DESC, id LIMIT -1 OFFSET ?2)",
        params![token, finished_kept],
    )?;
    let held: i64 = tx.query_row(
        "SELECT COALESCE(SUM(bytes), 0) FROM jobs WHERE token_id = ?1",
        params![token],
        |r| r.get(0),
    )?;
    super::jobs::trim_oldest(tx, Some(token), None, held, share.bytes)?;
    Ok(())
}

impl Store {
    /// The replica that runs job `id` when it is a copy (`None`: own, or unknown).
    pub fn job_owner(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn()
            .query_row("SELECT owner FROM jobs WHERE id = ?1", params![id], |r| {
                r.get::<_, Option<String>>(0)
            })
            .optional()?
            .flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::job::JobSummary;
    use rusqlite::TransactionBehavior;

    fn store() -> Store {
        let dir = std::env::temp_dir().join(format!("gsv-job-copies-{}", uuid::Uuid::new_v4()));
        Store::open(&dir).expect("open")
    }

    fn summary(id: &str) -> JobSummary {
        JobSummary {
            id: id.into(),
            agent: "ci".into(),
            token_id: "00ff".into(),
            name: "lab__Echo".into(),
            kind: JobKind::Call,
            select: None,
            state: JobState::Running,
            created_at: 10,
            finished_at: None,
        }
    }

    fn changes(s: &Store, after: i64) -> (i64, Vec<JobCopy>) {
        s.with_conn(|c| own_changes(c, after, 100, "a"))
            .expect("changes")
    }

    /// The shares a gateway gives a token.
    const SHARE: Share = Share {
        jobs: crate::jobs::MAX_JOBS_PER_TOKEN,
        bytes: crate::jobs::MAX_STORED_BYTES_PER_TOKEN,
    };

    fn apply_to(s: &Store, copies: &[JobCopy]) -> usize {
        apply_within(s, copies, SHARE)
    }

    fn apply_within(s: &Store, copies: &[JobCopy], share: Share) -> usize {
        s.with_conn(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let n = apply(&tx, copies, share)?;
            tx.commit()?;
            Ok(n)
        })
        .expect("apply")
    }

    #[test]
    fn own_jobs_travel_as_they_change_and_copies_never_go_back_to_running() {
        let (a, b) = (store(), store());
        a.insert_job(&summary("aa01")).expect("insert");
        let (last, started) = changes(&a, 0);
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].state, "running");
        let raw = RawValue::from_string("{\"content\":[]}".into()).expect("raw");
        a.finish_job("aa01", 20, Ok(&raw)).expect("finish");
        let (last2, ended) = changes(&a, last);
        assert!(last2 > last);
        assert_eq!(ended[0].state, "done");
        for j in started.iter().chain(&ended) {
            assert_eq!(check(j), Ok(()));
        }

        // B takes the copy, then its end; the older "running" arriving late changes
        // nothing; B's copy does not travel back.
        assert_eq!(apply_to(&b, &started), 1);
        assert_eq!(apply_to(&b, &ended), 1);
        assert_eq!(apply_to(&b, &started), 0);
        let job = b.job("aa01").expect("read").expect("copy");
        assert_eq!(job.summary.state, JobState::Done);
        assert!(job.result.is_some());
        assert_eq!(b.job_owner("aa01").expect("owner").as_deref(), Some("a"));
        assert!(changes(&b, 0).1.is_empty());
        // A copy is never marked lost by a restart, nor asked for again.
        assert_eq!(
            apply_to(
                &b,
                &[JobCopy {
                    id: "aa02".into(),
                    ..started[0].clone()
                }]
            ),
            1
        );
        let settled = b.settle_jobs(0, 30).expect("settle");
        assert_eq!((settled.lost, settled.resumable.len()), (0, 0));
        // An own job with the same id as a copy is left alone.
        assert_eq!(apply_to(&a, &ended), 0);
        // Published changes are forgotten.
        a.with_conn(|c| forget_changes(c, last2)).expect("forget");
        assert!(changes(&a, 0).1.is_empty());
    }

    /// A finished copy of job `id` of `token`, created at `at`, with a result of
    /// `size` bytes.
    fn finished(id: &str, token: &str, at: u64, size: usize) -> JobCopy {
        let a = store();
        a.insert_job(&JobSummary {
            token_id: token.into(),
            created_at: at,
            ..summary(id)
        })
        .expect("insert");
        let text = format!(
            "{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}",
            "x".repeat(size)
        );
        let raw = RawValue::from_string(text).expect("raw");
        a.finish_job(id, at + 1, Ok(&raw)).expect("finish");
        changes(&a, 0).1.pop().expect("the job's end")
    }

    #[test]
    fn copies_hold_their_token_to_its_share_and_leave_other_tokens_alone() {
        let b = store();
        // Another token's job, older than everything: kept whatever comes after.
        apply_to(&b, &[finished("0001", "aaaa", 1, 100)]);
        b.insert_job(&JobSummary {
            token_id: "ffff".into(),
            created_at: 2,
            ..summary("f000")
        })
        .expect("own running job");
        let share = Share {
            jobs: 4,
            bytes: 9_100,
        };
        // The flooding token's copies, one by one, past its share of rows.
        for i in 0..8u64 {
            let copy = finished(&format!("f1{i:02}"), "ffff", 10 + i, 100);
            apply_within(&b, &[copy], share);
        }
        let ids = |s: &Store| {
            let mut ids: Vec<String> = s
                .with_conn(|c| {
                    let mut st = c.prepare("SELECT id FROM jobs ORDER BY id")?;
                    let ids = st
                        .query_map([], |r| r.get::<_, String>(0))?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(ids)
                })
                .expect("ids");
            ids.sort();
            ids
        };
        // Its running own job counts; the newest three finished copies are kept.
        assert_eq!(ids(&b), ["0001", "f000", "f105", "f106", "f107"]);
        // Past its share of bytes (two results of ~9 KB and the one left): the oldest
        // of its finished jobs go first.
        let big = finished("f200", "ffff", 30, 6_000);
        let bigger = finished("f201", "ffff", 31, 3_000);
        apply_within(&b, &[big, bigger], share);
        assert_eq!(ids(&b), ["0001", "f000", "f200", "f201"]);
    }

    #[test]
    fn hostile_copies_are_refused_and_a_cut_one_says_where_its_outcome_is() {
        let a = store();
        a.insert_job(&summary("bb01")).expect("insert");
        let good = changes(&a, 0).1.remove(0);
        let bad = [
            JobCopy {
                id: "../x".into(),
                ..good.clone()
            },
            JobCopy {
                owner: "no such name!".into(),
                ..good.clone()
            },
            JobCopy {
                state: "exploded".into(),
                ..good.clone()
            },
            JobCopy {
                agent: "a\u{1b}[31m".into(),
                ..good.clone()
            },
            JobCopy {
                result: Some("{not json".into()),
                ..good.clone()
            },
            JobCopy {
                nodes: Some("\"web1\"".into()),
                ..good.clone()
            },
        ];
        for j in &bad {
            assert!(check(j).is_err(), "{j:?}");
        }
        let b = store();
        let done = JobCopy {
            state: "done".into(),
            finished_at: Some(20),
            result: Some("{}".into()),
            ..good
        }
        .cut();
        assert_eq!(check(&done), Ok(()));
        assert_eq!(apply_to(&b, &[done]), 1);
        let job = b.job("bb01").expect("read").expect("copy");
        let error = job.error.expect("says where");
        assert!(error.message.contains("replica a"), "{}", error.message);
    }
}
