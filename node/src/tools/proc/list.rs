//! The proc_list tool: the host's processes, filtered and sorted, read-only.
//!
//! It lists every process the node's user can see in `/proc` — other users' and other
//! agents' included: seeing what runs on the host is the tool's purpose, and it reads
//! nothing `ps` would not show the same user. A kernel mounted with `hidepid` hides
//! what it hides from the node too.
//!
//! Arguments: `user` (name or numeric uid, exact), `nameLike` (case-insensitive
//! substring of the process name or its command line), `sort` (`pid` ascending, the
//! default; `cpu` or `rss` highest first; `start` newest first), `limit` (default
//! [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]). Result: `{processes, total, truncated}`
//! ([`ProcListOutput`]); see [`super::table`] for what each record holds.

use super::table::{ProcessRecord, Table, TableError};
use crate::sessions::SessionManager;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

/// Processes listed when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = 100;
/// The most processes one call lists.
pub const MAX_LIMIT: u64 = 1000;

/// The proc_list tool.
pub struct ProcList {
    /// The node's sessions: a caller does not see other tokens' (their process groups).
    sessions: Option<Arc<SessionManager>>,
}

impl ProcList {
    /// proc_list hiding, from a caller that is not an operator, the processes of
    /// sessions other tokens own.
    pub fn new(sessions: Arc<SessionManager>) -> Self {
        ProcList {
            sessions: Some(sessions),
        }
    }

    /// proc_list without a session manager to consult (tests).
    pub fn standalone() -> Self {
        ProcList { sessions: None }
    }
}

/// proc_list's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcListOutput {
    pub processes: Vec<ProcessRecord>,
    /// How many processes matched the filters (listed or not).
    pub total: usize,
    /// Whether `limit` left some out.
    pub truncated: bool,
}

/// How to order the list.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sort {
    Pid,
    Cpu,
    Rss,
    Start,
}

const SORTS: &[&str] = &["pid", "cpu", "rss", "start"];

struct Query {
    user: Option<String>,
    name_like: Option<String>,
    sort: Sort,
    limit: usize,
}

impl Query {
    fn parse(args: &Value) -> Result<Query, String> {
        let a = Args::new(args, &["user", "nameLike", "sort", "limit"])?;
        let sort = match a.str("sort")? {
            None | Some("pid") => Sort::Pid,
            Some("cpu") => Sort::Cpu,
            Some("rss") => Sort::Rss,
            Some("start") => Sort::Start,
            Some(other) => {
                return Err(format!(
                    "\"sort\" must be one of {}, got {other:?}",
                    SORTS.join(", ")
                ))
            }
        };
        Ok(Query {
            user: a.str("user")?.filter(|u| !u.is_empty()).map(str::to_owned),
            name_like: a
                .str("nameLike")?
                .filter(|n| !n.is_empty())
                .map(str::to_lowercase),
            sort,
            limit: a.u64_in("limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT) as usize,
        })
    }

    fn matches(&self, p: &ProcessRecord) -> bool {
        if let Some(user) = &self.user {
            let by_name = p.user.as_deref() == Some(user.as_str());
            if !by_name && user.parse::<u32>().ok() != Some(p.uid) {
                return false;
            }
        }
        if let Some(needle) = &self.name_like {
            if !p.name.to_lowercase().contains(needle) && !p.command.to_lowercase().contains(needle)
            {
                return false;
            }
        }
        true
    }

    fn order(&self, a: &ProcessRecord, b: &ProcessRecord) -> Ordering {
        let by = match self.sort {
            Sort::Pid => Ordering::Equal,
            Sort::Cpu => b.cpu_percent.total_cmp(&a.cpu_percent),
            Sort::Rss => b.rss_bytes.cmp(&a.rss_bytes),
            // RFC 3339 UTC strings of one format order like the times they name.
            Sort::Start => b.start.cmp(&a.start),
        };
        by.then(a.pid.cmp(&b.pid))
    }
}

/// Lists the processes `query` selects (blocking).
fn list(query: &Query, hidden: &HashSet<i32>) -> Result<ProcListOutput, TableError> {
    let mut table = Table::open()?;
    let mut found = Vec::new();
    for pid in table.pids()? {
        match table.read(pid) {
            Ok(record) if hidden.contains(&record.pgrp) => {}
            Ok(record) if query.matches(&record) => found.push(record),
            Ok(_) => {}
            // Ended while we read, or unreadable: not listed.
            Err(e) => tracing::trace!(pid, error = %e, "process skipped"),
        }
    }
    found.sort_by(|a, b| query.order(a, b));
    let total = found.len();
    found.truncate(query.limit);
    Ok(ProcListOutput {
        truncated: total > found.len(),
        processes: found,
        total,
    })
}

#[async_trait::async_trait]
impl Tool for ProcList {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "proc_list".to_owned(),
            description: "The host's processes (Linux): pid, parent, user, lifetime CPU %, \
                          resident memory, start time, command line."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "user": {
                        "type": "string",
                        "description": "Name or uid."
                    },
                    "nameLike": {
                        "type": "string",
                        "description": "Text in the name or command line (any case)."
                    },
                    "sort": {
                        "type": "string",
                        "enum": SORTS,
                        "description": "Default pid; cpu, rss: highest first; start: newest first."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "description": format!("Default {DEFAULT_LIMIT}.")
                    }
                },
                "additionalProperties": false
            }),
            capability: Capability::ProcessList.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("List processes"),
            default_timeout_ms: None,
            requires_bins: Vec::new(),
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let query = match Query::parse(&args) {
            Ok(q) => q,
            Err(message) => return ToolResult::error(format!("proc_list: {message}")),
        };
        // Another token's sessions are not this caller's to see (as in Process).
        let hidden = match &self.sessions {
            Some(s) if !ctx.is_operator() => s.groups_not_of(|owner| ctx.may_use_session(owner)),
            _ => HashSet::new(),
        };
        match tokio::task::spawn_blocking(move || list(&query, &hidden)).await {
            Ok(Ok(out)) => output::structured(&out),
            Ok(Err(e)) => ToolResult::error(format!("proc_list: {e}")),
            Err(e) => ToolResult::error(format!("proc_list failed: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        for bad in [
            json!({"sort": "name"}),
            json!({"limit": 0}),
            json!({"limit": MAX_LIMIT + 1}),
            json!({"pid": 3}),
            json!({"user": 5}),
        ] {
            assert!(Query::parse(&bad).is_err(), "{bad}");
        }
        let q = Query::parse(&json!({})).unwrap();
        assert_eq!((q.sort, q.limit), (Sort::Pid, DEFAULT_LIMIT as usize));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn lists_this_process_and_bounds_the_list() {
        let me = std::process::id() as i32;
        let r = ProcList::standalone()
            .execute(json!({"limit": 1000}), ToolContext::new("/", "1"))
            .await;
        assert!(!r.is_error, "{}", r.joined_text());
        let sc = r.structured_content.unwrap();
        let listed = sc["processes"].as_array().unwrap();
        assert!(listed.iter().any(|p| p["pid"] == me), "{sc}");
        let r = ProcList::standalone()
            .execute(
                json!({"limit": 1, "sort": "rss"}),
                ToolContext::new("/", "1"),
            )
            .await;
        let sc = r.structured_content.unwrap();
        assert_eq!(sc["processes"].as_array().unwrap().len(), 1);
        assert_eq!(sc["truncated"], sc["total"].as_u64().unwrap() > 1);
    }
}
