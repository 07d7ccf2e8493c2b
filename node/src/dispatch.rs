//! Handling of every frame the gateway sends on a registered connection.
//!
//! The reader hands each text frame here and goes straight back to reading: every
//! request runs in its own task, so a slow tool, a full send queue or a long probe never
//! delays heartbeats or other calls. Calls are tracked by request id in the node's
//! [`Ledger`](crate::ledger::Ledger), which outlives the connection: a `cancel` reaches
//! the call whichever connection it arrived on, an id seen before never runs twice, and
//! a result that ends while the link is down waits there for the gateway to ask again.

use crate::guards::posture;
use crate::ledger::Seen;
use crate::state::NodeState;
use crate::tool::{Tool, ToolContext};
use crate::tools::paths::PathPolicy;
use futures_util::FutureExt;
use gsv_protocol::event::EventsAck;
use gsv_protocol::frame::{encode_err, encode_ok};
use gsv_protocol::limits::MAX_CALL_TIMEOUT_MS;
use gsv_protocol::method::{ProbeParams, ToolInvokeParams};
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape, EventName, Frame, Method, ToolResult};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, info_span, warn, Instrument};

/// Dispatches the frames of one connection.
pub(crate) struct Dispatcher {
    node: Arc<NodeState>,
    out: mpsc::Sender<String>,
    max_result_bytes: usize,
    /// Parent of every call's token: cancelled when the node shuts down.
    shutdown: CancellationToken,
    /// The connection's file transfers.
    transfers: crate::transfer::Transfers,
}

impl Dispatcher {
    pub fn new(
        node: Arc<NodeState>,
        out: mpsc::Sender<String>,
        binary: mpsc::Sender<Vec<u8>>,
        max_result_bytes: usize,
        shutdown: CancellationToken,
        lane: Option<crate::transfer::LaneDial>,
    ) -> Self {
        let transfers =
            crate::transfer::Transfers::new(Arc::clone(&node), out.clone(), binary, lane);
        Dispatcher {
            node,
            out,
            max_result_bytes,
            shutdown,
            transfers,
        }
    }

    /// Handles one binary frame: a transfer's chunk. Never blocks.
    pub fn handle_binary(&self, frame: gsv_transport::tungstenite::Bytes) {
        self.transfers.chunk(frame);
    }

    /// Calls of this node still running.
    pub fn in_flight(&self) -> usize {
        self.node.ledger.running()
    }

    /// Handles one text frame. Never blocks.
    pub fn handle_text(&self, text: &str) {
        match Frame::decode(text) {
            Err(e) => warn!(error = %e, "ignoring a malformed frame from the gateway"),
            Ok(Frame::Req {
                id,
                method,
                method_name,
                params,
            }) => match method {
                Method::ToolInvoke => self.invoke(id, params),
                Method::NodeProbe => self.probe(id, params),
                Method::SessionsEnd => self.end_sessions(id, params),
                Method::PathsResolve => self.resolve_paths(id, params),
                Method::TransferOpen | Method::TransferList | Method::TransferPlace
                    if self.node.config.backend != crate::config::Backend::Local =>
                {
                    self.reply(encode_err(&id, &remote_copy_refused(&self.node.config)))
                }
                Method::TransferOpen => match decode_params(params.as_deref()) {
                    Ok(p) => self.transfers.open(id, p),
                    Err(e) => self.reply(encode_err(&id, &e)),
                },
                Method::TransferFinish => match decode_params(params.as_deref()) {
                    Ok(p) => self.transfers.finish(id, p),
                    Err(e) => self.reply(encode_err(&id, &e)),
                },
                Method::TransferCancel => match decode_params(params.as_deref()) {
                    Ok(p) => self.transfers.cancel(id, p),
                    Err(e) => self.reply(encode_err(&id, &e)),
                },
                Method::TransferList => match decode_params(params.as_deref()) {
                    Ok(p) => crate::transfer::tree::list(&self.node, &self.out, id, p),
                    Err(e) => self.reply(encode_err(&id, &e)),
                },
                Method::TransferPlace => match decode_params(params.as_deref()) {
                    Ok(p) => crate::transfer::tree::place(&self.node, &self.out, id, p),
                    Err(e) => self.reply(encode_err(&id, &e)),
                },
                _ => self.reply(encode_err(
                    &id,
                    &ErrorShape::new(
                        ErrorCode::NotFound,
                        format!("method {method_name:?} is not served by nodes"),
                    ),
                )),
            },
            Ok(Frame::Cancel { id }) => {
                if self.node.ledger.cancel(&id) {
                    debug!(call_id = %id, "cancel requested");
                } else {
                    debug!(call_id = %id, "cancel for a call that is not running");
                }
            }
            Ok(Frame::Event {
                event: EventName::EventsAck,
                payload,
                ..
            }) => match decode_params::<EventsAck>(payload.as_deref()) {
                Ok(ack) => self.node.events.ack(ack.seq),
                Err(e) => warn!(error = %e.message, "ignoring a malformed events.ack"),
            },
            Ok(Frame::Event {
                event: EventName::TransferCredit,
                payload,
                ..
            }) => match decode_params(payload.as_deref()) {
                Ok(credit) => self.transfers.credit(credit),
                Err(e) => warn!(error = %e.message, "ignoring a malformed transfer.credit"),
            },
            Ok(Frame::Event {
                event,
                payload,
                seq,
            }) => {
                let payload = payload.as_deref().map(RawValue::get).unwrap_or("null");
                let payload: String = payload.chars().take(512).collect();
                info!(
                    event = event.as_str(),
                    seq, %payload, "event from the gateway"
                );
            }
            Ok(Frame::Res { id, .. }) => {
                debug!(id = %id, "ignoring a response to a request this node did not send")
            }
        }
    }

    /// Queues `frame` without blocking the reader.
    fn reply(&self, frame: String) {
        let out = self.out.clone();
        tokio::spawn(async move {
            if out.send(frame).await.is_err() {
                warn!("connection closed before a reply could be sent");
            }
        });
    }

    fn invoke(&self, id: String, params: Option<Box<RawValue>>) {
        let params: ToolInvokeParams = match decode_params(params.as_deref()) {
            Ok(p) => p,
            Err(e) => return self.reply(encode_err(&id, &e)),
        };
        let Some(tool) = self.node.registry.get(&params.tool) else {
            let e = ErrorShape::new(
                ErrorCode::NotFound,
                format!("node {} has no tool {:?}", self.node.config.id, params.tool),
            );
            return self.reply(encode_err(&id, &e));
        };
        let token = match self.node.ledger.begin(&id, &self.shutdown, &self.out) {
            Seen::New(token) => token,
            Seen::Running => {
                // Its result goes to this connection when it ends.
                info!(call_id = %id, resume = params.resume, "call already running; not run again");
                return;
            }
            Seen::Done(frame) => {
                info!(call_id = %id, resume = params.resume, "call already finished; sending its result again");
                return self.reply(frame);
            }
            Seen::Forgotten => {
                warn!(call_id = %id, "call finished long ago and its result is no longer kept");
                let e = ErrorShape::new(
                    ErrorCode::NodeDisconnected,
                    "the call ran, but its result is no longer kept on the node",
                )
                .with(ErrorDetails::disconnected(
                    true,
                    self.node.config.id.as_str(),
                ));
                return self.reply(encode_err(&id, &e));
            }
        };
        // Journaled before the tool runs: a restarted node knows this call may have run.
        // Not a read-only tool's call: running it again after a crash changes nothing,
        // and it then costs no file (Echo, Read, Grep... stay as fast as without a
        // journal).
        let def = self.node.registry.def(&params.tool);
        let read_only = def
            .as_ref()
            .is_some_and(|d| d.annotations.read_only_hint == Some(true));
        let requires_approval = def.as_ref().is_some_and(|d| d.requires_approval);
        if !read_only {
            self.node.ledger.record_begun(
                &id,
                &params.tool,
                params.caller.as_ref().map(|c| c.token_id.as_str()),
            );
        }
        if params.resume {
            info!(call_id = %id, "resumed call had not reached this node; running it now");
        }
        let span =
            info_span!("call", node_id = %self.node.config.id, call_id = %id, tool = %params.tool);
        let instant = tool.instant();
        let call = Call {
            id,
            tool,
            requires_approval,
            params,
            token,
            node: Arc::clone(&self.node),
            max_result_bytes: self.max_result_bytes,
            shutdown: self.shutdown.clone(),
        };
        let run = call.run().instrument(span);
        if instant {
            run_or_spawn(run);
        } else {
            tokio::spawn(run);
        }
    }

    /// `sessions.end`: the tokens were revoked; their running sessions stop.
    /// `paths.resolve`: what a waiting call's paths name here, for the operator's
    /// question. A node that works on another host cannot tell from here: it says so.
    fn resolve_paths(&self, id: String, params: Option<Box<RawValue>>) {
        use gsv_protocol::resolve::{ResolveParams, ResolveResult, Resolved, MAX_PATHS};
        let params: ResolveParams = match decode_params(params.as_deref()) {
            Ok(p) => p,
            Err(e) => return self.reply(encode_err(&id, &e)),
        };
        if params.paths.len() > MAX_PATHS {
            return self.reply(encode_err(
                &id,
                &ErrorShape::new(
                    ErrorCode::InvalidArgs,
                    format!("paths.resolve takes at most {MAX_PATHS} paths"),
                ),
            ));
        }
        let node = Arc::clone(&self.node);
        let out = self.out.clone();
        tokio::spawn(async move {
            let config = &node.config;
            let far = match &config.backend {
                crate::config::Backend::Local => None,
                crate::config::Backend::Ssh { target, .. } => Some(format!("over SSH on {target}")),
                crate::config::Backend::Container { name, .. } => {
                    Some(format!("inside the container {name}"))
                }
            };
            let paths = match far {
                Some(far) => params
                    .paths
                    .into_iter()
                    .map(|asked| Resolved {
                        error: Some(format!(
                            "node {} works {far}: its paths are resolved there when the call runs",
                            config.id
                        )),
                        asked,
                        ..Resolved::default()
                    })
                    .collect(),
                None => {
                    let policy = PathPolicy::new(config.workspace.clone(), config.confine)
                        .with_protected(Arc::clone(&node.protected));
                    tokio::task::spawn_blocking(move || {
                        params.paths.iter().map(|p| policy.named(p)).collect()
                    })
                    .await
                    .unwrap_or_default()
                }
            };
            let _ = out.send(encode_ok(&id, &ResolveResult { paths })).await;
        });
    }

    fn end_sessions(&self, id: String, params: Option<Box<RawValue>>) {
        let params: gsv_protocol::method::SessionsEndParams = match decode_params(params.as_deref())
        {
            Ok(p) => p,
            Err(e) => return self.reply(encode_err(&id, &e)),
        };
        let ended = self.node.registry.end_sessions_of(&params.token_ids);
        if ended > 0 {
            info!(ended, "ended the sessions of revoked tokens");
        }
        self.reply(encode_ok(
            &id,
            &gsv_protocol::method::SessionsEndResult { ended },
        ));
    }

    fn probe(&self, id: String, params: Option<Box<RawValue>>) {
        // Absent or `null` params probe everything tracked.
        let params: ProbeParams = match decode_params::<Option<ProbeParams>>(params.as_deref()) {
            Ok(p) => p.unwrap_or_default(),
            Err(e) => return self.reply(encode_err(&id, &e)),
        };
        let node = Arc::clone(&self.node);
        let out = self.out.clone();
        let span = info_span!("probe", node_id = %node.config.id, call_id = %id);
        tokio::spawn(
            async move {
                let mut result = node.probe.probe(&params.bins).await;
                debug!(bins = result.host_bin_status.len(), "probed binaries");
                // The login profile is compared with its baseline again on every probe.
                let (check, span) = (Arc::clone(&node), tracing::Span::current());
                let recheck = tokio::task::spawn_blocking(move || {
                    let _in_probe = span.enter();
                    check.login_profile.recheck()
                });
                match recheck.await {
                    Ok(found) => result.login_profile = found.map(Box::new),
                    Err(e) => {
                        warn!(error = %e, "the login-profile check failed");
                        result.login_profile = node.login_profile.status();
                    }
                }
                if out.send(encode_ok(&id, &result)).await.is_err() {
                    warn!("connection closed before the probe result could be sent");
                }
            }
            .instrument(span),
        );
    }
}

/// Runs `call` on the caller's task up to its first pause, and hands it to a task of
/// its own only if it has to wait. For an instant tool the result is then queued before
/// the connection's task reads its next frame, with no task hand-off on the way.
///
/// The first poll gets a no-op waker: whatever the future registered then is
/// registered again, with the task's waker, when the task polls it first (a future must
/// only wake the waker of its latest poll), so nothing that happens in between is lost.
/// A panic (outside the tool's own, which the call catches) ends only this call.
fn run_or_spawn(call: impl Future<Output = ()> + Send + 'static) {
    let mut call = Box::pin(call);
    let mut cx = Context::from_waker(Waker::noop());
    match std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(&mut cx))) {
        Ok(Poll::Ready(())) => {}
        Ok(Poll::Pending) => {
            tokio::spawn(call);
        }
        Err(_) => warn!("a call panicked outside its tool; dropped"),
    }
}

fn decode_params<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorShape> {
    let raw = params.map(RawValue::get).unwrap_or("null");
    serde_json::from_str(raw)
        .map_err(|e| ErrorShape::new(ErrorCode::InvalidArgs, format!("invalid params: {e}")))
}

/// One running `tool.invoke`.
struct Call {
    id: String,
    tool: Arc<dyn Tool>,
    /// The tool's approval posture, as declared ([`crate::guards::posture`]).
    requires_approval: bool,
    params: ToolInvokeParams,
    token: CancellationToken,
    node: Arc<NodeState>,
    max_result_bytes: usize,
    shutdown: CancellationToken,
}

impl Call {
    async fn run(self) {
        let started = Instant::now();
        let timeout_ms = self.params.timeout_ms.min(MAX_CALL_TIMEOUT_MS);
        let deadline = started + Duration::from_millis(timeout_ms);
        let ctx = ToolContext {
            workspace: self.node.config.workspace.clone(),
            confine: self.node.config.confine,
            call_id: self.id.clone(),
            cancel: self.token.clone(),
            deadline,
            events: self.node.events.clone(),
            approval: self.params.approval.clone(),
            caller: self.params.caller.clone(),
            protected: Arc::clone(&self.node.protected),
        };
        // The tool's approval posture, then its own guards: a refusal is the call's
        // protocol error, and the tool does not run.
        let tool = Arc::clone(&self.tool);
        let args = self.params.args;
        // A dry run changes nothing, so it needs nobody's approval.
        let admitted = posture::check(
            &self.params.tool,
            self.requires_approval && !tool.dry_run(&args),
            ctx.approval.as_deref(),
        );
        let execute = AssertUnwindSafe(async move {
            if let Err(asking) = admitted {
                return Err(posture::with_plan(asking, tool.as_ref(), &args, &ctx).await);
            }
            tool.check(&args, &ctx).await?;
            Ok(tool.execute(args, ctx).await)
        })
        .catch_unwind();
        let outcome = tokio::select! {
            biased;
            _ = self.token.cancelled() => Err(if self.shutdown.is_cancelled() {
                ErrorShape::new(ErrorCode::Cancelled, "the node is shutting down")
            } else {
                ErrorShape::new(ErrorCode::Cancelled, "the call was cancelled")
            }),
            r = tokio::time::timeout_at(deadline, execute) => match r {
                Ok(Ok(checked)) => checked,
                Ok(Err(_panic)) => Err(ErrorShape::new(
                    ErrorCode::Internal,
                    format!("tool {} panicked", self.params.tool),
                )),
                Err(_) => Err(ErrorShape::new(
                    ErrorCode::Timeout,
                    format!("tool {} did not finish within {timeout_ms} ms", self.params.tool),
                )),
            },
        };
        // Whatever the tool left behind watching the token stops now (the future
        // itself was dropped by the select above).
        if outcome.is_err() {
            self.token.cancel();
        }
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let frame = match &outcome {
            Ok(result) => {
                debug!(elapsed_ms, is_error = result.is_error, "call finished");
                encode_result(&self.id, result, self.max_result_bytes)
            }
            Err(e) => {
                debug!(elapsed_ms, code = %e.code, "call failed");
                encode_err(&self.id, e)
            }
        };
        // Kept in the ledger first: if the link is down now (or drops before the
        // gateway reads it), the gateway asks again after reconnecting.
        let Some(out) = self.node.ledger.finish(&self.id, &frame) else {
            info!(
                elapsed_ms,
                "the call's connection is gone; result kept for redelivery"
            );
            return;
        };
        let sent = out.send(frame).await;
        self.node.ledger.sent();
        if sent.is_err() {
            info!(
                elapsed_ms,
                "the connection closed before the result could be sent; result kept for redelivery"
            );
        }
    }
}

/// `res ok` with `result`, or `too_large` if the serialised result exceeds `max` bytes.
pub(crate) fn encode_result(id: &str, result: &ToolResult, max: usize) -> String {
    let frame = encode_ok(id, result);
    // The frame is the result plus a fixed envelope; measure the envelope once.
    let envelope = encode_ok(id, &Value::Null).len() - "null".len();
    let bytes = frame.len().saturating_sub(envelope);
    if bytes <= max {
        return frame;
    }
    warn!(bytes, limit = max, "tool result too large");
    encode_err(
        id,
        &ErrorShape::new(
            ErrorCode::TooLarge,
            format!("the tool's result is {bytes} bytes, over the limit of {max} bytes"),
        )
        .with(ErrorDetails::TooLarge { bytes, limit: max }),
    )
}

/// The answer to a copy asked of a node whose tools work on another host or inside a
/// container: the transfer code reads and writes the node process's own machine, so
/// it would copy the wrong files. Refused, until copies go through the backend.
fn remote_copy_refused(config: &crate::config::NodeConfig) -> ErrorShape {
    let (kind, target) = match &config.backend {
        crate::config::Backend::Ssh { target, .. } => ("over SSH on", target.as_str()),
        crate::config::Backend::Container { name, .. } => ("inside the container", name.as_str()),
        crate::config::Backend::Local => ("on", "this machine"),
    };
    ErrorShape::new(
        ErrorCode::Forbidden,
        format!(
            "node {} works {kind} {}: copies (gsv cp, fleet_copy) to and from such a node are \
             not supported; use Read and Write with encoding \"base64\" instead",
            config.id, target
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn run_or_spawn_finishes_inline_or_on_a_task() {
        // Ready at the first poll: done before run_or_spawn returns.
        let (tx, mut rx) = mpsc::channel(4);
        let t = tx.clone();
        run_or_spawn(async move {
            let _ = t.try_send("inline");
        });
        assert_eq!(rx.try_recv().ok(), Some("inline"));
        // Pauses first (registering the no-op waker), then finishes on its own task.
        let t = tx.clone();
        run_or_spawn(async move {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = t.try_send("spawned");
        });
        assert!(rx.try_recv().is_err(), "not done at the first poll");
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(got.ok().flatten(), Some("spawned"));
        // A panic at the first poll ends that call only.
        run_or_spawn(async { panic!("boom") });
        let t = tx.clone();
        run_or_spawn(async move {
            let _ = t.try_send("after");
        });
        assert_eq!(rx.try_recv().ok(), Some("after"));
    }

    #[test]
    fn results_over_the_limit_become_too_large() {
        let small = ToolResult::text("hello");
        let exact = serde_json::to_string(&small).unwrap().len();
        let frame = encode_result("7", &small, exact);
        match Frame::decode(&frame).unwrap() {
            Frame::Res { id, outcome: Ok(r) } => {
                assert_eq!(id, "7");
                assert_eq!(serde_json::from_str::<ToolResult>(r.get()).unwrap(), small);
            }
            other => panic!("{other:?}"),
        }
        let frame = encode_result("7", &small, exact - 1);
        match Frame::decode(&frame).unwrap() {
            Frame::Res {
                outcome: Err(e), ..
            } => {
                assert_eq!(e.code, ErrorCode::TooLarge);
                assert_eq!(e.details.unwrap()["bytes"], json!(exact));
            }
            other => panic!("{other:?}"),
        }
    }
}
