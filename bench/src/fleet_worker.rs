//! `gsv bench fleet-worker`: a share of a simulated fleet in a process of its own.
//!
//! One process may hold about 20,000 open files, so a fleet larger than
//! [`PER_PROCESS`] nodes (`gsv bench cluster --nodes 100000`) is spread over several
//! worker processes, each running its share of [`super::sim::reconnecting_node`]s. A
//! worker reads its share from stdin (one JSON line, [`Share`]), prints
//! `hello H failed F` (its totals so far) every 200 ms, and stops when its stdin
//! closes (the benchmark ended or died) or after 30 minutes.

use super::sim::{self, Counters, NodeTemplate};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// The hidden scenario name a worker runs under.
pub const FLEET_WORKER: &str = "fleet-worker";
/// Simulated nodes one process holds at most.
pub const PER_PROCESS: usize = 15_000;
/// A worker gives up after this long whatever happens.
const LIFETIME: Duration = Duration::from_secs(30 * 60);

/// One worker's share of the fleet.
#[derive(Debug, Serialize, Deserialize)]
pub struct Share {
    /// Where the node template's workspace lives.
    pub dir: PathBuf,
    /// Each node: id, token, and the replicas it knows, in the order it dials them.
    pub nodes: Vec<(String, String, Vec<String>)>,
    /// Dials at a time while registering.
    pub dials: usize,
}

/// `gsv bench fleet-worker`: runs the share read from stdin.
pub async fn serve_worker() -> Result<(), String> {
    super::fleet::raise_nofile();
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut line = String::new();
    stdin
        .read_line(&mut line)
        .await
        .map_err(|e| format!("fleet worker: stdin: {e}"))?;
    let share: Share =
        serde_json::from_str(&line).map_err(|e| format!("fleet worker: share: {e}"))?;
    let template = Arc::new(NodeTemplate::twelve(&share.dir)?);
    let counters = Arc::new(Counters::default());
    let sem = Arc::new(tokio::sync::Semaphore::new(share.dials.max(1)));
    let stop = CancellationToken::new();
    sim::spawn_fleet(share.nodes, &template, &sem, &counters, &stop);
    // Stdin closing means the benchmark is gone: so are we.
    let closed = {
        let stop = stop.clone();
        async move {
            let mut rest = Vec::new();
            let _ = stdin.read_to_end(&mut rest).await;
            stop.cancel();
        }
    };
    tokio::spawn(closed);
    let report = async {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "hello {} failed {}",
                counters.hello.load(Ordering::SeqCst),
                counters.failed.load(Ordering::SeqCst)
            );
            let _ = out.flush();
        }
    };
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = report => {}
        _ = tokio::time::sleep(LIFETIME) => {}
    }
    stop.cancel();
    Ok(())
}

/// A running worker, its totals added into the benchmark's counters as it reports.
pub struct Worker {
    child: Child,
}

impl Worker {
    /// Starts a worker (this executable) on `share`, adding what it reports to
    /// `counters`.
    pub async fn start(share: &Share, counters: Arc<Counters>) -> Result<Worker, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = Command::new(exe)
            .args(["bench", FLEET_WORKER])
            .env("RUST_LOG", "error")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn fleet worker: {e}"))?;
        let mut line = serde_json::to_vec(share).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let stdin = child.stdin.as_mut().ok_or("fleet worker: no stdin")?;
        stdin
            .write_all(&line)
            .await
            .map_err(|e| format!("fleet worker: {e}"))?;
        let stdout = child.stdout.take().ok_or("fleet worker: no stdout")?;
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let (mut hello, mut failed) = (0usize, 0usize);
            while let Ok(Some(l)) = lines.next_line().await {
                let words: Vec<&str> = l.split_whitespace().collect();
                if let ["hello", h, "failed", f] = words.as_slice() {
                    let (h, f) = (h.parse().unwrap_or(hello), f.parse().unwrap_or(failed));
                    counters
                        .hello
                        .fetch_add(h.saturating_sub(hello), Ordering::SeqCst);
                    counters
                        .failed
                        .fetch_add(f.saturating_sub(failed), Ordering::SeqCst);
                    (hello, failed) = (h.max(hello), f.max(failed));
                }
            }
        });
        Ok(Worker { child })
    }

    /// Its process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}
