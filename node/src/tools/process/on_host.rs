//! Process on a remote host: the jobs Bash left running there ([`crate::remote::jobs`]),
//! with the local tool's actions and result shapes. Differences, because a remote
//! job is a directory of files and not a process of this node: output is one
//! combined stream (`stream: "stdout"`/`"stderr"` is refused), there are no pty
//! sessions (`send-keys` is refused), and `poll` with `waitMs` looks again every
//! 200 ms instead of being woken by new output.

use crate::remote::jobs::{Job, Jobs};
use crate::remote::RemoteHost;
use crate::sessions::buffer::page_lines;
use crate::sessions::group::KILL_GRACE;
use crate::sessions::{LogPage, LogView, SessionError, Status};
use crate::tool::ToolContext;
use crate::tools::process::{list_of, log_result, poll_result, wrote, Action, Request};
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How often `poll` with `waitMs` and `kill` look at the job again.
const LOOK_AGAIN: Duration = Duration::from_millis(200);
/// How long `kill` waits beyond the grace period for the job to end.
const KILL_SETTLE: Duration = Duration::from_secs(2);

/// The far-host body of [`super::Process`] (made with `Process::on`): Process on the host of an
/// SSH- or container-backed node. Not a tool of its own: the tool dispatches here.
pub(crate) struct OnHost {
    jobs: Jobs,
}

impl OnHost {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        OnHost {
            jobs: Jobs::new(host),
        }
    }

    /// The job `id` if the caller may see it; another token's job is answered
    /// exactly like one that does not exist.
    async fn visible(&self, id: &str, ctx: &ToolContext, output: bool) -> Result<Job, String> {
        let not_found = || SessionError::NotFound(id.to_owned()).to_string();
        match self.jobs.get(id, output).await {
            Ok(Some(job)) if ctx.may_use_session(job.owner.as_deref()) => Ok(job),
            Ok(_) => Err(not_found()),
            Err(crate::remote::RemoteError::BadTarget(_)) => Err(not_found()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The job `id`, visible to the caller and still running (input and kills go
    /// only to those).
    async fn running(&self, id: &str, ctx: &ToolContext) -> Result<Job, String> {
        let job = self.visible(id, ctx, false).await?;
        if job.status() != Status::Running {
            return Err(SessionError::Exited {
                id: id.to_owned(),
                status: job.status().as_str().to_owned(),
            }
            .to_string());
        }
        Ok(job)
    }

    async fn run(&self, request: Request, ctx: &ToolContext) -> Result<ToolResult, String> {
        if request.action == Action::List {
            let jobs = self.jobs.list().await.map_err(|e| e.to_string())?;
            let snapshots = jobs
                .iter()
                .filter(|j| ctx.may_use_session(j.owner.as_deref()))
                .map(Job::snapshot)
                .collect();
            return Ok(list_of(snapshots));
        }
        let id = request.session_id.clone().unwrap_or_default();
        match request.action {
            Action::List => Err("unreachable".into()),
            Action::Poll => {
                let mut job = self.visible(&id, ctx, false).await?;
                if request.wait_ms > 0 && job.status() == Status::Running {
                    let wait = Duration::from_millis(request.wait_ms)
                        .min(ctx.remaining().saturating_sub(ctx.remaining() / 10));
                    let until = tokio::time::Instant::now() + wait;
                    let size = job.size;
                    while tokio::time::Instant::now() < until && !ctx.cancel.is_cancelled() {
                        tokio::time::sleep(LOOK_AGAIN.min(until - tokio::time::Instant::now()))
                            .await;
                        job = self.visible(&id, ctx, false).await?;
                        if job.size != size || job.status() != Status::Running {
                            break;
                        }
                    }
                }
                let job = self.visible(&id, ctx, true).await?;
                Ok(poll_result(&job.snapshot(), None))
            }
            Action::Log => {
                if request.raw {
                    return Err(SessionError::NotPty(id).to_string());
                }
                if request.stream != LogView::Combined {
                    return Err(format!(
                        "session {id} runs on another host, where its output is kept as one stream: use stream \"combined\""
                    ));
                }
                let job = self.visible(&id, ctx, true).await?;
                let s = job.snapshot();
                let page = page_lines(
                    job.output.as_deref().unwrap_or(""),
                    request.offset,
                    request.limit,
                );
                let log = LogPage {
                    page,
                    truncated: s.truncated,
                };
                Ok(log_result(&s, &request, LogView::Combined, log))
            }
            Action::Write | Action::Submit => {
                self.running(&id, ctx).await?;
                let mut data = request.data.clone().into_bytes();
                if request.action == Action::Submit {
                    data.push(b'\n');
                }
                let bytes = self
                    .jobs
                    .write(&id, &data)
                    .await
                    .map_err(|e| e.to_string())?;
                if bytes == 0 && !data.is_empty() {
                    return Err(SessionError::StdinClosed(id).to_string());
                }
                Ok(wrote(
                    &id,
                    Status::Running,
                    &request.action_name,
                    bytes,
                    None,
                ))
            }
            Action::SendKeys => Err(SessionError::NotPty(id).to_string()),
            Action::Kill => {
                self.running(&id, ctx).await?;
                self.jobs.kill(&id).await.map_err(|e| e.to_string())?;
                let until =
                    tokio::time::Instant::now() + (KILL_GRACE + KILL_SETTLE).min(ctx.remaining());
                loop {
                    let job = self.visible(&id, ctx, true).await?;
                    let done = job.status() != Status::Running;
                    if done || tokio::time::Instant::now() >= until || ctx.cancel.is_cancelled() {
                        return Ok(poll_result(&job.snapshot(), Some(true)));
                    }
                    tokio::time::sleep(LOOK_AGAIN).await;
                }
            }
            Action::Remove => {
                let job = self.visible(&id, ctx, false).await?;
                if job.status() == Status::Running {
                    return Err(SessionError::StillRunning(id).to_string());
                }
                self.jobs.remove(&id).await.map_err(|e| e.to_string())?;
                Ok(crate::tools::output::with_text(
                    format!("Session {id} removed."),
                    &crate::tools::process_output::RemoveOutput {
                        session_id: &id,
                        removed: true,
                    },
                ))
            }
        }
    }
}

impl OnHost {
    pub(crate) async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let request = match Request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Process: {message}")),
        };
        match self.run(request, &ctx).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Process: {e}")),
        }
    }
}
