//! One tool run on every node a selector picks (`tools.fanout`, MCP's `fleet_run`),
//! for a door that reports each node as it finishes.

use crate::fanout::{FanoutError, Ran};
use crate::policy::Policy;
use crate::router::Caller;
use gsv_protocol::fanout::{NodeOutcome, ToolsFanoutParams};
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;

impl super::Fleet {
    /// Runs the fan-out `params` for `caller` ([`crate::fanout::run`]): `started` is
    /// told the job's id, `report` each node's outcome as it finishes.
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

    /// How many nodes a fan-out with selector `select` picks for `policy` and
    /// `token_id` (0 for a bad selector).
    pub async fn count_picked(&self, policy: &Policy, token_id: &str, select: &str) -> usize {
        crate::fanout::count_picked(&self.shared, policy, token_id, select).await
    }

    /// Counts one piece of work in flight while the token lives: a stopping gateway
    /// waits for it (within its drain period).
    pub fn track_in_flight(&self) -> TaskTrackerToken {
        self.shared.in_flight.token()
    }
}
