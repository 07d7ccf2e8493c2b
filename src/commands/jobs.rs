//! `gsv call --async` and `gsv jobs list|show`: calls whose outcome the gateway keeps.
//!
//! An async call prints its job id and returns at once; the call runs on at the
//! gateway whatever this process does, and `gsv jobs show ID` (from any machine, with
//! the same token or the admin token) prints its outcome later, as `gsv call` would
//! have.

use crate::commands::client::{call_args, client_error, connect, print_json, Target};
use crate::exit;
use crate::terminal::safe;
use gsv_protocol::fanout::FanoutResult;
use gsv_protocol::job::{Job, JobKind, JobState, JobsListParams, JobsListResult};
use gsv_protocol::{Method, ToolResult};

/// `gsv call --async NAME ARGS`: prints the job id (`--json`: `{"job": ID}`).
pub async fn call_async(
    target: Target,
    name: &str,
    args: &str,
    json: bool,
    timeout_ms: Option<u64>,
) -> u8 {
    let args = match call_args(args) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.call_async(name, args, timeout_ms).await {
        Ok(job) => {
            if json {
                print_json(&gsv_protocol::job::AsyncCallResult { job });
            } else {
                println!("{job}");
            }
            exit::OK
        }
        Err(e) => client_error(&e),
    }
}

/// `gsv jobs list`: newest first, one line each.
pub async fn list(target: Target, json: bool, limit: u32, offset: u32, select: Option<&str>) -> u8 {
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let params = JobsListParams {
        limit,
        offset,
        select: select.map(str::to_owned),
    };
    let page: JobsListResult =
        match crate::commands::client::request_as(&client, Method::JobsList, &params).await {
            Ok(p) => p,
            Err(code) => return code,
        };
    if json {
        print_json(&page);
        return exit::OK;
    }
    if page.jobs.is_empty() {
        eprintln!("no jobs");
    }
    for j in &page.jobs {
        let what = match (&j.kind, &j.select) {
            (JobKind::Fanout, Some(select)) => format!("{} on {}", safe(&j.name), safe(select)),
            _ => safe(&j.name).into_owned(),
        };
        println!(
            "{}  {:<7}  {}  {}  {}",
            safe(&j.id),
            j.state.as_str(),
            gsv_gateway::time::rfc3339(j.created_at),
            safe(&j.agent),
            what
        );
    }
    let shown = u64::from(offset) + page.jobs.len() as u64;
    if shown < page.total {
        eprintln!(
            "{} more: gsv jobs list --offset {shown}",
            page.total - shown
        );
    }
    exit::OK
}

/// `gsv jobs show ID`: the job's outcome as `gsv call` prints a result (`--json`: the
/// whole job). Exits like `gsv call`: 0 done, 1 a tool error, the error's code when
/// the call failed; a job still running exits 0 and says so on stderr.
pub async fn show(target: Target, id: &str, json: bool) -> u8 {
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let job: Job = match client.job(id).await {
        Ok(j) => j,
        Err(e) => return client_error(&e),
    };
    if json {
        print_json(&job);
    }
    match job.summary.state {
        JobState::Running => {
            eprintln!(
                "job {} is still running ({})",
                safe(id),
                safe(&job.summary.name)
            );
            exit::OK
        }
        JobState::Done if job.summary.kind == JobKind::Fanout => {
            let result: Option<FanoutResult> = job
                .result
                .as_ref()
                .and_then(|raw| serde_json::from_str(raw.get()).ok());
            let Some(result) = result else {
                eprintln!("error: internal: the job's stored result does not decode");
                return exit::TOOL_ERROR;
            };
            if !json {
                for o in &result.results {
                    crate::commands::fanout::print_block(o);
                }
                println!("{}", crate::commands::fanout::summary_line(&result.summary));
            }
            if result.summary.all_ok() {
                exit::OK
            } else {
                exit::TOOL_ERROR
            }
        }
        JobState::Done => {
            let result: Option<ToolResult> = job
                .result
                .as_ref()
                .and_then(|raw| serde_json::from_str(raw.get()).ok());
            let Some(result) = result else {
                eprintln!("error: internal: the job's stored result does not decode");
                return exit::TOOL_ERROR;
            };
            if !json {
                crate::commands::client::print_text(&result);
            }
            crate::commands::client::result_exit(&result)
        }
        JobState::Failed | JobState::Lost => {
            let e = job.error.unwrap_or_else(|| {
                gsv_protocol::ErrorShape::new(gsv_protocol::ErrorCode::Internal, "no error kept")
            });
            if !json {
                eprintln!("error: {}: {}", e.code, safe(&e.message));
            }
            client_error(&gsv_client::ClientError::Remote(e))
        }
    }
}

/// `gsv jobs cancel ID`: cancels a running job and prints its state then (`--json`:
/// the job). A job that already ended is left as it is.
pub async fn cancel(target: Target, id: &str, json: bool) -> u8 {
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.cancel_job(id).await {
        Ok(job) => {
            if json {
                print_json(&job);
            } else {
                println!("{}  {}", safe(&job.summary.id), job.summary.state.as_str());
            }
            exit::OK
        }
        Err(e) => client_error(&e),
    }
}
