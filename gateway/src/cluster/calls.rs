//! Calls across replicas: a call that arrives at replica B for a node connected to
//! replica A travels over NATS request-reply.
//!
//! **Where a node is** is NATS's own interest: the replica that holds a node
//! subscribes to `gsv.node.ID.call` in the queue group [`QUEUE`] while the node is
//! connected to it ([`serve`], fed by [`crate::registry::Registry::watch`]), so a
//! request reaches exactly one holder, and "no responders" means no replica holds it.
//!
//! **Forwarding** ([`forward`]): B has authenticated the caller and checked its
//! policy's deny rules; it sends the token's id, the caller's name, the call's name,
//! its exact argument bytes and timeout, and a call key. A ([`handle`]) looks the token
//! up in its own store (tokens are shared, [`super::tokens`]: a token revoked or unknown
//! there is refused) and routes the call through its own router as if the caller were
//! connected to it: policy, tool, schema, approval, the node's ledger and the audit row
//! are A's, exactly as on one gateway. A call routed from another replica is never
//! forwarded again. Progress events come back on `gsv.progress.KEY`, before the
//! answer; a cancel (or B's caller going away) is sent on `gsv.cancel.KEY`. B waits at
//! most the call's timeout plus a margin; the answer is the node's raw result or the
//! error shape A's router gave.

use super::Cluster;
use crate::registry::ProgressSink;
use crate::router::{Caller, RouteError};
use crate::state::Shared;
use futures_util::{FutureExt, StreamExt};
use gsv_protocol::event::CallProgress;
use gsv_protocol::method::ToolsCallParams;
use gsv_protocol::{ErrorCode, ErrorShape};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The queue group holders subscribe in: one request, one holder.
pub const QUEUE: &str = "gsv-holder";
/// How long past the call's own timeout the forwarding replica waits for an answer.
const MARGIN: Duration = Duration::from_secs(10);

fn call_subject(node: &str) -> String {
    format!("gsv.node.{node}.call")
}

/// A forwarded call.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Forwarded {
    token_id: String,
    name: String,
    args: Box<RawValue>,
    timeout_ms: Option<u64>,
    /// Names this call's progress and cancel subjects.
    key: String,
    progress: bool,
    origin: String,
}

/// What the holder answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Answer {
    Ok(Box<RawValue>),
    Err(ErrorShape),
}

/// Sends a call for a node this replica does not hold to the replica that does.
/// `None` when no replica holds it (or NATS cannot be reached): the caller then gets
/// the same answer as on one gateway.
pub async fn forward(
    cluster: &Cluster,
    caller: &Caller<'_>,
    node: &str,
    params: &ToolsCallParams,
    cancel: &CancellationToken,
) -> Option<Result<Box<RawValue>, RouteError>> {
    if !cluster.connected() {
        return None;
    }
    let client = cluster.client();
    let key = uuid::Uuid::new_v4().simple().to_string();
    let request = Forwarded {
        token_id: caller.token_id.to_owned(),
        name: params.name.clone(),
        args: params.args.clone(),
        timeout_ms: params.timeout_ms,
        key: key.clone(),
        progress: caller.progress.is_some(),
        origin: cluster.replica.clone(),
    };
    let payload = match serde_json::to_vec(&request) {
        Ok(p) => p,
        Err(e) => return Some(Err(internal(format!("cannot encode the call: {e}")))),
    };
    let mut progress = match &caller.progress {
        Some(_) => client.subscribe(format!("gsv.progress.{key}")).await.ok(),
        None => None,
    };
    let wait = Duration::from_millis(
        params
            .timeout_ms
            .unwrap_or(gsv_protocol::limits::MAX_CALL_TIMEOUT_MS),
    ) + MARGIN;
    // The holder hears of a cancel, and of this side giving up, on the cancel subject.
    let guard = CancelOnDrop {
        client: client.clone(),
        subject: Some(format!("gsv.cancel.{key}")),
    };
    let sent = client.send_request(
        call_subject(node),
        async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(wait)),
    );
    tokio::pin!(sent);
    let answer = loop {
        tokio::select! {
            r = &mut sent => break r,
            _ = cancel.cancelled() => return Some(Err(RouteError::Cancelled)),
            Some(m) = next_progress(&mut progress) => relay(caller.progress.as_ref(), &m.payload),
        }
    };
    // Progress sent before the answer arrives first.
    if let Some(sub) = progress.as_mut() {
        while let Some(Some(m)) = sub.next().now_or_never() {
            relay(caller.progress.as_ref(), &m.payload);
        }
    }
    let message = match answer {
        Ok(m) => m,
        Err(e) => {
            return match e.kind() {
                async_nats::RequestErrorKind::NoResponders => {
                    guard.disarm();
                    None
                }
                async_nats::RequestErrorKind::TimedOut => Some(Err(RouteError::Deadline)),
                _ => Some(Err(internal(format!(
                    "the call to another replica failed: {e}"
                )))),
            };
        }
    };
    guard.disarm();
    Some(match serde_json::from_slice::<Answer>(&message.payload) {
        Ok(Answer::Ok(raw)) => Ok(raw),
        Ok(Answer::Err(shape)) => Err(RouteError::Node(shape)),
        Err(e) => Err(internal(format!(
            "unreadable answer from another replica: {e}"
        ))),
    })
}

async fn next_progress(sub: &mut Option<async_nats::Subscriber>) -> Option<async_nats::Message> {
    match sub {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

fn relay(sink: Option<&ProgressSink>, payload: &[u8]) {
    if let (Some(sink), Ok(p)) = (sink, serde_json::from_slice::<CallProgress>(payload)) {
        let _ = sink.try_send(p);
    }
}

fn internal(message: String) -> RouteError {
    RouteError::Node(ErrorShape::new(ErrorCode::Internal, message))
}

/// Publishes on the cancel subject when dropped armed.
struct CancelOnDrop {
    client: async_nats::Client,
    subject: Option<String>,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.subject = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(subject) = self.subject.take() {
            let client = self.client.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = client.publish(subject, "".into()).await;
                });
            }
        }
    }
}

/// Holds this replica's nodes in NATS: subscribes for each node while it is
/// connected here, and answers the calls other replicas forward to it.
pub async fn serve(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    let Some(mut changes) = shared.registry.watch() else {
        return;
    };
    let mut held: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    loop {
        let change = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            c = changes.recv() => c,
        };
        let Some((id, online)) = change else { break };
        let id = id.to_string();
        if online {
            if held.get(&id).is_some_and(|t| !t.is_finished()) {
                continue;
            }
            let task = tokio::spawn(hold(Arc::clone(&shared), Arc::clone(&cluster), id.clone()));
            held.insert(id, task);
        } else if let Some(task) = held.remove(&id) {
            // Dropping the subscription unsubscribes: calls go to whoever holds it next.
            task.abort();
        }
    }
    for (_, task) in held {
        task.abort();
    }
}

/// Answers forwarded calls for one node for as long as it is held here.
async fn hold(shared: Arc<Shared>, cluster: Arc<Cluster>, node: String) {
    loop {
        match cluster
            .client()
            .queue_subscribe(call_subject(&node), QUEUE.to_owned())
            .await
        {
            Ok(mut sub) => {
                while let Some(message) = sub.next().await {
                    tokio::spawn(handle(Arc::clone(&shared), Arc::clone(&cluster), message));
                }
            }
            Err(e) => {
                tracing::warn!(node_id = %node, error = %e, "cluster: cannot hold a node in NATS; trying again");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Routes one forwarded call here and answers it.
async fn handle(shared: Arc<Shared>, cluster: Arc<Cluster>, message: async_nats::Message) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    let answer = match serde_json::from_slice::<Forwarded>(&message.payload) {
        Ok(call) => run(&shared, &cluster, call).await,
        Err(e) => Answer::Err(ErrorShape::new(
            ErrorCode::InvalidFrame,
            format!("unreadable call from another replica: {e}"),
        )),
    };
    let client = cluster.client();
    let mut payload = serde_json::to_vec(&answer).unwrap_or_default();
    let max = client.server_info().max_payload;
    if payload.len() > max.saturating_sub(1024) {
        let shape = ErrorShape::new(
            ErrorCode::Internal,
            format!(
                "the result ({} bytes) is larger than the NATS server's max_payload ({max} bytes): raise max_payload (docs/operations.md, Cluster mode)",
                payload.len()
            ),
        );
        payload = serde_json::to_vec(&Answer::Err(shape)).unwrap_or_default();
    }
    if let Err(e) = client.publish(reply, payload.into()).await {
        tracing::warn!(error = %e, "cluster: cannot answer a forwarded call");
    }
}

async fn run(shared: &Arc<Shared>, cluster: &Cluster, call: Forwarded) -> Answer {
    let token_id = call.token_id.clone();
    let found = shared
        .store
        .blocking(move |store| store.active_by_id(&token_id))
        .await;
    let (record, policy) = match super::caller_policy(found) {
        Ok(found) => found,
        Err(shape) => return Answer::Err(shape),
    };
    let cancel = CancellationToken::new();
    // A cancel from the forwarding replica (or its giving up) cancels the call here.
    let watcher = match cluster
        .client()
        .subscribe(format!("gsv.cancel.{}", call.key))
        .await
    {
        Ok(mut sub) => {
            let cancel = cancel.clone();
            Some(tokio::spawn(async move {
                if sub.next().await.is_some() {
                    cancel.cancel();
                }
            }))
        }
        Err(_) => None,
    };
    let (progress, relay) = if call.progress {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<CallProgress>(64);
        let client = cluster.client();
        let subject = format!("gsv.progress.{}", call.key);
        let task = tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                if let Ok(bytes) = serde_json::to_vec(&p) {
                    let _ = client.publish(subject.clone(), bytes.into()).await;
                }
            }
        });
        (Some(tx), Some(task))
    } else {
        (None, None)
    };
    let caller = Caller {
        name: &record.subject,
        token_id: &record.id,
        policy: &policy,
        agent: None,
        progress,
        asker: None,
        fanout: None,
        job: None,
        from_replica: Some(&call.origin),
    };
    let params = ToolsCallParams {
        name: call.name,
        args: call.args,
        timeout_ms: call.timeout_ms,
        is_async: false,
    };
    let outcome = crate::router::call(shared, &caller, params, cancel).await;
    drop(caller);
    if let Some(relay) = relay {
        // Every progress event is published before the answer (bounded: the sink's
        // last copy goes with the call's ledger entry).
        let _ = tokio::time::timeout(Duration::from_secs(2), relay).await;
    }
    if let Some(w) = watcher {
        w.abort();
    }
    match outcome {
        Ok(raw) => Answer::Ok(raw),
        Err(shape) => Answer::Err(shape),
    }
}
