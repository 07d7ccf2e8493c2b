//! Calls across replicas: a call that arrives at replica B for a node connected to
//! replica A travels over NATS request-reply.
//!
//! **Where a node is** is the node directory ([`super::directory`]): a call goes to
//! the replica it names, on that replica's one subscription `gsv.replica.NAME.call`
//! ([`serve`]); no entry, an entry naming a replica that is gone, or "no responders"
//! means no replica holds the node.
//!
//! **Forwarding** ([`forward`]): B has authenticated the caller and checked its
//! policy's deny rules; it sends the token's id, the caller's name, the call's name,
//! its exact argument bytes and timeout, and a call key. A ([`handle`]) looks the token
//! up in its own store (tokens are shared, [`super::tokens`]: a token revoked or unknown
//! there is refused) and routes the call through its own router as if the caller were
//! connected to it: policy, tool, schema, approval, the node's ledger and the audit row
//! are A's, exactly as on one gateway. A call routed from another replica is never
//! forwarded again. Progress events come back on `gsv.progress.B.KEY` (B listens on
//! `gsv.progress.B.>` once, [`listen`]) before the answer, which says how many there
//! were, so B hands them all to its caller first; a cancel (or B's caller going away)
//! is sent on `gsv.cancel.KEY` (every replica listens on `gsv.cancel.>` once and
//! cancels the call it runs under that key). B waits at most the call's timeout plus a
//! margin; the answer is the node's raw result or the error shape A's router gave. A
//! keeps the policy of a token it looked up for [`POLICY_TTL`]; a revocation applied
//! on A forgets it at once.

use super::call_book::{
    answer_subject, answered, call_subject, held, progressed, Answer, CallBook, Forwarded, Holder,
    Judged, POLICY_TTL,
};
use super::Cluster;
use crate::peers::{ForwardedFor, RoutedElsewhere};
use crate::reattach::Dispatch;
use crate::router::{Caller, DispatchTx, FromReplica, RouteError};
use crate::state::Shared;
use gsv_protocol::event::CallProgress;
use gsv_protocol::method::ToolsCallParams;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long past the call's own timeout the forwarding replica waits for an answer.
const MARGIN: Duration = Duration::from_secs(10);

/// How a forwarded call's answer came (or did not).
enum Sent {
    Answer(Answer),
    NoResponders,
    TimedOut,
    Failed(String),
}

/// Sends a call for a node this replica does not hold to the replica that does.
/// `None` when no replica holds it (or NATS cannot be reached): the caller then gets
/// the same answer as on one gateway.
pub async fn forward(
    cluster: &Arc<Cluster>,
    metrics: &crate::metrics::Metrics,
    caller: ForwardedFor<'_>,
    node: &str,
    params: &ToolsCallParams,
    cancel: &CancellationToken,
) -> Option<RoutedElsewhere> {
    if !cluster.connected() {
        return None;
    }
    let entry = cluster.directory.fetch(cluster, node).await?;
    let holder = entry.replica;
    if holder == cluster.replica {
        // The directory is a step behind this replica's own registry.
        return None;
    }
    let client = cluster.client();
    let key = uuid::Uuid::new_v4().simple().to_string();
    // The call as it will reach the node, described here before it leaves: should the
    // holder die after sending it on, the node's next holder is asked for it under the
    // same id (the node never runs an id twice). The holder sends its own description
    // only for a call it sends with an approval it got.
    let call_id = cluster.call_ids.next();
    let tool = params
        .name
        .strip_prefix(node)
        .and_then(|t| t.strip_prefix("__"))
        .unwrap_or_default();
    let timeout = params
        .timeout_ms
        .unwrap_or(gsv_protocol::limits::DEFAULT_CALL_TIMEOUT_MS)
        .min(gsv_protocol::limits::MAX_CALL_TIMEOUT_MS);
    let dispatch = Dispatch {
        node: node.to_owned(),
        instance: entry.instance,
        call_id,
        tool: tool.to_owned(),
        args: params.args.clone(),
        approval: None,
        deadline_ms: gsv_protocol::now_ms() + timeout,
        token_id: caller.token_id.to_owned(),
        operator: caller.policy.is_full(),
    };
    let request = Forwarded {
        token_id: caller.token_id.to_owned(),
        name: params.name.clone(),
        args: params.args.clone(),
        timeout_ms: params.timeout_ms,
        key: key.clone(),
        progress_to: caller
            .progress
            .as_ref()
            .map(|_| format!("gsv.progress.{}.{key}", cluster.replica)),
        holder_to: Some(format!("gsv.holder.{}.{key}", cluster.replica)),
        origin: cluster.replica.clone(),
        call_id: Some(call_id),
        resume: None,
    };
    let delivered = Arc::new(AtomicUsize::new(0));
    let _progress = caller.progress.cloned().map(|sink| {
        cluster
            .calls
            .progress
            .insert(key.clone(), (sink, Arc::clone(&delivered)));
        Forget {
            book: &cluster.calls,
            key: key.clone(),
        }
    });
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
    // On the link to the holder when one is open (one hop instead of two), else over
    // NATS (and the link is dialled for the next calls).
    let link = cluster.links.to(&holder);
    if link.is_none() {
        super::link::want(cluster, &holder);
    }
    metrics.forwarded(if link.is_some() { "link" } else { "nats" });
    let sent = async {
        match link {
            Some(peer) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                cluster.calls.answers.insert(key.clone(), tx);
                let out = super::link::Outgoing {
                    fallback: Some((
                        call_subject(&holder),
                        Some(answer_subject(&cluster.replica, &key)),
                    )),
                    msg: super::link::wire::LinkMsg::Call {
                        key: key.clone(),
                        call: request,
                    },
                };
                if let Err(out) = peer.send(out).await {
                    out.over_nats(&client).await;
                }
                match tokio::time::timeout(wait, rx).await {
                    Ok(Ok(answer)) => Sent::Answer(answer),
                    Ok(Err(_)) => Sent::Failed("the call's answer was dropped".into()),
                    Err(_) => Sent::TimedOut,
                }
            }
            None => {
                let payload = match serde_json::to_vec(&request) {
                    Ok(p) => p,
                    Err(e) => return Sent::Failed(format!("cannot encode the call: {e}")),
                };
                let sent = client
                    .send_request(
                        call_subject(&holder),
                        async_nats::Request::new()
                            .payload(payload.into())
                            .timeout(Some(wait)),
                    )
                    .await;
                match sent {
                    Ok(m) => match serde_json::from_slice::<Answer>(&m.payload) {
                        Ok(a) => Sent::Answer(a),
                        Err(e) => {
                            Sent::Failed(format!("unreadable answer from another replica: {e}"))
                        }
                    },
                    Err(e) => match e.kind() {
                        async_nats::RequestErrorKind::NoResponders => Sent::NoResponders,
                        async_nats::RequestErrorKind::TimedOut => Sent::TimedOut,
                        _ => Sent::Failed(format!("the call to another replica failed: {e}")),
                    },
                }
            }
        }
    };
    cluster.calls.waiting.insert(key.clone(), ());
    cluster.calls.dispatches.insert(key.clone(), dispatch);
    cluster.calls.holders.insert(key.clone(), holder.clone());
    let _holder = Forget {
        book: &cluster.calls,
        key: key.clone(),
    };
    tokio::pin!(sent);
    // The replica that holds the call is watched: if it stops saying hello (it died,
    // or lost NATS), the call fails now, retryable, instead of at its deadline.
    let every = Duration::from_millis(500);
    let mut watch = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let answer = loop {
        tokio::select! {
            biased;
            r = &mut sent => break r,
            _ = cancel.cancelled() => return Some(Err(RouteError::Cancelled).into()),
            _ = watch.tick() => {
                let gone = cluster
                    .calls
                    .holders
                    .get(&key)
                    .filter(|h| cluster.gone(h.value()))
                    .map(|h| h.value().clone());
                if let Some(holder) = gone {
                    // Sent to the node already: ask its next holder for the same call.
                    let sent = cluster.calls.dispatches.get(&key).map(|d| d.clone());
                    if let Some(dispatch) = sent {
                        guard.disarm();
                        tracing::warn!(replica = ?holder, "cluster: the replica holding a call's node stopped answering; asking the node's next holder for the call");
                        return Some(super::resume::ask_again(cluster, node, dispatch, cancel).await.into());
                    }
                    return Some(Err(internal(format!(
                        "the gateway replica {holder} that held the node stopped answering, and the call was not described"
                    ))).into());
                }
            }
        }
    };
    let answer = match answer {
        Sent::Answer(a) => a,
        Sent::NoResponders => {
            guard.disarm();
            return None;
        }
        Sent::TimedOut => return Some(Err(RouteError::Deadline).into()),
        Sent::Failed(message) => {
            guard.disarm();
            return Some(Err(internal(message)).into());
        }
    };
    guard.disarm();
    let (outcome, sent_progress, audited) = match answer {
        Answer::Ok {
            result,
            progress,
            audited,
        } => (Ok(result), progress, audited),
        Answer::Err {
            error,
            progress,
            audited,
        } => (Err(RouteError::Node(error)), progress, audited),
    };
    // The progress the holder sent before its answer reaches the caller first (it
    // travels on another subject; a bounded wait).
    let waited = std::time::Instant::now();
    while caller.progress.is_some()
        && delivered.load(Ordering::SeqCst) < sent_progress
        && waited.elapsed() < Duration::from_millis(200)
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Some(RoutedElsewhere { outcome, audited })
}

fn internal(message: String) -> RouteError {
    RouteError::Node(ErrorShape::new(ErrorCode::Internal, message))
}

/// Forgets what was kept of a forwarded call (its progress sink, holder and
/// dispatch) when the call ends.
pub(super) struct Forget<'a> {
    pub book: &'a CallBook,
    pub key: String,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.book.progress.remove(&self.key);
        self.book.holders.remove(&self.key);
        self.book.dispatches.remove(&self.key);
        self.book.waiting.remove(&self.key);
        self.book.answers.remove(&self.key);
    }
}

/// The replica's standing subscriptions for calls crossing replicas: the progress,
/// holder words and (after a link failed) answers of calls forwarded from here, and
/// cancels of calls running here.
pub async fn listen(cluster: Arc<Cluster>) {
    let own = |what: &str| format!("gsv.{what}.{}.", cluster.replica);
    tokio::join!(
        by_key(&cluster, own("progress"), |c, key, body| {
            progressed(c, key, serde_json::from_slice(body).ok())
        }),
        by_key(&cluster, "gsv.cancel.".to_owned(), |c, key, _| {
            if let Some(cancel) = c.calls.running.get(key) {
                cancel.cancel();
            }
        }),
        by_key(&cluster, own("holder"), |c, key, body| {
            if let Ok(word) = serde_json::from_slice::<Holder>(body) {
                held(c, key, word);
            }
        }),
        // Answers to calls sent on a link that failed before the answer could take it.
        by_key(&cluster, own("answer"), |c, key, body| {
            if let Ok(answer) = serde_json::from_slice::<Answer>(body) {
                answered(c, key, answer);
            }
        }),
    );
}

/// Subscribes to `PREFIX>` for as long as the replica runs (again after a failure)
/// and hands each message's key (the subject after `prefix`) and body to `on`.
async fn by_key(cluster: &Cluster, prefix: String, on: impl Fn(&Cluster, &str, &[u8])) {
    loop {
        if let Ok(mut sub) = cluster.client().subscribe(format!("{prefix}>")).await {
            while let Some(m) = sub.next().await {
                if let Some(key) = m.subject.as_str().strip_prefix(&prefix) {
                    on(cluster, key, &m.payload);
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Publishes on the cancel subject when dropped armed.
struct CancelOnDrop {
    client: super::bus::Bus,
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

/// Answers the calls other replicas forward to this one, on its one subscription.
pub async fn serve(shared: Arc<Shared>, cluster: Arc<Cluster>) {
    loop {
        match cluster
            .client()
            .subscribe(call_subject(&cluster.replica))
            .await
        {
            Ok(mut sub) => {
                while let Some(message) = sub.next().await {
                    tokio::spawn(handle(Arc::clone(&shared), Arc::clone(&cluster), message));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cluster: cannot take forwarded calls; trying again");
            }
        }
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Routes one forwarded call here and answers it.
async fn handle(shared: Arc<Shared>, cluster: Arc<Cluster>, message: async_nats::Message) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    let answer = match serde_json::from_slice::<Forwarded>(&message.payload) {
        Ok(call) => respond(&shared, &cluster, call, None).await,
        Err(e) => Answer::err(ErrorShape::new(
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
        payload = serde_json::to_vec(&Answer::err(shape)).unwrap_or_default();
    }
    if let Err(e) = client.publish(reply, payload.into()).await {
        tracing::warn!(error = %e, "cluster: cannot answer a forwarded call");
    }
}

/// Routes a call that came on a link here and answers it on the link (over NATS when
/// the link failed meanwhile).
pub(super) async fn on_link(
    shared: Arc<Shared>,
    cluster: Arc<Cluster>,
    key: String,
    call: Forwarded,
    link: super::link::Peer,
) {
    let fallback =
        super::valid_replica_name(&call.origin).then(|| (answer_subject(&call.origin, &key), None));
    let answer = respond(&shared, &cluster, call, Some(&link)).await;
    let out = super::link::Outgoing {
        msg: super::link::wire::LinkMsg::Answer { key, answer },
        fallback,
    };
    if let Err(out) = link.send(out).await {
        out.over_nats(&cluster.client()).await;
    }
}

/// The answer to a forwarded call: routed here, or (a call whose holder died) asked of
/// the node again.
async fn respond(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    mut call: Forwarded,
    link: Option<&super::link::Peer>,
) -> Answer {
    match call.resume.take() {
        Some(dispatch) => super::resume::answer(shared, cluster, call, dispatch).await,
        None => run(shared, cluster, call, link).await,
    }
}

async fn run(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    call: Forwarded,
    link: Option<&super::link::Peer>,
) -> Answer {
    let judged = match judge(shared, cluster, &call.token_id).await {
        Ok(j) => j,
        Err(shape) => return Answer::err(shape),
    };
    let (record, policy) = (&judged.0, &judged.1);
    let cancel = take(cluster, &call).await;
    // Progress events are relayed by this task while the call runs (no task of their
    // own: a forwarded call's answer then waits for no other task to finish).
    let (progress, mut relay) = match call.progress_to {
        Some(subject) => {
            let (tx, rx) = tokio::sync::mpsc::channel::<CallProgress>(64);
            (
                Some(tx),
                Some(Relay {
                    rx,
                    subject,
                    sent: 0,
                }),
            )
        }
        None => (None, None),
    };
    let from = FromReplica {
        name: call.origin.clone(),
        call_id: call.call_id,
        dispatched: tell_dispatch(cluster, call.holder_to.clone()),
    };
    let caller = Caller::of(&record.subject, &record.id, policy)
        .with_progress_to(progress)
        .forwarded_by(&from);
    let params = ToolsCallParams {
        name: call.name,
        args: call.args,
        timeout_ms: call.timeout_ms,
        is_async: false,
    };
    let outcome = {
        let routed = crate::router::call(shared, &caller, params, cancel);
        tokio::pin!(routed);
        loop {
            tokio::select! {
                biased;
                outcome = &mut routed => break outcome,
                Some(p) = next_progress(&mut relay) => {
                    if let Some(r) = relay.as_mut() {
                        r.send(cluster, &call.key, link, p).await;
                    }
                }
            }
        }
    };
    drop(caller);
    cluster.calls.running.remove(&call.key);
    // The node sends its progress before its result: every event is queued by now,
    // and goes before the answer.
    let mut progress = 0;
    if let Some(mut r) = relay {
        while let Ok(p) = r.rx.try_recv() {
            r.send(cluster, &call.key, link, p).await;
        }
        progress = r.sent;
    }
    // `router::call` wrote the call's audit row here.
    match outcome {
        Ok(result) => Answer::Ok {
            result,
            progress,
            audited: true,
        },
        Err(error) => Answer::Err {
            error,
            progress,
            audited: true,
        },
    }
}

/// A forwarded call's progress events on their way to the forwarding replica.
struct Relay {
    rx: tokio::sync::mpsc::Receiver<CallProgress>,
    /// The call's progress subject on NATS (when there is no link, or it failed).
    subject: String,
    sent: usize,
}

impl Relay {
    /// Sends one event: on the call's link when it came on one (in order, before its
    /// answer), else (or when the link failed) on NATS.
    async fn send(
        &mut self,
        cluster: &Cluster,
        key: &str,
        link: Option<&super::link::Peer>,
        progress: CallProgress,
    ) {
        self.sent += 1;
        let out = super::link::Outgoing {
            msg: super::link::wire::LinkMsg::Progress {
                key: key.to_owned(),
                progress,
            },
            fallback: Some((self.subject.clone(), None)),
        };
        let out = match link {
            Some(l) => match l.send(out).await {
                Ok(()) => return,
                Err(out) => *out,
            },
            None => out,
        };
        out.over_nats(&cluster.client()).await;
    }
}

/// The next progress event of a call that wants them (pending forever otherwise).
async fn next_progress(relay: &mut Option<Relay>) -> Option<CallProgress> {
    match relay {
        Some(r) => r.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Takes forwarded call `call` here: tells the forwarding replica who holds it (when
/// it does not know: a call asked for again), and registers the cancel that its cancel
/// (or its giving up) fires.
pub(super) async fn take(cluster: &Cluster, call: &Forwarded) -> CancellationToken {
    // A call the forwarding replica gave an id knows its holder already.
    if let Some(subject) = call.holder_to.as_ref().filter(|_| call.call_id.is_none()) {
        let hello = Holder {
            holder: cluster.replica.clone(),
            dispatch: None,
        };
        if let Ok(bytes) = serde_json::to_vec(&hello) {
            let _ = cluster
                .client()
                .publish(subject.clone(), bytes.into())
                .await;
        }
    }
    let cancel = CancellationToken::new();
    cluster
        .calls
        .running
        .insert(call.key.clone(), cancel.clone());
    cancel
}

/// Where the router reports how it sends a forwarded call to its node: published to
/// the forwarding replica (`subject`, its holder subject) and flushed before the
/// router goes on, so a holder that dies after sending the call on has always told
/// the forwarding replica how to ask for it again.
fn tell_dispatch(cluster: &Cluster, subject: Option<String>) -> DispatchTx {
    let client = cluster.client();
    let holder = cluster.replica.clone();
    Box::new(move |dispatch| {
        let (client, holder, subject) = (client.clone(), holder.clone(), subject.clone());
        Box::pin(async move {
            let Some(subject) = subject else { return };
            let word = Holder {
                holder,
                dispatch: Some(dispatch),
            };
            if let Ok(bytes) = serde_json::to_vec(&word) {
                if client.publish(subject, bytes.into()).await.is_ok() {
                    let _ = client.flush().await;
                }
            }
        })
    })
}

/// The forwarded caller's token and policy: kept from an earlier call for
/// [`POLICY_TTL`], else looked up in this replica's store.
pub(super) async fn judge(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    token_id: &str,
) -> Result<Judged, ErrorShape> {
    if let Some(kept) = cluster.calls.policies.get(token_id) {
        if kept.0.elapsed() < POLICY_TTL {
            return Ok(Arc::clone(&kept.1));
        }
    }
    let id = token_id.to_owned();
    let found = shared
        .store
        .blocking(move |store| store.active_by_id(&id))
        .await;
    let judged = Arc::new(super::caller_policy(found)?);
    cluster
        .calls
        .policies
        .insert(token_id.to_owned(), (Instant::now(), Arc::clone(&judged)));
    Ok(judged)
}
