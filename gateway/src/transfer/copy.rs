//! Node → node copies (`transfer.copy`, `gsv cp A:x B:y`, MCP `fleet_copy`): the
//! gateway opens a get on the source node and a put on the destination node and
//! passes the chunks from one to the other, credits back, never holding more than one
//! window of the file and never writing it to its own disk.
//!
//! The source file's size and times come first (a held get, cancelled again), so the
//! destination can say how much of this very file it already holds from an
//! interrupted copy (verified by its hash); the get then starts there. The source's
//! SHA-256 of the whole file, sent with its last byte, is what the destination checks
//! before it renames the file into place.

use super::approval::{self, Asked};
use super::ending::{end, refused};
use super::relay::cancel_on_node;
use super::{
    ask_node, decode, Far, Leg, LegEvent, Owner, Route, TransferError, FINISH_ANSWER, NODE_ANSWER,
};
use crate::policy::{Decision, Policy};
use crate::registry::NodeHandle;
use crate::state::Shared;
use gsv_protocol::names::{NamespacedName, NodeId};
use gsv_protocol::transfer::{
    CancelParams, Copied, CopyParams, Direction, FileMeta, FinishParams, Finished, OpenParams,
    OpenResult, Place,
};
use gsv_protocol::Method;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often a copy tells its caller how far it came.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Who asks for a copy.
pub struct Requester {
    pub(crate) owner: Owner,
    pub policy: Arc<Policy>,
    /// The agent connection that asked, if one did: the copy ends with it.
    pub conn: Option<String>,
    /// Cancelled when the caller goes away.
    pub gone: CancellationToken,
}

impl Requester {
    pub fn new(
        name: &str,
        token_id: &str,
        policy: Arc<Policy>,
        conn: Option<String>,
        gone: CancellationToken,
    ) -> Requester {
        Requester {
            owner: Owner {
                name: name.to_owned(),
                token_id: token_id.to_owned(),
            },
            policy,
            conn,
            gone,
        }
    }
}

/// Node `id`, connected and offering `tool`.
pub(super) fn online(
    shared: &Shared,
    id: &str,
    tool: &'static str,
) -> Result<Arc<NodeHandle>, TransferError> {
    let node = shared
        .registry
        .get(id)
        .filter(|n| !n.out.is_closed())
        .ok_or_else(|| TransferError::NodeOffline {
            node: id.to_owned(),
        })?;
    if shared.registry.tool(&node, tool).is_none() {
        return Err(TransferError::NoTool {
            node: id.to_owned(),
            tool,
        });
    }
    Ok(node)
}

/// Checks one end of a copy: a node id and a path.
fn place(p: &Place, which: &str) -> Result<NodeId, TransferError> {
    if p.path.is_empty() {
        return Err(TransferError::BadPlace(format!(
            "{which}: name a file on node {:?}",
            p.node
        )));
    }
    NodeId::parse(&p.node).map_err(|_| TransferError::BadNode(p.node.clone()))
}

/// Ends the legs still open when the copy stops early (its caller went away, an
/// error): each node hears a cancel, a put's partial file stays for the next copy.
struct Legs<'a> {
    shared: &'a Shared,
    routes: [Arc<Route>; 2],
}

impl Drop for Legs<'_> {
    fn drop(&mut self) {
        for r in &self.routes {
            cancel_on_node(self.shared, r, "cancelled");
        }
    }
}

/// Copies `p.from` to `p.to` for `asker` (policy: `{from}__Read` and `{to}__Write`;
/// a `confirm` waits for an operator). `progress(bytes in place, size)` is called as
/// the copy goes.
pub async fn copy(
    shared: &Arc<Shared>,
    asker: &Requester,
    p: CopyParams,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Copied, TransferError> {
    use crate::error::WireError;
    let src_id = place(&p.from, "from")?;
    let dst_id = place(&p.to, "to")?;
    let mut p = p;
    // `to` ending in `/`: into that directory, under the source's name.
    if p.to.path.ends_with('/') {
        let name = p.from.path.rsplit('/').next().unwrap_or("");
        if name.is_empty() || name == "." || name == ".." {
            return Err(TransferError::BadPlace(format!(
                "from: {:?} does not end in a file name to copy into {:?}",
                p.from.path, p.to.path
            )));
        }
        p.to.path.push_str(name);
    }
    let who = &asker.owner;
    // A `confirm` side already approved as part of a directory copy (its listing on
    // the source, its placing on the destination) asks no more for each file.
    let decide = |node: &NodeId, tool: &str, path: &str| {
        let decision = asker.policy.decide_as(
            &NamespacedName::join(node.as_str(), tool),
            super::capability_of(tool),
        );
        let granted = || {
            let conn = asker.conn.as_deref()?;
            shared
                .transfers
                .grants
                .covering(conn, node.as_str(), tool, path)
        };
        match decision {
            Decision::Confirm => match granted() {
                Some(approval) => {
                    tracing::info!(agent = %who.name, node = %node, tool, path = ?path, approval = %approval, "copy covered by an approved directory copy");
                    Decision::Allow
                }
                None => decision,
            },
            other => other,
        }
    };
    let read = decide(&src_id, "Read", &p.from.path);
    let write = decide(&dst_id, "Write", &p.to.path);
    for (decision, node, tool, path) in [
        (read, &src_id, "Read", &p.from.path),
        (write, &dst_id, "Write", &p.to.path),
    ] {
        if decision == Decision::Deny {
            let e = TransferError::Denied {
                name: NamespacedName::join(node.as_str(), tool),
            };
            refused(shared, who, node.as_str(), tool, path, e.code().as_str());
            return Err(e);
        }
    }
    let src = online(shared, src_id.as_str(), "Read")?;
    let dst = online(shared, dst_id.as_str(), "Write")?;

    let (tx, mut events) = mpsc::unbounded_channel();
    let (get_id, put_id) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let leg = |peer| {
        Far::Leg(Leg {
            peer,
            events: tx.clone(),
            conn: asker.conn.clone(),
        })
    };
    let get = Arc::new(Route::new(
        get_id,
        Direction::Get,
        who.clone(),
        src.clone(),
        leg(put_id),
        p.from.path.clone(),
    ));
    let put = Arc::new(Route::new(
        put_id,
        Direction::Put,
        who.clone(),
        dst.clone(),
        leg(get_id),
        p.to.path.clone(),
    ));
    drop(tx);
    shared.transfers.admit(&[get.clone(), put.clone()])?;
    let legs = Legs {
        shared,
        routes: [get.clone(), put.clone()],
    };
    get.waiting.store(true, Ordering::Relaxed);
    put.waiting.store(true, Ordering::Relaxed);

    // The source as it is now (a held get sends nothing), and the approval if the
    // policy asks for one: it shows the size.
    let meta = tokio::select! {
        m = stat(&src, &p.from.path) => m?,
        _ = asker.gone.cancelled() => return Err(TransferError::Cancelled),
    };
    let _ = get.path.set(meta.1.clone());
    let from = format!("{}:{}", src_id, meta.1);

    // The destination opens its partial file and says where to go on from, before
    // any approval: the question names the file the node resolved, and the bytes go
    // to exactly that open file.
    let opened_put = OpenParams {
        id: put_id,
        direction: Direction::Put,
        path: p.to.path.clone(),
        meta: Some(meta.0),
        sha256: None,
        offset: 0,
        hold: false,
    };
    let placed: OpenResult = tokio::select! {
        r = ask_node(&dst, Method::TransferOpen, &opened_put, NODE_ANSWER) => decode(&r?)?,
        _ = asker.gone.cancelled() => return Err(TransferError::Cancelled),
    };
    let placed = put.opened(placed);
    if read == Decision::Confirm || write == Decision::Confirm {
        let side = if write == Decision::Confirm {
            (dst_id.as_str(), "Write")
        } else {
            (src_id.as_str(), "Read")
        };
        let asked = Asked::copy(
            who,
            asker.conn.clone(),
            side,
            (src_id.as_str(), &meta.1),
            (dst_id.as_str(), &p.to.path, &placed),
            meta.0.size,
        );
        if let Err(e) = approval::wait(shared, &asked, &asker.gone).await {
            super::relay::refuse_on_node(shared, &put, e.code().as_str(), placed.offset > 0);
            return Err(e);
        }
    }
    let resumed_from = placed.offset;
    let opened_get = OpenParams {
        id: get_id,
        direction: Direction::Get,
        path: p.from.path.clone(),
        meta: None,
        sha256: None,
        offset: resumed_from,
        hold: false,
    };
    get.waiting.store(false, Ordering::Relaxed);
    put.waiting.store(false, Ordering::Relaxed);
    get.touch();
    let sending: OpenResult = tokio::select! {
        r = ask_node(&src, Method::TransferOpen, &opened_get, NODE_ANSWER) => decode(&r?)?,
        _ = asker.gone.cancelled() => return Err(TransferError::Cancelled),
    };
    if sending.meta != meta.0 {
        return Err(TransferError::Changed {
            node: src_id.to_string(),
            path: sending.path,
        });
    }
    tracing::info!(
        agent = %who.name,
        from = ?from,
        to = ?format!("{}:{}", dst_id, placed.path),
        size = meta.0.size,
        resumed_from,
        "copy started"
    );

    // Chunks and credits pass in the relay; the legs tell how they end.
    let size = meta.0.size;
    let mut done = resumed_from;
    let mut told = Instant::now();
    progress(done, size);
    let sent = loop {
        let event = tokio::select! {
            e = events.recv() => e,
            _ = asker.gone.cancelled() => return Err(TransferError::Cancelled),
        };
        match event {
            Some(LegEvent::Credited(b)) => {
                done = done.saturating_add(b);
                if told.elapsed() >= PROGRESS_EVERY {
                    told = Instant::now();
                    progress(done, size);
                }
            }
            Some(LegEvent::Sent { sha256, .. }) => break sha256,
            Some(LegEvent::Failed(e)) => return Err(TransferError::Node(e)),
            None => return Err(TransferError::Cancelled),
        }
    };
    // Every byte is written on the destination: it checks the hash and places it.
    put.waiting.store(true, Ordering::Relaxed);
    let finish = FinishParams {
        id: put_id,
        sha256: sent,
    };
    let finished = tokio::select! {
        r = ask_node(&dst, Method::TransferFinish, &finish, FINISH_ANSWER) => r.and_then(|raw| decode::<Finished>(&raw)),
        _ = asker.gone.cancelled() => return Err(TransferError::Cancelled),
    };
    let finished = match finished {
        Ok(f) => f,
        Err(e) => {
            end(shared, &put, e.code().as_str(), None, None);
            return Err(e);
        }
    };
    end(
        shared,
        &put,
        "ok",
        Some(&finished.sha256),
        Some(finished.bytes),
    );
    drop(legs);
    progress(finished.bytes, size);
    Ok(Copied {
        from: Place {
            node: src_id.to_string(),
            path: meta.1,
        },
        to: Place {
            node: dst_id.to_string(),
            path: finished.path,
        },
        bytes: finished.bytes,
        sha256: finished.sha256,
        resumed_from,
    })
}

/// The file `path` on `node` as it is now (meta and resolved path): a held get,
/// cancelled once answered.
async fn stat(node: &NodeHandle, path: &str) -> Result<(FileMeta, String), TransferError> {
    let id = uuid::Uuid::new_v4();
    let params = OpenParams {
        id,
        direction: Direction::Get,
        path: path.to_owned(),
        meta: None,
        sha256: None,
        offset: 0,
        hold: true,
    };
    let opened: OpenResult =
        decode(&ask_node(node, Method::TransferOpen, &params, NODE_ANSWER).await?)?;
    let cancel = CancelParams { id, discard: false };
    ask_node(node, Method::TransferCancel, &cancel, NODE_ANSWER).await?;
    Ok((opened.meta, opened.path))
}
