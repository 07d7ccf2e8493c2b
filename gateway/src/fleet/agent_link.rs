//! An agent's connection as the fleet sees it: its place among its token's
//! connections, its entry among the agents that hear events, and the file transfers
//! it drives.
//!
//! The agent WebSocket (`agent_session`) drives the connection and reads its frames;
//! what they change in the gateway happens here and in `calls.rs`.

use crate::agent_handle::AgentHandle;
use crate::budget::{NoPlace, Reservation};
use bytes::Bytes;
use gsv_protocol::Method;
use gsv_transport::{queue, Outbound, Queue};
use serde_json::value::RawValue;
use std::sync::Arc;

impl super::Fleet {
    /// One more open agent connection for token `token_id`, unless it holds its share
    /// or all places are taken; given back when the reservation drops.
    pub fn open_agent_place(&self, token_id: &str) -> Result<Reservation<'_>, NoPlace> {
        self.shared.agent_conns.open(token_id)
    }

    /// A connection's send queue, closed when the gateway stops.
    pub fn send_queue(&self) -> (Outbound, Queue) {
        queue(self.shared.shutdown.child_token())
    }

    /// Enters `agent` among the connections that hear events (approvals, node
    /// changes, process exits).
    pub fn enter_agent(&self, agent: Arc<AgentHandle>) {
        self.shared.agents.insert(agent.conn_id.clone(), agent);
    }

    /// Takes connection `conn_id` out of the agents that hear events.
    pub fn forget_agent(&self, conn_id: &str) {
        self.shared.agents.remove(conn_id);
    }

    /// Handles a `transfer.*` request from `agent` (answered on its connection).
    pub fn transfer_request(
        &self,
        agent: &Arc<AgentHandle>,
        id: String,
        method: Method,
        params: Option<Box<RawValue>>,
    ) {
        crate::transfer::request(&self.shared, agent, id, method, params)
    }

    /// A binary transfer frame from `agent`, relayed to its node.
    pub fn agent_transfer_frame(&self, agent: &Arc<AgentHandle>, frame: Bytes) {
        crate::transfer::from_agent(&self.shared, agent, frame)
    }

    /// Ends the transfers of agent connection `conn_id`, which closed.
    pub fn agent_gone(&self, conn_id: &str) {
        crate::transfer::agent_gone(&self.shared, conn_id)
    }
}
