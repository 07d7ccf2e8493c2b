//! The kept outcomes of fan-outs and async calls read by a door (`jobs.list` and
//! `jobs.get`, MCP's `fleet_jobs` and `fleet_job`): one rule for who reads which job.

use crate::jobs::{JobError, Reader};
use gsv_protocol::job::{Job, JobsListParams, JobsListResult};

impl super::Fleet {
    /// A page of the jobs `reader` may see, newest first ([`crate::jobs::list`]).
    pub async fn jobs(
        &self,
        reader: Reader<'_>,
        params: JobsListParams,
    ) -> Result<JobsListResult, JobError> {
        crate::jobs::list(&self.shared, reader, params).await
    }

    /// Job `id` with its kept outcome, when `reader` may see it
    /// ([`crate::jobs::get`]); `not_found` otherwise.
    pub async fn job(&self, reader: Reader<'_>, id: &str) -> Result<Job, JobError> {
        crate::jobs::get(&self.shared, reader, id).await
    }
}
