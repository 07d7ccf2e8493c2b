//! `fleet_jobs` and `fleet_job`: the kept outcomes of fan-outs (`fleet_run`,
//! `tools.fanout`) and async calls, read from MCP.
//!
//! `fleet_run` cuts long node texts so a model is not flooded; the job keeps them
//! whole (up to what the store keeps, [`crate::jobs::MAX_STORED_RESULT`]), and these
//! two tools read it back, exactly as `jobs.list` / `jobs.get` do over WebSocket
//! ([`crate::jobs`]): a token sees its own jobs, the admin token every job, and
//! another token's job answers `not_found` like one that does not exist.

use super::auth::McpPrincipal;
use super::fleet_answer::structured;
use super::result;
use crate::fleet::Fleet;
use crate::jobs::{JobError, Reader, MAX_PAGE};
use gsv_protocol::job::{JobsListParams, DEFAULT_JOBS_PAGE};
use gsv_protocol::{ErrorCode, ErrorShape};
use rmcp::model::CallToolResult;
use serde::Deserialize;
use serde_json::{Map, Value};
use thiserror::Error;

/// Why `fleet_jobs` / `fleet_job` arguments were refused (`invalid_args`).
#[derive(Debug, Error)]
pub enum JobsArgsError {
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("limit must be 1 to {MAX_PAGE}")]
    Limit,
    #[error("id is empty: give a job id (fleet_run answers one; fleet_jobs lists them)")]
    EmptyId,
}

impl JobsArgsError {
    fn into_result(self) -> CallToolResult {
        result::error_result(&ErrorShape::new(ErrorCode::InvalidArgs, self.to_string()))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsArgs {
    limit: Option<u32>,
    offset: Option<u32>,
    select: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobArgs {
    id: String,
}

fn parse<T: for<'de> Deserialize<'de>>(
    args: Option<Map<String, Value>>,
) -> Result<T, JobsArgsError> {
    serde_json::from_value(Value::Object(args.unwrap_or_default())).map_err(JobsArgsError::Json)
}

/// `fleet_jobs`' arguments as a `jobs.list` page.
pub fn list_params(args: Option<Map<String, Value>>) -> Result<JobsListParams, JobsArgsError> {
    let a: JobsArgs = parse(args)?;
    let limit = a.limit.unwrap_or(DEFAULT_JOBS_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(JobsArgsError::Limit);
    }
    Ok(JobsListParams {
        limit,
        offset: a.offset.unwrap_or(0),
        select: a.select,
    })
}

/// `fleet_job`'s argument: the job id.
pub fn job_id(args: Option<Map<String, Value>>) -> Result<String, JobsArgsError> {
    let a: JobArgs = parse(args)?;
    if a.id.trim().is_empty() {
        return Err(JobsArgsError::EmptyId);
    }
    Ok(a.id)
}

fn reader(who: &McpPrincipal) -> Reader<'_> {
    Reader {
        token_id: &who.token_id,
        admin: who.admin,
        read_only: false,
        policy: Some(&who.policy),
    }
}

fn failed(e: JobError) -> CallToolResult {
    result::error_result(&e.to_shape())
}

/// `fleet_jobs`: a page of the jobs `who` may see, newest first (`{jobs, total}`).
pub async fn jobs_answer(
    fleet: &Fleet,
    who: &McpPrincipal,
    args: Option<Map<String, Value>>,
) -> CallToolResult {
    let params = match list_params(args) {
        Ok(p) => p,
        Err(e) => return e.into_result(),
    };
    match fleet.jobs(reader(who), params).await {
        Ok(page) => structured(&page),
        Err(e) => failed(e),
    }
}

/// `fleet_job`: one job with its kept outcome; `not_found` for another token's job
/// (unless `who` is the admin) exactly as for a missing one.
pub async fn job_answer(
    fleet: &Fleet,
    who: &McpPrincipal,
    args: Option<Map<String, Value>>,
) -> CallToolResult {
    let id = match job_id(args) {
        Ok(id) => id,
        Err(e) => return e.into_result(),
    };
    match fleet.job(reader(who), &id).await {
        Ok(job) => structured(&job),
        Err(e) => {
            tracing::debug!(job = ?id, error = ?e.to_string(), "fleet_job refused");
            failed(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Option<Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    #[test]
    fn pages_default_and_are_bounded() {
        assert_eq!(list_params(None).unwrap(), JobsListParams::default());
        let p = list_params(args(json!({"limit": 5, "offset": 10}))).unwrap();
        assert_eq!((p.limit, p.offset), (5, 10));
        for bad in [
            json!({"limit": 0}),
            json!({"limit": MAX_PAGE + 1}),
            json!({"limit": -1}),
            json!({"offset": "x"}),
            json!({"page": 1}),
        ] {
            let e = list_params(args(bad.clone())).expect_err(&bad.to_string());
            let r = e.into_result();
            assert_eq!(r.is_error, Some(true), "{bad}");
        }
    }

    #[test]
    fn a_job_id_is_required() {
        assert_eq!(job_id(args(json!({"id": "abc"}))).unwrap(), "abc");
        for bad in [
            json!({}),
            json!({"id": ""}),
            json!({"id": 5}),
            json!({"id": "a", "x": 1}),
        ] {
            let e = job_id(args(bad.clone())).expect_err(&bad.to_string());
            let r = e.into_result();
            let text = r.content[0]
                .as_text()
                .map(|t| t.text.clone())
                .unwrap_or_default();
            assert!(text.starts_with("invalid_args: "), "{bad}: {text}");
        }
    }
}
