//! The Bash tool: run a shell command on the node, synchronously, in the background,
//! or synchronously for a while and then in the background (`yieldMs`).
//!
//! Every command becomes a session of the node's [`SessionManager`]; background ones
//! are then managed with the Process tool. Each command is the leader of its own
//! process group, and a timeout, a `kill` or a cancelled call ends the whole group
//! (SIGTERM, then SIGKILL after
//! [`KILL_GRACE`](crate::sessions::group::KILL_GRACE)), so `sleep 1000 &` inside a command
//! does not outlive it. A synchronous call holds a guard whose `Drop` kills the group:
//! when the runner drops the call's future (cancel, deadline) the command dies with it.
//! Background sessions are not tied to the call and have no timeout unless one is
//! given explicitly.
//!
//! # How PATH is resolved
//!
//! Commands run as `$SHELL -c COMMAND` (`/bin/sh` if `$SHELL` is unset or not an
//! executable), *not* as a login shell: login profiles can take hundreds of
//! milliseconds and would be paid on every call. Instead the node captures the user's
//! login environment once — at start, by running `$SHELL -lc 'env -0'` with stdin
//! closed and a 5 s limit — and runs every command with it. The `PATH` of that
//! environment is the login shell's `PATH` followed by every entry of the node
//! process's own `PATH` that the login `PATH` lacks, so tools the profile adds
//! (Homebrew, nvm, `~/.local/bin`, ...) are found, and a profile that resets `PATH`
//! cannot hide a binary the node itself was started with. If the capture fails (no
//! shell, a profile that hangs or prints nothing), commands get the node's own
//! environment. The binary probe (`hostBinStatus`) searches the same `PATH`, so what it
//! reports is what a command can run. Changes to the profile are picked up when the
//! node restarts.
//!
//! # Parameters and results
//!
//! `command` (required), `workdir` (relative to the node workspace), `timeout` (ms;
//! default 300000 for synchronous calls, none for background jobs unless given),
//! `background`, `yieldMs` (clamped to 10–120000), `pty`. A finished command returns
//! `{status, sessionId, exitCode, signal, timedOut, startedAt, endedAt, durationMs,
//! output, tail, truncated, workdir}`; a backgrounded one `{status: "running",
//! sessionId, pid, startedAt, tail, workdir}`. A command that ran and failed is a
//! normal result with `status: "failed"`, not a tool error.
//!
//! # Guards
//!
//! Before anything is spawned, [`Tool::check`] runs the node's [`ShellGuard`]: the
//! shell blocklist (always on; `denied`) and, with `--approve-shell`, the auto-approve
//! patterns (`approval_required` unless the call carries an approval). This holds for
//! every mode, `pty` included. `execute` applies the blocklist once more, so a Bash
//! tool used outside the dispatcher cannot run a blocklisted command either. Data later
//! written to a running command's stdin (Process `write` / `submit`) is not checked.
//! A command that runs because a pattern approved it (no operator's approval) gets
//! git's program-running settings pinned in its environment
//! ([`crate::guards::git_env`]).

pub mod on_host;

use crate::guards::{blocklist, git_env, ShellGuard};
use crate::remote::RemoteHost;
use crate::sessions::{
    describe_end, KillReason, Session, SessionManager, Snapshot, SpawnSpec, Status,
    MAX_OUTPUT_CHARS,
};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::follow::{follow, Mode, Outcome};
use crate::tools::output;
use crate::tools::Host;
use gsv_protocol::limits::MAX_CALL_TIMEOUT_MS;
use gsv_protocol::{Capability, ErrorShape, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tracing::debug;

/// Timeout of a synchronous command when none is given (5 minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Range `yieldMs` is clamped to.
pub const MIN_YIELD_MS: u64 = 10;
pub const MAX_YIELD_MS: u64 = 120_000;
/// The call deadline declared for Bash: the default timeout plus room to kill the
/// group and drain its output, so the default timeout ends in a result (`timedOut`)
/// rather than a protocol timeout.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = DEFAULT_TIMEOUT_MS + 10_000;
/// Room kept before the call's deadline to kill a synchronous command and answer.
pub(crate) const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// The Bash tool.
pub struct Bash {
    /// This machine's sessions (`None` for a far host, whose commands are jobs there).
    sessions: Option<Arc<SessionManager>>,
    guard: ShellGuard,
    /// The far host the commands run on, or `None` for this machine.
    host: Host,
    /// Jobs one token may have running at once on the far host
    /// (`--sessions-per-token`; the session manager's limits apply on this machine).
    per_token: usize,
}

impl Bash {
    /// A Bash tool with the blocklist alone.
    pub fn new(sessions: Arc<SessionManager>) -> Self {
        Bash::with_guard(sessions, ShellGuard::new())
    }

    /// A Bash tool with `guard` (e.g. with the node's `--approve-shell` patterns).
    pub fn with_guard(sessions: Arc<SessionManager>, guard: ShellGuard) -> Self {
        Bash {
            sessions: Some(sessions),
            guard,
            host: None,
            per_token: 0,
        }
    }

    /// Bash on the host of an SSH- or container-backed node ([`on_host`]), under
    /// `guard`, with at most `per_token` jobs of one token running there at once.
    pub fn on(host: Arc<RemoteHost>, guard: ShellGuard, per_token: usize) -> Self {
        Bash {
            sessions: None,
            guard,
            host: Some(host),
            per_token,
        }
    }
}

#[async_trait::async_trait]
impl Tool for Bash {
    fn def(&self) -> ToolDef {
        def()
    }

    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), ErrorShape> {
        check_command(&self.guard, args, ctx)?;
        crate::tools::host_ready(&self.host).await
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        if let Some(host) = &self.host {
            return on_host::OnHost::new(Arc::clone(host), &self.guard, self.per_token)
                .execute(args, ctx)
                .await;
        }
        let Some(sessions) = &self.sessions else {
            return ToolResult::error("Bash: this node has no sessions");
        };
        let request = match BashRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Bash: {message}")),
        };
        if let Err(blocked) = blocklist::check(&request.command) {
            return ToolResult::error(format!("Bash: {blocked}"));
        }
        let workdir = match &request.workdir {
            Some(dir) => ctx.resolve_path(dir),
            None => ctx.workspace.clone(),
        };
        let timeout = match request.mode {
            Mode::Sync => Some(sync_budget(
                Duration::from_millis(request.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
                ctx.remaining(),
            )),
            Mode::Background | Mode::Yield(_) => request.timeout_ms.map(Duration::from_millis),
        };
        // A command no operator looked at runs with git's program-running settings
        // pinned (see `guards::git_env`).
        let env_overrides = if self.guard.auto_approves(ctx.approval.as_deref()) {
            git_env::auto_approved_overrides()
        } else {
            Vec::new()
        };
        let spec = SpawnSpec {
            command: request.command,
            workdir,
            pty: request.pty,
            background: request.mode == Mode::Background,
            stdin: request.mode != Mode::Sync,
            timeout,
            owner: ctx.owner().map(str::to_owned),
            env_overrides,
            argv: None,
            call_id: Some(ctx.call_id.clone()),
            yields: matches!(request.mode, Mode::Yield(_)),
        };
        let session = match sessions.spawn(spec).await {
            Ok(session) => session,
            Err(e) => return ToolResult::error(format!("Bash: {e}")),
        };
        debug!(call_id = %ctx.call_id, session_id = %session.id(), mode = ?request.mode, "command started");
        match follow(sessions, &session, &ctx, request.mode).await {
            Outcome::Finished => finished_result(&session),
            Outcome::Running(snapshot) => running_result(&snapshot),
            Outcome::Cancelled => cancelled(),
        }
    }
}

/// Bash's declaration (the same on every kind of node).
pub(crate) fn def() -> ToolDef {
    ToolDef {
        name: "Bash".to_owned(),
        description: "Run a shell command ($SHELL -c): its output (last 200,000 \
                      characters) and exit code. `background`/`yieldMs` leave it running \
                      for the Process tool. Some commands need approval."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "minLength": 1
                },
                "workdir": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Default: the workspace."
                },
                "timeout": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_CALL_TIMEOUT_MS,
                    "description": "Kill after this many ms (default 300000)."
                },
                "background": {
                    "type": "boolean",
                    "description": "Return a sessionId at once."
                },
                "yieldMs": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Wait this long, then go on in the background."
                },
                "pty": {
                    "type": "boolean",
                    "description": "Run on a terminal."
                }
            },
            "required": ["command"],
            "additionalProperties": false
        }),
        capability: Capability::ShellExec.as_str().to_owned(),
        annotations: ToolAnnotations::hints("Run shell command", false, true, false, true),
        default_timeout_ms: Some(DEFAULT_CALL_TIMEOUT_MS),
        requires_bins: Vec::new(),
        requires_approval: false,
    }
}

/// Bash's guard, before anything runs: the shell blocklist and `--approve-shell`
/// (see the module doc), on any kind of node.
pub(crate) fn check_command(
    guard: &ShellGuard,
    args: &Value,
    ctx: &ToolContext,
) -> Result<(), ErrorShape> {
    // Malformed arguments are left to `execute`, which reports them.
    let Some(command) = args.get("command").and_then(Value::as_str) else {
        return Ok(());
    };
    guard.check(command, ctx.approval.as_deref())?;
    // A pattern approves a command, not a session to type into later: on a
    // terminal or in the background a pager, shell or REPL would take input that
    // no pattern saw. Those runs always need an operator in approve-shell mode.
    let flag = |k: &str| args.get(k).and_then(Value::as_bool).unwrap_or(false);
    let interactive = flag("pty") || flag("background");
    if interactive && guard.auto_approves(ctx.approval.as_deref()) {
        let reason = format!(
            "the node runs in approve-shell mode and {:?} asks for a {} session: auto-approval never covers those",
            command.chars().take(300).collect::<String>(),
            if flag("pty") { "terminal (pty)" } else { "background" }
        );
        return Err(crate::guards::ask_operator("command", &reason, command));
    }
    Ok(())
}

/// How often a command the call waits for reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// The most lines and characters of output one progress message carries.
const PROGRESS_LINES: usize = 10;
const PROGRESS_CHARS: usize = 1_000;

/// Waits for the command to finish, sending the gateway a `call.progress` event with
/// the tail of its output every [`PROGRESS_EVERY`] (`progress`: seconds elapsed), so
/// a caller that asked for progress sees the command work. Only while connected:
/// progress queued for a later connection would be stale, and would crowd out the
/// events that matter (`process.exited`).
pub(crate) async fn wait_reporting(session: &Session, ctx: &ToolContext) {
    let finished = session.wait_finished();
    tokio::pin!(finished);
    let start = tokio::time::Instant::now() + PROGRESS_EVERY;
    let mut tick = tokio::time::interval_at(start, PROGRESS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut finished => return,
            _ = tick.tick() => report_progress(session, ctx),
        }
    }
}

fn report_progress(session: &Session, ctx: &ToolContext) {
    if !ctx.events.is_connected() {
        return;
    }
    let s = session.snapshot();
    let elapsed = s.duration_ms as f64 / 1000.0;
    let tail = progress_tail(&s.tail);
    let message = if tail.trim().is_empty() {
        format!("running for {elapsed:.0} s, no output yet")
    } else {
        tail.to_owned()
    };
    let event = gsv_protocol::event::CallProgress {
        call_id: ctx.call_id.clone(),
        message: Some(message),
        progress: Some(elapsed),
        total: None,
    };
    if let Err(e) = ctx
        .events
        .queue(gsv_protocol::EventName::CallProgress, &event)
    {
        debug!(error = %e, "progress event not queued");
    }
}

/// The last [`PROGRESS_LINES`] lines of `output`, at most [`PROGRESS_CHARS`]
/// characters, without a trailing newline.
fn progress_tail(output: &str) -> &str {
    let output = output.trim_end_matches('\n');
    let start = output
        .rmatch_indices('\n')
        .nth(PROGRESS_LINES - 1)
        .map(|(i, _)| i + 1)
        .unwrap_or(0);
    let tail = &output[start..];
    let chars = tail.chars().count();
    if chars <= PROGRESS_CHARS {
        return tail;
    }
    let at = tail
        .char_indices()
        .nth(chars - PROGRESS_CHARS)
        .map(|(i, _)| i)
        .unwrap_or(0);
    &tail[at..]
}

pub(crate) struct BashRequest {
    pub(crate) command: String,
    pub(crate) workdir: Option<String>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) mode: Mode,
    pub(crate) pty: bool,
}

impl BashRequest {
    pub(crate) fn parse(args: &Value) -> Result<BashRequest, String> {
        let args = Args::new(
            args,
            &[
                "command",
                "workdir",
                "timeout",
                "background",
                "yieldMs",
                "pty",
            ],
        )?;
        let command = args.required_str("command")?;
        if command.trim().is_empty() {
            return Err("\"command\" must not be empty".to_owned());
        }
        if command.contains('\0') {
            return Err("\"command\" must not contain NUL characters".to_owned());
        }
        let workdir = match args.str("workdir")? {
            Some("") => return Err("\"workdir\" must not be empty".to_owned()),
            Some(dir) if dir.contains('\0') => {
                return Err("\"workdir\" must not contain NUL characters".to_owned())
            }
            other => other.map(str::to_owned),
        };
        let timeout_ms = args.u64_in("timeout", 1, MAX_CALL_TIMEOUT_MS)?;
        let background = args.bool("background")?.unwrap_or(false);
        let yield_ms = args
            .u64_in("yieldMs", 0, u64::MAX)?
            .map(|ms| ms.clamp(MIN_YIELD_MS, MAX_YIELD_MS));
        let mode = match (background, yield_ms) {
            (true, _) => Mode::Background,
            (false, Some(ms)) => Mode::Yield(ms),
            (false, None) => Mode::Sync,
        };
        Ok(BashRequest {
            command: command.to_owned(),
            workdir,
            timeout_ms,
            mode,
            pty: args.bool("pty")?.unwrap_or(false),
        })
    }
}

/// The timeout of a synchronous command: `timeout`, but never so long that the call's
/// deadline passes before the command has been killed and the result sent.
pub(crate) fn sync_budget(timeout: Duration, remaining: Duration) -> Duration {
    let margin = DEADLINE_MARGIN.min(remaining / 4);
    timeout.min(remaining.saturating_sub(margin))
}

/// Kills the session's process group when dropped armed: a synchronous call whose
/// future is dropped (cancel, deadline) takes its command with it.
pub(crate) struct KillOnDrop(pub(crate) Option<Arc<Session>>);

impl KillOnDrop {
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(session) = self.0.take() {
            session.kill(KillReason::CallEnded);
        }
    }
}

fn cancelled() -> ToolResult {
    ToolResult::error("Bash: the call was cancelled; the command's process group was killed")
}

/// The result of a finished command.
pub(crate) fn finished_result(session: &Session) -> ToolResult {
    finished_from(&session.snapshot(), session.output())
}

/// The result of the finished command `s` whose retained output is `output`.
pub(crate) fn finished_from(s: &Snapshot, output: String) -> ToolResult {
    let mut text = String::new();
    if s.truncated {
        text.push_str(&format!(
            "[earlier output dropped: showing the last {MAX_OUTPUT_CHARS} characters]\n"
        ));
    }
    text.push_str(&output);
    if s.status != Status::Completed {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if s.timed_out {
            text.push_str(&format!(
                "[timed out after {} ms: {}]",
                s.duration_ms,
                describe_end(s)
            ));
        } else {
            text.push_str(&format!("[{}]", describe_end(s)));
        }
    } else if text.is_empty() {
        text.push_str("(no output)");
    }
    output::with_text(text, &FinishedOutput::new(s, output))
}

/// Bash's structured content for a command that finished within the call: `{status,
/// sessionId, exitCode, signal, timedOut, startedAt, endedAt, durationMs, output,
/// tail, truncated, workdir}` (`exitCode`, `signal` and `endedAt` are `null` when
/// unknown).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishedOutput<'a> {
    /// `completed` (exit code 0) or `failed`.
    pub status: Status,
    pub session_id: &'a str,
    pub exit_code: Option<i32>,
    /// The signal that killed it (`SIGTERM`, ...).
    pub signal: Option<&'a str>,
    pub timed_out: bool,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub duration_ms: u64,
    /// All the output retained (its last [`MAX_OUTPUT_CHARS`] characters).
    pub output: String,
    /// The last characters of output.
    pub tail: &'a str,
    /// Whether earlier output was dropped.
    pub truncated: bool,
    pub workdir: &'a str,
}

impl<'a> FinishedOutput<'a> {
    /// The output of the finished session `s`, whose retained output is `output`.
    pub fn new(s: &'a Snapshot, output: String) -> Self {
        FinishedOutput {
            status: s.status,
            session_id: &s.session_id,
            exit_code: s.exit_code,
            signal: s.signal.as_deref(),
            timed_out: s.timed_out,
            started_at: s.started_at,
            ended_at: s.ended_at,
            duration_ms: s.duration_ms,
            output,
            tail: &s.tail,
            truncated: s.truncated,
            workdir: &s.workdir,
        }
    }
}

/// Bash's structured content for a command that goes on in the background: `{status:
/// "running", sessionId, pid, startedAt, tail, workdir}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningOutput<'a> {
    /// Always `running`: the Process tool takes it from here.
    pub status: Status,
    pub session_id: &'a str,
    pub pid: u32,
    pub started_at: u64,
    /// The output so far (its last characters).
    pub tail: &'a str,
    pub workdir: &'a str,
}

/// The result of a command that goes on in the background.
pub(crate) fn running_result(s: &Snapshot) -> ToolResult {
    let mut text = format!(
        "Running in the background: sessionId {} (pid {}). Use the Process tool with this \
         sessionId to poll, read the log, write to stdin or kill it.",
        s.session_id, s.pid
    );
    if !s.tail.is_empty() {
        text.push_str("\nOutput so far (tail):\n");
        text.push_str(&s.tail);
    }
    output::with_text(
        text,
        &RunningOutput {
            status: Status::Running,
            session_id: &s.session_id,
            pid: s.pid,
            started_at: s.started_at,
            tail: &s.tail,
            workdir: &s.workdir,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<BashRequest, String> {
        BashRequest::parse(&v)
    }

    #[test]
    fn modes_and_clamping() {
        let r = parse(json!({"command": "true"})).unwrap();
        assert_eq!(r.mode, Mode::Sync);
        assert_eq!(r.timeout_ms, None);
        let r = parse(json!({"command": "true", "yieldMs": 1})).unwrap();
        assert_eq!(r.mode, Mode::Yield(MIN_YIELD_MS));
        let r = parse(json!({"command": "true", "yieldMs": 10_000_000})).unwrap();
        assert_eq!(r.mode, Mode::Yield(MAX_YIELD_MS));
        let r = parse(json!({"command": "true", "yieldMs": 50, "background": true})).unwrap();
        assert_eq!(r.mode, Mode::Background);
        let r = parse(json!({"command": "x", "timeout": 5, "pty": true})).unwrap();
        assert_eq!((r.timeout_ms, r.pty), (Some(5), true));
    }

    #[test]
    fn bad_arguments() {
        for bad in [
            json!({}),
            json!({"command": ""}),
            json!({"command": "  \n"}),
            json!({"command": 1}),
            json!({"command": "a\u{0}b"}),
            json!({"command": "a", "timeout": 0}),
            json!({"command": "a", "timeout": -5}),
            json!({"command": "a", "yieldMs": "5"}),
            json!({"command": "a", "workdir": ""}),
            json!({"command": "a", "background": "yes"}),
            json!({"command": "a", "shell": "zsh"}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            session_id: "s-1".to_owned(),
            status: Status::Failed,
            pid: 4242,
            command: "make test".to_owned(),
            workdir: "/ws".to_owned(),
            pty: false,
            background: false,
            started_at: 1_700_000_000_000,
            ended_at: Some(1_700_000_001_500),
            duration_ms: 1500,
            exit_code: None,
            signal: Some("SIGTERM".to_owned()),
            timed_out: true,
            tail: "tail\n".to_owned(),
            truncated: true,
            total_chars: 99,
            owner: Some("tok-1".to_owned()),
        }
    }

    #[test]
    fn structured_output() {
        assert_eq!(
            serde_json::to_value(FinishedOutput::new(&snapshot(), "all\ntail\n".to_owned()))
                .unwrap(),
            json!({
                "status": "failed",
                "sessionId": "s-1",
                "exitCode": null,
                "signal": "SIGTERM",
                "timedOut": true,
                "startedAt": 1_700_000_000_000_u64,
                "endedAt": 1_700_000_001_500_u64,
                "durationMs": 1500,
                "output": "all\ntail\n",
                "tail": "tail\n",
                "truncated": true,
                "workdir": "/ws",
            })
        );
        let done = Snapshot {
            status: Status::Completed,
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            truncated: false,
            ..snapshot()
        };
        assert_eq!(
            serde_json::to_value(FinishedOutput::new(&done, String::new())).unwrap(),
            json!({
                "status": "completed",
                "sessionId": "s-1",
                "exitCode": 0,
                "signal": null,
                "timedOut": false,
                "startedAt": 1_700_000_000_000_u64,
                "endedAt": 1_700_000_001_500_u64,
                "durationMs": 1500,
                "output": "",
                "tail": "tail\n",
                "truncated": false,
                "workdir": "/ws",
            })
        );
        let running = Snapshot {
            status: Status::Running,
            ended_at: None,
            ..snapshot()
        };
        let r = running_result(&running);
        assert!(!r.is_error);
        assert_eq!(
            r.structured_content,
            Some(json!({
                "status": "running",
                "sessionId": "s-1",
                "pid": 4242,
                "startedAt": 1_700_000_000_000_u64,
                "tail": "tail\n",
                "workdir": "/ws",
            }))
        );
    }

    #[test]
    fn progress_tails() {
        assert_eq!(progress_tail("a\nb\n"), "a\nb");
        let many: String = (0..30).map(|i| format!("line{i}\n")).collect();
        let t = progress_tail(&many);
        assert_eq!(t.lines().count(), PROGRESS_LINES);
        assert!(t.starts_with("line20") && t.ends_with("line29"), "{t}");
        let long = "é".repeat(PROGRESS_CHARS + 10);
        assert_eq!(progress_tail(&long).chars().count(), PROGRESS_CHARS);
        assert_eq!(progress_tail(""), "");
    }

    #[test]
    fn budgets() {
        let s = Duration::from_secs;
        assert_eq!(sync_budget(s(300), s(310)), s(300));
        assert_eq!(sync_budget(s(300), s(100)), s(95));
        assert_eq!(sync_budget(s(1), s(4)), s(1));
        assert_eq!(sync_budget(s(10), s(4)), s(3));
        assert_eq!(sync_budget(s(10), Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn declaration() {
        let def = Bash::new(SessionManager::new(crate::EventSender::detached())).def();
        assert_eq!(def.name, "Bash");
        assert_eq!(def.capability, "shell.exec");
        assert_eq!(def.input_schema["additionalProperties"], json!(false));
        assert_eq!(def.annotations.destructive_hint, Some(true));
        assert_eq!(def.annotations.open_world_hint, Some(true));
    }
}
