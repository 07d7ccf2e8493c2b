//! The exec tool: run a program with an argv, no shell, and get its stdout and stderr
//! apart, its exit code or signal, and timing.
//!
//! Bash hands a command line to a shell, so what runs can only be judged by regexes
//! over text; exec runs exactly `argv` (nothing is ever passed through a shell), which
//! lets a node allowlist calls word by word (`--approve-exec`,
//! [`crate::guards::approve_exec`]). Runs are sessions of the same
//! [`SessionManager`] as Bash: `background` and `yieldMs` work the same way, the
//! Process tool polls, reads and kills them, a timeout or kill ends the whole process
//! group.
//!
//! Parameters: `argv` (1 to [`MAX_ARGS`] strings; `argv[0]` not empty; no NUL; each
//! at most [`MAX_ARG_BYTES`] bytes and all together at most [`MAX_ARGV_BYTES`]),
//! `cwd` (resolved like a file tool's path: relative to the workspace, confined to it
//! with `--confine`), `env` (at most [`MAX_ENV`] variables set on top of the node's
//! login environment), `stdin` (at most [`MAX_STDIN_BYTES`] bytes written to the
//! program, then closed), `timeout`, `background`, `yieldMs` (as Bash).
//!
//! The node's shell blocklist applies to exec too, judged on the argv written as the
//! shell command line it amounts to (`rm -rf /`, `sh -c 'reboot'` are refused with
//! `denied`), so exec is no way around it.
//!
//! `argv[0]` is resolved at call time ([`crate::guards::program`]) to a canonical
//! absolute path, which is what runs. Posture: like Bash, a call runs at once unless a
//! node guard says otherwise: with `--approve-exec` entries, only calls whose program
//! and argv match one (and that set no `env`, which could load code into any program
//! through `LD_PRELOAD` and the like) run without an operator's approval; those runs
//! get git's program-running settings pinned ([`crate::guards::git_env`]).

use crate::guards::program as exec_program;
use crate::guards::{blocklist, git_env, ApproveExec, ShellGuard};
use crate::sessions::{describe_end, ArgvSpec, Session, SessionManager, SpawnSpec, Status};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::bash::{
    running_result, sync_budget, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, MAX_YIELD_MS,
    MIN_YIELD_MS,
};
use crate::tools::follow::{follow, Mode, Outcome};
use crate::tools::output;
use crate::tools::paths::PathPolicy;
use gsv_protocol::limits::MAX_CALL_TIMEOUT_MS;
use gsv_protocol::{Capability, ErrorShape, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Most entries of `argv`.
pub const MAX_ARGS: usize = 4096;
/// Longest single argument, in bytes (Linux's `MAX_ARG_STRLEN`).
pub const MAX_ARG_BYTES: usize = 128 * 1024;
/// Most bytes of all arguments together.
pub const MAX_ARGV_BYTES: usize = 1024 * 1024;
/// Most variables in `env`.
pub const MAX_ENV: usize = 256;
/// Most bytes of `stdin`.
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;

/// Why an exec call's arguments were refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ExecArgsError {
    #[error("{0}")]
    Shape(String),
    #[error("\"argv\" must be an array of 1 to {MAX_ARGS} strings")]
    ArgvShape,
    #[error("\"argv[0]\" must not be empty")]
    EmptyProgram,
    #[error("\"argv[{0}]\" contains a NUL character")]
    Nul(usize),
    #[error("\"argv[{0}]\" is longer than {MAX_ARG_BYTES} bytes")]
    ArgTooLong(usize),
    #[error("\"argv\" is longer than {MAX_ARGV_BYTES} bytes in all")]
    ArgvTooLong,
    #[error("\"env\" must be an object of at most {MAX_ENV} string values")]
    EnvShape,
    #[error("\"env\" name {0:?} is not valid (empty, or contains '=' or NUL)")]
    EnvName(String),
    #[error("\"env\" value of {0:?} contains a NUL character")]
    EnvValue(String),
    #[error("\"stdin\" is longer than {MAX_STDIN_BYTES} bytes")]
    StdinTooLong,
    #[error("\"cwd\" must not be empty or contain NUL characters")]
    Cwd,
}

impl From<String> for ExecArgsError {
    fn from(message: String) -> Self {
        ExecArgsError::Shape(message)
    }
}

#[derive(Debug)]
struct ExecRequest {
    argv: Vec<String>,
    cwd: Option<String>,
    env: Vec<(String, String)>,
    stdin: Option<String>,
    timeout_ms: Option<u64>,
    mode: Mode,
}

impl ExecRequest {
    fn parse(value: &Value) -> Result<ExecRequest, ExecArgsError> {
        let args = Args::new(
            value,
            &[
                "argv",
                "cwd",
                "env",
                "stdin",
                "timeout",
                "background",
                "yieldMs",
            ],
        )?;
        let list = value
            .get("argv")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty() && a.len() <= MAX_ARGS)
            .ok_or(ExecArgsError::ArgvShape)?;
        let mut argv = Vec::with_capacity(list.len());
        let mut total = 0usize;
        for (i, item) in list.iter().enumerate() {
            let s = item.as_str().ok_or(ExecArgsError::ArgvShape)?;
            if s.contains('\0') {
                return Err(ExecArgsError::Nul(i));
            }
            if s.len() > MAX_ARG_BYTES {
                return Err(ExecArgsError::ArgTooLong(i));
            }
            total += s.len() + 1;
            if total > MAX_ARGV_BYTES {
                return Err(ExecArgsError::ArgvTooLong);
            }
            argv.push(s.to_owned());
        }
        if argv[0].is_empty() {
            return Err(ExecArgsError::EmptyProgram);
        }
        let cwd = match args.str("cwd")? {
            Some(c) if c.is_empty() || c.contains('\0') => return Err(ExecArgsError::Cwd),
            other => other.map(str::to_owned),
        };
        let mut env = Vec::new();
        if let Some(v) = value.get("env").filter(|v| !v.is_null()) {
            let map = v
                .as_object()
                .filter(|m| m.len() <= MAX_ENV)
                .ok_or(ExecArgsError::EnvShape)?;
            for (k, v) in map {
                if k.is_empty() || k.contains('=') || k.contains('\0') {
                    return Err(ExecArgsError::EnvName(k.clone()));
                }
                let v = v.as_str().ok_or(ExecArgsError::EnvShape)?;
                if v.contains('\0') {
                    return Err(ExecArgsError::EnvValue(k.clone()));
                }
                env.push((k.clone(), v.to_owned()));
            }
        }
        let stdin = args.str("stdin")?.map(str::to_owned);
        if stdin.as_ref().is_some_and(|s| s.len() > MAX_STDIN_BYTES) {
            return Err(ExecArgsError::StdinTooLong);
        }
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
        Ok(ExecRequest {
            argv,
            cwd,
            env,
            stdin,
            timeout_ms,
            mode,
        })
    }

    /// The argv as a shell would need it typed (words with anything but
    /// `[A-Za-z0-9_/.,:=+@%-]` single-quoted): what listings and the operator see,
    /// and what the shell blocklist judges, so exec is no way around it.
    fn display(&self) -> String {
        self.argv
            .iter()
            .map(|w| {
                let plain = !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_/.,:=+@%-".contains(c));
                if plain {
                    w.clone()
                } else {
                    format!("'{}'", w.replace('\'', "'\\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The exec tool.
pub struct Exec {
    sessions: Arc<SessionManager>,
    allow: Arc<ApproveExec>,
}

impl Exec {
    /// exec with no allowlist (every call runs at once).
    pub fn new(sessions: Arc<SessionManager>) -> Self {
        Exec::with_allowlist(sessions, ApproveExec::default())
    }

    /// exec with the node's `--approve-exec` entries.
    pub fn with_allowlist(sessions: Arc<SessionManager>, allow: ApproveExec) -> Self {
        Exec {
            sessions,
            allow: Arc::new(allow),
        }
    }

    /// The cwd and canonical program of `request`, as this call resolves them.
    async fn resolve(
        &self,
        request: &ExecRequest,
        ctx: &ToolContext,
    ) -> Result<(PathBuf, PathBuf), String> {
        let policy = PathPolicy::of(ctx);
        let cwd = match &request.cwd {
            Some(dir) => policy.resolve(dir).map_err(|e| e.to_string())?,
            None => ctx.workspace.clone(),
        };
        let env = crate::probe::login_env().await;
        let program = exec_program::resolve(&request.argv[0], &cwd, env.get("PATH"))
            .map_err(|e| e.to_string())?;
        Ok((cwd, program))
    }

    /// Why this call is not auto-approved on an approve-exec node, or `None`.
    async fn unapproved(&self, request: &ExecRequest, ctx: &ToolContext) -> Option<String> {
        if !request.env.is_empty() {
            return Some(
                "it sets environment variables (\"env\"), which --approve-exec entries never cover"
                    .to_owned(),
            );
        }
        match self.resolve(request, ctx).await {
            Err(e) => Some(format!("its program cannot be resolved ({e})")),
            Ok((_, program)) if !self.allow.allows(&program, &request.argv[1..]) => Some(format!(
                "{} with these arguments matches none of its --approve-exec entries",
                program.display()
            )),
            Ok(_) => risky_argv(request),
        }
    }
}

/// Why an argv an `--approve-exec` entry matches still needs an operator: one of its
/// options writes files or runs programs (the table `--approve-shell` uses,
/// [`crate::guards::risky`]), whatever the entry's globs say.
fn risky_argv(request: &ExecRequest) -> Option<String> {
    let words: Vec<&str> = request.argv.iter().map(String::as_str).collect();
    crate::guards::risky::argv_risk(&words)
        .map(|why| format!("{why}, which no --approve-exec entry approves without an operator"))
}

#[async_trait::async_trait]
impl Tool for Exec {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "exec".to_owned(),
            description: "Run a program from an argument vector, without a shell (argv \
                          as is; argv[0] on PATH unless it holds a '/'): stdout, stderr, \
                          exit code or signal. `background`/`yieldMs` as for Bash. A \
                          timeout or kill ends its process tree. Calls the node's \
                          allowlist does not cover wait for an operator's approval."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "argv": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "maxItems": MAX_ARGS,
                        "description": "e.g. [\"systemctl\", \"status\", \"nginx\"]."
                    },
                    "cwd": {"type": "string", "minLength": 1, "description": "Working directory (default: the workspace)."},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Added to the login environment."},
                    "stdin": {"type": "string", "description": "Written to stdin, then closed."},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_CALL_TIMEOUT_MS, "description": "Milliseconds (default 300000)."},
                    "background": {"type": "boolean", "description": "Return a sessionId at once."},
                    "yieldMs": {"type": "integer", "minimum": 0, "description": "Wait this long (10-120000 ms), then background."}
                },
                "required": ["argv"],
                "additionalProperties": false
            }),
            capability: Capability::ProcessExec.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Run program", false, true, false, true),
            default_timeout_ms: Some(DEFAULT_CALL_TIMEOUT_MS),
            requires_bins: Vec::new(),
            requires_approval: false,
        }
    }

    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), ErrorShape> {
        // Malformed arguments are left to `execute`, which reports them.
        let Ok(request) = ExecRequest::parse(args) else {
            return Ok(());
        };
        // The shell blocklist judges the argv as the command line it amounts to.
        ShellGuard::new().check(&request.display(), None)?;
        if !self.allow.is_on() || ctx.approval.is_some() {
            return Ok(());
        }
        match self.unapproved(&request, ctx).await {
            None => Ok(()),
            Some(why) => Err(crate::guards::ask_operator(
                "program",
                &format!("the node runs with --approve-exec and {why}"),
                &request.display(),
            )),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let request = match ExecRequest::parse(&args) {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("exec: {e}")),
        };
        if let Err(blocked) = blocklist::check(&request.display()) {
            return ToolResult::error(format!("exec: {blocked}"));
        }
        let auto_approved = self.allow.is_on() && ctx.approval.is_none();
        let (cwd, program) = match self.resolve(&request, &ctx).await {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("exec: {e}")),
        };
        // Checked again here, on exactly the path about to run: a file planted
        // between `check` and now changes nothing.
        if auto_approved
            && (!request.env.is_empty()
                || !self.allow.allows(&program, &request.argv[1..])
                || risky_argv(&request).is_some())
        {
            return ToolResult::error(format!(
                "exec: not approved: {} with these arguments matches none of the node's --approve-exec entries",
                program.display()
            ));
        }
        let timeout = match request.mode {
            Mode::Sync => Some(sync_budget(
                Duration::from_millis(request.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
                ctx.remaining(),
            )),
            Mode::Background | Mode::Yield(_) => request.timeout_ms.map(Duration::from_millis),
        };
        let env_overrides = if auto_approved {
            git_env::auto_approved_overrides()
        } else {
            Vec::new()
        };
        let command = request.display();
        let spec = SpawnSpec {
            command,
            workdir: cwd,
            pty: false,
            background: request.mode == Mode::Background,
            stdin: request.mode != Mode::Sync,
            timeout,
            owner: ctx.owner().map(str::to_owned),
            env_overrides,
            argv: Some(ArgvSpec {
                program: program.clone(),
                arg0: request.argv[0].clone(),
                args: request.argv[1..].to_vec(),
                env: request.env,
                stdin: request.stdin.map(String::into_bytes),
            }),
            call_id: Some(ctx.call_id.clone()),
            yields: matches!(request.mode, Mode::Yield(_)),
        };
        let session = match self.sessions.spawn(spec).await {
            Ok(session) => session,
            Err(e) => return ToolResult::error(format!("exec: {e}")),
        };
        let program = program.display().to_string();
        match follow(&self.sessions, &session, &ctx, request.mode).await {
            Outcome::Finished => finished_result(&session, &program),
            Outcome::Running(snapshot) => running_result(&snapshot),
            Outcome::Cancelled => cancelled(),
        }
    }
}

fn cancelled() -> ToolResult {
    ToolResult::error("exec: the call was cancelled; the program's process group was killed")
}

/// exec's structured content for a program that finished within the call.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutput<'a> {
    /// `completed` (exit code 0) or `failed`.
    pub status: Status,
    pub session_id: &'a str,
    /// The canonical path that ran.
    pub program: &'a str,
    pub exit_code: Option<i32>,
    /// The signal that killed it (`SIGTERM`, ...).
    pub signal: Option<&'a str>,
    pub timed_out: bool,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub duration_ms: u64,
    /// stdout (its last 256 KiB, decoded as UTF-8 with replacement).
    pub stdout: String,
    pub stderr: String,
    /// Whether earlier stdout / stderr was dropped.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub cwd: &'a str,
}

fn finished_result(session: &Session, program: &str) -> ToolResult {
    let s = session.snapshot();
    let ((stdout, stdout_truncated), (stderr, stderr_truncated)) = session.streams();
    let mut text = stdout.clone();
    if !stderr.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(&stderr);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("[{}]", describe_end(&s)));
    output::with_text(
        text,
        &ExecOutput {
            status: s.status,
            session_id: &s.session_id,
            program,
            exit_code: s.exit_code,
            signal: s.signal.as_deref(),
            timed_out: s.timed_out,
            started_at: s.started_at,
            ended_at: s.ended_at,
            duration_ms: s.duration_ms,
            stdout,
            stderr,
            stdout_truncated,
            stderr_truncated,
            cwd: &s.workdir,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<ExecRequest, ExecArgsError> {
        ExecRequest::parse(&v)
    }

    #[test]
    fn good_arguments() {
        let r = parse(json!({"argv": ["ls", "-l"], "env": {"A": "1"}, "stdin": "x", "yieldMs": 1}))
            .unwrap();
        assert_eq!(r.argv, ["ls", "-l"]);
        assert_eq!(r.env, [("A".to_owned(), "1".to_owned())]);
        assert_eq!(r.mode, Mode::Yield(MIN_YIELD_MS));
        assert_eq!(r.display(), "ls -l");
        let r = parse(json!({"argv": ["echo", "a b", ""], "background": true})).unwrap();
        assert_eq!(r.mode, Mode::Background);
        assert_eq!(r.display(), "echo 'a b' ''");
        let r = parse(json!({"argv": ["sh", "-c", "it's; reboot"]})).unwrap();
        assert_eq!(r.display(), "sh -c 'it'\\''s; reboot'");
        let r = parse(json!({"argv": ["sh", "-c", "false && reboot"]})).unwrap();
        assert!(blocklist::check(&r.display()).is_err());
        let r = parse(json!({"argv": ["rm", "-rf", "/"]})).unwrap();
        assert!(blocklist::check(&r.display()).is_err());
        let r = parse(json!({"argv": ["echo", "reboot; x"]})).unwrap();
        assert!(blocklist::check(&r.display()).is_ok());
    }

    #[test]
    fn bad_arguments() {
        let long = "x".repeat(MAX_ARG_BYTES + 1);
        let many: Vec<String> = vec!["a".into(); MAX_ARGS + 1];
        let big: Vec<String> = vec!["y".repeat(MAX_ARG_BYTES); 9];
        for (bad, want) in [
            (json!({}), ExecArgsError::ArgvShape),
            (json!({"argv": []}), ExecArgsError::ArgvShape),
            (json!({"argv": "ls"}), ExecArgsError::ArgvShape),
            (json!({"argv": [1]}), ExecArgsError::ArgvShape),
            (json!({"argv": many}), ExecArgsError::ArgvShape),
            (json!({"argv": [""]}), ExecArgsError::EmptyProgram),
            (json!({"argv": ["ls", "a\u{0}"]}), ExecArgsError::Nul(1)),
            (json!({"argv": ["ls", long]}), ExecArgsError::ArgTooLong(1)),
            (json!({"argv": big}), ExecArgsError::ArgvTooLong),
            (
                json!({"argv": ["ls"], "env": {"A=B": "1"}}),
                ExecArgsError::EnvName("A=B".into()),
            ),
            (
                json!({"argv": ["ls"], "env": {"": "1"}}),
                ExecArgsError::EnvName(String::new()),
            ),
            (
                json!({"argv": ["ls"], "env": {"A": 1}}),
                ExecArgsError::EnvShape,
            ),
            (
                json!({"argv": ["ls"], "env": {"A": "\u{0}"}}),
                ExecArgsError::EnvValue("A".into()),
            ),
            (json!({"argv": ["ls"], "cwd": ""}), ExecArgsError::Cwd),
            (
                json!({"argv": ["ls"], "stdin": "z".repeat(MAX_STDIN_BYTES + 1)}),
                ExecArgsError::StdinTooLong,
            ),
        ] {
            assert_eq!(parse(bad.clone()).unwrap_err(), want, "{bad}");
        }
        assert!(matches!(
            parse(json!({"argv": ["ls"], "shell": true})),
            Err(ExecArgsError::Shape(_))
        ));
        assert!(matches!(
            parse(json!({"argv": ["ls"], "timeout": 0})),
            Err(ExecArgsError::Shape(_))
        ));
    }

    #[test]
    fn declaration() {
        let def = Exec::new(SessionManager::new(crate::EventSender::detached())).def();
        assert_eq!(def.name, "exec");
        assert_eq!(def.capability, "process.exec");
        assert!(!def.requires_approval);
    }
}
