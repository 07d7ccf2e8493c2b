//! One agent WebSocket connection: `tools.list`, `tools.call`, `tools.fanout`, `nodes.list`,
//! `nodes.show`, `cancel`, and for operators `approvals.*`, `nodes.acceptTools` and
//! `nodes.label`.
//!
//! Each call runs in its own task, so a slow tool never blocks the connection. The
//! agent's token policy is fixed at connect and checked on every call. When the agent
//! goes away, its calls still running are cancelled on their nodes.

use crate::agent_handle::AgentHandle;
use crate::audit::AuditEvent;
use crate::conn::{drive, Ws};
use crate::error::WireError;
use crate::fleet::Fleet;
use crate::handshake::{Handshake, HandshakeError};
use crate::operator::Authority;
use crate::policy::Policy;
use crate::router;
use crate::session_error::SessionError;
use crate::token::TokenKind;
use dashmap::DashMap;
use gsv_protocol::frame::{encode_err, encode_ok};
use gsv_protocol::method::{
    LabelsChange, NodesLabelParams, NodesListParams, NodesListResult, ToolsCallParams,
    ToolsListResult,
};
use gsv_protocol::offer::NodeIdParams;
use gsv_protocol::{ErrorShape, Frame, Limits, Method, Role};
use gsv_transport::Outbound;
use serde_json::value::RawValue;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Progress events buffered per call before the slowest are dropped.
const PROGRESS_BUFFER: usize = 16;

/// The agent's calls in flight, by request id.
type CallCancels = Arc<DashMap<String, CancellationToken>>;

/// Serves an agent WebSocket until it closes.
pub async fn run(fleet: Fleet, ws: Ws, peer: SocketAddr) {
    let Some(hs) = fleet.handshake(ws, Role::Agent, peer).await else {
        return;
    };
    // An agent's bulk lane (`gsv cp`'s connection) is served below calls.
    if hs.params.lane.is_some() {
        crate::bulk::run(session(fleet, hs, peer)).await;
    } else {
        session(fleet, hs, peer).await;
    }
}

/// An agent connection after its `connect` was read and authenticated.
async fn session(fleet: Fleet, hs: Handshake, peer: SocketAddr) {
    let policy = match hs.token.kind {
        TokenKind::Admin => Policy::full_access(),
        TokenKind::Operator => Policy::view_only(),
        TokenKind::Agent => {
            let spec = hs.token.policy.clone().unwrap_or_default();
            match Policy::compile(&spec) {
                Ok(p) => p,
                Err(e) => {
                    fleet.refuse(hs, HandshakeError::StoredPolicy(e)).await;
                    return;
                }
            }
        }
        TokenKind::Node | TokenKind::Join => {
            fleet.refuse(hs, HandshakeError::NodeTokenAsAgent).await;
            return;
        }
    };
    // Its place among the token's connections, held while the connection lives.
    let _place = match fleet.open_agent_place(&hs.token.id) {
        Ok(place) => place,
        Err(full) => {
            tracing::warn!(token_id = %hs.token.id, limit = full.limit, "agent connection refused: too many open");
            let e = HandshakeError::TooManyConnections {
                limit: full.limit,
                max: full.max,
            };
            fleet.refuse(hs, e).await;
            return;
        }
    };
    let conn_id = uuid::Uuid::new_v4().to_string();
    let name = hs.token.subject.clone();
    let token_id = hs.token.id.clone();
    let authority = match (hs.token.kind, hs.token.role) {
        (TokenKind::Admin, _) => Authority::Admin,
        (TokenKind::Operator, Some(role)) => Authority::Operator(role),
        _ => Authority::Agent,
    };
    let limits = Limits::standard(
        gsv_protocol::limits::MAX_IN_FLIGHT_PER_AGENT,
        fleet.config().heartbeat.as_millis() as u64,
    );
    let (out, queue) = fleet.send_queue();
    let agent = Arc::new(AgentHandle::new(
        conn_id.clone(),
        name,
        token_id,
        authority,
        out.clone(),
        Arc::new(policy),
        hs.ws.get_ref().switch(),
    ));
    // Registered before `hello-ok` goes out: a client that hears it is connected gets
    // every event from then on (an operator's `approval.requested` included); events
    // sent meanwhile wait in the queue until the session drives it.
    fleet.enter_agent(agent.clone());
    let Some(ws) = hs.hello(&conn_id, limits, None).await else {
        fleet.forget_agent(&conn_id);
        return;
    };
    fleet.metrics().connected_agents.inc();
    // A stopping gateway waits (bounded) for its sessions to end and deliver what they
    // queued, answers to calls in flight included.
    let _session = fleet.closing().token();
    let span = tracing::info_span!("agent", agent = %agent.name, conn_id = %conn_id);
    async {
        tracing::info!(%peer, "agent connected");
        fleet.audit(AuditEvent::AgentConnected {
            agent: &agent.name,
            remote: peer,
            token_id: &agent.token_id,
            conn_id: &conn_id,
        });
        let in_flight: CallCancels = Arc::new(DashMap::new());
        let reason = drive(
            ws,
            queue,
            &out,
            fleet.config().heartbeat,
            fleet.closing(),
            |text| {
                agent.uploads.text();
                on_frame(&fleet, &agent, &in_flight, text)
            },
            |frame| fleet.agent_transfer_frame(&agent, frame),
        )
        .await;
        fleet.agent_gone(&agent.conn_id);
        // The calls and fan-outs still running go on as jobs (they watch the
        // connection close themselves): nothing the agent started is lost with it.
        out.close();
        tracing::info!(?reason, "agent disconnected");
        fleet.audit(AuditEvent::AgentDisconnected {
            agent: &agent.name,
            reason: &reason,
            token_id: &agent.token_id,
            conn_id: &conn_id,
        });
    }
    .instrument(span)
    .await;
    fleet.forget_agent(&conn_id);
    fleet.metrics().connected_agents.dec();
}

/// Runs `answer` on the connection's read loop until it first has to wait, and only
/// then hands the rest to a task of its own. A lone gateway's listings are ready at once,
/// so a connection reads its next frame only after the answer is queued (a token
/// flooding `nodes.list` gets one listing at a time, not a pile of concurrent ones);
/// a replica asking the others does not hold up the connection's other requests.
fn answer_here_or_later(answer: impl std::future::Future<Output = ()> + Send + 'static) {
    let mut answer = Box::pin(answer);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    if answer.as_mut().poll(&mut cx).is_pending() {
        // The task polls it again with a waker of its own.
        tokio::spawn(answer);
    }
}

fn reply_err(out: &Outbound, id: &str, err: impl Into<ErrorShape>) {
    let _ = out.send(encode_err(id, &err.into()));
}

fn on_frame(fleet: &Fleet, agent: &Arc<AgentHandle>, in_flight: &CallCancels, text: &str) {
    let frame = match Frame::decode(text) {
        Ok(f) => f,
        Err(e) => return reply_err(&agent.out, "", e.to_shape()),
    };
    match frame {
        Frame::Req {
            id,
            method,
            method_name,
            params,
        } => match method {
            Method::ToolsCall => start_call(fleet, agent, in_flight, id, params),
            Method::ToolsFanout => start_fanout(fleet, agent, in_flight, id, params),
            // Answered on the connection's reading while the answer is at hand (a lone
            // gateway: one listing at a time per connection), off it once the other
            // replicas are asked (a short wait).
            Method::ToolsList => {
                let (fleet, agent) = (fleet.clone(), Arc::clone(agent));
                answer_here_or_later(async move {
                    let tools = fleet.tools(&agent.policy, &agent.token_id).await;
                    let _ = agent.out.send(encode_ok(&id, &ToolsListResult { tools }));
                });
            }
            Method::NodesList => {
                let params = match decode::<NodesListParams>(params.as_deref()) {
                    Ok(p) => p,
                    Err(e) => return reply_err(&agent.out, &id, e.to_shape()),
                };
                let (fleet, agent) = (fleet.clone(), Arc::clone(agent));
                answer_here_or_later(async move {
                    let select = params.select.as_deref();
                    let frame = match fleet.nodes(&agent.policy, &agent.token_id, select).await {
                        Ok(nodes) => encode_ok(
                            &id,
                            &NodesListResult {
                                nodes,
                                gateway_version: crate::VERSION.to_owned(),
                            },
                        ),
                        Err(e) => encode_err(&id, &e.to_shape()),
                    };
                    let _ = agent.out.send(frame);
                });
            }
            Method::NodesShow => {
                let p = match decode::<NodeIdParams>(params.as_deref()) {
                    Ok(p) => p,
                    Err(e) => return reply_err(&agent.out, &id, e.to_shape()),
                };
                let (fleet, agent) = (fleet.clone(), Arc::clone(agent));
                answer_here_or_later(async move {
                    let frame = match fleet.node(&agent.policy, &agent.token_id, &p.id).await {
                        Ok(detail) => encode_ok(&id, &detail),
                        Err(e) => encode_err(&id, &e.to_shape()),
                    };
                    let _ = agent.out.send(frame);
                });
            }
            Method::JobsList | Method::JobsGet | Method::JobsCancel => {
                jobs_request(fleet, agent, id, method, params)
            }
            Method::TransferOpen
            | Method::TransferFinish
            | Method::TransferCancel
            | Method::TransferCredit
            | Method::TransferCopy
            | Method::TransferList
            | Method::TransferPlace => fleet.transfer_request(agent, id, method, params),
            Method::ApprovalsList
            | Method::ApprovalsDecide
            | Method::NodesAcceptTools
            | Method::NodesLabel => operator_request(fleet, agent, id, method, params),
            Method::Connect => reply_err(&agent.out, &id, SessionError::AlreadyConnected),
            _ => reply_err(
                &agent.out,
                &id,
                SessionError::UnknownMethod {
                    method: method_name,
                },
            ),
        },
        Frame::Cancel { id } => {
            if let Some(call) = in_flight.get(&id) {
                call.value().cancel();
            }
        }
        Frame::Res { id, .. } => reply_err(&agent.out, &id, SessionError::ResFromAgent),
        Frame::Event { .. } => reply_err(&agent.out, "", SessionError::EventFromAgent),
    }
}

fn start_call(
    fleet: &Fleet,
    agent: &Arc<AgentHandle>,
    in_flight: &CallCancels,
    id: String,
    params: Option<Box<RawValue>>,
) {
    let params: ToolsCallParams = match params
        .as_deref()
        .map(|p| serde_json::from_str(p.get()))
        .unwrap_or_else(|| serde_json::from_str("null"))
    {
        Ok(p) => p,
        Err(e) => return reply_err(&agent.out, &id, SessionError::BadCallParams(e)),
    };
    if params.is_async {
        // A job: answered at once with its id; the call is no longer this
        // connection's (it is not in `in_flight`, and the connection closing does not
        // cancel it).
        let (fleet, agent) = (fleet.clone(), agent.clone());
        tokio::spawn(async move {
            let frame = match fleet.start_job(agent.clone(), params).await {
                Ok(started) => encode_ok(&id, &started),
                Err(e) => encode_err(&id, &e),
            };
            let _ = agent.out.send(frame);
        });
        return;
    }
    // Cancelled by the agent's `cancel` frame only: when the connection closes first,
    // the call goes on as a job (below).
    let Some(cancel) = claim(agent, in_flight, &id) else {
        return;
    };
    let fleet = fleet.clone();
    let agent = agent.clone();
    let in_flight = in_flight.clone();
    // Counted as a call in flight until its answer is queued on the agent's connection
    // (which a shutdown still delivers), not only until it is routed: a draining
    // gateway waits for this token.
    let counted = fleet.count_in_flight();
    tokio::spawn(async move {
        let _counted = counted;
        // The node's progress events reach the agent as `call.progress` events named by
        // the agent's own request id, always before the call's `res`.
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
        let relay = |p: gsv_protocol::event::CallProgress| {
            let payload = gsv_protocol::event::CallProgress {
                call_id: id.clone(),
                ..p
            };
            agent.send_event(gsv_protocol::EventName::CallProgress, &payload);
        };
        let name = params.name.clone();
        let closed = agent.out.closed_token().clone();
        // The job this call became when its caller went away before the result.
        let mut job: Option<String> = None;
        let outcome = {
            let caller = router::Caller::from_agent(&agent).with_progress(progress_tx);
            let call = fleet.call(&caller, params, cancel.clone());
            tokio::pin!(call);
            loop {
                tokio::select! {
                    biased;
                    outcome = &mut call => break outcome,
                    Some(p) = progress_rx.recv() => if job.is_none() { relay(p) },
                    _ = closed.cancelled(), if job.is_none() => {
                        match fleet.keep_as_job(&agent, &name, &cancel).await {
                            Some(id) => job = Some(id),
                            // No job could be kept: the call ends as before, cancelled.
                            None => {
                                cancel.cancel();
                                job = Some(String::new());
                            }
                        }
                    }
                }
            }
        };
        in_flight.remove(&id);
        if let Some(job) = job {
            if !job.is_empty() {
                fleet.settle_job(&job, outcome).await;
            }
            return;
        }
        while let Ok(p) = progress_rx.try_recv() {
            relay(p);
        }
        let frame = match outcome {
            Ok(raw) => encode_ok(&id, &raw),
            Err(e) => encode_err(&id, &e),
        };
        let _ = agent.out.send(frame);
    });
}

/// Registers request `id` as in flight on the connection, with the token its `cancel`
/// frame fires; `None` (the refusal already sent) past the connection's limit or for
/// an id already in flight.
fn claim(agent: &AgentHandle, in_flight: &CallCancels, id: &str) -> Option<CancellationToken> {
    if in_flight.len() >= gsv_protocol::limits::MAX_IN_FLIGHT_PER_AGENT {
        reply_err(&agent.out, id, SessionError::TooManyInFlight);
        return None;
    }
    match in_flight.entry(id.to_owned()) {
        dashmap::Entry::Occupied(_) => {
            reply_err(&agent.out, id, SessionError::DuplicateCallId);
            None
        }
        dashmap::Entry::Vacant(v) => {
            let cancel = CancellationToken::new();
            v.insert(cancel.clone());
            Some(cancel)
        }
    }
}

/// `jobs.list` and `jobs.get`: read from the store off the connection's task.
fn jobs_request(
    fleet: &Fleet,
    agent: &Arc<AgentHandle>,
    id: String,
    method: Method,
    params: Option<Box<RawValue>>,
) {
    let (fleet, agent) = (fleet.clone(), agent.clone());
    tokio::spawn(async move {
        let frame = match method {
            Method::JobsGet | Method::JobsCancel => {
                match decode::<gsv_protocol::job::JobsGetParams>(params.as_deref()) {
                    Ok(p) => {
                        let reader = agent.as_ref().into();
                        let job = if method == Method::JobsCancel {
                            fleet.cancel_job(reader, &p.id).await
                        } else {
                            fleet.job(reader, &p.id).await
                        };
                        match job {
                            Ok(job) => encode_ok(&id, &job),
                            Err(e) => encode_err(&id, &e.to_shape()),
                        }
                    }
                    Err(e) => encode_err(&id, &e.to_shape()),
                }
            }
            _ => match decode::<gsv_protocol::job::JobsListParams>(params.as_deref()) {
                Ok(p) => match fleet.jobs(agent.as_ref().into(), p).await {
                    Ok(page) => encode_ok(&id, &page),
                    Err(e) => encode_err(&id, &e.to_shape()),
                },
                Err(e) => encode_err(&id, &e.to_shape()),
            },
        };
        let _ = agent.out.send(frame);
    });
}

/// `tools.fanout`: runs in its own task, counted like a call (one entry of the
/// connection's calls in flight, cancelled by its request id, drained on shutdown).
/// Each node that finishes is sent as a `fanout.result` event before the `res`.
fn start_fanout(
    fleet: &Fleet,
    agent: &Arc<AgentHandle>,
    in_flight: &CallCancels,
    id: String,
    params: Option<Box<RawValue>>,
) {
    let params: gsv_protocol::fanout::ToolsFanoutParams = match decode(params.as_deref()) {
        Ok(p) => p,
        Err(e) => return reply_err(&agent.out, &id, e),
    };
    // A fan-out is a job: the agent's `cancel` frame or `jobs.cancel` ends it, the
    // connection closing does not (its outcome is kept in the job).
    let Some(cancel) = claim(agent, in_flight, &id) else {
        return;
    };
    let fleet = fleet.clone();
    let agent = agent.clone();
    let in_flight = in_flight.clone();
    let counted = fleet.count_in_flight();
    tokio::spawn(async move {
        let _counted = counted;
        // `async`: answered with the job id as soon as it is recorded; no events, and
        // no longer this connection's request.
        let is_async = params.is_async;
        let answered = std::sync::atomic::AtomicBool::new(false);
        let started = |job: &str| {
            if is_async {
                in_flight.remove(&id);
                let job = gsv_protocol::job::AsyncCallResult {
                    job: job.to_owned(),
                };
                let _ = agent.out.send(encode_ok(&id, &job));
                answered.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let report = |outcome: &gsv_protocol::fanout::NodeOutcome| {
            if is_async {
                return;
            }
            let event = gsv_protocol::fanout::FanoutResultEventOut::new(&id, outcome);
            agent.send_event(gsv_protocol::EventName::FanoutResult, &event);
        };
        let caller = router::Caller::from_agent(&agent);
        let outcome = fleet.fanout(&caller, params, cancel, started, report).await;
        in_flight.remove(&id);
        if answered.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let frame = match outcome {
            Ok(ran) => {
                // Encoded once, for its job already: reused.
                let whole = match &ran.encoded {
                    Some(raw) => encode_ok(&id, raw),
                    None => encode_ok(&id, &ran.result),
                };
                // Every body was in its node's event: a result too large for one
                // frame goes without them.
                if whole.len() <= gsv_protocol::limits::MAX_FRAME_BYTES {
                    whole
                } else {
                    encode_ok(&id, &ran.result.without_bodies())
                }
            }
            Err(e) => encode_err(&id, &e.to_shape()),
        };
        let _ = agent.out.send(frame);
    });
}

/// Decodes a request's params (absent params read as `{}`).
fn decode<T: serde::de::DeserializeOwned>(params: Option<&RawValue>) -> Result<T, SessionError> {
    serde_json::from_str(params.map(RawValue::get).unwrap_or("{}")).map_err(SessionError::BadParams)
}

/// `approvals.list` / `approvals.decide` / `nodes.acceptTools` / `nodes.label`:
/// operators only — listing for any operator token, deciding for the admin's and
/// approvers', the rest for the admin's.
fn operator_request(
    fleet: &Fleet,
    agent: &Arc<AgentHandle>,
    id: String,
    method: Method,
    params: Option<Box<RawValue>>,
) {
    let authority = agent.authority;
    let refused = match method {
        Method::NodesAcceptTools if !authority.is_admin() => Some(SessionError::OperatorOnly {
            what: "accepting a node's tools",
        }),
        Method::NodesLabel if !authority.is_admin() => Some(SessionError::OperatorOnly {
            what: "labelling a node",
        }),
        _ if !authority.reads_all() => Some(SessionError::NotOperator),
        Method::ApprovalsDecide if !authority.decides() => Some(SessionError::ViewerDecision),
        _ => None,
    };
    if let Some(err) = refused {
        return reply_err(&agent.out, &id, err);
    }
    let raw = params
        .map(|p| p.get().to_owned())
        .unwrap_or_else(|| "{}".into());
    let fleet = fleet.clone();
    let agent = agent.clone();
    tokio::spawn(async move {
        let frame = match method {
            Method::ApprovalsList => {
                match serde_json::from_str::<crate::approvals::ListQuery>(&raw) {
                    Ok(q) => match fleet.approvals(q).await {
                        Ok(page) => encode_ok(&id, &page),
                        Err(e) => encode_err(&id, &e.to_shape()),
                    },
                    Err(e) => encode_err(&id, &SessionError::BadParams(e).to_shape()),
                }
            }
            Method::NodesAcceptTools => match serde_json::from_str::<NodeIdParams>(&raw) {
                Ok(p) => match fleet.accept_tools(&p.id, "operator").await {
                    Ok(result) => encode_ok(&id, &result),
                    Err(e) => encode_err(&id, &e.to_shape()),
                },
                Err(e) => encode_err(&id, &SessionError::BadParams(e).to_shape()),
            },
            Method::NodesLabel => match serde_json::from_str::<NodesLabelParams>(&raw) {
                Ok(p) => {
                    let change = LabelsChange {
                        set: p.set,
                        remove: p.remove,
                    };
                    match fleet.relabel(&p.id, change, "operator").await {
                        Ok(result) => encode_ok(&id, &result),
                        Err(e) => encode_err(&id, &e.to_shape()),
                    }
                }
                Err(e) => encode_err(&id, &SessionError::BadParams(e).to_shape()),
            },
            _ => match serde_json::from_str::<gsv_protocol::method::ApprovalsDecideParams>(&raw) {
                Ok(p) => match fleet
                    .decide_approval(
                        &p.id,
                        p.decision,
                        &authority.decider("operator", &agent.name),
                    )
                    .await
                {
                    Ok(req) => encode_ok(&id, &req),
                    Err(e) => encode_err(&id, &e.to_shape()),
                },
                Err(e) => encode_err(&id, &SessionError::BadParams(e).to_shape()),
            },
        };
        let _ = agent.out.send(frame);
    });
}

#[cfg(test)]
mod tests {
    use super::answer_here_or_later;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn an_answer_at_hand_is_given_before_the_next_frame_is_read() {
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        answer_here_or_later(async move { d.store(true, Ordering::SeqCst) });
        assert!(
            done.load(Ordering::SeqCst),
            "answered on the read loop itself"
        );
    }

    #[tokio::test]
    async fn an_answer_that_waits_goes_on_in_a_task_of_its_own() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let (back_tx, back_rx) = tokio::sync::oneshot::channel::<u32>();
        answer_here_or_later(async move {
            if let Ok(v) = rx.await {
                let _ = back_tx.send(v + 1);
            }
        });
        tx.send(41).expect("the answer is still waiting");
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), back_rx)
            .await
            .expect("the task finished")
            .expect("it answered");
        assert_eq!(got, 42);
    }
}
