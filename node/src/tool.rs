//! The tool trait: what every tool a node offers implements.
//!
//! A tool declares itself once ([`Tool::def`]: name, schema, capability, hints) and then
//! runs calls ([`Tool::execute`]). Failures the model should read are returned as
//! `ToolResult::error` (`isError: true`); protocol failures (unknown tool, timeout,
//! cancellation, oversized results) are the runner's business, not the tool's — with
//! one exception: a tool may refuse a call *before* it runs ([`Tool::check`]) with a
//! protocol error, which is how node-side guards answer `denied` or
//! `approval_required` (see [`crate::guards`]).

use crate::events::EventSender;
use crate::protected::Protected;
use gsv_protocol::limits::DEFAULT_CALL_TIMEOUT_MS;
use gsv_protocol::{ErrorShape, ToolDef, ToolResult};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One tool. Implement with `#[gsv_node::async_trait]`.
///
/// `execute` receives untrusted `args` (validate every field; never panic on them). Its
/// future may be dropped at any await point: on cancellation or when the deadline
/// passes, the runner first cancels `ctx.cancel` and then drops the future, so anything
/// the tool starts outside the future (child processes, blocking work) must either
/// watch `ctx.cancel` or be cleaned up on drop (e.g. `kill_on_drop`).
#[async_trait::async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The declaration sent to the gateway in `connect`. Called once, at registration.
    fn def(&self) -> ToolDef;

    /// Decides whether a call may run at all, before [`Tool::execute`]. The node's
    /// dispatcher always calls it first; an `Err` becomes the call's protocol error
    /// (e.g. `denied` from the shell blocklist, `approval_required` from
    /// `--approve-shell`) and `execute` is not called. Malformed arguments are not
    /// its business: let them through for `execute` to report as a tool error. The
    /// default admits every call.
    async fn check(&self, _args: &Value, _ctx: &ToolContext) -> Result<(), ErrorShape> {
        Ok(())
    }

    /// Runs one call.
    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult;

    /// Whether this call only says what it would do (`dryRun: true` for the tools
    /// that take it) and changes nothing. Such a call of a tool that needs approval
    /// ([`crate::guards::posture`]) runs without one. Only a tool whose dry run
    /// really changes nothing may answer `true`; the default is `false`.
    fn dry_run(&self, _args: &Value) -> bool {
        false
    }

    /// What this call would do, in a few lines for the operator who decides on it:
    /// the dry-run plan shown in the approval request when the tool needs approval
    /// (e.g. the packages `pkg_install` would install). Must change nothing; it runs
    /// before any approval, bounded in time by the node (cut to
    /// [`crate::guards::posture::MAX_PLAN_BYTES`]). `None` (the default): no plan.
    async fn plan(&self, _args: &Value, _ctx: &ToolContext) -> Option<String> {
        None
    }

    /// Whether the tool usually answers without waiting on anything (no I/O, no
    /// process, no timer), like Echo. Such a call runs on the connection's own task up
    /// to its first pause, and gets a task of its own only if it has to wait: an
    /// instant answer then costs no task hand-off. Anything that does real work before
    /// its first pause (spawning a process, reading a file) must answer `false` (the
    /// default), or it holds up the connection's reads while it works.
    fn instant(&self) -> bool {
        false
    }
}

/// What a tool knows about the call it is running.
#[derive(Clone)]
pub struct ToolContext {
    /// The node's workspace (absolute): relative paths resolve against it.
    pub workspace: PathBuf,
    /// Whether file tools are confined to `workspace` (`--confine`); see
    /// [`crate::tools::paths`].
    pub confine: bool,
    /// The gateway's id for this call (the `req` id).
    pub call_id: String,
    /// Cancelled when the caller cancels, the deadline passes, or the node shuts down.
    pub cancel: CancellationToken,
    /// When the call's deadline passes.
    pub deadline: Instant,
    /// Sends events to the gateway on the current connection.
    pub events: EventSender,
    /// The id of the operator's approval this call carries (`tool.invoke.approval`),
    /// if the gateway obtained one. Node-side guards that ask for approval accept it
    /// as the gateway's word; see [`crate::guards::approve`].
    pub approval: Option<String>,
    /// Who the call is for (`tool.invoke.caller`): sessions the call starts belong to
    /// that token, and Process shows a caller only its own unless it is an operator.
    /// `None` when the gateway did not say (a context made in tests): an operator.
    pub caller: Option<gsv_protocol::method::InvokeCaller>,
    /// What the file tools never read or write (the node's and the gateway's data);
    /// see [`crate::protected`].
    pub protected: Arc<Protected>,
}

impl ToolContext {
    /// A context with a fresh cancellation token, the default call deadline and a
    /// detached event sender: for tests and for running a tool outside a connection.
    pub fn new(workspace: impl Into<PathBuf>, call_id: impl Into<String>) -> Self {
        ToolContext {
            workspace: workspace.into(),
            confine: false,
            call_id: call_id.into(),
            cancel: CancellationToken::new(),
            deadline: Instant::now() + Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
            events: EventSender::detached(),
            approval: None,
            caller: None,
            protected: Arc::new(Protected::default()),
        }
    }

    /// The token id that sessions this call starts belong to (`None`: nobody's, which
    /// only operators see).
    pub fn owner(&self) -> Option<&str> {
        self.caller.as_ref().map(|c| c.token_id.as_str())
    }

    /// Whether the caller may see and act on every session: an operator, or a context
    /// the gateway did not describe.
    pub fn is_operator(&self) -> bool {
        self.caller.as_ref().is_none_or(|c| c.operator)
    }

    /// Whether the caller may see and act on a session owned by `owner`.
    pub fn may_use_session(&self, owner: Option<&str>) -> bool {
        self.is_operator() || (owner.is_some() && owner == self.owner())
    }

    /// Resolves a path argument: absolute paths are used as they are, relative ones
    /// are joined to the workspace. `.` components are dropped; `..` is kept (the
    /// kernel resolves it, symlinks included), and nothing here confines the result:
    /// file tools go through [`crate::tools::paths`], which applies `confine`.
    pub fn resolve_path(&self, path: impl AsRef<Path>) -> PathBuf {
        let joined = self.workspace.join(path);
        std::path::absolute(&joined).unwrap_or(joined)
    }

    /// Time left before the deadline (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_against_the_workspace() {
        let ctx = ToolContext::new("/srv/ws", "1");
        assert_eq!(ctx.resolve_path("a/b.txt"), Path::new("/srv/ws/a/b.txt"));
        assert_eq!(ctx.resolve_path("./a"), Path::new("/srv/ws/a"));
        assert_eq!(ctx.resolve_path("/etc/hosts"), Path::new("/etc/hosts"));
        assert_eq!(ctx.resolve_path("../x"), Path::new("/srv/ws/../x"));
        assert!(ctx.remaining() > Duration::from_secs(60));
    }
}
