//! A `get`'s file written on a thread of its own.
//!
//! The connection's reader hashes each chunk, hands it over and goes back to the
//! socket, while this thread writes it (straight to the disk where [`Received`] can):
//! the hash and the disk work side by side.
//! A chunk is credited back to the node only once it is written, so the chunks
//! waiting here never exceed the transfer's window.

use gsv_files::Received;
use gsv_protocol::transfer::{CHUNK_BYTES, WINDOW_BYTES};
use gsv_transport::tungstenite::Bytes;
use std::sync::mpsc;
use tokio::sync::mpsc as tmpsc;

/// Chunks that may wait for the thread: a window of them, and a few more.
const QUEUE: usize = WINDOW_BYTES as usize / CHUNK_BYTES + 4;

/// The writing thread of one `get`.
pub(crate) struct Writer {
    chunks: Option<mpsc::SyncSender<(u64, Bytes)>>,
    /// Bytes written, chunk by chunk; an error ends the thread.
    written: tmpsc::UnboundedReceiver<std::io::Result<u64>>,
    thread: Option<std::thread::JoinHandle<Received>>,
}

/// Why a chunk was not taken.
pub(crate) enum Refused {
    /// More than a window waits: the node broke the flow rules.
    Overflow,
    /// The thread ended (its write error is in [`Writer::written`]).
    Stopped,
}

impl Writer {
    /// Starts the thread for `file`.
    pub fn start(file: Received) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::sync_channel::<(u64, Bytes)>(QUEUE);
        let (done_tx, done_rx) = tmpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("gsv-get".into())
            .spawn(move || {
                let mut file = file;
                for (offset, data) in rx {
                    match file.write_at(offset, &data) {
                        Ok(()) => {
                            if done_tx.send(Ok(data.len() as u64)).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            let _ = done_tx.send(Err(e));
                            break;
                        }
                    }
                }
                file
            })?;
        Ok(Writer {
            chunks: Some(tx),
            written: done_rx,
            thread: Some(thread),
        })
    }

    /// Hands `data` (at `offset`) to the thread without waiting.
    pub fn push(&self, offset: u64, data: Bytes) -> Result<(), Refused> {
        let Some(tx) = &self.chunks else {
            return Err(Refused::Stopped);
        };
        tx.try_send((offset, data)).map_err(|e| match e {
            mpsc::TrySendError::Full(_) => Refused::Overflow,
            mpsc::TrySendError::Disconnected(_) => Refused::Stopped,
        })
    }

    /// The next chunk written (its length), or the write that failed.
    pub async fn written(&mut self) -> Option<std::io::Result<u64>> {
        self.written.recv().await
    }

    /// Every chunk is written: ends the thread and takes back the file.
    pub async fn finish(mut self) -> std::io::Result<Received> {
        self.chunks = None;
        let thread = self.thread.take();
        let joined = tokio::task::spawn_blocking(move || thread.map(|t| t.join()))
            .await
            .map_err(std::io::Error::other)?;
        match joined {
            Some(Ok(done)) => Ok(done),
            _ => Err(std::io::Error::other("the file's writing thread failed")),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The thread stops after the write under way: with `written` gone it cannot
        // report it, and a copy given up (Ctrl-C, a retry) writes nothing more.
        self.chunks = None;
    }
}
