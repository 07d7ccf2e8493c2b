//! The structured content of each Process action ([`super::process`]).
//!
//! Every action but `remove` describes a session through a subset of its
//! [`Snapshot`]; each subset is written down here once. Fields that may be unknown
//! (`endedAt` while running, `exitCode` of a killed job, `signal` of one that exited)
//! are always present, `null` when unknown; only `kill`'s `killed` and `send-keys`'
//! `keys` appear for those actions alone.

use crate::sessions::{Snapshot, Status};
use serde::Serialize;

/// `list`: the sessions the caller may see, newest first.
#[derive(Debug, Serialize)]
pub struct ListOutput {
    pub sessions: Vec<ListedSession>,
    /// Entries in `sessions`.
    pub count: usize,
}

/// One entry of `list`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSession {
    pub session_id: String,
    pub status: Status,
    pub pid: u32,
    /// The command line, cut to its first `command_chars` characters.
    pub command: String,
    pub workdir: String,
    pub pty: bool,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub duration_ms: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub timed_out: bool,
    /// Whether output was dropped (more than is kept was printed).
    pub truncated: bool,
}

impl ListedSession {
    /// The entry of `s`, its command cut to `command_chars` characters.
    pub fn new(s: Snapshot, command_chars: usize) -> Self {
        ListedSession {
            command: s.command.chars().take(command_chars).collect(),
            session_id: s.session_id,
            status: s.status,
            pid: s.pid,
            workdir: s.workdir,
            pty: s.pty,
            started_at: s.started_at,
            ended_at: s.ended_at,
            duration_ms: s.duration_ms,
            exit_code: s.exit_code,
            signal: s.signal,
            timed_out: s.timed_out,
            truncated: s.truncated,
        }
    }
}

/// `poll`, and `kill` (with `killed: true`): where a session stands.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PollOutput<'a> {
    pub session_id: &'a str,
    pub status: Status,
    /// `status == "running"`.
    pub running: bool,
    pub pid: u32,
    pub exit_code: Option<i32>,
    pub signal: Option<&'a str>,
    pub timed_out: bool,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub duration_ms: u64,
    /// The last characters of output.
    pub tail: &'a str,
    pub truncated: bool,
    /// Characters of output produced so far (retained or not).
    pub total_chars: u64,
    pub command: &'a str,
    pub workdir: &'a str,
    pub pty: bool,
    /// Only in `kill`'s answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killed: Option<bool>,
}

impl<'a> PollOutput<'a> {
    pub fn new(s: &'a Snapshot, killed: Option<bool>) -> Self {
        PollOutput {
            session_id: &s.session_id,
            status: s.status,
            running: s.status == Status::Running,
            pid: s.pid,
            exit_code: s.exit_code,
            signal: s.signal.as_deref(),
            timed_out: s.timed_out,
            started_at: s.started_at,
            ended_at: s.ended_at,
            duration_ms: s.duration_ms,
            tail: &s.tail,
            truncated: s.truncated,
            total_chars: s.total_chars,
            command: &s.command,
            workdir: &s.workdir,
            pty: s.pty,
            killed,
        }
    }
}

/// `log`: one page of a session's output, by line.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogOutput<'a> {
    pub session_id: &'a str,
    pub status: Status,
    /// `combined`, `stdout` or `stderr` (`combined` for the raw terminal stream).
    pub stream: &'static str,
    /// Whether this is the raw terminal stream (escapes included).
    pub raw: bool,
    /// The page's first line, as asked for.
    pub offset: usize,
    /// Most lines asked for.
    pub limit: usize,
    /// Lines in `output`.
    pub lines: usize,
    pub output: &'a str,
    /// Lines retained in this view.
    pub total_lines: usize,
    /// Characters retained in this view.
    pub total_chars: usize,
    /// Whether older output of this view was dropped (offsets count retained lines).
    pub truncated: bool,
    /// The offset of the next page, `null` at the end.
    pub next_offset: Option<usize>,
}

/// `write`, `submit` and `send-keys`: what went to the session's stdin.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StdinOutput<'a> {
    pub session_id: &'a str,
    /// The session's status just after the write.
    pub status: Status,
    /// Bytes written.
    pub bytes: usize,
    /// The named keys sent, for `send-keys` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<&'a [String]>,
}

/// `remove`: the session is forgotten.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoveOutput<'a> {
    pub session_id: &'a str,
    /// Always `true`.
    pub removed: bool,
}
