//! How a call follows the command it started: Bash and exec alike wait for it, hand it
//! to the background at once, or wait a while and then hand it over.
//!
//! One place for the rules both tools promise: a call that waits kills its command's
//! process group if the call is cancelled or dropped (its deadline), reports progress
//! while it waits, and a `yieldMs` wait ends early enough before the call's deadline
//! for the answer to get out; a command that finishes just as the wait ends is
//! reported finished, not running.

use crate::sessions::{Session, SessionManager, Snapshot};
use crate::tool::ToolContext;
use crate::tools::bash::{wait_reporting, KillOnDrop, DEADLINE_MARGIN};
use std::sync::Arc;
use std::time::Duration;

/// How the call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Until the command ends.
    Sync,
    /// Not at all: the command runs in the background from the start.
    Background,
    /// This many ms, then the command goes to the background.
    Yield(u64),
}

/// How the call's wait ended.
pub(crate) enum Outcome {
    /// The command ended (its output is drained); the session is forgotten as a
    /// foreground one.
    Finished,
    /// The command runs on in the background, as this snapshot shows.
    Running(Box<Snapshot>),
    /// The call was cancelled: the command's process group was killed.
    Cancelled,
}

/// Follows `session` as `mode` says.
pub(crate) async fn follow(
    sessions: &SessionManager,
    session: &Arc<Session>,
    ctx: &ToolContext,
    mode: Mode,
) -> Outcome {
    let wait = match mode {
        Mode::Background => return Outcome::Running(Box::new(session.snapshot())),
        Mode::Sync => None,
        Mode::Yield(yield_ms) => Some(
            Duration::from_millis(yield_ms).min(
                ctx.remaining()
                    .saturating_sub(DEADLINE_MARGIN.min(ctx.remaining() / 4)),
            ),
        ),
    };
    let guard = KillOnDrop(Some(Arc::clone(session)));
    match wait {
        None => {
            tokio::select! {
                _ = wait_reporting(session, ctx) => {}
                _ = ctx.cancel.cancelled() => return Outcome::Cancelled,
            }
        }
        Some(wait) => {
            tokio::select! {
                _ = wait_reporting(session, ctx) => {}
                _ = tokio::time::sleep(wait) => {}
                _ = ctx.cancel.cancelled() => return Outcome::Cancelled,
            }
            if session.set_background() {
                guard.disarm();
                return Outcome::Running(Box::new(session.snapshot()));
            }
            // It finished just now: wait for the last output to be drained.
            session.wait_finished().await;
        }
    }
    guard.disarm();
    sessions.forget_foreground(session);
    Outcome::Finished
}
