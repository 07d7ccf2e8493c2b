//! An agent connection as the rest of the gateway sees it: who it is, what its token
//! may do, and how to send it an event.

use crate::policy::Policy;
use crate::toolset::ToolSet;
use gsv_protocol::frame::encode_event;
use gsv_protocol::names::NamespacedName;
use gsv_protocol::EventName;
use gsv_transport::Outbound;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An agent connection, as other parts of the gateway see it (to send it events).
pub struct AgentHandle {
    pub conn_id: String,
    pub name: String,
    pub token_id: String,
    /// What the token may do beyond its policy: the admin's, an operator's (reads the
    /// fleet and gets operator events), or an agent's.
    pub authority: crate::operator::Authority,
    pub out: Outbound,
    pub policy: Arc<Policy>,
    /// Its open uploads: its connection reads ahead while there are any.
    pub uploads: crate::transfer::uploads::Uploads,
    seq: AtomicU64,
}

impl AgentHandle {
    pub fn new(
        conn_id: String,
        name: String,
        token_id: String,
        authority: crate::operator::Authority,
        out: Outbound,
        policy: Arc<Policy>,
        read_ahead: gsv_transport::ReadAheadSwitch,
    ) -> Self {
        AgentHandle {
            conn_id,
            name,
            token_id,
            authority,
            out,
            policy,
            uploads: crate::transfer::uploads::Uploads::new(read_ahead),
            seq: AtomicU64::new(1),
        }
    }

    /// Sends an event with this connection's next sequence number.
    pub fn send_event<P: Serialize + ?Sized>(&self, event: EventName, payload: &P) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let _ = self.out.send(encode_event(event, payload, seq));
    }

    /// Whether this agent may see any tool of `set` on `node` that `hidden` does not
    /// hide (operators see every node, tools or not).
    pub fn sees_any(&self, node: &str, set: &ToolSet, hidden: impl Fn(&str) -> bool) -> bool {
        self.policy.sees_all()
            || set.tools.iter().any(|t| {
                !hidden(&t.def.name)
                    && self
                        .policy
                        .visible(&NamespacedName::join(node, &t.def.name), t.classes)
            })
    }
}
