//! File transfers (`gsv cp`) on an agent connection: the client side of
//! `docs/protocol.md` section 5.11.
//!
//! A transfer's bytes come and go as binary chunk frames on the same connection as
//! everything else, and its credits, end and failure arrive as events. This module
//! routes what arrives to the one transfer it belongs to ([`Routes`], fed by the
//! connection's task), keeps the sender's credit window ([`Window`]), and holds an open
//! transfer ([`Open`]) that cancels itself on the node when it is dropped unfinished.
//! The file work is in [`put`] (local → node) and [`get`] (node → local).

mod copy;
mod get;
mod get_writer;
mod partial;
mod put;
mod routes;
#[cfg(unix)]
mod tree;
mod window;

pub(crate) use routes::{Inbound, Routes};
#[cfg(unix)]
pub use tree::TreeCopied;
pub use window::Window;

use crate::{AgentClient, ClientError};
use gsv_protocol::transfer::{AgentOpenParams, CancelParams, Direction, FileMeta, OpenResult};
use gsv_protocol::{ErrorCode, ErrorShape, Method};
use sha2::{Digest, Sha256};
use std::time::Duration;
use tokio::sync::mpsc;

/// Messages a transfer's inbox holds before the connection drops the transfer as
/// falling behind: the window's worth of full chunks, and room for small ones and
/// events.
const INBOX: usize = 64;
/// How long a transfer waits for its next chunk, credit or end before it gives up:
/// far longer than a node takes to read, write or hash a window's worth.
const STALLED: Duration = Duration::from_secs(120);

/// An open transfer: its inbox, and what the node answered. Dropped before
/// [`Open::done`], it cancels the transfer on the node (a partial file is kept for a
/// resumed copy).
pub(crate) struct Open<'a> {
    client: &'a AgentClient,
    rx: mpsc::Receiver<Inbound>,
    done: bool,
    /// Cancel with `discard`: the node's partial file is of no use to a later copy.
    discard: bool,
    pub result: OpenResult,
}

impl Open<'_> {
    /// The next message of this transfer; a connection that closed (or dropped the
    /// transfer for falling behind) is an error.
    async fn next(&mut self) -> Result<Inbound, ClientError> {
        let got = tokio::time::timeout(STALLED, self.rx.recv())
            .await
            .map_err(|_| {
                ClientError::Remote(ErrorShape::new(
                    ErrorCode::Timeout,
                    format!(
                        "the copy stalled: nothing from the node for {} s",
                        STALLED.as_secs()
                    ),
                ))
            })?;
        match got {
            Some(m) => Ok(m),
            None if self.client.is_closed() => Err(ClientError::Closed),
            None => Err(ClientError::Protocol(
                "the transfer fell behind the frames the gateway sent".into(),
            )),
        }
    }

    /// A message of this transfer if one is there now.
    fn try_next(&mut self) -> Option<Inbound> {
        self.rx.try_recv().ok()
    }

    /// `e` ends the copy and what the node holds of it is of no use (the source
    /// changed): the cancel on drop removes the node's partial file too.
    fn discarding(&mut self, e: ClientError) -> ClientError {
        self.discard = true;
        e
    }

    /// The transfer ended: nothing to cancel on drop.
    fn done(&mut self) {
        self.done = true;
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let id = self.result.id;
        self.client.routes.remove(id);
        if !self.done {
            tracing::debug!(%id, "cancelling an unfinished transfer");
            self.client.send_detached(
                Method::TransferCancel,
                &CancelParams {
                    id,
                    discard: self.discard,
                },
            );
        }
    }
}

impl AgentClient {
    /// Sends `transfer.open` (`local`: this machine's end of the copy) and registers
    /// the transfer's inbox before any of its frames can arrive (the connection's task does it as it reads the answer).
    async fn open_transfer(
        &self,
        node: &str,
        path: &str,
        direction: Direction,
        meta: Option<FileMeta>,
        offset: u64,
        local: &std::path::Path,
    ) -> Result<Open<'_>, ClientError> {
        let params = AgentOpenParams {
            node: node.to_owned(),
            path: path.to_owned(),
            direction,
            meta,
            sha256: None,
            offset,
            // This machine's end, for an operator asked to approve the copy.
            source: Some(local.display().to_string()),
        };
        let (tx, rx) = mpsc::channel(INBOX);
        let req = self.next_id();
        let pending = routes::PendingOpen::new(&self.routes, &req, tx);
        let raw = self
            .request_with_id(&req, Method::TransferOpen, &params)
            .await?;
        pending.settled();
        let result: OpenResult = serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad transfer.open result: {e}")))?;
        Ok(Open {
            client: self,
            rx,
            done: false,
            discard: false,
            result,
        })
    }
}

/// Lower-case hex of a finished SHA-256.
pub(crate) fn hex(hasher: Sha256) -> String {
    ::hex::encode(hasher.finalize())
}

/// An I/O error on a local file, named.
fn io_error(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ClientError + '_ {
    move |source| ClientError::Io {
        path: path.display().to_string(),
        source,
    }
}
