//! Directory copies (`gsv cp -r`): `transfer.list` and `transfer.place`, relayed to the
//! node after the policy check of a file transfer of the same direction.
//!
//! A tree is copied as a manifest plus one ordinary transfer per file
//! (`docs/protocol.md` §5.11, "Directory trees"): these two requests carry the
//! manifest. Listing a tree reads the node, so it needs `{node}__Read`; making
//! directories and symlinks and settling their modes writes it, so `{node}__Write`. A
//! `confirm` rule asks an operator once per tree ([`super::grant`]). The gateway does not judge
//! the entries: the node checks every path against its path rules and refuses `..`
//! and absolute entries itself, so a client talking to the node through any gateway
//! meets the same checks. Each request leaves one audit row.

use super::agent::{owner, parse};
use super::approval::{self, Asked, TreeSize};
use super::grant::{Grant, GRANT_LIFE};
use super::{ask_node, decode, tree_top, TransferError};
use crate::agent_handle::AgentHandle;
use crate::audit::AuditEvent;
use crate::error::WireError;
use crate::policy::Decision;
use crate::state::Shared;
use gsv_protocol::names::{NamespacedName, NodeId};
use gsv_protocol::transfer::tree::{
    AgentListParams, AgentPlaceParams, ListParams, Listing, PlaceParams, PlaceStep, Placed,
};
use gsv_protocol::Method;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a node may take to list a tree (up to its bounded size).
const LIST_ANSWER: Duration = Duration::from_secs(120);
/// How long a node may take to make or settle one batch of entries.
const PLACE_ANSWER: Duration = Duration::from_secs(120);

/// `transfer.list`: a tree on a node (`{node}__Read`). Under a `confirm` rule the
/// gateway lists it first to tell the operator what it holds, and hands the listing
/// out (listed again) only once approved; the approval then covers the tree's files.
pub(super) async fn list(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<Listing, TransferError> {
    let p: AgentListParams = parse(raw)?;
    let started = Instant::now();
    let audit = Audit {
        shared,
        agent,
        node: &p.node,
        tool: "Read",
        method: Method::TransferList,
        path: &p.path,
        started,
    };
    let (node, decision) = admit(shared, agent, &audit)?;
    let grants = &shared.transfers.grants;
    let ask = decision == Decision::Confirm
        && grants
            .covering(&agent.conn_id, node.id.as_str(), "Read", &p.path)
            .is_none();
    let params = ListParams {
        path: p.path.clone(),
    };
    let listed = || async {
        ask_node(&node, Method::TransferList, &params, LIST_ANSWER)
            .await
            .and_then(|raw| decode::<Listing>(&raw))
    };
    let mut outcome = listed().await;
    if let (true, Ok(first)) = (ask, &outcome) {
        let size = TreeSize::of(&first.entries);
        let root = first.root.clone();
        let from = approval::on_node(node.id.as_str(), &root);
        let to = approval::local(agent, p.source.as_deref());
        let asked = Asked::tree(
            &owner(agent),
            agent,
            (node.id.as_str(), "Read"),
            (from, to),
            size,
        );
        outcome = match approval::wait(shared, &asked, agent.out.closed_token()).await {
            Ok(approval) => {
                grants.add(Grant {
                    conn_id: agent.conn_id.clone(),
                    node: node.id.to_string(),
                    tool: "Read",
                    root,
                    approval,
                    until: Instant::now() + GRANT_LIFE,
                });
                listed().await
            }
            Err(e) => Err(e),
        };
    }
    match &outcome {
        Ok(l) => {
            tracing::info!(agent = %agent.name, node = %node.id, path = ?l.root, entries = l.entries.len(), "tree listed");
            audit.record("ok", l.entries.len());
        }
        Err(e) => audit.record(e.code().as_str(), 0),
    }
    outcome
}

/// `transfer.place`: directories, symlinks or settled modes on a node
/// (`{node}__Write`). Under a `confirm` rule the directories step of a tree asks an
/// operator once for the whole copy; its other steps and files are covered by that
/// approval.
pub(super) async fn place(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<Placed, TransferError> {
    let p: AgentPlaceParams = parse(raw)?;
    let started = Instant::now();
    let audit = Audit {
        shared,
        agent,
        node: &p.node,
        tool: "Write",
        method: Method::TransferPlace,
        path: &p.path,
        started,
    };
    let (node, decision) = admit(shared, agent, &audit)?;
    let grants = &shared.transfers.grants;
    let mut approved = None;
    // Exactly the top the operator read, once approved.
    let mut resolved_top = None;
    if decision == Decision::Confirm
        && grants
            .covering(&agent.conn_id, node.id.as_str(), "Write", &p.path)
            .is_none()
    {
        if p.step != PlaceStep::Dirs {
            let e = TransferError::TreeNeedsApproval {
                name: NamespacedName::join(node.id.as_str(), "Write"),
            };
            audit.record(e.code().as_str(), 0);
            return Err(e);
        }
        let from = approval::local(agent, p.source.as_deref());
        let top = tree_top::resolve(&node, &p.path, p.into.as_deref()).await;
        let size = TreeSize::of(&p.entries);
        let asked = Asked::tree(
            &owner(agent),
            agent,
            (node.id.as_str(), "Write"),
            (from, top.shown),
            size,
        );
        match approval::wait(shared, &asked, agent.out.closed_token()).await {
            Ok(a) => {
                approved = Some(a);
                resolved_top = Some((top.path, top.into));
            }
            Err(e) => {
                audit.record(e.code().as_str(), 0);
                return Err(e);
            }
        }
    }
    let entries = p.entries.len();
    let (path, into) = resolved_top.unwrap_or_else(|| (p.path.clone(), p.into));
    let params = PlaceParams {
        path,
        into,
        step: p.step,
        entries: p.entries,
    };
    let outcome = ask_node(&node, Method::TransferPlace, &params, PLACE_ANSWER)
        .await
        .and_then(|raw| decode::<Placed>(&raw));
    match &outcome {
        Ok(placed) => {
            tracing::info!(agent = %agent.name, node = %node.id, path = ?placed.root, step = ?params.step, done = placed.done, "tree placed");
            audit.record("ok", placed.done);
            if let Some(approval) = approved {
                grants.add(Grant {
                    conn_id: agent.conn_id.clone(),
                    node: node.id.to_string(),
                    tool: "Write",
                    root: placed.root.clone(),
                    approval,
                    until: Instant::now() + GRANT_LIFE,
                });
            }
        }
        Err(e) => {
            tracing::info!(agent = %agent.name, node = %node.id, path = ?params.path, step = ?params.step, entries, error = %e, "tree place refused");
            audit.record(e.code().as_str(), 0);
        }
    }
    outcome
}

/// What one request's audit row says.
struct Audit<'a> {
    shared: &'a Shared,
    agent: &'a AgentHandle,
    node: &'a str,
    tool: &'static str,
    method: Method,
    path: &'a str,
    started: Instant,
}

impl Audit<'_> {
    fn record(&self, outcome: &str, entries: usize) {
        self.shared.audit.record(AuditEvent::TransferTree {
            agent: &self.agent.name,
            token_id: &self.agent.token_id,
            node: self.node,
            tool: self.tool,
            method: self.method.as_str(),
            path: self.path,
            entries,
            outcome,
            duration_ms: self.started.elapsed().as_millis() as u64,
        });
    }
}

/// The token's policy for the file tool the request stands for (a denial is logged
/// and audited), then the node: its connection and that it offers the tool. The
/// node, and whether the policy allows outright or asks for an approval.
fn admit(
    shared: &Shared,
    agent: &AgentHandle,
    audit: &Audit<'_>,
) -> Result<(Arc<crate::registry::NodeHandle>, Decision), TransferError> {
    let node_id =
        NodeId::parse(audit.node).map_err(|_| TransferError::BadNode(audit.node.into()))?;
    let name = NamespacedName::join(node_id.as_str(), audit.tool);
    let decision = agent
        .policy
        .decide_as(&name, super::capability_of(audit.tool));
    if decision == Decision::Deny {
        let e = TransferError::Denied { name };
        tracing::warn!(agent = %agent.name, node = %node_id, tool = audit.tool, method = audit.method.as_str(), path = ?audit.path, "tree request refused by the token's policy");
        audit.record(e.code().as_str(), 0);
        return Err(e);
    }
    let node = super::copy::online(shared, node_id.as_str(), audit.tool)?;
    Ok((node, decision))
}
