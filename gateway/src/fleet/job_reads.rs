//! Reading the job table (`jobs.list`, `jobs.get`) as a door's reader may: this
//! gateway's jobs, through [`crate::jobs`], which holds the store they live in.

use crate::jobs::{JobError, Reader};
use gsv_protocol::job::{Job, JobsListParams, JobsListResult};

impl super::Fleet {
    /// `jobs.list`: one page of the jobs `reader` may see, as `params` asks.
    pub async fn list_jobs(
        &self,
        reader: Reader<'_>,
        params: JobsListParams,
    ) -> Result<JobsListResult, JobError> {
        crate::jobs::list(&self.shared, reader, params).await
    }

    /// `jobs.get`: job `id` with its result, if `reader` may see it.
    pub async fn show_job(&self, reader: Reader<'_>, id: &str) -> Result<Job, JobError> {
        crate::jobs::get(&self.shared, reader, id).await
    }
}
