//! Queries on the `jobs` table: calls whose outcome the gateway keeps.
//!
//! One row per job: who started it (agent name and token id), the namespaced tool,
//! its state, and once it ended the node's result (JSON text) or the error. Rows are
//! written by the gateway as jobs start and end ([`crate::jobs`]) and deleted after
//! the retention period; a gateway that starts marks the jobs a previous run left
//! `running` as `lost`.

use super::{Store, StoreError};
use gsv_protocol::job::{Job, JobKind, JobState, JobSummary};
use gsv_protocol::ErrorShape;
use rusqlite::{params, OptionalExtension, Row};
use serde_json::value::RawValue;

/// What a starting gateway finds of its previous run's jobs ([`Store::settle_jobs`]).
#[derive(Debug, Default)]
pub struct Settled {
    /// Running jobs marked `lost` (their call was never sent to a node).
    pub lost: usize,
    /// Jobs past the retention period deleted.
    pub deleted: usize,
    /// Running jobs whose call was sent to a node: `(id, dispatch JSON)`, to ask that
    /// node for the outcome again.
    pub resumable: Vec<(String, String)>,
}

const SUMMARY: &str = "id, agent, token_id, name, state, created_at, finished_at, kind, selector";

/// A summary as read, with its state and kind still as stored.
type RawSummary = (JobSummary, String, String);

fn summary(r: &Row<'_>) -> rusqlite::Result<RawSummary> {
    Ok((
        JobSummary {
            id: r.get(0)?,
            agent: r.get(1)?,
            token_id: r.get(2)?,
            name: r.get(3)?,
            kind: JobKind::Call,
            select: r.get(8)?,
            state: JobState::Running,
            created_at: r.get::<_, i64>(5)?.max(0) as u64,
            finished_at: r.get::<_, Option<i64>>(6)?.map(|v| v.max(0) as u64),
        },
        r.get(4)?,
        r.get(7)?,
    ))
}

fn checked((mut s, state, kind): RawSummary) -> Result<JobSummary, StoreError> {
    let corrupt = |reason: String| StoreError::Job {
        id: s.id.clone(),
        reason,
    };
    s.state = JobState::parse(&state).ok_or_else(|| corrupt(format!("unknown state {state:?}")))?;
    s.kind = JobKind::parse(&kind).ok_or_else(|| corrupt(format!("unknown kind {kind:?}")))?;
    Ok(s)
}

fn insert(
    conn: &rusqlite::Connection,
    job: &JobSummary,
    nodes: &[String],
) -> Result<(), StoreError> {
    let nodes = serde_json::to_string(nodes).map_err(|e| StoreError::Job {
        id: job.id.clone(),
        reason: e.to_string(),
    })?;
    conn.execute(
        "INSERT INTO jobs (id, agent, token_id, name, state, created_at, kind, selector, nodes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            job.id,
            job.agent,
            job.token_id,
            job.name,
            job.state.as_str(),
            job.created_at as i64,
            job.kind.as_str(),
            job.select,
            nodes
        ],
    )?;
    Ok(())
}

/// Deletes the oldest finished jobs (of `token`, or of everyone), never `keep`, until
/// `held` bytes are within `cap`; how many went.
pub(super) fn trim_oldest(
    conn: &rusqlite::Connection,
    token: Option<&str>,
    keep: Option<&str>,
    mut held: i64,
    cap: usize,
) -> Result<usize, StoreError> {
    let cap = cap as i64;
    if held <= cap {
        return Ok(0);
    }
    let mut stmt = conn.prepare(
        "SELECT id, bytes FROM jobs WHERE (?1 IS NULL OR token_id = ?1) AND state != 'running' AND id != COALESCE(?2, '') AND bytes > 0 ORDER BY created_at, id",
    )?;
    let mut doomed = Vec::new();
    let mut rows = stmt.query(params![token, keep])?;
    while held > cap {
        let Some(row) = rows.next()? else { break };
        doomed.push(row.get::<_, String>(0)?);
        held -= row.get::<_, i64>(1)?;
    }
    drop(rows);
    for id in &doomed {
        conn.execute("DELETE FROM jobs WHERE id = ?1", params![id])?;
    }
    Ok(doomed.len())
}

impl Store {
    /// Records a job that starts now, within its token's share of `cap` jobs kept: the
    /// token's oldest finished jobs are deleted to make room; `false` (nothing
    /// recorded) when its running jobs alone fill the share. One step under the
    /// connection's lock, so racing starts of one token cannot pass the cap together.
    pub fn insert_job_capped(
        &self,
        job: &JobSummary,
        nodes: &[String],
        cap: usize,
    ) -> Result<bool, StoreError> {
        let conn = self.conn();
        let running: i64 = conn.query_row(
            "SELECT COUNT(*) FROM jobs WHERE token_id = ?1 AND state = 'running'",
            params![job.token_id],
            |r| r.get(0),
        )?;
        let running = running.max(0) as usize;
        if running >= cap {
            return Ok(false);
        }
        // Keep at most `cap - 1 - running` finished ones, the newest.
        conn.execute(
            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE token_id = ?1 AND state != 'running' ORDER BY created_at DESC, id LIMIT -1 OFFSET ?2)",
            params![job.token_id, (cap - 1 - running) as i64],
        )?;
        insert(&conn, job, nodes)?;
        Ok(true)
    }

    /// Records a job that starts now.
    pub fn insert_job(&self, job: &JobSummary) -> Result<(), StoreError> {
        insert(&self.conn(), job, &[])
    }

    /// Records how a running job ended, then keeps the bytes its token's finished jobs
    /// hold within `token_bytes`: that token's oldest other finished jobs are deleted
    /// first. One step under the connection's lock.
    pub fn finish_job_capped(
        &self,
        id: &str,
        at: u64,
        outcome: Result<&RawValue, &ErrorShape>,
        token_bytes: usize,
    ) -> Result<(), StoreError> {
        self.finish_job(id, at, outcome)?;
        let conn = self.conn();
        let Some(token) = conn
            .query_row(
                "SELECT token_id FROM jobs WHERE id = ?1",
                params![id],
                |r| r.get::<_, String>(0),
            )
            .optional()?
        else {
            return Ok(());
        };
        let held: i64 = conn.query_row(
            "SELECT COALESCE(SUM(bytes), 0) FROM jobs WHERE token_id = ?1",
            params![token],
            |r| r.get(0),
        )?;
        trim_oldest(&conn, Some(&token), Some(id), held, token_bytes)?;
        Ok(())
    }

    /// Deletes the oldest finished jobs while all finished jobs together hold more
    /// than `bytes`; how many were deleted.
    pub fn trim_jobs_to(&self, bytes: usize) -> Result<usize, StoreError> {
        let conn = self.conn();
        let held: i64 =
            conn.query_row("SELECT COALESCE(SUM(bytes), 0) FROM jobs", [], |r| r.get(0))?;
        trim_oldest(&conn, None, None, held, bytes)
    }

    /// Records how a running job ended: its result (`done`) or its error (`failed`).
    pub fn finish_job(
        &self,
        id: &str,
        at: u64,
        outcome: Result<&RawValue, &ErrorShape>,
    ) -> Result<(), StoreError> {
        let (state, result, error) = match outcome {
            Ok(raw) => (JobState::Done, Some(raw.get().to_owned()), None),
            Err(e) => (
                JobState::Failed,
                None,
                Some(serde_json::to_string(e).map_err(|e| StoreError::Job {
                    id: id.to_owned(),
                    reason: e.to_string(),
                })?),
            ),
        };
        let bytes = result.as_ref().or(error.as_ref()).map_or(0, String::len) as i64;
        self.conn().execute(
            "UPDATE jobs SET state = ?2, finished_at = ?3, result = ?4, error = ?5, bytes = ?6 WHERE id = ?1 AND state = 'running'",
            params![id, state.as_str(), at as i64, result, error, bytes],
        )?;
        Ok(())
    }

    /// One job with its outcome.
    pub fn job(&self, id: &str) -> Result<Option<Job>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                &format!("SELECT {SUMMARY}, result, error FROM jobs WHERE id = ?1"),
                params![id],
                |r| {
                    Ok((
                        summary(r)?,
                        r.get::<_, Option<String>>(9)?,
                        r.get::<_, Option<String>>(10)?,
                    ))
                },
            )
            .optional()?;
        let Some((summary, result, error)) = row else {
            return Ok(None);
        };
        let summary = checked(summary)?;
        let corrupt = |reason: String| StoreError::Job {
            id: summary.id.clone(),
            reason,
        };
        let result = result
            .map(RawValue::from_string)
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?;
        let error = error
            .map(|text| serde_json::from_str::<ErrorShape>(&text))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(Some(Job {
            summary,
            result,
            error,
        }))
    }

    /// A page of jobs, newest first: `token_id`'s, or everyone's when `None`. With the
    /// total count.
    pub fn jobs(
        &self,
        token_id: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> Result<(Vec<JobSummary>, u64), StoreError> {
        self.jobs_on(token_id, None, limit, offset)
    }

    /// [`Store::jobs`], only those that ran on one of `nodes` (when given).
    pub fn jobs_on(
        &self,
        token_id: Option<&str>,
        nodes: Option<&[String]>,
        limit: u32,
        offset: u32,
    ) -> Result<(Vec<JobSummary>, u64), StoreError> {
        let conn = self.conn();
        let nodes = match nodes {
            Some(n) => Some(serde_json::to_string(n).map_err(|e| StoreError::Job {
                id: String::new(),
                reason: e.to_string(),
            })?),
            None => None,
        };
        let filter = "WHERE (?1 IS NULL OR token_id = ?1) AND (?4 IS NULL OR EXISTS (SELECT 1 FROM json_each(COALESCE(jobs.nodes, '[]')) AS j WHERE j.value IN (SELECT value FROM json_each(?4))))";
        let total: i64 = conn.query_row(
            &format!("SELECT COUNT(*) FROM jobs {}", filter.replace("?4", "?2")),
            params![token_id, nodes],
            |r| r.get(0),
        )?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {SUMMARY} FROM jobs {filter} ORDER BY created_at DESC, id LIMIT ?2 OFFSET ?3"
        ))?;
        let rows = stmt.query_map(params![token_id, limit, offset, nodes], summary)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(checked(row?)?);
        }
        Ok((out, total.max(0) as u64))
    }

    /// Marks every own `running` job `lost` (at startup: the run that started them is
    /// gone; copies of other replicas' jobs are theirs to settle) and deletes jobs
    /// created before `before`; returns (lost, deleted).
    pub fn settle_jobs(&self, before: u64, at: u64) -> Result<Settled, StoreError> {
        let lost_error = serde_json::to_string(&ErrorShape::new(
            gsv_protocol::ErrorCode::NodeDisconnected,
            "the gateway stopped while the call was running; its outcome is not known",
        ))
        .map_err(|e| StoreError::Job {
            id: String::new(),
            reason: e.to_string(),
        })?;
        let conn = self.conn();
        let lost = conn.execute(
            "UPDATE jobs SET state = 'lost', finished_at = ?1, error = ?2 WHERE state = 'running' AND dispatch IS NULL AND owner IS NULL",
            params![at as i64, lost_error],
        )?;
        let deleted = self.delete_jobs_before_locked(&conn, before)?;
        let mut stmt = conn.prepare(
            "SELECT id, dispatch FROM jobs WHERE state = 'running' AND dispatch IS NOT NULL AND owner IS NULL ORDER BY created_at",
        )?;
        let resumable = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Settled {
            lost,
            deleted,
            resumable,
        })
    }

    /// Records how the running job `id`'s call was sent to its node (JSON text).
    pub fn set_job_dispatch(&self, id: &str, dispatch: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE jobs SET dispatch = ?2 WHERE id = ?1 AND state = 'running'",
            params![id, dispatch],
        )?;
        Ok(())
    }

    /// Whether the token `id` exists and is not revoked.
    pub fn token_live(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT 1 FROM tokens WHERE id = ?1 AND revoked_at IS NULL",
                params![id],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Deletes jobs created before `before` (the retention period), and the oldest
    /// beyond `keep` rows.
    pub fn prune_jobs(&self, before: u64, keep: usize) -> Result<usize, StoreError> {
        let conn = self.conn();
        let mut deleted = self.delete_jobs_before_locked(&conn, before)?;
        deleted += conn.execute(
            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs ORDER BY created_at DESC, id LIMIT -1 OFFSET ?1)",
            params![keep as i64],
        )?;
        // Changes of jobs that are gone (a gateway outside a cluster never publishes
        // them; in a cluster, published ones are forgotten as they go).
        conn.execute(
            "DELETE FROM job_changes WHERE id NOT IN (SELECT id FROM jobs)",
            [],
        )?;
        Ok(deleted)
    }

    fn delete_jobs_before_locked(
        &self,
        conn: &rusqlite::Connection,
        before: u64,
    ) -> Result<usize, StoreError> {
        Ok(conn.execute(
            "DELETE FROM jobs WHERE created_at < ?1 AND state != 'running'",
            params![before as i64],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, token: &str, at: u64) -> JobSummary {
        JobSummary {
            id: id.into(),
            agent: "ci".into(),
            token_id: token.into(),
            name: "lab__Echo".into(),
            kind: JobKind::Call,
            select: None,
            state: JobState::Running,
            created_at: at,
            finished_at: None,
        }
    }

    #[test]
    fn jobs_are_kept_listed_per_token_settled_and_pruned() {
        let dir = std::env::temp_dir().join(format!("gsv-jobs-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&dir).expect("open");
        for (id, token, at) in [
            ("a", "t1", 10),
            ("b", "t2", 20),
            ("c", "t1", 30),
            ("d", "t1", 40),
        ] {
            store.insert_job(&job(id, token, at)).expect("insert");
        }
        let raw = RawValue::from_string(r#"{"content":[],"isError":false}"#.into()).unwrap();
        store.finish_job("a", 11, Ok(&raw)).expect("finish");
        let e = ErrorShape::new(gsv_protocol::ErrorCode::Denied, "no");
        store.finish_job("b", 21, Err(&e)).expect("finish");
        // A finished job is not finished again.
        store.finish_job("a", 12, Err(&e)).expect("no-op");
        let a = store.job("a").expect("read").expect("a");
        assert_eq!(
            (a.summary.state, a.summary.finished_at),
            (JobState::Done, Some(11))
        );
        assert!(a.error.is_none() && a.result.is_some());
        let b = store.job("b").expect("read").expect("b");
        assert_eq!(b.summary.state, JobState::Failed);
        assert_eq!(
            b.error.map(|e| e.code),
            Some(gsv_protocol::ErrorCode::Denied)
        );
        assert!(store.job("zz").expect("read").is_none());

        let (mine, total) = store.jobs(Some("t1"), 2, 0).expect("list");
        let ids: Vec<&str> = mine.iter().map(|j| j.id.as_str()).collect();
        assert_eq!((ids, total), (vec!["d", "c"], 3));
        let (all, total) = store.jobs(None, 10, 0).expect("list");
        assert_eq!((all.len(), total), (4, 4));

        // At start: running jobs become lost unless their call reached a node (those
        // are asked for again); finished ones past the retention go.
        store
            .set_job_dispatch("d", r#"{"node":"n"}"#)
            .expect("dispatch");
        let settled = store.settle_jobs(15, 100).expect("settle");
        assert_eq!((settled.lost, settled.deleted), (1, 1));
        assert_eq!(
            settled.resumable,
            vec![("d".to_owned(), r#"{"node":"n"}"#.to_owned())]
        );
        assert_eq!(
            store.job("c").unwrap().unwrap().summary.state,
            JobState::Lost
        );
        assert_eq!(
            store.job("d").unwrap().unwrap().summary.state,
            JobState::Running
        );
        assert!(store.job("a").unwrap().is_none());
        // The count bound keeps the newest.
        assert_eq!(store.prune_jobs(0, 2).expect("prune"), 1);
        assert!(store.job("b").unwrap().is_none());
        assert!(store.job("d").unwrap().is_some());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_tokens_finished_jobs_keep_at_most_its_bytes() {
        let dir = std::env::temp_dir().join(format!("gsv-jobs-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&dir).expect("open");
        let big = RawValue::from_string(format!("\"{}\"", "x".repeat(998))).unwrap();
        for i in 0..5u64 {
            store.insert_job(&job(&format!("m{i}"), "t1", i)).unwrap();
            store
                .finish_job_capped(&format!("m{i}"), 10 + i, Ok(&big), 3_000)
                .unwrap();
        }
        store.insert_job(&job("o1", "t2", 1)).unwrap();
        store.finish_job_capped("o1", 20, Ok(&big), 3_000).unwrap();
        // t1 keeps its newest three (3 000 bytes); t2's job is untouched.
        let (mine, total) = store.jobs(Some("t1"), 10, 0).expect("list");
        let ids: Vec<&str> = mine.iter().map(|j| j.id.as_str()).collect();
        assert_eq!((ids, total), (vec!["m4", "m3", "m2"], 3));
        assert!(store.job("o1").unwrap().is_some());
        // The total bound deletes the oldest of everyone.
        assert_eq!(store.trim_jobs_to(2_000).unwrap(), 2);
        let (all, _) = store.jobs(None, 10, 0).expect("list");
        let ids: Vec<&str> = all.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, vec!["m4", "m3"]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn jobs_are_listed_by_the_nodes_they_ran_on() {
        let dir = std::env::temp_dir().join(format!("gsv-jobs-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&dir).expect("open");
        let on = |nodes: &[&str]| nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        store
            .insert_job_capped(&job("a", "t1", 1), &on(&["web1"]), 10)
            .unwrap();
        store
            .insert_job_capped(&job("b", "t1", 2), &on(&["db1", "web2"]), 10)
            .unwrap();
        store
            .insert_job_capped(&job("c", "t1", 3), &on(&["db1"]), 10)
            .unwrap();
        store
            .insert_job_capped(&job("d", "t2", 4), &on(&["web1"]), 10)
            .unwrap();
        let ids = |token: Option<&str>, nodes: &[&str]| {
            let (jobs, total) = store.jobs_on(token, Some(&on(nodes)), 10, 0).unwrap();
            (jobs.into_iter().map(|j| j.id).collect::<Vec<_>>(), total)
        };
        assert_eq!(
            ids(Some("t1"), &["web1", "web2"]),
            (vec!["b".into(), "a".into()], 2)
        );
        assert_eq!(ids(None, &["web1"]), (vec!["d".into(), "a".into()], 2));
        assert_eq!(ids(Some("t1"), &[]), (vec![], 0));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn one_token_keeps_at_most_its_share() {
        let dir = std::env::temp_dir().join(format!("gsv-jobs-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&dir).expect("open");
        let raw = RawValue::from_string("{}".into()).unwrap();
        for i in 0..3u64 {
            assert!(store
                .insert_job_capped(&job(&format!("f{i}"), "t1", i), &[], 3)
                .unwrap());
            store.finish_job(&format!("f{i}"), i, Ok(&raw)).unwrap();
        }
        store.insert_job(&job("other", "t2", 0)).unwrap();
        // A new job pushes out the token's oldest finished one, not another token's.
        assert!(store
            .insert_job_capped(&job("r1", "t1", 10), &[], 3)
            .unwrap());
        assert!(store.job("f0").unwrap().is_none());
        assert!(store.job("other").unwrap().is_some());
        assert!(store
            .insert_job_capped(&job("r2", "t1", 11), &[], 3)
            .unwrap());
        assert!(store
            .insert_job_capped(&job("r3", "t1", 12), &[], 3)
            .unwrap());
        // Three running: the share is full, nothing is recorded.
        assert!(!store
            .insert_job_capped(&job("r4", "t1", 13), &[], 3)
            .unwrap());
        assert!(store.job("r4").unwrap().is_none());
        assert_eq!(store.jobs(Some("t1"), 10, 0).unwrap().1, 3);
        let _ = std::fs::remove_dir_all(dir);
    }
}
