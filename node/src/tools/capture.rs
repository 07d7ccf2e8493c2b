//! Running a host program to its end with bounded output: the pieces the network
//! tools' runner ([`super::net::run`]) and the container and package tools' runner
//! ([`super::host_run`]) share — a guard that kills the program's process group if the
//! call is dropped mid-run, and a capped capture of one output stream.

use crate::sessions::group;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// How long a dropped run's process group gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(500);

/// Kills the process group when dropped (the call's future was dropped mid-run).
pub(crate) struct GroupGuard(pub(crate) Option<u32>);

impl GroupGuard {
    pub(crate) fn terminate(&self) {
        if let Some(pgid) = self.0 {
            if group::group_alive(pgid) {
                group::terminate(pgid, KILL_GRACE);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// One output stream, read by its own task into a capped buffer (shared, so what was
/// read is kept even if the stream never closes: a process that left the group).
pub(crate) struct Capture {
    buf: Arc<Mutex<(Vec<u8>, bool)>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Capture {
    pub(crate) fn start<R: AsyncRead + Unpin + Send + 'static>(
        reader: Option<R>,
        cap: usize,
    ) -> Capture {
        let buf = Arc::new(Mutex::new((Vec::new(), false)));
        let task = reader.map(|mut reader| {
            let buf = Arc::clone(&buf);
            tokio::spawn(async move {
                let mut chunk = vec![0u8; 16 * 1024];
                loop {
                    match reader.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let mut b = buf.lock().unwrap_or_else(|p| p.into_inner());
                            let room = cap.saturating_sub(b.0.len());
                            if n > room {
                                b.1 = true;
                            }
                            b.0.extend_from_slice(&chunk[..n.min(room)]);
                        }
                    }
                }
            })
        });
        Capture { buf, task }
    }

    /// Waits (until `deadline`) for the stream to close; returns what was kept and
    /// whether some was cut.
    pub(crate) async fn finish(mut self, deadline: tokio::time::Instant) -> (Vec<u8>, bool) {
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
            }
        }
        let mut b = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        (std::mem::take(&mut b.0), b.1)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
