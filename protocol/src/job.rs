//! Jobs: calls whose results the gateway keeps after the call, for whoever may read
//! them later (`tools.call` with `async: true`, `jobs.list`, `jobs.get`).
//!
//! A caller that starts a call asynchronously gets the job's id at once and may go
//! away; the call runs on, and its outcome is stored by the gateway (in its database,
//! so a restart keeps it) for the retention period. These are the wire shapes.

use crate::error::ErrorShape;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// What `tools.call` with `async: true` answers at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsyncCallResult {
    /// The job that holds the call's outcome (`jobs.get`).
    pub job: String,
}

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// The call has not ended yet.
    Running,
    /// The call ended with a result (which may itself be a tool error).
    Done,
    /// The call ended with an error instead of a result (denied, timeout, offline...).
    Failed,
    /// The gateway stopped while the call was running; its outcome is not known.
    Lost,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Lost => "lost",
        }
    }

    /// The state stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "running" => JobState::Running,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            "lost" => JobState::Lost,
            _ => return None,
        })
    }
}

/// What a job runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// One call (`tools.call` with `async: true`): the outcome is a tool result.
    #[default]
    Call,
    /// A fan-out (`tools.fanout`): the outcome is its result, per node.
    Fanout,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Call => "call",
            JobKind::Fanout => "fanout",
        }
    }

    /// The kind stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "call" => Some(JobKind::Call),
            "fanout" => Some(JobKind::Fanout),
            _ => None,
        }
    }
}

/// One job as `jobs.list` shows it (no outcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    pub id: String,
    /// The agent name of the token that started it.
    pub agent: String,
    pub token_id: String,
    /// The namespaced tool called (a fan-out: the bare tool).
    pub name: String,
    #[serde(default)]
    pub kind: JobKind,
    /// A fan-out's selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
    pub state: JobState,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
}

/// One job with its outcome (`jobs.get`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    #[serde(flatten)]
    pub summary: JobSummary,
    /// The outcome (`done`): a call's tool result as the node answered it; a
    /// fan-out's result (`{job, results, summary}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// Why the call ended without a result (`failed`, `lost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorShape>,
}

/// The page size of `jobs.list` when none is asked for.
pub const DEFAULT_JOBS_PAGE: u32 = 50;

/// Params of `jobs.list`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobsListParams {
    /// Page size (the gateway clamps it to 1–500; default 50).
    pub limit: u32,
    /// Jobs skipped, newest first.
    pub offset: u32,
    /// Only the jobs that ran on a node this selector picks now (a call on one of
    /// them, a fan-out that reached one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
}

impl Default for JobsListParams {
    fn default() -> Self {
        JobsListParams {
            limit: DEFAULT_JOBS_PAGE,
            offset: 0,
            select: None,
        }
    }
}

/// Result of `jobs.list`: the caller's jobs (every token's, for an admin token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobsListResult {
    pub jobs: Vec<JobSummary>,
    /// How many jobs the caller may see in all.
    pub total: u64,
}

/// Params of `jobs.get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsGetParams {
    pub id: String,
}
