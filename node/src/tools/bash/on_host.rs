//! Bash on a remote host, in its three modes.
//!
//! Waiting (the default): the command runs in a session of its own on the host
//! (`setsid` where the host has it) with its combined output in a file under the
//! node's private directory there; the shell that started it waits for it and sends
//! the output's last characters. A timeout, a cancelled call or a call whose future
//! is dropped kills the command's whole process group from another shell (SIGTERM,
//! then SIGKILL after [`KILL_GRACE`]), so nothing it started outlives the call.
//!
//! `background` and `yieldMs`: the command becomes a job on the host
//! ([`crate::remote::jobs`]), detached from every SSH session, managed with Process,
//! and counted against the same limits as a local node's sessions (the node's
//! total, and one token's share).

use crate::guards::{blocklist, git_env, ShellGuard};
use crate::remote::jobs::{kill_group, now_ms, Job, JobSpec, Jobs, StartError};
use crate::remote::program::KillOnDrop;
use crate::remote::quote::quote;
use crate::remote::{Lane, RemoteHost, MAX_REPLY};
use crate::sessions::group::{signal_name, KILL_GRACE};
use crate::sessions::{Limits, SessionError, Snapshot, Status, MAX_OUTPUT_CHARS, TAIL_CHARS};
use crate::tool::ToolContext;
use crate::tools::bash::{
    finished_from, running_result, sync_budget, BashRequest, DEADLINE_MARGIN, DEFAULT_TIMEOUT_MS,
};
use crate::tools::follow::Mode;
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tracing::debug;

/// The far-host body of [`super::Bash`] (made with `Bash::on`): Bash on the host of an
/// SSH- or container-backed node. Not a tool of its own: the tool dispatches here.
pub(crate) struct OnHost<'a> {
    host: Arc<RemoteHost>,
    jobs: Jobs,
    guard: &'a ShellGuard,
    /// Jobs one token may have running at once (`--sessions-per-token`).
    per_token: usize,
}

impl<'a> OnHost<'a> {
    pub fn new(host: Arc<RemoteHost>, guard: &'a ShellGuard, per_token: usize) -> Self {
        OnHost {
            jobs: Jobs::new(Arc::clone(&host)),
            host,
            guard,
            per_token,
        }
    }

    /// `background` and `yieldMs`: the command starts as a job on the host; a
    /// background call answers at once, a yielding one waits up to `yieldMs` for it
    /// to end (a job that ended by then is answered as finished and forgotten).
    async fn detached(
        &self,
        request: &BashRequest,
        ctx: &ToolContext,
        id: &str,
        workdir: &str,
        exports: &str,
    ) -> ToolResult {
        if let Err(refused) = self.room_for(ctx).await {
            return refused;
        }
        let spec = JobSpec {
            id,
            command: &request.command,
            workdir,
            owner: ctx.owner(),
            timeout: request.timeout_ms.map(Duration::from_millis),
            exports,
        };
        match self.jobs.start(&spec).await {
            Ok(pid) => {
                debug!(call_id = %ctx.call_id, session_id = %id, pid, host = %self.host.shown(), "remote job started")
            }
            Err(StartError::Workdir { path, problem }) => {
                return ToolResult::error(format!(
                    "Bash: cannot use the working directory {path}: {problem}"
                ))
            }
            Err(e) => return ToolResult::error(format!("Bash: {e}")),
        }
        if let Mode::Yield(ms) = request.mode {
            let remaining = ctx.remaining();
            let budget = Duration::from_millis(ms)
                .min(remaining.saturating_sub(DEADLINE_MARGIN.min(remaining / 4)));
            let until = tokio::time::Instant::now() + budget;
            let mut pause = Duration::from_millis(20);
            loop {
                match self.jobs.get(id, false).await {
                    Ok(Some(job)) if job.status() != Status::Running => {
                        if let Ok(Some(job)) = self.jobs.get(id, true).await {
                            let s = job.snapshot();
                            let _ = self.jobs.remove(id).await;
                            return finished_from(&s, job.output.unwrap_or_default());
                        }
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => return ToolResult::error(format!("Bash: {e}")),
                }
                let now = tokio::time::Instant::now();
                if now >= until || ctx.cancel.is_cancelled() {
                    break;
                }
                tokio::time::sleep(pause.min(until - now)).await;
                pause = (pause * 2).min(Duration::from_millis(250));
            }
        }
        match self.jobs.get(id, true).await {
            Ok(Some(job)) => running_result(&job.snapshot()),
            Ok(None) => ToolResult::error(format!("Bash: the job {id} vanished on the host")),
            Err(e) => ToolResult::error(format!("Bash: {e}")),
        }
    }

    /// Refuses a new job when the host runs as many as a node may, or the caller's
    /// token has its share running (as a local node's session limits).
    async fn room_for(&self, ctx: &ToolContext) -> Result<(), ToolResult> {
        let limits = Limits::default();
        let jobs = self
            .jobs
            .list()
            .await
            .map_err(|e| ToolResult::error(format!("Bash: {e}")))?;
        let running: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.status() == Status::Running)
            .collect();
        if running.len() >= limits.max_running {
            let e = SessionError::TooManyRunning {
                limit: limits.max_running,
            };
            return Err(ToolResult::error(format!("Bash: {e}")));
        }
        let mine = running
            .iter()
            .filter(|j| j.owner.as_deref() == ctx.owner())
            .count();
        if ctx.owner().is_some() && mine >= self.per_token {
            let e = SessionError::TooManyRunningForToken {
                limit: self.per_token,
                total: limits.max_running,
            };
            return Err(ToolResult::error(format!("Bash: {e}")));
        }
        Ok(())
    }
}

impl OnHost<'_> {
    pub(crate) async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let request = match BashRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Bash: {message}")),
        };
        if let Err(blocked) = blocklist::check(&request.command) {
            return ToolResult::error(format!("Bash: {blocked}"));
        }
        if request.pty {
            return ToolResult::error(
                "Bash: `pty` is not available on a node that works on another host (SSH or container)",
            );
        }
        let workdir = match &request.workdir {
            Some(dir) => ctx.resolve_path(dir),
            None => ctx.workspace.clone(),
        };
        let workdir_shown = workdir.display().to_string();
        let (Some(cmd), Some(wd)) = (quote(&request.command), workdir.to_str().and_then(quote))
        else {
            return ToolResult::error("Bash: the command or workdir cannot be passed to the host");
        };
        let exports: String = if self.guard.auto_approves(ctx.approval.as_deref()) {
            git_env::auto_approved_overrides()
                .into_iter()
                .filter_map(|(k, v)| {
                    let k = k.to_str()?.to_owned();
                    Some(match v {
                        Some(v) => format!("{k}={}; export {k}; ", quote(v.to_str()?)?),
                        None => format!("unset {k}; "),
                    })
                })
                .collect()
        } else {
            String::new()
        };
        let id = uuid::Uuid::new_v4().to_string();
        if request.mode != Mode::Sync {
            return self
                .detached(&request, &ctx, &id, &workdir_shown, &exports)
                .await;
        }
        let cap = MAX_OUTPUT_CHARS * 4;
        let script = format!(
            r#"gsv_main() {{
  gsv_j="$GSV_D/jobs/{id}"
  mkdir "$gsv_j" || {{ gsv_text error "cannot create $gsv_j"; return 0; }}
  if ! cd {wd} 2>"$gsv_j/err"; then gsv_file cderr "$gsv_j/err"; rm -rf "$gsv_j"; cd /; return 0; fi
  if command -v setsid >/dev/null 2>&1; then gsv_s=setsid; else gsv_s=; fi
  ( umask "$gsv_umask"; {exports}exec $gsv_s "${{SHELL:-/bin/sh}}" -c {cmd} ) >"$gsv_j/out" 2>&1 </dev/null &
  gsv_pid=$!
  echo "$gsv_pid" >"$gsv_j/pid"
  wait "$gsv_pid"; gsv_rc=$?
  cd /
  gsv_text pid "$gsv_pid"
  gsv_text rc "$gsv_rc"
  gsv_tail out "$gsv_j/out" {cap}; gsv_text total "$gsv_n"
  rm -rf "$gsv_j"
}}
gsv_main"#
        );
        // With `--tmux`, the command is typed into the session's pane instead, one at
        // a time, and its output read from the copy the pane's script keeps.
        // The pane is one terminal: while it runs another call's command, this one
        // runs outside it as without `--tmux` (no token can hold every waiting
        // command of the node behind a long one of its own).
        let pane = match self.host.tmux_session() {
            Some(s) => self
                .host
                .pane()
                .try_lock()
                .ok()
                .map(|guard| (s.to_owned(), guard)),
            None => None,
        };
        let session = pane.as_ref().map(|(s, _)| s.clone());
        let script = match &session {
            None => script,
            Some(s) => {
                let (Some(pane), Some(text)) = (
                    crate::tools::term::on_host::pane_script(s),
                    quote(&format!("{exports}{}", request.command)),
                ) else {
                    return ToolResult::error("Bash: the command cannot be passed to the host");
                };
                format!(
                    r#"gsv_main() {{
  gsv_j="$GSV_D/jobs/{id}"
  mkdir "$gsv_j" || {{ gsv_text error "cannot create $gsv_j"; return 0; }}
  if ! cd {wd} 2>"$gsv_j/err"; then gsv_file cderr "$gsv_j/err"; rm -rf "$gsv_j"; cd /; return 0; fi
  cd /
  printf '%s' {text} > "$gsv_j/cmd"
  printf '%s' {wd} > "$gsv_j/wd"
{pane}
  gsv_tail out "$gsv_j/out" {cap}; gsv_text total "$gsv_n"
  rm -rf "$gsv_j"
}}
gsv_main"#
                )
            }
        };
        let timeout = sync_budget(
            Duration::from_millis(request.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
            ctx.remaining(),
        );
        let started = now_ms();
        let clock = std::time::Instant::now();
        debug!(call_id = %ctx.call_id, session_id = %id, host = %self.host.shown(), "remote command started");
        let kill = KillOnDrop::armed(Arc::clone(&self.host), id.clone());
        let run = self.host.run(Lane::Work, ctx.owner(), &script, MAX_REPLY);
        tokio::pin!(run);
        let mut timed_out = false;
        let reply = tokio::select! {
            r = &mut run => r,
            _ = tokio::time::sleep(timeout) => {
                timed_out = true;
                if let Err(e) = kill_group(&self.host, &id).await {
                    tracing::warn!(session_id = %id, error = ?e, "could not kill a command on the host");
                }
                // The waiting shell answers once the group is gone.
                match tokio::time::timeout(KILL_GRACE + Duration::from_secs(5), &mut run).await {
                    Ok(r) => r,
                    Err(_) => return ToolResult::error("Bash: the command was killed but the host did not answer"),
                }
            }
            _ = ctx.cancel.cancelled() => {
                // `kill` fires as the future is dropped.
                return ToolResult::error("Bash: the call was cancelled; the command's process group was killed");
            }
        };
        kill.disarm();
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("Bash: {e}")),
        };
        if let Some(err) = reply.text("cderr") {
            return ToolResult::error(format!(
                "Bash: cannot use the working directory {workdir_shown}: {}",
                err.trim()
            ));
        }
        if let Some(err) = reply.text("error") {
            return ToolResult::error(format!("Bash: {err}"));
        }
        let rc: i32 = reply.text("rc").and_then(|s| s.parse().ok()).unwrap_or(-1);
        let total: u64 = reply
            .text("total")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let bytes = reply.get("out").unwrap_or_default();
        let text = String::from_utf8_lossy(bytes);
        let chars = text.chars().count();
        let kept: String = text
            .chars()
            .skip(chars.saturating_sub(MAX_OUTPUT_CHARS))
            .collect();
        let truncated = chars > MAX_OUTPUT_CHARS || total > bytes.len() as u64;
        let tail: String = {
            let n = kept.chars().count();
            kept.chars().skip(n.saturating_sub(TAIL_CHARS)).collect()
        };
        // A shell reports death by signal N as 128+N; only a kill of ours is sure to
        // be one (a program may exit 130 by itself).
        let (exit_code, signal) = if timed_out && rc > 128 {
            (None, Some(signal_name(rc - 128)))
        } else {
            (Some(rc), None)
        };
        let duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        let snapshot = Snapshot {
            session_id: id,
            status: if rc == 0 && !timed_out {
                Status::Completed
            } else {
                Status::Failed
            },
            pid: reply.text("pid").and_then(|s| s.parse().ok()).unwrap_or(0),
            command: request.command,
            workdir: workdir_shown,
            pty: false,
            background: false,
            started_at: started,
            ended_at: Some(started + duration_ms),
            duration_ms,
            exit_code,
            signal,
            timed_out,
            tail,
            truncated,
            total_chars: chars as u64,
            owner: ctx.owner().map(str::to_owned),
        };
        finished_from(&snapshot, kept)
    }
}
