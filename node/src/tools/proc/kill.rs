//! The proc_kill tool: send one signal to one host process, with an operator's
//! approval by default (its approval posture, [`crate::guards::posture`]).
//!
//! What it refuses, dry run or not, before anything is sent:
//!
//! - pids 0 and 1 and negative pids: 0 and negatives address process groups (a
//!   signal to many processes at once), 1 is init, whose end is the host's;
//! - the node's own pid and every ancestor of it (its `ppid` chain up to init): the
//!   node would stop itself, or its supervisor, shell or service manager, and with it
//!   the operator's way back in;
//! - thread ids that are not a process (the kernel refuses a pidfd for them), pids
//!   that do not exist, and signals outside [`SIGNALS`] (names only, no numbers).
//!
//! The signal goes through a pidfd (`pidfd_open`, then `pidfd_send_signal`): the pid
//! is resolved to a process once, the record checked is read after that, and the
//! signal reaches that process or, if it ended meanwhile, nobody — never a process
//! that reused its pid. Between the operator's approval and the call, though, a pid
//! may be reused: a caller that passes `startTime` (the `start` proc_list or a dry
//! run shows) binds the call to that process, and a process with another start time
//! is refused (within one second, see [`super::table::same_start`]). Without
//! `startTime` the plan the operator approves still names the process's start time.
//!
//! `dryRun: true` shows the process and the signal and sends nothing; it runs without
//! an approval ([`Tool::dry_run`]). Result: `{pid, signal, sent, dryRun, process}`
//! ([`ProcKillOutput`]).

use super::table::{ProcessRecord, TableError};
use crate::sessions::SessionManager;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;
use thiserror::Error;

/// The signals proc_kill sends, by name (without `SIG`); `TERM` is the default.
pub const SIGNALS: &[&str] = &[
    "TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT",
];

/// The longest ancestry walked from the node (a guard against a cycle in a racing
/// `/proc`; real chains are a handful long).
#[cfg(target_os = "linux")]
const MAX_ANCESTRY: usize = 1024;

/// The proc_kill tool.
pub struct ProcKill {
    /// The node's sessions: a caller may not signal other tokens' (their process
    /// groups); they are answered like a pid that does not exist.
    sessions: Option<Arc<SessionManager>>,
}

impl ProcKill {
    /// proc_kill refusing, for a caller that is not an operator, the processes of
    /// sessions other tokens own.
    pub fn new(sessions: Arc<SessionManager>) -> Self {
        ProcKill {
            sessions: Some(sessions),
        }
    }

    /// proc_kill without a session manager to consult (tests).
    pub fn standalone() -> Self {
        ProcKill { sessions: None }
    }

    /// The process groups `ctx`'s caller may not touch.
    fn hidden(&self, ctx: &ToolContext) -> HashSet<i32> {
        match &self.sessions {
            Some(s) if !ctx.is_operator() => s.groups_not_of(|owner| ctx.may_use_session(owner)),
            _ => HashSet::new(),
        }
    }
}

/// proc_kill's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcKillOutput {
    pub pid: i32,
    /// The signal's name (`TERM`, `KILL`, …).
    pub signal: &'static str,
    /// Whether the signal was sent (`false` for a dry run).
    pub sent: bool,
    pub dry_run: bool,
    /// The process, as read just before the signal.
    pub process: ProcessRecord,
}

/// Why proc_kill did not signal.
#[derive(Debug, Error)]
pub enum KillError {
    #[error("{0}")]
    Args(String),
    #[error("pid {pid} is refused: {why}")]
    Refused { pid: i64, why: &'static str },
    #[error("pid {0} is a thread of a process, not a process; signal the process")]
    NotAProcess(i32),
    #[error(
        "pid {pid} started at {now}, not at the given startTime {given}: the pid was reused, \
         nothing was sent"
    )]
    StartMismatch {
        pid: i32,
        given: String,
        now: String,
    },
    #[error("pid {0}: the process ended before the signal was sent")]
    Ended(i32),
    #[error("pid {pid}: permission denied (the node's user may not signal a process of {owner})")]
    Permission { pid: i32, owner: String },
    #[error("pid {pid}: {source}")]
    Os { pid: i32, source: std::io::Error },
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("the check did not finish: {0}")]
    Internal(String),
}

/// One validated call.
struct Request {
    pid: i32,
    signal: &'static str,
    start_time: Option<String>,
    dry_run: bool,
}

impl Request {
    fn parse(args: &Value) -> Result<Request, KillError> {
        let a =
            Args::new(args, &["pid", "signal", "startTime", "dryRun"]).map_err(KillError::Args)?;
        if let Some(n) = args.get("pid").and_then(Value::as_i64) {
            if n <= 1 {
                return Err(KillError::Refused {
                    pid: n,
                    why: if n == 1 {
                        "it is init; ending it ends the host"
                    } else {
                        "0 and negative pids address process groups; signal one process"
                    },
                });
            }
        }
        let pid = a
            .u64_in("pid", 2, i32::MAX as u64)
            .map_err(KillError::Args)?
            .ok_or_else(|| KillError::Args("missing required argument \"pid\"".into()))?
            as i32;
        let signal = match a.str("signal").map_err(KillError::Args)? {
            None => "TERM",
            Some(name) => signal_name(name).ok_or_else(|| {
                KillError::Args(format!(
                    "\"signal\" must be one of {} (by name), got {name:?}",
                    SIGNALS.join(", ")
                ))
            })?,
        };
        Ok(Request {
            pid,
            signal,
            start_time: a
                .str("startTime")
                .map_err(KillError::Args)?
                .map(str::to_owned),
            dry_run: a.bool("dryRun").map_err(KillError::Args)?.unwrap_or(false),
        })
    }
}

/// The name in [`SIGNALS`] that `given` spells (any case, `SIG` prefix optional).
fn signal_name(given: &str) -> Option<&'static str> {
    let upper = given.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().copied().find(|s| *s == bare)
}

/// Whether `args` ask for a dry run: exactly `dryRun: true`.
fn is_dry_run(args: &Value) -> bool {
    args.get("dryRun") == Some(&Value::Bool(true))
}

/// The node's pid and its ancestors, nearest first.
#[cfg(target_os = "linux")]
fn lineage() -> Vec<i32> {
    use super::table::parent_of;
    let mut chain = vec![std::process::id() as i32];
    while let Some(&last) = chain.last() {
        match parent_of(last) {
            Some(parent)
                if parent > 0 && !chain.contains(&parent) && chain.len() < MAX_ANCESTRY =>
            {
                chain.push(parent)
            }
            _ => break,
        }
    }
    chain
}

/// Whether `pid` is a thread id other than its process's (`Tgid` is another id).
#[cfg(target_os = "linux")]
fn is_thread(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse::<i32>().ok())
        })
        .is_some_and(|tgid| tgid != pid)
}

/// Without Linux's `/proc` and pidfds, nothing to check against: not supported.
#[cfg(not(target_os = "linux"))]
fn run(_req: &Request, _hidden: &HashSet<i32>) -> Result<ProcKillOutput, KillError> {
    Err(KillError::Table(TableError::Unsupported))
}

/// Checks the request and, unless it is a dry run, sends the signal (blocking).
#[cfg(target_os = "linux")]
fn run(req: &Request, hidden: &HashSet<i32>) -> Result<ProcKillOutput, KillError> {
    use super::table::{same_start, Table};
    use rustix::io::Errno;
    use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

    let pid = req.pid;
    let lineage = lineage();
    if lineage.first() == Some(&pid) {
        return Err(KillError::Refused {
            pid: pid.into(),
            why: "it is this node",
        });
    }
    if lineage.contains(&pid) {
        return Err(KillError::Refused {
            pid: pid.into(),
            why: "it is an ancestor of this node (its supervisor, shell or service manager)",
        });
    }
    let Some(raw) = Pid::from_raw(pid) else {
        return Err(KillError::Table(TableError::NotFound(pid)));
    };
    // The process is pinned first; what is checked below is read after.
    // A thread id that is not its process's is refused by the kernel (EINVAL, or
    // ENOENT on newer kernels).
    let fd = pidfd_open(raw, PidfdFlags::empty()).map_err(|e| match e {
        Errno::SRCH | Errno::INVAL | Errno::NOENT if is_thread(pid) => KillError::NotAProcess(pid),
        Errno::SRCH | Errno::INVAL | Errno::NOENT => KillError::Table(TableError::NotFound(pid)),
        other => KillError::Os {
            pid,
            source: other.into(),
        },
    })?;
    let process = Table::open()?.read(pid)?;
    // Another token's session: answered exactly as a pid that does not exist.
    if hidden.contains(&process.pgrp) {
        return Err(KillError::Table(TableError::NotFound(pid)));
    }
    if let Some(given) = &req.start_time {
        if !same_start(given, &process.start) {
            return Err(KillError::StartMismatch {
                pid,
                given: given.clone(),
                now: process.start,
            });
        }
    }
    if !req.dry_run {
        let signal = match req.signal {
            "KILL" => Signal::KILL,
            "INT" => Signal::INT,
            "HUP" => Signal::HUP,
            "QUIT" => Signal::QUIT,
            "USR1" => Signal::USR1,
            "USR2" => Signal::USR2,
            "STOP" => Signal::STOP,
            "CONT" => Signal::CONT,
            _ => Signal::TERM,
        };
        pidfd_send_signal(&fd, signal).map_err(|e| match e {
            Errno::SRCH => KillError::Ended(pid),
            Errno::PERM => KillError::Permission {
                pid,
                owner: process
                    .user
                    .clone()
                    .unwrap_or_else(|| format!("uid {}", process.uid)),
            },
            other => KillError::Os {
                pid,
                source: other.into(),
            },
        })?;
        tracing::info!(
            pid,
            signal = req.signal,
            command = ?process.command,
            "proc_kill sent a signal"
        );
    }
    Ok(ProcKillOutput {
        pid,
        signal: req.signal,
        sent: !req.dry_run,
        dry_run: req.dry_run,
        process,
    })
}

/// Parses and runs a call on a blocking thread.
async fn call(
    args: &Value,
    force_dry_run: bool,
    hidden: HashSet<i32>,
) -> Result<ProcKillOutput, KillError> {
    let mut req = Request::parse(args)?;
    req.dry_run |= force_dry_run;
    match tokio::task::spawn_blocking(move || run(&req, &hidden)).await {
        Ok(result) => result,
        Err(e) => Err(KillError::Internal(e.to_string())),
    }
}

#[async_trait::async_trait]
impl Tool for ProcKill {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "proc_kill".to_owned(),
            description: "Signal one host process (Linux). Refuses the node itself and \
                          its ancestors."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pid": {
                        "type": "integer",
                        "minimum": 2,
                        "description": "Not 1 or a process group."
                    },
                    "signal": {
                        "type": "string",
                        "enum": SIGNALS,
                        "description": "Default TERM."
                    },
                    "startTime": {
                        "type": "string",
                        "description": "From proc_list: nothing is sent if the pid was reused."
                    },
                    "dryRun": {
                        "type": "boolean",
                        "description": "Show the process, send nothing (no approval needed)."
                    }
                },
                "required": ["pid"],
                "additionalProperties": false
            }),
            capability: Capability::ProcessSignal.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Signal a process", false, true, false, false),
            default_timeout_ms: None,
            requires_bins: Vec::new(),
            requires_approval: true,
        }
    }

    fn dry_run(&self, args: &Value) -> bool {
        is_dry_run(args)
    }

    async fn plan(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        Some(match call(args, true, self.hidden(ctx)).await {
            Ok(out) => {
                let p = &out.process;
                format!(
                    "send SIG{} to pid {} ({}, started {}, parent {}): {}",
                    out.signal,
                    p.pid,
                    p.user.clone().unwrap_or_else(|| format!("uid {}", p.uid)),
                    p.start,
                    p.ppid,
                    p.command
                )
            }
            Err(e) => format!("would be refused: {e}"),
        })
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let dry_run = is_dry_run(&args);
        match call(&args, dry_run, self.hidden(&ctx)).await {
            Ok(out) => {
                let text = if out.sent {
                    format!(
                        "sent SIG{} to pid {} ({})",
                        out.signal, out.pid, out.process.command
                    )
                } else {
                    format!(
                        "dry run: would send SIG{} to pid {} ({})",
                        out.signal, out.pid, out.process.command
                    )
                };
                output::with_text(text, &out)
            }
            Err(e) => ToolResult::error(format!("proc_kill: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        for (bad, why) in [
            (json!({}), "missing"),
            (json!({"pid": 1}), "init"),
            (json!({"pid": 0}), "process groups"),
            (json!({"pid": -5}), "process groups"),
            (json!({"pid": "5"}), "integer"),
            (json!({"pid": 5, "signal": "SEGV"}), "must be one of"),
            (json!({"pid": 5, "signal": "9"}), "must be one of"),
            (json!({"pid": 5, "force": true}), "unknown argument"),
        ] {
            let e = Request::parse(&bad).err().unwrap().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let r = Request::parse(&json!({"pid": 5, "signal": "sigkill"})).unwrap();
        assert_eq!((r.pid, r.signal, r.dry_run), (5, "KILL", false));
        assert_eq!(Request::parse(&json!({"pid": 5})).unwrap().signal, "TERM");
        assert!(is_dry_run(&json!({"pid": 5, "dryRun": true})));
        assert!(!is_dry_run(&json!({"pid": 5, "dryRun": "true"})));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_node_and_its_ancestors_are_refused() {
        use super::super::table::parent_of;
        let me = std::process::id() as i32;
        let e = call(&json!({"pid": me}), true, HashSet::new())
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("this node"), "{e}");
        let parent = parent_of(me).unwrap();
        if parent > 1 {
            let e = call(
                &json!({"pid": parent, "signal": "KILL"}),
                false,
                HashSet::new(),
            )
            .await
            .err()
            .unwrap()
            .to_string();
            assert!(e.contains("ancestor"), "{e}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn threads_and_unknown_pids_are_refused() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let _ = tx.send(unsafe { libc::gettid() });
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let req = Request::parse(&json!({"pid": tid, "signal": "KILL"})).unwrap();
        let e = run(&req, &HashSet::new()).err().unwrap();
        assert!(matches!(e, KillError::NotAProcess(_)), "{e}");
        let _ = done_tx.send(());
        thread.join().unwrap();
        let req = Request::parse(&json!({"pid": i32::MAX})).unwrap();
        let e = run(&req, &HashSet::new()).err().unwrap();
        assert!(
            matches!(e, KillError::Table(TableError::NotFound(_))),
            "{e}"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn signals_the_process_checked() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let dry = call(&json!({"pid": pid, "dryRun": true}), false, HashSet::new())
            .await
            .unwrap();
        assert!(!dry.sent);
        assert!(
            dry.process.command.starts_with("sleep 30"),
            "{:?}",
            dry.process
        );
        let plan = ProcKill::standalone()
            .plan(
                &json!({"pid": pid, "signal": "KILL"}),
                &ToolContext::new("/", "1"),
            )
            .await
            .unwrap();
        assert!(
            plan.contains("SIGKILL") && plan.contains("sleep 30"),
            "{plan}"
        );
        let e = call(
            &json!({"pid": pid, "startTime": "2001-01-01T00:00:00Z"}),
            false,
            HashSet::new(),
        )
        .await
        .err()
        .unwrap();
        assert!(matches!(e, KillError::StartMismatch { .. }), "{e}");
        assert!(
            child.try_wait().unwrap().is_none(),
            "a refused call signalled"
        );
        let out = call(
            &json!({"pid": pid, "signal": "KILL", "startTime": dry.process.start}),
            false,
            HashSet::new(),
        )
        .await
        .unwrap();
        assert!(out.sent);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
