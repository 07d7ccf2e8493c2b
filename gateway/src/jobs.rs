//! Jobs: calls whose outcome the gateway keeps, so a caller may go away and read it
//! later (or another connection of the same token, or an operator).
//!
//! `tools.call` with `async: true` answers at once with a job id; the call runs on
//! through the same router as any call (policy, approvals, node guards, budgets,
//! audit), no longer tied to the caller's connection, and its result or error is
//! written to the job in the database when it ends. `jobs.list` and `jobs.get` read
//! them: a token sees its own jobs, an admin token every job; another token's job is
//! answered `not_found`, exactly like one that does not exist. Jobs are kept
//! [`crate::config::DEFAULT_JOB_RETENTION`] and at most [`MAX_JOBS`]; a result over [`MAX_STORED_RESULT`] is not
//! kept (the job fails `too_large`). A gateway that starts asks the nodes again for the
//! calls of the `async` jobs its previous run left running ([`crate::reattach`]), and
//! marks the other running ones `lost`: their outcome is not known.

use crate::agent_handle::AgentHandle;
use crate::router;
use crate::state::Shared;
use crate::store::{Store, StoreError};
use gsv_protocol::job::{
    AsyncCallResult, Job, JobKind, JobState, JobSummary, JobsListParams, JobsListResult,
};
use gsv_protocol::method::ToolsCallParams;
use gsv_protocol::tool_class::ToolClasses;
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub mod outcome;
pub use outcome::{finish, settle, MAX_STORED_BYTES_PER_TOKEN, MAX_STORED_RESULT};

/// Most bytes of results and errors all finished jobs keep (the oldest go first;
/// checked at start and every 10 minutes).
pub const MAX_STORED_BYTES: usize = 2 * 1024 * 1024 * 1024;
/// Most jobs kept at once (the oldest go first).
pub const MAX_JOBS: usize = 100_000;
/// Most jobs one token keeps (its oldest finished ones go first; when all are
/// running, a new one is refused `overloaded`): no token fills the gateway's jobs.
pub const MAX_JOBS_PER_TOKEN: usize = 10_000;
/// How often old jobs are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(10 * 60);
/// The largest page `jobs.list` returns.
pub const MAX_PAGE: u32 = 500;

/// Why a jobs request failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("no job {id}")]
    NotFound { id: String },
    #[error("the jobs store failed: {0}")]
    Store(#[from] StoreError),
    #[error("the jobs store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Selector(#[from] crate::inventory::InventoryError),
    /// An operator token asked to cancel another token's job.
    #[error("operator tokens read jobs but cannot cancel job {id}: that needs the admin token")]
    ReadOnly { id: String },
    /// The replica that runs the job answered the cancel with this (cluster mode).
    #[error("{}", .0.message)]
    Elsewhere(ErrorShape),
}

impl JobError {
    pub fn to_shape(&self) -> ErrorShape {
        if matches!(self, JobError::Store(_) | JobError::Task(_)) {
            tracing::error!(error = %self, "jobs store");
        }
        crate::error::WireError::to_shape(self)
    }
}

impl crate::error::WireError for JobError {
    fn code(&self) -> ErrorCode {
        match self {
            JobError::NotFound { .. } => ErrorCode::NotFound,
            JobError::ReadOnly { .. } => ErrorCode::Forbidden,
            JobError::Store(_) | JobError::Task(_) => ErrorCode::Internal,
            JobError::Selector(e) => e.to_shape().code,
            JobError::Elsewhere(e) => e.code,
        }
    }

    fn to_shape(&self) -> ErrorShape {
        match self {
            JobError::Elsewhere(e) => e.clone(),
            other => crate::error::shape(other.code(), other.to_string(), other.details()),
        }
    }
}

/// Who asks for jobs: a token, and whether it sees every token's jobs (the admin's
/// and operators') and cancels them (the admin's only).
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    pub token_id: &'a str,
    pub admin: bool,
    /// An operator token: reads every job, cancels only its own (it starts none).
    pub read_only: bool,
    /// An agent's policy: a selector in `jobs.list` matches only the nodes it may see
    /// (`None`: every node, for readers who see every node anyway).
    pub policy: Option<&'a crate::policy::Policy>,
}

impl<'a> Reader<'a> {
    /// The reader for a token with `authority`.
    pub fn new(token_id: &'a str, authority: crate::operator::Authority) -> Self {
        Reader {
            token_id,
            admin: authority.reads_all(),
            read_only: !authority.is_admin() && authority.reads_all(),
            policy: None,
        }
    }

    /// The same reader, whose selectors match only what `policy` may see.
    pub fn seeing(mut self, policy: &'a crate::policy::Policy) -> Self {
        self.policy = Some(policy);
        self
    }
}

impl<'a> From<&'a AgentHandle> for Reader<'a> {
    fn from(agent: &'a AgentHandle) -> Self {
        Reader::new(&agent.token_id, agent.authority).seeing(&agent.policy)
    }
}

async fn blocking<T: Send + 'static>(
    store: &Arc<Store>,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, JobError> {
    Ok(store.blocking(f).await??)
}

/// At start: marks the previous run's running jobs lost and deletes expired ones;
/// then deletes expired jobs every [`PRUNE_EVERY`] until the gateway stops.
pub async fn keep(shared: Arc<Shared>) {
    let now = gsv_protocol::now_ms();
    let retention = shared.config.job_retention;
    let before = now.saturating_sub(retention.as_millis() as u64);
    match blocking(&shared.store, move |s| s.settle_jobs(before, now)).await {
        Ok(settled) => {
            let resumed = settled.resumable.len();
            if settled.lost + settled.deleted + resumed > 0 {
                tracing::info!(
                    lost = settled.lost,
                    deleted = settled.deleted,
                    resumed,
                    "jobs settled at start"
                );
            }
            crate::reattach::resume_all(&shared, settled.resumable);
        }
        Err(e) => tracing::warn!(error = %e, "could not settle the jobs at start"),
    }
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let before = gsv_protocol::now_ms().saturating_sub(retention.as_millis() as u64);
        let pruned = blocking(&shared.store, move |s| {
            Ok(s.prune_jobs(before, MAX_JOBS)? + s.trim_jobs_to(MAX_STORED_BYTES)?)
        });
        if let Err(e) = pruned.await {
            tracing::warn!(error = %e, "could not prune old jobs");
        }
    }
}

/// Records a job that starts now for `caller`, within its token's share, on `nodes`;
/// its id.
pub async fn record(
    shared: &Shared,
    caller: &router::Caller<'_>,
    kind: JobKind,
    name: &str,
    select: Option<&str>,
    nodes: Vec<String>,
) -> Result<String, ErrorShape> {
    // A job's name is a tool's: a namespaced name (a call) or a bare one (a fan-out),
    // never longer. Checked here, before anything is stored, whatever the door: an
    // async call's name is otherwise only checked when the call is routed, after its
    // job row was written.
    if name.len() > gsv_protocol::names::MAX_NAMESPACED_LEN {
        return Err(ErrorShape::new(
            ErrorCode::InvalidArgs,
            format!(
                "a tool name is at most {} characters; this one has {}",
                gsv_protocol::names::MAX_NAMESPACED_LEN,
                name.len()
            ),
        ));
    }
    let job = JobSummary {
        id: uuid::Uuid::new_v4().simple().to_string(),
        agent: caller.name.to_owned(),
        token_id: caller.token_id.to_owned(),
        name: name.to_owned(),
        kind,
        select: select.map(str::to_owned),
        state: JobState::Running,
        created_at: gsv_protocol::now_ms(),
        finished_at: None,
    };
    let id = job.id.clone();
    let recorded = blocking(&shared.store, move |s| {
        s.insert_job_capped(&job, &nodes, MAX_JOBS_PER_TOKEN)
    })
    .await
    .map_err(|e| e.to_shape())?;
    if !recorded {
        return Err(ErrorShape::new(
            ErrorCode::Overloaded,
            format!(
                "this token already has {MAX_JOBS_PER_TOKEN} jobs running, its share of the \
                 gateway's jobs; retry when some finish"
            ),
        )
        .with(ErrorDetails::limit("jobs_per_token", MAX_JOBS_PER_TOKEN)));
    }
    shared.changes.send(crate::changes::Topic::Jobs);
    Ok(id)
}

/// `tools.call` with `async: true`: records the job, answers its id on `reply`, and
/// runs the call to its end whatever the caller does, keeping the outcome.
pub async fn run_async(
    shared: Arc<Shared>,
    agent: Arc<AgentHandle>,
    params: ToolsCallParams,
) -> Result<AsyncCallResult, ErrorShape> {
    let id = record(
        &shared,
        &router::Caller::from_agent(&agent),
        JobKind::Call,
        &params.name,
        None,
        node_of(&params.name),
    )
    .await?;
    // Counted like a call in flight until its outcome is stored: a stopping gateway
    // waits for it (within its drain period).
    let counted = shared.in_flight.token();
    // Its own cancellation, not the caller connection's: the job outlives it, and
    // `jobs.cancel` ends it.
    let cancel = CancellationToken::new();
    running(&shared, &id, &agent.token_id, &cancel);
    let job = id.clone();
    tokio::spawn(async move {
        let _counted = counted;
        // Its dispatch is recorded with the job: a restarted gateway asks the node again.
        let caller = router::Caller::from_agent(&agent).for_job(&job);
        let outcome = router::call(&shared, &caller, params, cancel).await;
        settle(&shared, &job, outcome).await;
    });
    Ok(AsyncCallResult { job: id })
}

/// A synchronous call whose caller went away before its result: records it as a job
/// of `agent` named `name`, from now on cancelled by `jobs.cancel` through `cancel`,
/// and returns the job's id; `None` when no job can be kept (the token's share of jobs
/// is full, or the store failed), and then the caller should cancel the call.
pub async fn detach(
    shared: &Shared,
    agent: &AgentHandle,
    name: &str,
    cancel: &CancellationToken,
) -> Option<String> {
    let caller = router::Caller::from_agent(agent);
    match record(shared, &caller, JobKind::Call, name, None, node_of(name)).await {
        Ok(id) => {
            running(shared, &id, &agent.token_id, cancel);
            // A revocation closes the connection (which is how the call got here): if
            // the token is revoked, the call ends now rather than run on as a job. Read
            // after the job is registered, so a revocation noticed meanwhile has
            // cancelled it through `cancel_token_jobs` either way.
            let token = agent.token_id.clone();
            let live = shared.store.blocking(move |s| s.token_live(&token)).await;
            if !matches!(live, Ok(Ok(true))) {
                tracing::info!(job = %id, "the caller's token is revoked; the call is cancelled");
                cancel.cancel();
            } else {
                tracing::info!(job = %id, "the caller went away; the call goes on as a job");
            }
            Some(id)
        }
        Err(e) => {
            tracing::warn!(error = %e.message, "the caller went away and no job could keep the call; cancelled");
            None
        }
    }
}

/// The node a namespaced tool name points at, as a job's node list.
fn node_of(name: &str) -> Vec<String> {
    name.split_once(gsv_protocol::names::NAMESPACE_SEPARATOR)
        .map(|(node, _)| vec![node.to_owned()])
        .unwrap_or_default()
}

/// Registers the running job `id` of `token_id`, cancelled through `cancel`.
pub fn running(shared: &Shared, id: &str, token_id: &str, cancel: &CancellationToken) {
    shared.running_jobs.insert(
        id.to_owned(),
        crate::state::RunningJob {
            token_id: token_id.to_owned(),
            cancel: cancel.clone(),
        },
    );
}

/// Cancels every running job of `token_id` (the token was revoked); how many.
pub fn cancel_token_jobs(shared: &Shared, token_id: &str) -> usize {
    let mut n = 0;
    for job in shared.running_jobs.iter() {
        if job.token_id == token_id {
            job.cancel.cancel();
            n += 1;
        }
    }
    n
}

/// `jobs.get`: one job, if `reader` may see it.
pub async fn get(shared: &Shared, reader: Reader<'_>, id: &str) -> Result<Job, JobError> {
    let wanted = id.to_owned();
    let job = blocking(&shared.store, move |s| s.job(&wanted)).await?;
    match job {
        Some(job) if reader.admin || job.summary.token_id == reader.token_id => Ok(job),
        _ => Err(JobError::NotFound { id: id.to_owned() }),
    }
}

/// The job `reader` may cancel: one it may see and, for a read-only reader, its own.
pub async fn cancellable(shared: &Shared, reader: Reader<'_>, id: &str) -> Result<Job, JobError> {
    let job = get(shared, reader, id).await?;
    if reader.read_only && job.summary.token_id != reader.token_id {
        return Err(JobError::ReadOnly { id: id.to_owned() });
    }
    Ok(job)
}

/// The replica that runs job `id`, when it is a copy of another replica's job
/// (cluster mode); `None` for this gateway's own.
pub async fn owner_elsewhere(shared: &Shared, id: &str) -> Result<Option<String>, JobError> {
    let wanted = id.to_owned();
    blocking(&shared.store, move |s| s.job_owner(&wanted)).await
}

/// Cancels this gateway's running job `id` that `reader` may cancel (the call ends
/// `cancelled`, as a cancelled call does); returns the job as it is then. A job that
/// already ended is returned unchanged. Another replica's job is cancelled through
/// [`crate::fleet::cancel_job`].
pub async fn cancel(shared: &Shared, reader: Reader<'_>, id: &str) -> Result<Job, JobError> {
    cancellable(shared, reader, id).await?;
    if let Some(job) = shared.running_jobs.get(id) {
        tracing::info!(job = id, "job cancelled");
        job.cancel.cancel();
    }
    // The call ends and its outcome is stored within moments; read it then.
    for _ in 0..50 {
        let job = get(shared, reader, id).await?;
        if job.summary.state != JobState::Running {
            return Ok(job);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    get(shared, reader, id).await
}

/// `jobs.list`: a page of the jobs `reader` may see, newest first.
pub async fn list(
    shared: &Shared,
    reader: Reader<'_>,
    params: JobsListParams,
) -> Result<JobsListResult, JobError> {
    let token = (!reader.admin).then(|| reader.token_id.to_owned());
    let limit = params.limit.clamp(1, MAX_PAGE);
    // The nodes the selector picks now, among the nodes the reader may see: its own
    // job on a node it may not see (a call refused by its policy is a job too) must not
    // tell it that node's labels or facts.
    let nodes = match params.select.as_deref() {
        Some(text) => {
            let selector = crate::inventory::parse_selector(text)?;
            let policy = reader.policy.filter(|_| !reader.admin);
            let seen = crate::registry::Viewer {
                visible: |n: &str, c: ToolClasses| policy.is_none_or(|p| p.visible(n, c)),
                operator: policy.is_none(),
            };
            Some(
                crate::inventory::visible_nodes(shared, &seen, Some(&selector))
                    .into_iter()
                    .map(|n| n.id)
                    .collect::<Vec<_>>(),
            )
        }
        None => None,
    };
    let offset = params.offset;
    let (jobs, total) = blocking(&shared.store, move |s| {
        s.jobs_on(token.as_deref(), nodes.as_deref(), limit, offset)
    })
    .await?;
    Ok(JobsListResult { jobs, total })
}
