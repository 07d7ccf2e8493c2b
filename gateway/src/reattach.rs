//! Jobs whose gateway stopped mid-call get their outcome anyway.
//!
//! A call keeps running on its node when the gateway dies, and the node keeps its
//! result (its outbox, and with a journal across its own restarts too). So a job's
//! call records how it was sent ([`Dispatch`]: node, node process, call id, tool,
//! arguments, approval, deadline, caller) in the job's row before the `tool.invoke`
//! leaves; a gateway that starts finds the jobs its previous run left running with
//! such a record and, for each, waits for that node to connect and asks it for the
//! call again (`tool.invoke` with `resume: true` and the same call id). The node
//! answers with the kept result, or the running call's result when it ends, or runs
//! the call if it never got it — so the job ends with the real outcome instead of
//! `lost`. A node that comes back as a new process without a journal cannot know the
//! call: the job is `lost` then, as it is when the node does not come back within
//! [`REATTACH_WINDOW`] or the caller's token was revoked meanwhile.
//!
//! Not covered (they end `lost` after a gateway crash): a synchronous call that became
//! a job after its caller left, fan-outs, and calls still waiting for an approval.

use crate::registry::{CallOutcome, PendingError, TokenShare};
use crate::state::Shared;
use gsv_protocol::frame::encode_req;
use gsv_protocol::method::{InvokeCallerOut, ToolInvokeOut};
use gsv_protocol::{ErrorCode, ErrorDetails, ErrorShape, Method};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long after it starts a gateway waits for a job's node to come back.
pub const REATTACH_WINDOW: Duration = Duration::from_secs(10 * 60);
/// How long a node is given to answer a call asked for again whose deadline has
/// already passed (it answers from what it kept, at once, or not at all).
const LATE_ANSWER: Duration = Duration::from_secs(30);
/// Past the deadline, how long the node's own timeout answer is waited for.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);

/// How a job's call was sent to its node: enough to ask for it again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dispatch {
    pub node: String,
    /// The node process it went to (`NodeInfo.instance`).
    pub instance: String,
    pub call_id: u64,
    pub tool: String,
    pub args: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// The call's deadline, ms since the epoch.
    pub deadline_ms: u64,
    pub token_id: String,
    #[serde(default)]
    pub operator: bool,
}

/// Writes `dispatch` into the running job `job`'s row, before the call is sent.
pub async fn remember(shared: &Shared, job: &str, dispatch: &Dispatch) {
    let text = match serde_json::to_string(dispatch) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(job, error = %e, "could not encode a job's dispatch");
            return;
        }
    };
    let id = job.to_owned();
    match shared
        .store
        .blocking(move |s| s.set_job_dispatch(&id, &text))
        .await
    {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(job, error = %e, "could not record a job's dispatch"),
        Err(e) => tracing::warn!(job, error = %e, "could not record a job's dispatch"),
    }
}

/// At start: one task per job of the previous run whose call reached a node.
pub fn resume_all(shared: &Arc<Shared>, resumable: Vec<(String, String)>) {
    for (job, text) in resumable {
        let shared = shared.clone();
        let counted = shared.in_flight.token();
        tokio::spawn(async move {
            let _counted = counted;
            let outcome = match serde_json::from_str::<Dispatch>(&text) {
                Ok(d) => {
                    tracing::info!(%job, node = %d.node, call_id = d.call_id, "asking the node again for a job's call");
                    ask_again(&shared, &d).await
                }
                Err(e) => Err(lost(format!(
                    "the gateway stopped while the call was running and its record is unreadable ({e})"
                ))),
            };
            crate::jobs::outcome::settle(&shared, &job, outcome).await;
        });
    }
}

fn lost(message: String) -> ErrorShape {
    ErrorShape::new(ErrorCode::NodeDisconnected, message)
}

/// Waits for `d.node` (within [`REATTACH_WINDOW`]) and asks it for the call; the
/// outcome, or why there is none.
pub(crate) async fn ask_again(shared: &Shared, d: &Dispatch) -> CallOutcome {
    let live = {
        let token = d.token_id.clone();
        shared.store.blocking(move |s| s.token_live(&token)).await
    };
    if !matches!(live, Ok(Ok(true))) {
        return Err(lost(
            "the gateway stopped while the call was running, and the caller's token is no longer valid"
                .into(),
        ));
    }
    let until = Instant::now() + REATTACH_WINDOW;
    loop {
        let arrived = shared.registry.arrivals().notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        if let Some(node) = shared.registry.get(&d.node) {
            if node.instance != d.instance && !node.journal {
                return Err(ErrorShape::new(
                    ErrorCode::NodeDisconnected,
                    format!(
                        "node {:?} restarted while the gateway was down; the call's outcome is not known (it may have run)",
                        d.node
                    ),
                )
                .with(ErrorDetails::NodeDisconnected {
                    dispatched: true,
                    node: d.node.clone(),
                    restarted: Some(true),
                }));
            }
            let share = TokenShare {
                token: &d.token_id,
                share: shared.config.pending_calls_per_token,
            };
            match node.resume_call(d.call_id, Some(share), None) {
                Ok(rx) => {
                    let frame = frame(d);
                    if node.out.send(frame).is_ok() {
                        let now_ms = gsv_protocol::now_ms();
                        let left = Duration::from_millis(d.deadline_ms.saturating_sub(now_ms));
                        let wait = (left + DEADLINE_SLACK).max(LATE_ANSWER);
                        tokio::select! {
                            answer = rx => {
                                // Err: the connection dropped again; wait for the next one.
                                if let Ok(outcome) = answer {
                                    return outcome;
                                }
                            }
                            _ = tokio::time::sleep(wait) => {
                                node.abandon_call(d.call_id);
                                return Err(ErrorShape::new(
                                    ErrorCode::Timeout,
                                    "the node did not answer for the call in time after the gateway restarted",
                                ));
                            }
                            _ = shared.shutdown.cancelled() => {
                                node.abandon_call(d.call_id);
                                return Err(lost("the gateway stopped again while asking for the call".into()));
                            }
                        }
                    } else {
                        node.abandon_call(d.call_id);
                    }
                }
                Err(PendingError::Closed) => {}
                Err(PendingError::Full | PendingError::TokenShare | PendingError::Taken) => {
                    return Err(ErrorShape::new(
                        ErrorCode::Overloaded,
                        "the node was too busy to take the call back after the gateway restarted",
                    ));
                }
            }
        }
        tokio::select! {
            _ = &mut arrived => {}
            _ = tokio::time::sleep_until(until.into()) => {
                return Err(lost(format!(
                    "the gateway stopped while the call was running and node {:?} did not come back within {} s",
                    d.node,
                    REATTACH_WINDOW.as_secs()
                )));
            }
            _ = shared.shutdown.cancelled() => {
                return Err(lost("the gateway stopped again while waiting for the node".into()));
            }
        }
    }
}

/// The `tool.invoke` asking the node for the call again.
fn frame(d: &Dispatch) -> String {
    let left = d.deadline_ms.saturating_sub(gsv_protocol::now_ms()).max(1);
    encode_req(
        &d.call_id.to_string(),
        Method::ToolInvoke,
        &ToolInvokeOut {
            tool: &d.tool,
            args: &d.args,
            timeout_ms: left,
            approval: d.approval.as_deref(),
            resume: true,
            caller: Some(InvokeCallerOut {
                token_id: &d.token_id,
                operator: d.operator,
            }),
        },
    )
}
