//! The transfers of one connection to the gateway: `transfer.open` / `finish` /
//! `cancel`, chunks in binary frames, credits as events.
//!
//! Each transfer is a task owning its [`Incoming`] or [`Outgoing`] file, fed through a
//! small channel in the order the connection delivered its frames, so a chunk, the
//! credits and the closing request never race. A `get`'s file work runs on the blocking
//! pool; a `put` is written by a thread of its own, at a lower priority than calls.
//! A transfer sends at most [`WINDOW_BYTES`] ahead of the credits it has, so it holds
//! a bounded amount in the connection's queue, and other calls keep flowing. When the
//! connection ends its transfers end too; a `put`'s partial file stays for a resumed
//! copy.

use super::lane::{Lane, LaneDial, LaneUse};
use super::{Incoming, Outgoing, TransferError};
use crate::state::NodeState;
use crate::tools::paths::PathPolicy;
use dashmap::DashMap;
use gsv_protocol::frame::{encode_err, encode_event, encode_ok};
use gsv_protocol::transfer::{
    CancelParams, Chunk, Credit, Direction, Failed, FinishParams, Finished, OpenParams, OpenResult,
    CHUNK_BYTES, HEADER_BYTES, WINDOW_BYTES,
};
use gsv_protocol::{ErrorCode, ErrorShape, EventName};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Transfers one node runs at once.
pub const MAX_TRANSFERS: usize = 16;
/// How long `transfer.cancel` waits for the transfer's task to end before it answers.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// Messages queued for one transfer: a window of chunks and their credits.
const INBOX: usize = (WINDOW_BYTES as usize / CHUNK_BYTES) * 2 + 8;

/// What reaches a transfer's task.
enum Msg {
    Chunk(gsv_transport::tungstenite::Bytes),
    Credit(u64),
    Finish {
        sha256: String,
        reply: oneshot::Sender<Result<Finished, ErrorShape>>,
    },
    Cancel {
        discard: bool,
    },
}

/// The transfers of one connection.
pub(crate) struct Transfers {
    node: Arc<NodeState>,
    text: mpsc::Sender<String>,
    binary: mpsc::Sender<Vec<u8>>,
    running: Running,
    /// The connection's bulk lane, dialled for the first transfer.
    lane: Arc<Lane>,
}

/// The transfers running on one connection, by id.
type Running = Arc<DashMap<uuid::Uuid, mpsc::Sender<Msg>>>;

impl Transfers {
    /// `lane`: where the connection was dialled, for its bulk lane (`None`: every
    /// transfer's chunks go on the connection).
    pub fn new(
        node: Arc<NodeState>,
        text: mpsc::Sender<String>,
        binary: mpsc::Sender<Vec<u8>>,
        lane: Option<LaneDial>,
    ) -> Self {
        let running: Running = Arc::new(DashMap::new());
        let deliver = {
            let (running, text) = (Arc::clone(&running), text.clone());
            Arc::new(move |frame| deliver_chunk(&running, &text, frame))
        };
        Transfers {
            lane: Arc::new(Lane::new(Arc::clone(&node), lane, deliver)),
            node,
            text,
            binary,
            running,
        }
    }

    /// `transfer.open`: opens the file and starts the transfer's task; answers
    /// request `req` with [`OpenResult`].
    pub fn open(&self, req: String, params: OpenParams) {
        let node = Arc::clone(&self.node);
        let text = self.text.clone();
        let binary = self.binary.clone();
        let running = Arc::clone(&self.running);
        let lane = Arc::clone(&self.lane);
        tokio::spawn(async move {
            let id = params.id;
            let answer = match open(&node, &running, params).await {
                Ok((mut result, file, rx)) => {
                    // Its chunks go on the bulk lane when there is one.
                    let lane = lane.hold().await;
                    result.lane = lane.is_some();
                    let frame = encode_ok(&req, &result);
                    let text2 = text.clone();
                    let running2 = Arc::clone(&running);
                    tokio::spawn(async move {
                        match file {
                            Opened::Get(out, hold) => {
                                run_get(id, out, hold, rx, &text2, &binary, lane).await
                            }
                            Opened::Put(inc) => {
                                run_put(id, inc, rx, &text2).await;
                                drop(lane);
                            }
                        }
                        running2.remove(&id);
                    });
                    frame
                }
                Err(e) => encode_err(&req, &e),
            };
            let _ = text.send(answer).await;
        });
    }

    /// A binary frame on the connection: a chunk for a `put` of this connection.
    pub fn chunk(&self, frame: gsv_transport::tungstenite::Bytes) {
        deliver_chunk(&self.running, &self.text, frame);
    }

    /// A `transfer.credit` event from the gateway (a `get`'s receiver wrote bytes).
    pub fn credit(&self, credit: Credit) {
        if let Some(tx) = self.running.get(&credit.id).map(|tx| tx.clone()) {
            let _ = tx.try_send(Msg::Credit(credit.bytes));
        }
    }

    /// `transfer.finish`: checks and places a `put`'s file; answers `req`.
    pub fn finish(&self, req: String, params: FinishParams) {
        let tx = self.running.get(&params.id).map(|tx| tx.clone());
        let text = self.text.clone();
        tokio::spawn(async move {
            let (reply, answer) = oneshot::channel();
            let sent = match tx {
                Some(tx) => tx
                    .send(Msg::Finish {
                        sha256: params.sha256,
                        reply,
                    })
                    .await
                    .is_ok(),
                None => false,
            };
            let frame = match (sent, answer.await) {
                (true, Ok(Ok(done))) => encode_ok(&req, &done),
                (true, Ok(Err(e))) => encode_err(&req, &e),
                _ => encode_err(&req, &not_running(params.id)),
            };
            let _ = text.send(frame).await;
        });
    }

    /// `transfer.cancel`: ends a transfer (a `put`'s partial file kept unless
    /// `discard`); answers `req` `{}`.
    pub fn cancel(&self, req: String, params: CancelParams) {
        let tx = self.running.get(&params.id).map(|tx| tx.clone());
        let text = self.text.clone();
        tokio::spawn(async move {
            if let Some(tx) = tx {
                let _ = tx
                    .send(Msg::Cancel {
                        discard: params.discard,
                    })
                    .await;
                // Answered once the transfer's task has ended (a discarded partial
                // file is gone by then), within a bound.
                let _ = tokio::time::timeout(CANCEL_WAIT, tx.closed()).await;
            }
            let _ = text.send(encode_ok(&req, &serde_json::json!({}))).await;
        });
    }
}

/// A chunk (from the connection or the bulk lane) handed to its `put`. Never blocks.
fn deliver_chunk(
    running: &Running,
    text: &mpsc::Sender<String>,
    frame: gsv_transport::tungstenite::Bytes,
) {
    let Some(id) = Chunk::peek_id(&frame) else {
        warn!("ignoring a binary frame that is not a transfer chunk");
        return;
    };
    match running.get(&id).map(|tx| tx.clone()) {
        Some(tx) => {
            if tx.try_send(Msg::Chunk(frame)).is_err() {
                // More than a window in flight: the gateway broke the flow rules.
                warn!(transfer = %id, "chunk over the window; transfer ended");
                if let Some((_, tx)) = running.remove(&id) {
                    let _ = tx.try_send(Msg::Cancel { discard: false });
                }
                let text = text.clone();
                tokio::spawn(async move { failed(&text, id, overflow()).await });
            }
        }
        None => debug!(transfer = %id, "chunk for a transfer that is not running"),
    }
}

impl Drop for Transfers {
    /// The connection is gone: its transfers end now (a `put`'s partial file stays for
    /// a resumed copy). Their tasks hold the running map, so without this they would
    /// wait for chunks or credits that can no longer come, and keep the partial file
    /// locked against the resumed copy on the next connection.
    fn drop(&mut self) {
        for entry in self.running.iter() {
            let _ = entry.value().try_send(Msg::Cancel { discard: false });
        }
        self.running.clear();
    }
}

/// A file opened for a transfer (a get: and whether it waits for its first credit).
enum Opened {
    Get(Outgoing, bool),
    Put(Incoming),
}

async fn open(
    node: &Arc<NodeState>,
    running: &DashMap<uuid::Uuid, mpsc::Sender<Msg>>,
    params: OpenParams,
) -> Result<(OpenResult, Opened, mpsc::Receiver<Msg>), ErrorShape> {
    // A node offers transfers as far as it offers the file tools: no Write (read-only
    // nodes, `--without Write`), no put; no Read, no get.
    let tool = match params.direction {
        Direction::Get => "Read",
        Direction::Put => "Write",
    };
    if node.registry.get(tool).is_none() {
        return Err(ErrorShape::new(
            ErrorCode::Forbidden,
            format!(
                "node {} does not offer {tool}, so it does not {} files",
                node.config.id,
                match params.direction {
                    Direction::Get => "send",
                    Direction::Put => "receive",
                }
            ),
        ));
    }
    if running.len() >= MAX_TRANSFERS {
        return Err(ErrorShape::new(
            ErrorCode::Overloaded,
            format!("this node runs {MAX_TRANSFERS} transfers at once; try again when one ends"),
        ));
    }
    if running.contains_key(&params.id) {
        return Err(ErrorShape::new(
            ErrorCode::InvalidArgs,
            format!("transfer {} is already open", params.id),
        ));
    }
    let policy = PathPolicy::new(node.config.workspace.clone(), node.config.confine)
        .with_protected(Arc::clone(&node.protected));
    let OpenParams {
        id,
        direction,
        path,
        meta,
        sha256,
        offset,
        hold,
    } = params;
    let opened = tokio::task::spawn_blocking(move || match direction {
        Direction::Get => Outgoing::open(&policy, &path, offset).map(|o| Opened::Get(o, false)),
        Direction::Put => match meta {
            Some(meta) => Incoming::open(&policy, &path, meta, sha256).map(Opened::Put),
            None => Err(TransferError::Short { size: 0, got: 0 }),
        },
    })
    .await
    .map_err(|e| ErrorShape::new(ErrorCode::Internal, format!("transfer task failed: {e}")))?;
    let opened = match (direction, meta, opened) {
        (Direction::Put, None, _) => {
            return Err(ErrorShape::new(
                ErrorCode::InvalidArgs,
                "a put needs meta: {size, mode, mtimeMs}",
            ))
        }
        (_, _, Ok(o)) => o,
        (_, _, Err(e)) => return Err(ErrorShape::new(e.code(), e.to_string())),
    };
    let result = match &opened {
        Opened::Get(out, _) => OpenResult {
            id,
            path: out.path().display().to_string(),
            resolved: out.resolved(),
            replaces: None,
            meta: out.meta(),
            offset: out.offset(),
            lane: false,
        },
        Opened::Put(inc) => OpenResult {
            id,
            path: inc.path().display().to_string(),
            resolved: inc.resolved(),
            replaces: Some(inc.replaces()),
            meta: inc.meta(),
            offset: inc.offset(),
            lane: false,
        },
    };
    let (tx, rx) = mpsc::channel(INBOX);
    running.insert(id, tx);
    info!(transfer = %id, ?direction, path = ?result.path, offset = result.offset, hold, "transfer opened");
    let opened = match opened {
        Opened::Get(out, _) => Opened::Get(out, hold),
        put => put,
    };
    Ok((result, opened, rx))
}

/// Receives a `put`: writes each chunk, credits it, then checks and places the file.
///
/// The whole loop runs on a thread of its own, which takes the chunks as the
/// connection's reader hands them over and writes and hashes them back to back: no
/// hop through the async runtime and back per chunk (two thread wake-ups, each a wait
/// for a core on a busy machine), and a credit leaves as soon as its chunk is written.
/// The thread runs [`gsv_transport::priority::BULK_NICE`] below the node's other work, so calls that arrive
/// during a copy are served first and the copy takes the CPU they leave.
async fn run_put(
    id: uuid::Uuid,
    inc: Incoming,
    rx: mpsc::Receiver<Msg>,
    text: &mpsc::Sender<String>,
) {
    let (done, ended) = oneshot::channel::<()>();
    let thread_text = text.clone();
    let spawned = std::thread::Builder::new()
        .name("gsv-put".into())
        .spawn(move || {
            gsv_transport::priority::lower_this_thread();
            put_loop(id, inc, rx, &thread_text);
            let _ = done.send(());
        });
    match spawned {
        // Ends with the loop, or when the thread panicked.
        Ok(_) => {
            let _ = ended.await;
        }
        Err(e) => {
            let error = ErrorShape::new(
                ErrorCode::Internal,
                format!("could not start the transfer's thread: {e}"),
            );
            warn!(transfer = %id, error = %error.message, "transfer failed");
            failed(text, id, error).await;
        }
    }
}

/// [`run_put`]'s loop (blocking).
fn put_loop(
    id: uuid::Uuid,
    mut file: Incoming,
    mut rx: mpsc::Receiver<Msg>,
    text: &mpsc::Sender<String>,
) {
    while let Some(msg) = rx.blocking_recv() {
        match msg {
            Msg::Chunk(frame) => {
                let written = match Chunk::decode(&frame) {
                    Ok(c) => file
                        .write(c.offset, c.data)
                        .map(|()| c.data.len() as u64)
                        .map_err(|e| ErrorShape::new(e.code(), e.to_string())),
                    Err(e) => Err(ErrorShape::new(ErrorCode::InvalidFrame, e.to_string())),
                };
                // The chunk's memory goes back before the credit lets the next one in.
                drop(frame);
                match written {
                    Ok(bytes) => {
                        let credit =
                            encode_event(EventName::TransferCredit, &Credit { id, bytes }, 0);
                        if text.blocking_send(credit).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        warn!(transfer = %id, error = %e.message, "transfer failed");
                        failed_blocking(text, id, e);
                        return;
                    }
                }
            }
            Msg::Credit(_) => {}
            Msg::Finish { sha256, reply } => {
                let path = file.path().display().to_string();
                let done = file
                    .finish(&sha256)
                    .map(|(bytes, sha256)| Finished {
                        id,
                        path,
                        bytes,
                        sha256,
                    })
                    .map_err(|e| ErrorShape::new(e.code(), e.to_string()));
                match &done {
                    Ok(f) => info!(transfer = %id, bytes = f.bytes, "transfer received"),
                    Err(e) => warn!(transfer = %id, error = %e.message, "transfer not placed"),
                }
                let _ = reply.send(done);
                return;
            }
            Msg::Cancel { discard } => {
                if discard {
                    file.discard();
                }
                debug!(transfer = %id, discard, "transfer cancelled");
                return;
            }
        }
    }
}

/// Sends a `get`: chunks while the window allows, then `transfer.end` once every
/// byte is credited. A `held` get sends nothing before its first credit.
async fn run_get(
    id: uuid::Uuid,
    out: Outgoing,
    mut held: bool,
    mut rx: mpsc::Receiver<Msg>,
    text: &mpsc::Sender<String>,
    binary: &mpsc::Sender<Vec<u8>>,
    lane: Option<LaneUse>,
) {
    // Chunks go on the bulk lane when the transfer has one; a lane that ends takes
    // what it carried with it, so the transfer ends too (the copy resumes).
    let (binary, lane_closed) = match &lane {
        Some(l) => (&l.binary, l.closed.clone()),
        None => (binary, CancellationToken::new()),
    };
    let mut out = Some(out);
    let start = out.as_ref().map(Outgoing::offset).unwrap_or(0);
    let (mut sent, mut credited, mut eof) = (start, start, false);
    loop {
        // What the gateway sent meanwhile (credits, a cancel) first.
        while let Ok(msg) = rx.try_recv() {
            match msg {
                Msg::Credit(b) => {
                    held = false;
                    credited = credited.saturating_add(b);
                }
                Msg::Cancel { .. } => return,
                Msg::Finish { reply, .. } => {
                    let _ = reply.send(Err(ErrorShape::new(
                        ErrorCode::InvalidArgs,
                        "transfer.finish is for puts; a get ends with transfer.end",
                    )));
                }
                Msg::Chunk(_) => {}
            }
        }
        if !held && !eof && sent.saturating_sub(credited) < WINDOW_BYTES {
            let Some(file) = out.take() else { return };
            let read = tokio::task::spawn_blocking(move || {
                let mut file = file;
                // The data is read straight into the frame, behind its header.
                let mut frame = Vec::with_capacity(HEADER_BYTES + CHUNK_BYTES);
                frame.extend_from_slice(&Chunk::header(id, file.offset()));
                let r = file.append_chunk(&mut frame).map(|n| (n, frame));
                (file, r)
            })
            .await;
            let Ok((file, read)) = read else {
                failed(
                    text,
                    id,
                    ErrorShape::new(ErrorCode::Internal, "transfer task failed"),
                )
                .await;
                return;
            };
            out = Some(file);
            match read {
                Ok((0, _)) => eof = true,
                Ok((n, frame)) => {
                    if binary.send(frame).await.is_err() {
                        if lane.is_some() {
                            failed(text, id, lane_lost()).await;
                        }
                        return;
                    }
                    sent += n as u64;
                }
                Err(e) => {
                    failed(text, id, ErrorShape::new(e.code(), e.to_string())).await;
                    return;
                }
            }
            continue;
        }
        if !held && eof && credited >= sent {
            let Some(file) = out.take() else { return };
            let path = file.path().display().to_string();
            let (bytes, sha256) = file.finish();
            info!(transfer = %id, bytes, "transfer sent");
            let end = Finished {
                id,
                path,
                bytes,
                sha256,
            };
            let _ = text
                .send(encode_event(EventName::TransferEnd, &end, 0))
                .await;
            return;
        }
        let msg = tokio::select! {
            msg = rx.recv() => msg,
            _ = lane_closed.cancelled() => {
                failed(text, id, lane_lost()).await;
                return;
            }
        };
        match msg {
            Some(Msg::Credit(b)) => {
                held = false;
                credited = credited.saturating_add(b);
            }
            Some(Msg::Cancel { .. }) | None => return,
            Some(Msg::Finish { reply, .. }) => {
                let _ = reply.send(Err(ErrorShape::new(
                    ErrorCode::InvalidArgs,
                    "transfer.finish is for puts; a get ends with transfer.end",
                )));
            }
            Some(Msg::Chunk(_)) => {}
        }
    }
}

/// A transfer's bulk lane ended under it (retryable: the copy resumes).
fn lane_lost() -> ErrorShape {
    ErrorShape::new(
        ErrorCode::NodeDisconnected,
        "the bulk lane carrying the transfer ended",
    )
}

/// [`failed`] from a blocking thread.
fn failed_blocking(text: &mpsc::Sender<String>, id: uuid::Uuid, error: ErrorShape) {
    let _ = text.blocking_send(encode_event(
        EventName::TransferFailed,
        &Failed { id, error },
        0,
    ));
}

/// Tells the gateway that transfer `id` ended on `error`.
async fn failed(text: &mpsc::Sender<String>, id: uuid::Uuid, error: ErrorShape) {
    let _ = text
        .send(encode_event(
            EventName::TransferFailed,
            &Failed { id, error },
            0,
        ))
        .await;
}

fn not_running(id: uuid::Uuid) -> ErrorShape {
    ErrorShape::new(
        ErrorCode::NotFound,
        format!("transfer {id} is not running on this node"),
    )
}

fn overflow() -> ErrorShape {
    ErrorShape::new(
        ErrorCode::InvalidFrame,
        "more chunks than the transfer window allows",
    )
}
