//! Announcing the end of the jobs a node runs on a remote host (`process.exited`,
//! as a local node's session manager does), and ending them when the node stops.
//!
//! The host does not tell anyone when a job ends: the watcher looks at the jobs
//! once a second while any it knows of is running (after each start, and the ones
//! a restarted node finds there), and sends the event when one is no longer
//! running. With nothing running it waits for the next start.

use super::host::RemoteHost;
use super::jobs::{Job, Jobs};
use crate::events::EventSender;
use crate::sessions::{exited_payload, Status};
use gsv_protocol::EventName;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// How often running jobs are looked at.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How long a stopping node waits for the jobs it ends.
const END_WAIT: Duration = Duration::from_secs(6);

/// Watches the host's jobs until `stop` is cancelled.
pub async fn watch(host: Arc<RemoteHost>, events: EventSender, stop: CancellationToken) {
    let jobs = Jobs::new(Arc::clone(&host));
    let mut running: HashSet<String> = HashSet::new();
    let mut first = true;
    loop {
        if !first && running.is_empty() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = host.job_started().notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(30)) => {}
            }
        } else {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(if first { Duration::ZERO } else { LOOK_EVERY }) => {}
            }
        }
        first = false;
        let listed = match jobs.list().await {
            Ok(l) => l,
            Err(e) => {
                debug!(error = ?e, "could not look at the host's jobs");
                continue;
            }
        };
        for job in &listed {
            let ended = job.status() != Status::Running;
            if ended && running.remove(&job.id) {
                announce(&events, job).await;
            } else if !ended {
                running.insert(job.id.clone());
            }
        }
        // A job that vanished (removed on the host) is no longer watched.
        running.retain(|id| listed.iter().any(|j| &j.id == id));
    }
}

async fn announce(events: &EventSender, job: &Job) {
    let s = job.snapshot();
    info!(session_id = %s.session_id, status = s.status.as_str(), "remote job finished");
    if let Err(e) = events
        .send(EventName::ProcessExited, &exited_payload(&s))
        .await
    {
        warn!(error = %e, "could not queue the process.exited event");
    }
}

/// Ends every running job on the host (SIGTERM to its group, SIGKILL after the grace
/// period) and waits, a few seconds at most, until none is left: a node that stops
/// takes its sessions with it unless `--keep-sessions-on-exit`.
pub async fn end_all(host: &Arc<RemoteHost>) {
    let jobs = Jobs::new(Arc::clone(host));
    let Ok(listed) = jobs.list().await else {
        return;
    };
    let running: Vec<&Job> = listed
        .iter()
        .filter(|j| j.status() == Status::Running)
        .collect();
    if running.is_empty() {
        return;
    }
    for job in &running {
        if let Err(e) = jobs.kill(&job.id).await {
            warn!(session_id = %job.id, error = ?e, "could not end a job on the host");
        }
    }
    let until = tokio::time::Instant::now() + END_WAIT;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        match jobs.list().await {
            Ok(now) if now.iter().all(|j| j.status() != Status::Running) => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    info!(jobs = running.len(), "ended the node's jobs on the host");
}
