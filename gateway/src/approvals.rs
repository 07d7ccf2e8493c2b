//! Approval requests: a call that needs a human's yes waits here for it.
//!
//! A request is bound to one exact call — agent, node, tool and the hash of its
//! canonical arguments — and to the one caller waiting for it. An operator decides it
//! once (approve or deny); it expires after a TTL (default 10 min) or when the waiting
//! call ends first. Requests are stored in SQLite so `gsv approvals list` and the audit
//! log can show them; the decision travels to the waiting call in memory.

mod error;

pub use error::ApprovalError;

use crate::store::{Store, StoreError};
use dashmap::DashMap;
use rusqlite::{params, OptionalExtension};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Default time an approval request stays open.
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);

pub use gsv_protocol::method::{
    AgentCount, ApprovalRequest, ApprovalsListParams as ListQuery, ApprovalsListResult as ListPage,
    Verdict,
};

/// What is being asked for.
pub struct NewRequest {
    pub agent: String,
    pub token_id: String,
    pub node: String,
    pub tool: String,
    pub args_hash: String,
    pub summary: String,
    pub reason: String,
    /// The tool's dry-run plan, from the node ([`ApprovalRequest::plan`]).
    pub plan: Option<String>,
    /// A fan-out's request: the nodes it covers ([`ApprovalRequest::nodes`]).
    pub nodes: Vec<String>,
    /// The call's arguments as canonical JSON, whatever their size: lists and events
    /// carry them ([`ApprovalRequest::args`]) up to [`MAX_SHOWN_ARGS_BYTES`], the
    /// console's page whole ([`Approvals::args_of`]).
    pub args: Option<String>,
}

/// The largest canonical arguments a listed request carries for operators to read
/// (64 KiB); larger ones (a big Write) are shown by their summary, which names every
/// argument and cuts long strings visibly, and whole by [`Approvals::args_of`].
pub const MAX_SHOWN_ARGS_BYTES: usize = 64 * 1024;

/// The canonical JSON of `args` for [`NewRequest::args`]: object keys sorted (the form
/// the arguments hash is taken of).
pub fn shown_args(args: &serde_json::Value) -> Option<String> {
    serde_json::to_string(args).ok()
}

/// `args` if it is small enough to carry in a list or an event.
fn listed(args: Option<&str>) -> Option<String> {
    args.filter(|t| t.len() <= MAX_SHOWN_ARGS_BYTES)
        .map(str::to_owned)
}

/// The approval queue of one gateway.
pub struct Approvals {
    store: Arc<Store>,
    waiters: DashMap<String, Waiter>,
    pub ttl: Duration,
    /// Requests one token may have waiting at once (its share of the operators'
    /// attention: beyond it, `overloaded`).
    pub per_token: usize,
    /// Makes the share check and the insert one step, so racing requests of one token
    /// cannot pass the check together.
    admit: std::sync::Mutex<()>,
}

/// A call waiting for a decision, and whose it is.
struct Waiter {
    token_id: String,
    tx: oneshot::Sender<Verdict>,
    /// The call's arguments for operators to read, whole. Kept in memory only, while
    /// the call waits (which holds them anyway): the database keeps their hash, as the
    /// audit log does.
    args: Option<Arc<str>>,
}

/// The largest page `approvals.list` returns.
pub const MAX_PAGE: u32 = 500;
/// The most requests each replica gives for one list across a cluster (the page's
/// end, `offset + limit`): a page further than that is cut short.
pub const MAX_LISTED_EVERYWHERE: u32 = 5_000;
/// The page size when none is asked for.
pub const DEFAULT_PAGE: u32 = gsv_protocol::method::DEFAULT_APPROVALS_PAGE;

/// Default of [`Approvals::per_token`].
pub const DEFAULT_PENDING_PER_TOKEN: usize = 32;

fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRequest> {
    Ok(ApprovalRequest {
        id: r.get(0)?,
        agent: r.get(1)?,
        token_id: r.get(2)?,
        node: r.get(3)?,
        tool: r.get(4)?,
        args_hash: r.get(5)?,
        summary: r.get(6)?,
        reason: r.get(7)?,
        created_at: r.get::<_, i64>(8)?.max(0) as u64,
        expires_at: r.get::<_, i64>(9)?.max(0) as u64,
        state: r.get(10)?,
        decided_at: r.get::<_, Option<i64>>(11)?.map(|v| v.max(0) as u64),
        decided_by: r.get(12)?,
        args: None,
        plan: r.get(13)?,
        // Written by this gateway as a JSON list; anything else reads as none.
        nodes: r
            .get::<_, Option<String>>(14)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
    })
}

const COLUMNS: &str = "id, agent, token_id, node, tool, args_hash, summary, reason, created_at, expires_at, state, decided_at, decided_by, plan, nodes";

impl Approvals {
    pub fn new(store: Arc<Store>, ttl: Duration) -> Self {
        Approvals {
            store,
            waiters: DashMap::new(),
            ttl,
            per_token: DEFAULT_PENDING_PER_TOKEN,
            admit: std::sync::Mutex::new(()),
        }
    }

    /// The same with a share of `per_token` requests per token (at least 1).
    pub fn with_per_token(mut self, per_token: usize) -> Self {
        self.per_token = per_token.max(1);
        self
    }

    /// How many requests of `token_id` are waiting (calls that went away not counted).
    pub fn pending_for(&self, token_id: &str) -> usize {
        self.waiters
            .iter()
            .filter(|w| w.token_id == token_id && !w.tx.is_closed())
            .count()
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ApprovalError> {
        Ok(self.store.blocking(f).await??)
    }

    /// Opens a request; the receiver gets the operator's decision.
    pub async fn open(
        &self,
        req: NewRequest,
    ) -> Result<(ApprovalRequest, oneshot::Receiver<Verdict>), ApprovalError> {
        let admit = self.admit.lock().unwrap_or_else(|p| p.into_inner());
        // Calls that stopped waiting without saying so leave no trace behind.
        self.waiters.retain(|_, w| !w.tx.is_closed());
        if self.pending_for(&req.token_id) >= self.per_token {
            return Err(ApprovalError::TooManyPending {
                per_token: self.per_token,
            });
        }
        let now = gsv_protocol::now_ms();
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let token_id = req.token_id.clone();
        let request = ApprovalRequest {
            id: id.clone(),
            agent: req.agent,
            token_id: req.token_id,
            node: req.node,
            tool: req.tool,
            args_hash: req.args_hash,
            summary: req.summary,
            reason: req.reason,
            plan: req.plan,
            nodes: req.nodes,
            created_at: now,
            expires_at: now + self.ttl.as_millis() as u64,
            state: "pending".into(),
            decided_at: None,
            decided_by: None,
            args: listed(req.args.as_deref()),
        };
        let (tx, rx) = oneshot::channel();
        self.waiters.insert(
            id,
            Waiter {
                token_id,
                tx,
                args: req.args.map(Arc::from),
            },
        );
        drop(admit);
        let r = request.clone();
        let nodes = (!r.nodes.is_empty())
            .then(|| serde_json::to_string(&r.nodes).ok())
            .flatten();
        self.blocking(move |s| {
            s.with_conn(|c| {
                c.execute(
                    &format!("INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, NULL, NULL, ?12, ?13)"),
                    params![r.id, r.agent, r.token_id, r.node, r.tool, r.args_hash, r.summary, r.reason, r.created_at as i64, r.expires_at as i64, r.state, r.plan, nodes],
                )?;
                Ok(())
            })
        })
        .await?;
        Ok((request, rx))
    }

    /// Decides a pending request once. Fails for unknown, decided or expired ones.
    pub async fn decide(
        &self,
        id: &str,
        decision: Verdict,
        by: &str,
    ) -> Result<ApprovalRequest, ApprovalError> {
        let now = gsv_protocol::now_ms();
        let waiting = self.waiters.remove(id).map(|(_, w)| w.tx);
        let state = match decision {
            Verdict::Approve => "approved",
            Verdict::Deny => "denied",
        };
        let (id_s, by_s) = (id.to_owned(), by.to_owned());
        let live = waiting.is_some();
        let updated = self
            .blocking(move |s| {
                s.with_conn(|c| {
                    let row = c
                        .query_row(
                            &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
                            params![id_s],
                            read,
                        )
                        .optional()?;
                    let Some(mut row) = row else {
                        return Ok(Err(ApprovalError::NotFound { id: id_s }));
                    };
                    if row.state == "expired" {
                        return Ok(Err(ApprovalError::Expired { id: id_s }));
                    }
                    if row.state != "pending" {
                        return Ok(Err(ApprovalError::AlreadyDecided { id: id_s }));
                    }
                    if row.expires_at <= now || !live {
                        c.execute(
                            "UPDATE approvals SET state = 'expired' WHERE id = ?1",
                            params![id_s],
                        )?;
                        return Ok(Err(ApprovalError::Expired { id: id_s }));
                    }
                    c.execute(
                        "UPDATE approvals SET state = ?2, decided_at = ?3, decided_by = ?4 WHERE id = ?1 AND state = 'pending'",
                        params![id_s, state, now as i64, by_s],
                    )?;
                    row.state = state.to_owned();
                    row.decided_at = Some(now);
                    row.decided_by = Some(by_s.clone());
                    Ok(Ok(row))
                })
            })
            .await?;
        let row = updated?;
        if let Some(tx) = waiting {
            let _ = tx.send(decision);
        }
        Ok(row)
    }

    /// Whether this gateway opened request `id` (its row is in this store).
    pub async fn knows(&self, id: &str) -> bool {
        let id = id.to_owned();
        self.blocking(move |s| {
            s.with_conn(|c| {
                Ok(
                    c.query_row("SELECT 1 FROM approvals WHERE id = ?1", params![id], |_| {
                        Ok(())
                    })
                    .optional()?
                    .is_some(),
                )
            })
        })
        .await
        .unwrap_or(false)
    }

    /// Marks a request expired (its call stopped waiting). Idempotent.
    pub async fn expire(&self, id: &str) {
        self.waiters.remove(id);
        let id = id.to_owned();
        let _ = self
            .blocking(move |s| {
                s.with_conn(|c| {
                    c.execute(
                        "UPDATE approvals SET state = 'expired' WHERE id = ?1 AND state = 'pending'",
                        params![id],
                    )?;
                    Ok(())
                })
            })
            .await;
    }

    /// Requests, newest first; only pending ones (not yet expired) when `pending_only`.
    /// One page of requests, newest first (pending ones only unless `all`), with how
    /// many match in all and how many of those each agent has, so no agent's request
    /// can hide behind another's flood.
    pub async fn list(&self, query: ListQuery) -> Result<ListPage, ApprovalError> {
        let limit = query.limit.clamp(1, MAX_PAGE);
        self.page(query.all, limit, query.offset).await
    }

    /// [`Approvals::list`] without the page-size clamp (a cluster replica asks each
    /// other for the first `offset + limit` of theirs).
    pub async fn page(
        &self,
        all: bool,
        limit: u32,
        offset: u32,
    ) -> Result<ListPage, ApprovalError> {
        let now = gsv_protocol::now_ms() as i64;
        let limit = i64::from(limit.max(1));
        let offset = i64::from(offset);
        let filter = if all {
            "?1 = ?1"
        } else {
            "state = 'pending' AND expires_at > ?1"
        };
        let mut page = self.blocking(move |s| {
            s.with_conn(|c| {
                let mut stmt = c.prepare(&format!(
                    "SELECT {COLUMNS} FROM approvals WHERE {filter} ORDER BY created_at DESC, id LIMIT ?2 OFFSET ?3"
                ))?;
                let approvals = stmt
                    .query_map(params![now, limit, offset], read)?
                    .collect::<Result<Vec<_>, _>>()?;
                let mut stmt = c.prepare(&format!(
                    "SELECT agent, COUNT(*) FROM approvals WHERE {filter} GROUP BY agent ORDER BY COUNT(*) ASC, agent"
                ))?;
                let by_agent = stmt
                    .query_map(params![now], |r| {
                        Ok(AgentCount {
                            agent: r.get(0)?,
                            count: r.get::<_, i64>(1)?.max(0) as u64,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                let total = by_agent.iter().map(|a| a.count).sum();
                Ok(ListPage {
                    approvals,
                    total,
                    offset: offset as u64,
                    by_agent,
                })
            })
        })
        .await?;
        // The arguments of the calls still waiting, from memory.
        for r in page.approvals.iter_mut().filter(|r| r.state == "pending") {
            r.args = self
                .waiters
                .get(&r.id)
                .and_then(|w| listed(w.args.as_deref()));
        }
        Ok(page)
    }

    /// Every argument of request `id` while its call waits on this gateway, whatever
    /// their size.
    pub fn args_of(&self, id: &str) -> Option<Arc<str>> {
        self.waiters
            .get(id)
            .filter(|w| !w.tx.is_closed())
            .and_then(|w| w.args.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(args: Option<String>) -> NewRequest {
        NewRequest {
            agent: "careful".into(),
            token_id: "t1".into(),
            node: "lab".into(),
            tool: "Echo".into(),
            args_hash: "h".into(),
            summary: "s".into(),
            reason: "r".into(),
            plan: None,
            nodes: Vec::new(),
            args,
        }
    }

    #[tokio::test]
    async fn large_arguments_stay_out_of_lists_but_are_kept_whole_for_the_console() {
        let dir = std::env::temp_dir().join(format!("gsv-approvals-{}", uuid::Uuid::new_v4()));
        let store = Arc::new(Store::open(&dir).expect("open"));
        let approvals = Approvals::new(store, DEFAULT_TTL);
        let big = shown_args(&serde_json::json!({ "text": "x".repeat(200_000) }));
        let small = shown_args(&serde_json::json!({ "text": "hi" }));
        let (b, _brx) = approvals.open(asked(big.clone())).await.expect("open");
        let (s, _srx) = approvals.open(asked(small.clone())).await.expect("open");
        assert!(b.args.is_none(), "over 64 KiB: not in the request's event");
        assert_eq!(s.args, small);
        let page = approvals.list(ListQuery::default()).await.expect("list");
        let listed = |id: &str| page.approvals.iter().find(|r| r.id == id).cloned();
        assert!(listed(&b.id).expect("listed").args.is_none());
        assert_eq!(listed(&s.id).expect("listed").args, small);
        assert_eq!(approvals.args_of(&b.id).as_deref(), big.as_deref(), "whole");
        assert_eq!(approvals.args_of(&s.id).as_deref(), small.as_deref());
        assert!(approvals.args_of("nope").is_none());
        approvals.expire(&b.id).await;
        assert!(
            approvals.args_of(&b.id).is_none(),
            "gone with the waiting call"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
