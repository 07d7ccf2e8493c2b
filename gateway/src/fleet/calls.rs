//! Routing a caller's calls: one tool call, a fan-out over many nodes, and the jobs a
//! call becomes (started as one, or kept as one when its caller goes away).
//!
//! Every door's call comes here with the [`Caller`] it was built as
//! (`router/caller.rs`); the router and the fan-out do the rest.

use crate::agent_handle::AgentHandle;
use crate::fanout::{FanoutError, Ran};
use crate::registry::CallOutcome;
use crate::router::Caller;
use gsv_protocol::fanout::{NodeOutcome, ToolsFanoutParams};
use gsv_protocol::job::AsyncCallResult;
use gsv_protocol::method::ToolsCallParams;
use gsv_protocol::ErrorShape;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl super::Fleet {
    /// Routes one tool call to its node (or to the replica that holds it) and waits
    /// for its outcome, approvals included.
    pub async fn call(
        &self,
        caller: &Caller<'_>,
        params: ToolsCallParams,
        cancel: CancellationToken,
    ) -> CallOutcome {
        crate::router::call(&self.shared, caller, params, cancel).await
    }

    /// Marks a call or fan-out in flight until the token drops: a draining gateway
    /// waits for it.
    pub fn count_in_flight(&self) -> tokio_util::task::task_tracker::TaskTrackerToken {
        self.shared.in_flight.token()
    }

    /// Runs a fan-out (`tools.fanout`) as `caller`: `started` hears the job id once it
    /// is recorded, `report` each node's outcome as it comes.
    pub async fn fanout(
        &self,
        caller: &Caller<'_>,
        params: ToolsFanoutParams,
        cancel: CancellationToken,
        started: impl FnOnce(&str),
        report: impl Fn(&NodeOutcome),
    ) -> Result<Ran, FanoutError> {
        crate::fanout::run(&self.shared, caller, params, cancel, started, report).await
    }

    /// Starts `agent`'s call as a job (`async: true`): answered with the job's id, the
    /// outcome kept in the job.
    pub async fn start_job(
        &self,
        agent: Arc<AgentHandle>,
        params: ToolsCallParams,
    ) -> Result<AsyncCallResult, ErrorShape> {
        crate::jobs::run_async(self.shared.clone(), agent, params).await
    }

    /// Keeps `agent`'s call to `name`, whose connection closed, as a job; its id, or
    /// `None` when no job could be kept.
    pub async fn keep_as_job(
        &self,
        agent: &AgentHandle,
        name: &str,
        cancel: &CancellationToken,
    ) -> Option<String> {
        crate::jobs::detach(&self.shared, agent, name, cancel).await
    }

    /// Records the outcome of job `id`, which a call became.
    pub async fn settle_job(&self, id: &str, outcome: CallOutcome) {
        crate::jobs::settle(&self.shared, id, outcome).await
    }

    /// What the node resolves the paths of call `name` with `args` to, as an approval
    /// question shows it ([`crate::router::plan_for`]); `None` when there is nothing to
    /// show or the node is not held here.
    pub async fn approval_plan(&self, name: &str, args: &serde_json::Value) -> Option<String> {
        crate::router::plan_for(&self.shared, name, args).await
    }

    /// How long an approval request stays open.
    pub fn approval_ttl(&self) -> std::time::Duration {
        self.shared.approvals.ttl
    }
}
