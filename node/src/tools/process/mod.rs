//! The Process tool: list, poll, read, feed and stop the background sessions started by
//! Bash (`background: true`, or `yieldMs` that ran out).
//!
//! Actions (`sessionId` is required for all but `list`):
//!
//! - `list`: background sessions, newest first (finished ones are kept 30 minutes).
//! - `poll`: status, exit code, signal and the last 4,000 characters; with `waitMs`
//!   (up to 30,000) it first waits until new output arrives or the job ends.
//! - `log`: the output paged by line (`offset`, `limit` — default 200), with the total
//!   line and character counts. For pty sessions the text has terminal escapes
//!   stripped; `raw: true` pages the raw terminal stream instead (escapes included).
//!   For piped sessions `stream` picks `stdout` or `stderr` alone (default: both,
//!   interleaved in arrival order). Offsets count the *retained* lines: once a session
//!   printed more than is kept, `truncated` is true and line 0 is the oldest kept line.
//! - `write` / `submit`: `data` to stdin (`submit` adds a newline).
//! - `send-keys`: for pty sessions, `data` typed as is and then the named `keys`
//!   (`C-c`, `Enter`, `Up`, ...).
//! - `kill`: SIGTERM to the session's whole process group, SIGKILL after the grace
//!   period. (The reference sent SIGKILL to the shell alone, which left its children
//!   running and gave nothing a chance to clean up.) Answers once the session has
//!   ended, with its final status.
//! - `remove`: forgets a finished session.
//!
//! Each action's structured content is a type of [`super::process_output`].

pub mod on_host;

use crate::guards::ShellGuard;
use crate::remote::RemoteHost;
use crate::sessions::group::KILL_GRACE;
use crate::sessions::keys::{key_bytes, key_pattern};
use crate::sessions::{
    describe_end, KillOutcome, KillReason, LogView, Session, SessionError, SessionManager,
    Snapshot, Status,
};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use crate::tools::process_output::{
    ListOutput, ListedSession, LogOutput, PollOutput, RemoveOutput, StdinOutput,
};
use crate::tools::Host;
use gsv_protocol::{Capability, ErrorShape, ToolAnnotations, ToolDef, ToolResult};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tracing::debug;

/// Longest `waitMs` of `poll`.
pub const MAX_WAIT_MS: u64 = 30_000;
/// Default `limit` of `log`.
pub const DEFAULT_LOG_LIMIT: usize = 200;
/// Longest `data` accepted for stdin (1 MiB).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;
/// Most keys in one `send-keys`.
pub const MAX_KEYS: usize = 256;
/// Characters of a command shown by `list`.
const LIST_COMMAND_CHARS: usize = 500;
/// How long `kill` waits for the session to end beyond the grace period.
const KILL_SETTLE: Duration = Duration::from_secs(2);

const ACTIONS: &[&str] = &[
    "list",
    "poll",
    "log",
    "write",
    "submit",
    "send-keys",
    "kill",
    "remove",
];

/// The Process tool.
pub struct Process {
    /// This machine's sessions (`None` for a far host, whose sessions are jobs there).
    sessions: Option<Arc<SessionManager>>,
    /// Input to a session is judged like a Bash command (blocklist, `--approve-shell`).
    guard: ShellGuard,
    /// The far host whose jobs are managed, or `None` for this machine.
    host: Host,
}

impl Process {
    pub fn new(sessions: Arc<SessionManager>) -> Self {
        Process::with_guard(sessions, ShellGuard::new())
    }

    /// Process with the node's shell guard: `write` and `submit` text pass the
    /// blocklist, and in approve-shell mode run at once only when the text itself
    /// matches an auto-approve pattern; `send-keys` then always needs an operator.
    pub fn with_guard(sessions: Arc<SessionManager>, guard: ShellGuard) -> Self {
        Process {
            sessions: Some(sessions),
            guard,
            host: None,
        }
    }

    /// Process on the host of an SSH- or container-backed node ([`on_host`]): the
    /// jobs Bash left running there, input judged by `guard`.
    pub fn on(host: Arc<RemoteHost>, guard: ShellGuard) -> Self {
        Process {
            sessions: None,
            guard,
            host: Some(host),
        }
    }
}

/// What input a Process call sends to a session, if any: the text of `write` and
/// `submit`, or the key names of `send-keys`.
pub enum SessionInput<'a> {
    Text(&'a str),
    Keys(Vec<&'a str>),
}

/// The input `args` would send to a session (`None`: the action sends none).
pub fn session_input(args: &Value) -> Option<SessionInput<'_>> {
    match args.get("action").and_then(Value::as_str)? {
        "write" | "submit" => Some(SessionInput::Text(
            args.get("data").and_then(Value::as_str).unwrap_or(""),
        )),
        "send-keys" => Some(SessionInput::Keys(
            args.get("keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default(),
        )),
        _ => None,
    }
}

#[async_trait::async_trait]
impl Tool for Process {
    /// Input to a running program is a command like any other: approving an
    /// interactive program (a shell, a pager, a REPL) must not approve what is typed
    /// into it later.
    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), ErrorShape> {
        check_input(&self.guard, args, ctx)?;
        crate::tools::host_ready(&self.host).await
    }

    fn def(&self) -> ToolDef {
        def()
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        if let Some(host) = &self.host {
            return on_host::OnHost::new(Arc::clone(host))
                .execute(args, ctx)
                .await;
        }
        let request = match Request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Process: {message}")),
        };
        debug!(
            call_id = %ctx.call_id,
            action = %request.action_name,
            session_id = request.session_id.as_deref().unwrap_or(""),
            "process action"
        );
        match self.run(request, &ctx).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Process: {e}")),
        }
    }
}

/// Process's declaration (the same on every kind of node).
pub(crate) fn def() -> ToolDef {
    ToolDef {
        name: "Process".to_owned(),
        description: "Sessions of Bash: `list`, `poll` (status, output tail), `log` \
                      (lines), `write`/`submit` (stdin; submit adds a newline), \
                      `send-keys` (pty), `kill` (process tree), `remove` (a finished one)."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ACTIONS
                },
                "sessionId": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Needed by every action but list."
                },
                "data": {
                    "type": "string",
                    "description": "Text to send."
                },
                "keys": {
                    "type": "array",
                    "items": {"type": "string", "pattern": key_pattern()},
                    "maxItems": MAX_KEYS,
                    "description": "Keys pressed in order."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "log: first line, 0-based."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "log: most lines (default 200)."
                },
                "stream": {
                    "type": "string",
                    "enum": ["combined", "stdout", "stderr"],
                    "description": "log: which output (default combined)."
                },
                "raw": {
                    "type": "boolean",
                    "description": "log: keep a pty's escapes."
                },
                "waitMs": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_WAIT_MS,
                    "description": "poll: wait for output."
                }
            },
            "required": ["action"],
            "additionalProperties": false
        }),
        capability: Capability::ProcessManage.as_str().to_owned(),
        annotations: ToolAnnotations::hints(
            "Manage background commands",
            false,
            true,
            false,
            false,
        ),
        default_timeout_ms: None,
        requires_bins: Vec::new(),
        requires_approval: false,
    }
}

/// Process's guard: input to a session is judged like a Bash command (on any kind
/// of node).
pub(crate) fn check_input(
    guard: &ShellGuard,
    args: &Value,
    ctx: &ToolContext,
) -> Result<(), ErrorShape> {
    match session_input(args) {
        None => Ok(()),
        Some(SessionInput::Text(text)) => {
            guard.check(text.trim_end_matches(['\n', '\r']), ctx.approval.as_deref())
        }
        Some(SessionInput::Keys(keys)) => {
            if !guard.auto_approves(ctx.approval.as_deref()) {
                return Ok(());
            }
            let shown = keys.join(" ");
            let reason = format!(
                "the node runs in approve-shell mode and keys typed into a session ({shown}) are never auto-approved"
            );
            Err(crate::guards::ask_operator(
                "input",
                &reason,
                &format!("send-keys {shown}"),
            ))
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    List,
    Poll,
    Log,
    Write,
    Submit,
    SendKeys,
    Kill,
    Remove,
}

impl Action {
    fn parse(name: &str) -> Option<Action> {
        Some(match name {
            "list" => Action::List,
            "poll" => Action::Poll,
            "log" => Action::Log,
            "write" => Action::Write,
            "submit" => Action::Submit,
            "send-keys" => Action::SendKeys,
            "kill" => Action::Kill,
            "remove" => Action::Remove,
            _ => return None,
        })
    }
}

pub(crate) struct Request {
    pub(crate) action: Action,
    pub(crate) action_name: String,
    pub(crate) session_id: Option<String>,
    pub(crate) data: String,
    pub(crate) keys: Vec<String>,
    pub(crate) offset: usize,
    pub(crate) limit: usize,
    pub(crate) stream: LogView,
    pub(crate) raw: bool,
    pub(crate) wait_ms: u64,
}

impl Request {
    pub(crate) fn parse(value: &Value) -> Result<Request, String> {
        let args = Args::new(
            value,
            &[
                "action",
                "sessionId",
                "data",
                "keys",
                "offset",
                "limit",
                "stream",
                "raw",
                "waitMs",
            ],
        )?;
        let action_name = args.required_str("action")?;
        let action = Action::parse(action_name).ok_or_else(|| {
            format!(
                "unknown action {action_name:?}; expected one of: {}",
                ACTIONS.join(", ")
            )
        })?;
        let session_id = match args.str("sessionId")? {
            Some("") | None if action != Action::List => {
                return Err(format!("action {action_name:?} needs \"sessionId\""))
            }
            other => other.map(str::to_owned),
        };
        let data = args.str("data")?.unwrap_or("").to_owned();
        if data.len() > MAX_DATA_BYTES {
            return Err(format!(
                "\"data\" is {} bytes; at most {MAX_DATA_BYTES} are accepted at once",
                data.len()
            ));
        }
        let keys = parse_keys(value.get("keys").filter(|v| !v.is_null()))?;
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let stream = match args.str("stream")? {
            None | Some("combined") => LogView::Combined,
            Some("stdout") => LogView::Stdout,
            Some("stderr") => LogView::Stderr,
            Some(other) => {
                return Err(format!(
                    "unknown stream {other:?}; expected combined, stdout or stderr"
                ))
            }
        };
        Ok(Request {
            action,
            action_name: action_name.to_owned(),
            session_id,
            data,
            keys,
            offset: args.u64_in("offset", 0, u64::MAX)?.map_or(0, to_usize),
            limit: args
                .u64_in("limit", 1, u64::MAX)?
                .map_or(DEFAULT_LOG_LIMIT, to_usize),
            stream,
            raw: args.bool("raw")?.unwrap_or(false),
            wait_ms: args.u64_in("waitMs", 0, MAX_WAIT_MS)?.unwrap_or(0),
        })
    }
}

fn parse_keys(value: Option<&Value>) -> Result<Vec<String>, String> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Some(items) = value.as_array() else {
        return Err("\"keys\" must be an array of key names".to_owned());
    };
    if items.len() > MAX_KEYS {
        return Err(format!(
            "\"keys\" has {} names; at most {MAX_KEYS}",
            items.len()
        ));
    }
    items
        .iter()
        .map(|item| match item.as_str() {
            Some(name) if key_bytes(name).is_some() => Ok(name.to_owned()),
            Some(name) => Err(format!(
                "unknown key {:?} in \"keys\"; known keys: C-a..C-z, Enter, Tab, Escape, Esc, Up, Down, Left, Right, Home, End, PageUp, PageDown, Backspace, Delete, Space",
                name.chars().take(40).collect::<String>()
            )),
            None => Err("\"keys\" must contain only strings".to_owned()),
        })
        .collect()
}

impl Process {
    /// The background sessions this caller may see: its own (an operator: all).
    fn visible(sessions: &SessionManager, ctx: &ToolContext) -> Vec<Arc<Session>> {
        let mut sessions = sessions.list();
        sessions.retain(|s| ctx.may_use_session(s.owner()));
        sessions
    }

    async fn run(&self, request: Request, ctx: &ToolContext) -> Result<ToolResult, SessionError> {
        let Some(sessions) = &self.sessions else {
            return Ok(ToolResult::error("Process: this node has no sessions"));
        };
        if request.action == Action::List {
            return Ok(list_result(&Self::visible(sessions, ctx)));
        }
        // `parse` made sure every other action has a session id.
        let id = request.session_id.as_deref().unwrap_or_default();
        // Another token's session is answered exactly like one that does not exist.
        if let Some(s) = sessions.get(id) {
            if !ctx.may_use_session(s.owner()) {
                return Err(SessionError::NotFound(id.to_owned()));
            }
        }
        let session = sessions.background(id)?;
        match request.action {
            Action::List => Ok(list_result(&Self::visible(sessions, ctx))),
            Action::Poll => {
                if request.wait_ms > 0 {
                    let wait = Duration::from_millis(request.wait_ms)
                        .min(ctx.remaining().saturating_sub(ctx.remaining() / 10));
                    tokio::select! {
                        _ = session.wait_change(wait) => {}
                        _ = ctx.cancel.cancelled() => {}
                    }
                }
                Ok(poll_result(&session.snapshot(), None))
            }
            Action::Log => {
                let view = if request.raw {
                    LogView::Raw
                } else {
                    request.stream
                };
                let page = session.log(view, request.offset, request.limit)?;
                Ok(log_result(&session.snapshot(), &request, view, page))
            }
            Action::Write | Action::Submit => {
                let mut data = request.data.into_bytes();
                if request.action == Action::Submit {
                    data.push(b'\n');
                }
                let bytes = session.write(&data).await?;
                Ok(write_result(&session, &request.action_name, bytes, None))
            }
            Action::SendKeys => {
                if !session.is_pty() {
                    return Err(SessionError::NotPty(id.to_owned()));
                }
                if request.data.is_empty() && request.keys.is_empty() {
                    return Ok(ToolResult::error(
                        "Process: send-keys needs \"keys\" (named keys) and/or \"data\" (text to type)",
                    ));
                }
                let mut bytes = request.data.into_bytes();
                for key in &request.keys {
                    bytes.extend(key_bytes(key).unwrap_or_default());
                }
                let written = session.write(&bytes).await?;
                Ok(write_result(
                    &session,
                    &request.action_name,
                    written,
                    Some(&request.keys),
                ))
            }
            Action::Kill => {
                match session.kill(KillReason::Requested) {
                    KillOutcome::Finished => {
                        session.ensure_running()?;
                    }
                    KillOutcome::Started | KillOutcome::AlreadyKilling => {}
                }
                let settle = (KILL_GRACE + KILL_SETTLE).min(ctx.remaining());
                tokio::select! {
                    _ = tokio::time::timeout(settle, session.wait_finished()) => {}
                    _ = ctx.cancel.cancelled() => {}
                }
                Ok(poll_result(&session.snapshot(), Some(true)))
            }
            Action::Remove => {
                sessions.remove(id)?;
                Ok(output::with_text(
                    format!("Session {id} removed."),
                    &RemoveOutput {
                        session_id: id,
                        removed: true,
                    },
                ))
            }
        }
    }
}

fn status_line(s: &Snapshot) -> String {
    match s.status {
        Status::Running => format!(
            "Session {}: running (pid {}, {} ms so far)",
            s.session_id, s.pid, s.duration_ms
        ),
        _ => format!(
            "Session {}: {} after {} ms",
            s.session_id,
            describe_end(s),
            s.duration_ms
        ),
    }
}

/// `{sessions: [...], count}`.
fn list_result(sessions: &[Arc<Session>]) -> ToolResult {
    list_of(sessions.iter().map(|s| s.snapshot()).collect())
}

/// [`list_result`] of sessions described by their snapshots, in order.
pub(crate) fn list_of(snapshots: Vec<Snapshot>) -> ToolResult {
    let mut text = String::new();
    let mut items = Vec::with_capacity(snapshots.len());
    for s in snapshots {
        let short: String = s.command.chars().take(80).collect();
        text.push_str(&format!(
            "{}  {:<9}  pid {:<7}  {}\n",
            s.session_id,
            s.status.as_str(),
            s.pid,
            short.replace('\n', " ")
        ));
        items.push(ListedSession::new(s, LIST_COMMAND_CHARS));
    }
    if text.is_empty() {
        text.push_str("No background sessions.");
    }
    let count = items.len();
    output::with_text(
        text.trim_end().to_owned(),
        &ListOutput {
            sessions: items,
            count,
        },
    )
}

/// The poll shape (also `kill`'s, with `killed: true`).
pub(crate) fn poll_result(s: &Snapshot, killed: Option<bool>) -> ToolResult {
    let mut text = status_line(s);
    if !s.tail.is_empty() {
        text.push_str("\n--- output (tail) ---\n");
        text.push_str(&s.tail);
    }
    output::with_text(text, &PollOutput::new(s, killed))
}

pub(crate) fn log_result(
    s: &Snapshot,
    request: &Request,
    view: LogView,
    log: crate::sessions::LogPage,
) -> ToolResult {
    let page = log.page;
    let stream = match view {
        LogView::Combined | LogView::Raw => "combined",
        LogView::Stdout => "stdout",
        LogView::Stderr => "stderr",
    };
    let mut text = page.text.clone();
    let end = request.offset.saturating_add(page.lines);
    let footer = if page.lines == 0 {
        format!(
            "[no lines from offset {}: {} line(s) retained; session {}]",
            request.offset,
            page.total_lines,
            s.status.as_str()
        )
    } else {
        let more = match page.next_offset {
            Some(next) => format!("; continue with offset={next}"),
            None => String::new(),
        };
        format!(
            "[lines {}-{} of {}{}{}; session {}]",
            request.offset,
            end.saturating_sub(1),
            page.total_lines,
            if log.truncated {
                " retained (earlier output dropped)"
            } else {
                ""
            },
            more,
            s.status.as_str()
        )
    };
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&footer);
    output::with_text(
        text,
        &LogOutput {
            session_id: &s.session_id,
            status: s.status,
            stream,
            raw: view == LogView::Raw,
            offset: request.offset,
            limit: request.limit,
            lines: page.lines,
            output: &page.text,
            total_lines: page.total_lines,
            total_chars: page.total_chars,
            truncated: log.truncated,
            next_offset: page.next_offset,
        },
    )
}

fn write_result(
    session: &Session,
    action: &str,
    bytes: usize,
    keys: Option<&[String]>,
) -> ToolResult {
    wrote(session.id(), session.snapshot().status, action, bytes, keys)
}

/// The answer to `write`, `submit` or `send-keys` that sent `bytes` to session `id`.
pub(crate) fn wrote(
    id: &str,
    status: Status,
    action: &str,
    bytes: usize,
    keys: Option<&[String]>,
) -> ToolResult {
    output::with_text(
        format!("{action}: sent {bytes} byte(s) to session {id}."),
        &StdinOutput {
            session_id: id,
            status,
            bytes,
            keys,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<Request, String> {
        Request::parse(&v)
    }

    #[test]
    fn arguments() {
        let r = parse(json!({"action": "list"})).unwrap();
        assert_eq!(r.action, Action::List);
        let r = parse(json!({"action": "log", "sessionId": "s"})).unwrap();
        assert_eq!(
            (r.offset, r.limit, r.stream),
            (0, DEFAULT_LOG_LIMIT, LogView::Combined)
        );
        let r = parse(json!({"action": "send-keys", "sessionId": "s", "keys": ["C-c", "Enter"]}))
            .unwrap();
        assert_eq!(r.keys, ["C-c", "Enter"]);
        for bad in [
            json!({}),
            json!({"action": "frobnicate"}),
            json!({"action": "poll"}),
            json!({"action": "poll", "sessionId": ""}),
            json!({"action": "poll", "sessionId": "s", "waitMs": 30_001}),
            json!({"action": "log", "sessionId": "s", "limit": 0}),
            json!({"action": "log", "sessionId": "s", "stream": "both"}),
            json!({"action": "send-keys", "sessionId": "s", "keys": "C-c"}),
            json!({"action": "send-keys", "sessionId": "s", "keys": ["C-%"]}),
            json!({"action": "send-keys", "sessionId": "s", "keys": [1]}),
            json!({"action": "list", "extra": 1}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
        let err = parse(json!({"action": "kill"})).err().unwrap();
        assert!(err.contains("needs \"sessionId\""), "{err}");
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            session_id: "s-1".to_owned(),
            status: Status::Completed,
            pid: 4242,
            command: "make".to_owned(),
            workdir: "/ws".to_owned(),
            pty: true,
            background: true,
            started_at: 1_700_000_000_000,
            ended_at: Some(1_700_000_000_250),
            duration_ms: 250,
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            tail: "done\n".to_owned(),
            truncated: false,
            total_chars: 5,
            owner: Some("tok-1".to_owned()),
        }
    }

    #[test]
    fn poll_and_kill_output() {
        let poll = json!({
            "sessionId": "s-1",
            "status": "completed",
            "running": false,
            "pid": 4242,
            "exitCode": 0,
            "signal": null,
            "timedOut": false,
            "startedAt": 1_700_000_000_000_u64,
            "endedAt": 1_700_000_000_250_u64,
            "durationMs": 250,
            "tail": "done\n",
            "truncated": false,
            "totalChars": 5,
            "command": "make",
            "workdir": "/ws",
            "pty": true,
        });
        assert_eq!(
            poll_result(&snapshot(), None).structured_content,
            Some(poll.clone())
        );
        let mut killed = poll;
        killed["killed"] = json!(true);
        assert_eq!(
            poll_result(&snapshot(), Some(true)).structured_content,
            Some(killed)
        );
        let running = Snapshot {
            status: Status::Running,
            ended_at: None,
            exit_code: None,
            ..snapshot()
        };
        let v = poll_result(&running, None).structured_content.unwrap();
        assert_eq!(
            (&v["status"], &v["running"], &v["endedAt"], &v["exitCode"]),
            (&json!("running"), &json!(true), &json!(null), &json!(null))
        );
    }

    #[test]
    fn log_output() {
        let request =
            parse(json!({"action": "log", "sessionId": "s-1", "offset": 1, "limit": 2})).unwrap();
        let page = crate::sessions::LogPage {
            page: crate::sessions::buffer::LinePage {
                text: "b\nc".to_owned(),
                lines: 2,
                total_lines: 4,
                total_chars: 8,
                next_offset: Some(3),
            },
            truncated: true,
        };
        let r = log_result(&snapshot(), &request, LogView::Stderr, page);
        assert_eq!(
            r.structured_content,
            Some(json!({
                "sessionId": "s-1",
                "status": "completed",
                "stream": "stderr",
                "raw": false,
                "offset": 1,
                "limit": 2,
                "lines": 2,
                "output": "b\nc",
                "totalLines": 4,
                "totalChars": 8,
                "truncated": true,
                "nextOffset": 3,
            }))
        );
        let page = crate::sessions::LogPage {
            page: crate::sessions::buffer::LinePage {
                text: String::new(),
                lines: 0,
                total_lines: 0,
                total_chars: 0,
                next_offset: None,
            },
            truncated: false,
        };
        let r = log_result(&snapshot(), &request, LogView::Raw, page);
        assert_eq!(
            r.structured_content,
            Some(json!({
                "sessionId": "s-1",
                "status": "completed",
                "stream": "combined",
                "raw": true,
                "offset": 1,
                "limit": 2,
                "lines": 0,
                "output": "",
                "totalLines": 0,
                "totalChars": 0,
                "truncated": false,
                "nextOffset": null,
            }))
        );
    }

    #[test]
    fn declaration() {
        let def = Process::new(SessionManager::new(crate::EventSender::detached())).def();
        assert_eq!(def.name, "Process");
        assert_eq!(def.capability, "process.manage");
        assert_eq!(
            def.input_schema["properties"]["action"]["enum"],
            json!(ACTIONS)
        );
        assert_eq!(def.input_schema["additionalProperties"], json!(false));
        assert_eq!(def.annotations.read_only_hint, Some(false));
    }
}
