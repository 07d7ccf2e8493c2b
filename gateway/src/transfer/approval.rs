//! A transfer the token's policy marks `confirm` waits for an operator: the request
//! shows the source, the destination and the size, and is decided like a call's
//! (`gsv approvals`, the console, `approvals.decide`).
//!
//! What the operator reads is what runs: a file's side is named as its node resolved
//! it when the transfer opened (the descriptor's real path: symlinks resolved, `..`
//! collapsed, and whether a put replaces a file), not as the agent wrote it, and the
//! bytes go to exactly that open file, so a symlink swapped after the question cannot
//! redirect them. Every agent- or node-given value is quoted, cut and escaped
//! ([`quoted`]), so it cannot pass for the gateway's own words around it.

use super::{Owner, TransferError};
use crate::agent_handle::AgentHandle;
use crate::approvals::{NewRequest, Verdict};
use crate::audit::{args_hash, AuditEvent};
use crate::state::Shared;
use crate::summary::quoted;
use gsv_protocol::transfer::{OpenResult, MAX_SOURCE_CHARS};
use gsv_protocol::EventName;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// The question an operator is asked about one transfer.
pub(super) struct Asked {
    owner: Owner,
    /// The agent connection that asked (it hears the request's events too).
    conn: Option<String>,
    /// The node whose file tool needs the approval.
    node: String,
    tool: &'static str,
    args: Value,
    summary: String,
}

/// What a directory copy holds, for the operator's question.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TreeSize {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
}

impl TreeSize {
    pub fn of(entries: &[gsv_protocol::transfer::tree::TreeEntry]) -> TreeSize {
        use gsv_protocol::transfer::tree::EntryKind;
        let mut t = TreeSize::default();
        for e in entries {
            match e.kind {
                EntryKind::File => {
                    t.files += 1;
                    t.bytes = t.bytes.saturating_add(e.size);
                }
                EntryKind::Dir => t.dirs += 1,
                EntryKind::Symlink => t.symlinks += 1,
            }
        }
        t
    }
}

/// The agent's name for its own end, quoted for the operator's screen.
pub(super) fn local(agent: &AgentHandle, source: Option<&str>) -> String {
    let named = source.map_or_else(
        || "(not named)".to_owned(),
        |s| quoted(&s.chars().take(MAX_SOURCE_CHARS).collect::<String>()),
    );
    format!("{named} (agent {})", quoted(&agent.name))
}

/// `NODE:"PATH"` for a file on a node, as the node resolved it.
pub(super) fn on_node(node: &str, path: &str) -> String {
    format!("{node}:{}", quoted(path))
}

/// What the node said of the file it opened, for the question: whether the path is the
/// open file's real one, whether a put replaces a file, and the agent's own name for it
/// when that differs.
fn resolution(asked: &str, opened: &OpenResult) -> String {
    let mut s = String::new();
    match opened.replaces {
        Some(true) => s.push_str("; replaces the file there"),
        Some(false) => s.push_str("; a new file"),
        None => {}
    }
    if !opened.resolved {
        s.push_str("; the node could not resolve the path further (no /proc)");
    }
    if asked != opened.path {
        s.push_str("; the agent named it ");
        s.push_str(&quoted(asked));
    }
    s
}

impl Asked {
    /// A put: the agent's file `source` → `node:path` as the node resolved it when it
    /// opened the transfer (`opened`), `size` bytes.
    pub fn put(
        owner: &Owner,
        agent: &AgentHandle,
        node: &str,
        (asked, opened): (&str, &OpenResult),
        source: Option<&str>,
        size: u64,
    ) -> Asked {
        let from = local(agent, source);
        let to = on_node(node, &opened.path);
        Asked {
            owner: owner.clone(),
            conn: Some(agent.conn_id.clone()),
            node: node.to_owned(),
            tool: "Write",
            summary: format!(
                "copy {from} → {to} ({size} bytes{})",
                resolution(asked, opened)
            ),
            args: json!({"source": from, "destination": to, "size": size,
                "asked": asked, "resolved": opened.resolved, "replaces": opened.replaces}),
        }
    }

    /// A get: `node:path` as the node resolved it (`opened`) → the agent's
    /// `destination`, `size` bytes.
    pub fn get(
        owner: &Owner,
        agent: &AgentHandle,
        node: &str,
        (asked, opened): (&str, &OpenResult),
        destination: Option<&str>,
        size: u64,
    ) -> Asked {
        let from = on_node(node, &opened.path);
        let to = local(agent, destination);
        Asked {
            owner: owner.clone(),
            conn: Some(agent.conn_id.clone()),
            node: node.to_owned(),
            tool: "Read",
            summary: format!(
                "copy {from} → {to} ({size} bytes{})",
                resolution(asked, opened)
            ),
            args: json!({"source": from, "destination": to, "size": size,
                "asked": asked, "resolved": opened.resolved}),
        }
    }

    /// A directory copy (`gsv cp -r`): `from` → `to`, through `node`'s `tool`, with
    /// the tree's counts.
    pub fn tree(
        owner: &Owner,
        agent: &AgentHandle,
        (node, tool): (&str, &'static str),
        (from, to): (String, String),
        size: TreeSize,
    ) -> Asked {
        let TreeSize {
            files,
            dirs,
            symlinks,
            bytes,
        } = size;
        Asked {
            owner: owner.clone(),
            conn: Some(agent.conn_id.clone()),
            node: node.to_owned(),
            tool,
            summary: format!(
                "copy directory {from} → {to} ({files} files, {dirs} directories, {symlinks} symlinks, {bytes} bytes)"
            ),
            args: json!({"source": from, "destination": to, "size": bytes,
                "files": files, "dirs": dirs, "symlinks": symlinks}),
        }
    }

    /// A node → node copy; `node`/`tool`: the side that needs the approval (the
    /// destination's Write when both do). `from`: the source as its node resolved it;
    /// `to`: the destination node's answer when it opened the partial file.
    pub fn copy(
        owner: &Owner,
        conn: Option<String>,
        (node, tool): (&str, &'static str),
        (from_node, from): (&str, &str),
        (to_node, asked, to): (&str, &str, &OpenResult),
        size: u64,
    ) -> Asked {
        let shown_from = on_node(from_node, from);
        let shown_to = on_node(to_node, &to.path);
        Asked {
            owner: owner.clone(),
            conn,
            node: node.to_owned(),
            tool,
            summary: format!(
                "copy {shown_from} → {shown_to} ({size} bytes{})",
                resolution(asked, to)
            ),
            args: json!({"source": shown_from, "destination": shown_to, "size": size,
                "asked": asked, "resolved": to.resolved, "replaces": to.replaces}),
        }
    }
}

/// Opens the operator request for `asked` and waits for its decision (at most the
/// queue's time to live, or until `gone`: the asker left). `Ok` once approved.
pub(super) async fn wait(
    shared: &Shared,
    asked: &Asked,
    gone: &CancellationToken,
) -> Result<String, TransferError> {
    let (request, rx) = shared
        .approvals
        .open(NewRequest {
            agent: asked.owner.name.clone(),
            token_id: asked.owner.token_id.clone(),
            node: asked.node.clone(),
            tool: asked.tool.to_owned(),
            args_hash: args_hash(&asked.args),
            summary: asked.summary.clone(),
            reason: format!(
                "the token's policy asks for approval of {}__{}",
                asked.node, asked.tool
            ),
            plan: None,
            nodes: Vec::new(),
            args: crate::approvals::shown_args(&asked.args),
        })
        .await?;
    tracing::info!(approval = %request.id, summary = ?asked.summary, "transfer waits for approval");
    shared.audit.record(AuditEvent::ApprovalRequested {
        agent: &asked.owner.name,
        request: &request,
    });
    let conn = asked.conn.as_deref();
    shared.notify_operators(EventName::ApprovalRequested, &request, conn);
    if let Some(hook) = &shared.webhook {
        hook.notify(&request);
    }
    let expired = |state: &str| gsv_protocol::event::ApprovalResolved {
        id: request.id.clone(),
        state: state.to_owned(),
        decided_by: None,
    };
    tokio::select! {
        d = rx => match d {
            Ok(Verdict::Approve) => Ok(request.id.clone()),
            Ok(Verdict::Deny) => Err(TransferError::ApprovalDenied { approval: request.id.clone() }),
            Err(_) => Err(TransferError::ApprovalExpired { approval: request.id.clone() }),
        },
        _ = tokio::time::sleep(shared.approvals.ttl) => {
            shared.approvals.expire(&request.id).await;
            shared.notify_operators(EventName::ApprovalResolved, &expired("expired"), conn);
            Err(TransferError::ApprovalExpired { approval: request.id.clone() })
        }
        _ = gone.cancelled() => {
            shared.approvals.expire(&request.id).await;
            shared.notify_operators(EventName::ApprovalResolved, &expired("expired"), conn);
            Err(TransferError::Cancelled)
        }
    }
}
