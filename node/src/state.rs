//! What every connection of one node shares: its configuration, tools, probe cache and
//! event sender.
//!
//! Built once by the runner and handed to each session behind an `Arc`, so a reconnect
//! rebuilds nothing but the socket.

use crate::config::NodeConfig;
use crate::credential::Credentials;
use crate::events::EventSender;
use crate::ledger::Ledger;
use crate::login_profile::LoginProfileCheck;
use crate::probe::Probe;
use crate::protected::Protected;
use crate::registry::Registry;
use gsv_protocol::handshake::{Auth, ClientInfo};
use gsv_protocol::{ConnectParams, NodeInfo, Role, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};
use std::sync::Arc;

/// Shared, read-mostly node state.
pub(crate) struct NodeState {
    pub config: NodeConfig,
    pub credentials: Credentials,
    pub registry: Registry,
    pub probe: Probe,
    /// The login-profile check and its last finding (reported in `runtime`).
    pub login_profile: LoginProfileCheck,
    pub events: EventSender,
    /// The calls the gateway sent, across connections (outbox and call-id dedupe).
    pub ledger: Ledger,
    /// Random id of this node process, sent in `connect`.
    pub instance: String,
    /// What the file tools never touch: `config.protect` plus `config.data_dir`.
    pub protected: Arc<Protected>,
}

impl NodeState {
    /// The `connect` params of a lane (`lane`) of this node's connection, answering
    /// the challenge `nonce`: its credential, and no node object.
    pub fn lane_params(
        &self,
        nonce: String,
        lane: gsv_protocol::handshake::LaneParams,
    ) -> ConnectParams {
        ConnectParams {
            node: None,
            lane: Some(lane),
            ..self.connect_params(nonce)
        }
    }

    /// The `connect` params answering the challenge `nonce`.
    pub fn connect_params(&self, nonce: String) -> ConnectParams {
        ConnectParams {
            min_protocol: MIN_PROTOCOL_VERSION,
            max_protocol: PROTOCOL_VERSION,
            role: Role::Node,
            auth: Auth {
                token: self.credentials.current(),
                nonce,
            },
            client: ClientInfo {
                name: "gsv-node".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
            },
            node: Some(NodeInfo {
                id: self.config.id.to_string(),
                tools: self.registry.defs(),
                capabilities: self.registry.capabilities(),
                host_role: self.config.host_role,
                runtime: gsv_protocol::Runtime {
                    login_profile: self.login_profile.status(),
                    ..self.probe.runtime()
                },
                instance: self.instance.clone(),
                journal: self.ledger.journaled(),
            }),
            lane: None,
        }
    }
}
