//! The jobs a door lists and reads (`jobs.list`, `jobs.get`, `GET /v1/jobs`): the
//! store's record of them, as the reader may see it. Cancelling is
//! [`super::Fleet::cancel_job`], which reaches another replica's jobs too.

use crate::jobs::{JobError, Reader};
use gsv_protocol::job::{Job, JobsListParams, JobsListResult};

impl super::Fleet {
    /// One page of the jobs `reader` may see, newest first.
    pub async fn jobs(
        &self,
        reader: Reader<'_>,
        params: JobsListParams,
    ) -> Result<JobsListResult, JobError> {
        crate::jobs::list(&self.shared, reader, params).await
    }

    /// Job `id`, if `reader` may see it.
    pub async fn job(&self, reader: Reader<'_>, id: &str) -> Result<Job, JobError> {
        crate::jobs::get(&self.shared, reader, id).await
    }
}
