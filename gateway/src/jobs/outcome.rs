//! How a job's outcome is kept: stored once it ends (within the store's bounds), and
//! the running job forgotten. The call's delivery after a reconnect settles jobs here
//! too ([`crate::reattach`]).

use crate::registry::CallOutcome;
use crate::state::Shared;
use crate::store::Store;
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape};
use std::sync::Arc;

/// Most bytes of results and errors one token's finished jobs keep: its oldest go
/// first, so no token fills the gateway's disk (10 000 jobs × 4 MiB would be 40 GB).
pub const MAX_STORED_BYTES_PER_TOKEN: usize = 256 * 1024 * 1024;
/// Largest result a job keeps, in bytes.
pub const MAX_STORED_RESULT: usize = 4 * 1024 * 1024;

/// Stores how the running job `id` ended and forgets its cancel handle.
pub async fn settle(shared: &Shared, id: &str, outcome: CallOutcome) {
    finish(&shared.store, id, outcome).await;
    shared.running_jobs.remove(id);
    shared.changes.send(crate::changes::Topic::Jobs);
}

/// Stores how the job `id` ended (a result over [`MAX_STORED_RESULT`] fails it
/// `too_large`).
pub async fn finish(store: &Arc<Store>, id: &str, outcome: CallOutcome) {
    let outcome = match outcome {
        Ok(raw) if raw.get().len() > MAX_STORED_RESULT => Err(ErrorShape::new(
            ErrorCode::TooLarge,
            format!(
                "the result is {} bytes, over the {MAX_STORED_RESULT} bytes a job keeps",
                raw.get().len()
            ),
        )
        .with(ErrorDetails::TooLarge {
            bytes: raw.get().len(),
            limit: MAX_STORED_RESULT,
        })),
        other => other,
    };
    let (job, at) = (id.to_owned(), gsv_protocol::now_ms());
    let stored = store
        .blocking(move |s| {
            s.finish_job_capped(&job, at, outcome.as_deref(), MAX_STORED_BYTES_PER_TOKEN)
        })
        .await;
    match stored {
        Ok(Ok(())) => tracing::info!(job = id, "job finished"),
        Ok(Err(e)) => tracing::error!(job = id, error = %e, "could not store a job's outcome"),
        Err(e) => tracing::error!(job = id, error = %e, "could not store a job's outcome"),
    }
}
