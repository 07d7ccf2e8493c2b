//! Who is calling: the one place a [`Caller`] is made. Every way in (an agent
//! connection, an MCP session, an HTTP token, a console session, a job, a fan-out, a
//! call another replica forwarded) starts from [`Caller::from_agent`] or
//! [`Caller::of`] and adds what it carries, so what a caller is cannot differ from
//! one door to the next.

use super::{ApprovalAsker, FanoutApproval, FromReplica};
use crate::agent_handle::AgentHandle;
use crate::policy::Policy;
use crate::registry::ProgressSink;

/// Who is calling.
// A private field, not `#[non_exhaustive]`: that attribute binds other crates only,
// and the point is that no module of this one writes a `Caller { .. }` either.
#[allow(clippy::manual_non_exhaustive)]
pub struct Caller<'a> {
    pub name: &'a str,
    pub token_id: &'a str,
    pub policy: &'a Policy,
    /// The caller's WebSocket connection, for approval events.
    pub agent: Option<&'a AgentHandle>,
    /// Where the node's `call.progress` events for this call go, if the caller wants them.
    pub progress: Option<ProgressSink>,
    /// Asks the caller's own user to approve a call that needs approval, before (or
    /// instead of) the operator queue: the MCP client's user through elicitation.
    pub asker: Option<&'a dyn ApprovalAsker>,
    /// The fan-out this call is one node's part of: its one approval decision.
    pub fanout: Option<&'a FanoutApproval>,
    /// The job this call is (`async`): how it is sent is recorded in the job, so a
    /// restarted gateway can ask the node for it again ([`crate::reattach`]).
    pub job: Option<&'a str>,
    /// The replica that forwarded this call (cluster mode): it is routed here or not at
    /// all, never forwarded again.
    pub from_replica: Option<&'a FromReplica>,
    /// Private: a caller is made here only, by the constructors below.
    _made_here: (),
}

impl<'a> Caller<'a> {
    /// A caller with no connection of its own to send events to (an MCP session, an
    /// HTTP request, a console session): `name` and `token_id` its token's.
    pub fn of(name: &'a str, token_id: &'a str, policy: &'a Policy) -> Self {
        Caller {
            name,
            token_id,
            policy,
            agent: None,
            progress: None,
            asker: None,
            fanout: None,
            job: None,
            from_replica: None,
            _made_here: (),
        }
    }

    /// The agent on this WebSocket connection (approval events go to it).
    pub fn from_agent(agent: &'a AgentHandle) -> Self {
        Caller {
            agent: Some(agent),
            ..Caller::of(&agent.name, &agent.token_id, &agent.policy)
        }
    }

    /// The same caller, with a sink for the call's progress events.
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// The same caller, its progress going to `sink` if there is one.
    pub fn with_progress_to(mut self, sink: Option<ProgressSink>) -> Self {
        self.progress = sink;
        self
    }

    /// The same caller, whose own user is asked first when a call needs approval.
    pub fn with_asker(mut self, asker: &'a dyn ApprovalAsker) -> Self {
        self.asker = Some(asker);
        self
    }

    /// The same caller making the job `job`'s call.
    pub fn for_job(mut self, job: &'a str) -> Self {
        self.job = Some(job);
        self
    }

    /// The same caller making one node's part of a fan-out: one approval decision for
    /// the whole group; no progress, no job of its own.
    pub fn in_fanout(&self, group: &'a FanoutApproval) -> Caller<'a> {
        Caller {
            agent: self.agent,
            asker: self.asker,
            fanout: Some(group),
            ..Caller::of(self.name, self.token_id, self.policy)
        }
    }

    /// The same caller, for a call the replica `from` forwarded here.
    pub fn forwarded_by(mut self, from: &'a FromReplica) -> Self {
        self.from_replica = Some(from);
        self
    }
}
