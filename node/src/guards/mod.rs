//! Node-side guards: checks a node applies to the calls it runs, whatever the gateway
//! allowed.
//!
//! The gateway's policy decides which agent may call which tool; these guards are the
//! node's own, configured on the node's command line, so no gateway (misconfigured or
//! not) can switch them off:
//!
//! - [`blocklist`]: Bash commands that are always refused (`rm -rf /`, `mkfs`, fork
//!   bombs, `reboot`, writes to raw disks, …), with the protocol error `denied`. Always
//!   on. A seat belt against obvious destruction, not a sandbox.
//! - [`approve`]: with `--approve-shell REGEX…`, Bash commands that match none of the
//!   node's auto-approve patterns, or match but carry an option that writes files or
//!   runs programs ([`risky`]), are answered `approval_required` unless the call
//!   carries an operator's approval (the gateway opens the request and re-sends the
//!   call once it is approved).
//! - [`posture`]: a tool that declares `requiresApproval` (its approval posture) runs
//!   only with an operator's approval, unless the node's owner waived it
//!   (`--no-approval TOOL`); applied by the dispatcher to every call.
//! - `--read-only`, `--tools` and `--without` are applied where the tool set is built
//!   ([`crate::selection`], [`crate::Registry::apply`]): a tool left out is not
//!   registered at all; with `--read-only` only tools that declare
//!   `readOnlyHint: true` are offered.
//!
//! - [`approve_exec`]: with `--approve-exec 'PROGRAM ARGGLOB...'`, exec calls whose
//!   resolved program and argv match no entry are answered `approval_required` unless
//!   approved; on such a node Bash runs in approve-shell mode too (with no
//!   `--approve-shell` pattern every Bash call waits), so Bash is no way around the
//!   allowlist.
//!
//! [`ShellGuard`] combines the first two for the Bash tool, which calls it from
//! [`crate::Tool::check`] (so a refusal is a protocol error and nothing is spawned).
//! `shell` is the lexer both share.

pub mod approve;
pub mod approve_exec;
pub mod blocklist;
pub mod git_env;
mod partition;
mod pattern;
pub mod posture;
pub mod program;
pub mod risky;
pub(crate) mod shell;
mod wrappers;

pub use approve::{ApproveShell, Unapproved};
pub use approve_exec::{ApproveExec, ApproveExecError};
pub use blocklist::{Blocked, Rule};

use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape};
use thiserror::Error;

/// Why the guards could not be set up (a startup error: the CLI exits 2).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GuardError {
    #[error("--approve-shell pattern {pattern:?} is not a valid regex: {message}")]
    Pattern { pattern: String, message: String },
}

/// Longest command echoed back in an approval request's `summary`.
const MAX_SUMMARY_CHARS: usize = 300;

/// The guards for shell commands: the blocklist, and the auto-approve patterns when
/// the node runs with `--approve-shell`.
#[derive(Debug, Clone, Default)]
pub struct ShellGuard {
    approve: Option<ApproveShell>,
    /// Approve-shell mode was switched on by `--approve-exec` (for messages).
    for_exec: bool,
}

impl ShellGuard {
    /// The blocklist alone (no approve-shell mode).
    pub fn new() -> Self {
        ShellGuard::default()
    }

    /// The blocklist, plus approve-shell mode if `patterns` is not empty.
    pub fn with_approve_shell(patterns: &[String]) -> Result<Self, GuardError> {
        let approve = if patterns.is_empty() {
            None
        } else {
            Some(ApproveShell::new(patterns)?)
        };
        Ok(ShellGuard {
            approve,
            for_exec: false,
        })
    }

    /// The guard of a node with `--approve-exec` entries: approve-shell mode even
    /// without `--approve-shell` patterns (then no Bash command is auto-approved), so
    /// Bash is no way around the exec allowlist.
    pub fn for_approve_exec(patterns: &[String]) -> Result<Self, GuardError> {
        Ok(ShellGuard {
            approve: Some(ApproveShell::new(patterns)?),
            for_exec: patterns.is_empty(),
        })
    }

    /// Whether the node runs in approve-shell mode.
    pub fn approve_shell(&self) -> bool {
        self.approve.is_some()
    }

    /// Whether a command that passed [`ShellGuard::check`] with `approval` runs because
    /// a pattern approved it (approve-shell mode, no operator's approval).
    pub fn auto_approves(&self, approval: Option<&str>) -> bool {
        self.approve.is_some() && approval.is_none()
    }

    /// Decides whether `command` may run: the blocklist first (`denied`, whatever the
    /// approval), then, in approve-shell mode, the patterns (`approval_required` unless
    /// `approval` names the operator's approval of this call).
    pub fn check(&self, command: &str, approval: Option<&str>) -> Result<(), ErrorShape> {
        if let Err(blocked) = blocklist::check(command) {
            tracing::warn!(
                rule = blocked.rule.name(),
                "command refused by the shell blocklist"
            );
            return Err(
                ErrorShape::new(ErrorCode::Denied, blocked.to_string()).with(ErrorDetails::Rule {
                    rule: blocked.rule.name().to_owned(),
                }),
            );
        }
        let Some(approve) = &self.approve else {
            return Ok(());
        };
        let Some(unapproved) = approve.unapproved(command) else {
            return Ok(());
        };
        if let Some(id) = approval {
            tracing::info!(approval = id, "running a command an operator approved");
            return Ok(());
        }
        let shown = truncate(&unapproved.command, MAX_SUMMARY_CHARS);
        let reason = match &unapproved.risk {
            None if self.for_exec => format!(
                "the node runs with --approve-exec and no --approve-shell pattern, so no Bash command ({shown:?}) is auto-approved"
            ),
            None => format!(
                "the node runs in approve-shell mode and {shown:?} matches none of its auto-approve patterns"
            ),
            Some(why) => format!(
                "the node runs in approve-shell mode and {shown:?} matches an auto-approve pattern, but {why}"
            ),
        };
        Err(ask_operator("command", &reason, command))
    }
}

/// The `approval_required` a guard answers: what needs approval (`command`, `input`),
/// why, and the text shown to the operator (cut to `MAX_SUMMARY_CHARS`, 300 characters).
pub fn ask_operator(what: &str, reason: &str, summary: &str) -> ErrorShape {
    ErrorShape::new(
        ErrorCode::ApprovalRequired,
        format!("this {what} needs an operator's approval: {reason}"),
    )
    .with(ErrorDetails::ApprovalRequired {
        reason: reason.to_owned(),
        summary: truncate(summary, MAX_SUMMARY_CHARS),
        plan: None,
    })
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    text.chars().take(max.saturating_sub(3)).collect::<String>() + "..."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocklist_wins_over_everything() {
        let guard = ShellGuard::with_approve_shell(&[".*".into()]).unwrap();
        let e = guard.check("reboot", Some("abc")).unwrap_err();
        assert_eq!(e.code, ErrorCode::Denied);
        assert_eq!(e.details.unwrap()["rule"], "power");
        assert!(e.message.contains("not a sandbox"), "{}", e.message);
        assert_eq!(
            ShellGuard::new().check("rm -rf /", None).unwrap_err().code,
            ErrorCode::Denied
        );
    }

    #[test]
    fn without_patterns_everything_else_runs() {
        let guard = ShellGuard::with_approve_shell(&[]).unwrap();
        assert!(!guard.approve_shell());
        assert_eq!(guard.check("touch x", None), Ok(()));
    }

    #[test]
    fn approve_shell_mode_asks_unless_approved() {
        let guard = ShellGuard::with_approve_shell(&["echo .*".into()]).unwrap();
        assert!(guard.approve_shell());
        assert_eq!(guard.check("echo hi", None), Ok(()));
        let e = guard.check("echo hi; touch x", None).unwrap_err();
        assert_eq!(e.code, ErrorCode::ApprovalRequired);
        let details = e.details.unwrap();
        assert_eq!(details["summary"], "echo hi; touch x");
        assert!(
            details["reason"].as_str().unwrap().contains("\"touch x\""),
            "{details}"
        );
        assert_eq!(guard.check("touch x", Some("req1")), Ok(()));
        let long = format!("touch {}", "x".repeat(1000));
        let e = guard.check(&long, None).unwrap_err();
        assert_eq!(
            e.details.unwrap()["summary"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            MAX_SUMMARY_CHARS
        );
    }

    #[test]
    fn approve_exec_mode_puts_bash_in_approve_shell_mode() {
        let guard = ShellGuard::for_approve_exec(&[]).unwrap();
        assert!(guard.approve_shell());
        assert!(guard.auto_approves(None));
        let e = guard.check("ls", None).unwrap_err();
        assert_eq!(e.code, ErrorCode::ApprovalRequired);
        assert!(e.message.contains("--approve-exec"), "{}", e.message);
        assert_eq!(guard.check("ls", Some("req1")), Ok(()));
        let guard = ShellGuard::for_approve_exec(&["ls".into()]).unwrap();
        assert_eq!(guard.check("ls", None), Ok(()));
        assert!(guard.check("touch x", None).is_err());
    }

    #[test]
    fn bad_patterns_are_startup_errors() {
        assert!(matches!(
            ShellGuard::with_approve_shell(&["[".into()]),
            Err(GuardError::Pattern { .. })
        ));
    }
}
