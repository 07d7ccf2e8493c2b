//! The `transfer.*` requests of an agent connection: open a put or a get on a node
//! (after the token's policy, and an operator's approval where it says `confirm`),
//! finish, cancel and credit it, and node → node copies.

use super::approval::{self, Asked};
use super::ending::{end, refused};
use super::{
    ask_node, decode, tool_of, Far, Owner, Route, TransferError, FINISH_ANSWER, NODE_ANSWER,
};
use crate::agent_handle::AgentHandle;
use crate::policy::Decision;
use crate::state::Shared;
use gsv_protocol::frame::{encode_err, encode_event, encode_ok};
use gsv_protocol::names::{NamespacedName, NodeId};
use gsv_protocol::transfer::{
    AgentOpenParams, CancelParams, CopyParams, Credit, Direction, FinishParams, Finished,
    OpenParams, OpenResult, Progress, WINDOW_BYTES,
};
use gsv_protocol::{EventName, Method};
use serde::Serialize;
use serde_json::value::RawValue;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Handles a `transfer.*` request from `agent` (answered on its connection).
pub fn request(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    id: String,
    method: Method,
    params: Option<Box<RawValue>>,
) {
    let shared = shared.clone();
    let agent = agent.clone();
    tokio::spawn(async move {
        let raw = params.as_deref().map(RawValue::get).unwrap_or("{}");
        let frame = match method {
            Method::TransferOpen => answer(&id, open(&shared, &agent, raw).await),
            Method::TransferFinish => answer(&id, finish(&shared, &agent, raw).await),
            Method::TransferCancel => answer(&id, cancel(&shared, &agent, raw).await),
            Method::TransferCopy => answer(&id, copy(&shared, &agent, &id, raw).await),
            Method::TransferList => answer(&id, super::tree::list(&shared, &agent, raw).await),
            Method::TransferPlace => answer(&id, super::tree::place(&shared, &agent, raw).await),
            _ => answer(&id, credit(&shared, &agent, raw)),
        };
        let _ = agent.out.send(frame);
    });
}

fn answer<T: Serialize>(id: &str, result: Result<T, TransferError>) -> String {
    use crate::error::WireError;
    match result {
        Ok(r) => encode_ok(id, &r),
        Err(e) => encode_err(id, &e.to_shape()),
    }
}

pub(super) fn parse<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T, TransferError> {
    serde_json::from_str(raw).map_err(TransferError::BadParams)
}

/// Whose a transfer an agent opens is.
pub(super) fn owner(agent: &AgentHandle) -> Owner {
    Owner {
        name: agent.name.clone(),
        token_id: agent.token_id.clone(),
    }
}

/// `transfer.open`: the policy (and an approval where it asks for one), the node,
/// then the node's own checks.
async fn open(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<OpenResult, TransferError> {
    use crate::error::WireError;
    let p: AgentOpenParams = parse(raw)?;
    let node_id = NodeId::parse(&p.node).map_err(|_| TransferError::BadNode(p.node.clone()))?;
    let tool = tool_of(p.direction);
    let name = NamespacedName::join(node_id.as_str(), tool);
    let who = owner(agent);
    let mut decision = agent.policy.decide_as(&name, super::capability_of(tool));
    // A file of a directory copy an operator approved as a whole.
    if decision == Decision::Confirm {
        let grants = &shared.transfers.grants;
        if let Some(approval) = grants.covering(&agent.conn_id, node_id.as_str(), tool, &p.path) {
            tracing::info!(agent = %agent.name, node = %node_id, tool, path = ?p.path, approval = %approval, "transfer covered by an approved directory copy");
            decision = Decision::Allow;
        }
    }
    let refuse = |e: &TransferError| {
        refused(
            shared,
            &who,
            node_id.as_str(),
            tool,
            &p.path,
            e.code().as_str(),
        )
    };
    if decision == Decision::Deny {
        let e = TransferError::Denied { name };
        refuse(&e);
        return Err(e);
    }
    let node = super::copy::online(shared, node_id.as_str(), tool)?;
    // A transfer that waits for an approval is opened on the node first, so the
    // question names the file the node resolved (and a get's size); nothing moves
    // before the answer: a held get sends nothing, and the agent learns a put's id
    // (without which its chunks go nowhere) only once it is approved.
    let confirm = decision == Decision::Confirm;
    let id = uuid::Uuid::new_v4();
    // Registered before the node is asked: a node sends a `get`'s first chunks as
    // soon as it has opened the file, and they may arrive before its answer is read.
    let route = Arc::new(Route::new(
        id,
        p.direction,
        who.clone(),
        node.clone(),
        Far::Agent(agent.clone()),
        p.path.clone(),
    ));
    shared.transfers.admit(std::slice::from_ref(&route))?;
    let params = OpenParams {
        id,
        direction: p.direction,
        path: p.path.clone(),
        meta: p.meta,
        sha256: p.sha256,
        offset: p.offset,
        hold: confirm && p.direction == Direction::Get,
    };
    let opened = ask_node(&node, Method::TransferOpen, &params, NODE_ANSWER)
        .await
        .and_then(|raw| decode::<OpenResult>(&raw));
    let opened = match opened {
        Ok(o) => route.opened(o),
        Err(e) => {
            shared.transfers.routes.remove(&id);
            return Err(e);
        }
    };
    if confirm {
        let asked = match p.direction {
            Direction::Get => Asked::get(
                &who,
                agent,
                node_id.as_str(),
                (&p.path, &opened),
                p.source.as_deref(),
                opened.meta.size,
            ),
            Direction::Put => Asked::put(
                &who,
                agent,
                node_id.as_str(),
                (&p.path, &opened),
                p.source.as_deref(),
                opened.meta.size,
            ),
        };
        route.waiting.store(true, Ordering::Relaxed);
        let approved = approval::wait(shared, &asked, agent.out.closed_token()).await;
        route.waiting.store(false, Ordering::Relaxed);
        route.touch();
        if let Err(e) = approved {
            super::relay::refuse_on_node(shared, &route, e.code().as_str(), opened.offset > 0);
            return Err(e);
        }
        if params.hold {
            // Released: the node starts sending.
            let release = Credit { id, bytes: 0 };
            let _ = node
                .out
                .send(encode_event(EventName::TransferCredit, &release, 0));
        }
    }
    // The agent may have gone while the node opened it.
    if agent.out.is_closed() {
        super::relay::agent_gone(shared, &agent.conn_id);
    }
    tracing::info!(
        transfer = %id,
        agent = %agent.name,
        node = %route.node.id,
        tool = route.tool(),
        path = ?route.path(),
        "transfer opened"
    );
    Ok(opened)
}

/// `transfer.finish` (a put): the node checks and places the file.
async fn finish(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<Finished, TransferError> {
    use crate::error::WireError;
    let p: FinishParams = parse(raw)?;
    let route = shared
        .transfers
        .of_agent(p.id, agent)
        .ok_or(TransferError::Unknown { id: p.id })?;
    if route.direction != Direction::Put {
        return Err(TransferError::NotAPut {
            what: "transfer.finish",
        });
    }
    route.waiting.store(true, Ordering::Relaxed);
    let outcome = ask_node(&route.node, Method::TransferFinish, &p, FINISH_ANSWER).await;
    let done = outcome.and_then(|raw| decode::<Finished>(&raw));
    match &done {
        Ok(f) => end(shared, &route, "ok", Some(&f.sha256), Some(f.bytes)),
        Err(e) => end(shared, &route, e.code().as_str(), None, None),
    }
    done
}

/// `transfer.cancel`: ends the transfer on the node too.
async fn cancel(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<serde_json::Value, TransferError> {
    let p: CancelParams = parse(raw)?;
    let route = shared
        .transfers
        .of_agent(p.id, agent)
        .ok_or(TransferError::Unknown { id: p.id })?;
    end(shared, &route, "cancelled", None, None);
    ask_node(&route.node, Method::TransferCancel, &p, NODE_ANSWER).await?;
    Ok(serde_json::json!({}))
}

/// `transfer.credit` (a get): the agent wrote bytes; the node may send more.
fn credit(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    raw: &str,
) -> Result<serde_json::Value, TransferError> {
    let p: Credit = parse(raw)?;
    let route = shared
        .transfers
        .of_agent(p.id, agent)
        .ok_or(TransferError::Unknown { id: p.id })?;
    if route.direction != Direction::Get {
        return Err(TransferError::NotAGet {
            what: "transfer.credit",
        });
    }
    let credit = Credit {
        id: p.id,
        bytes: p.bytes.min(WINDOW_BYTES),
    };
    route.in_flight.give(credit.bytes);
    route.touch();
    let _ = route
        .node
        .out
        .send(encode_event(EventName::TransferCredit, &credit, 0));
    Ok(serde_json::json!({}))
}

/// `transfer.copy`: a node → node copy the gateway drives; `transfer.progress` events
/// (naming request `req`) tell the agent how far it came.
async fn copy(
    shared: &Arc<Shared>,
    agent: &Arc<AgentHandle>,
    req: &str,
    raw: &str,
) -> Result<gsv_protocol::transfer::Copied, TransferError> {
    let p: CopyParams = parse(raw)?;
    let asker = super::Requester::new(
        &agent.name,
        &agent.token_id,
        agent.policy.clone(),
        Some(agent.conn_id.clone()),
        agent.out.closed_token().clone(),
    );
    let progress = |bytes: u64, size: u64| {
        agent.send_event(
            EventName::TransferProgress,
            &Progress {
                request: req.to_owned(),
                bytes,
                size,
            },
        );
    };
    super::copy(shared, &asker, p, &progress).await
}
