//! `gsv bench transfer`: `gsv cp` of one file to a node and back, against `scp` of the
//! same file to and from the harness's own sshd through a warm ControlMaster, in the
//! same run.
//!
//! - gsv: `gsv gateway` and a real `gsv node --id laptop` as child processes on
//!   127.0.0.1; each sample is a whole `gsv cp` process (connect, open, stream with
//!   credits, SHA-256 checked at the destination, renamed into place, exit): local →
//!   `laptop:` and back.
//! - scp: the same file through `scp -q` to the harness's sshd on 127.0.0.1 and back,
//!   each a mux client of one master connection opened first (as `gsv bench ssh`).
//!
//! The sides alternate round by round (the order flips), so drift in machine load hits
//! both alike. Two more figures come from more gsv uploads (as many as rounds, their
//! samples pooled), not counted in the throughput: the gateway's RSS growth while they
//! run (sampled every 20 ms, against its RSS before: target ≤ 32 MiB), and a small Read
//! call to the same node made over and over during them (a 2 ms pause after each),
//! whose p50 is compared with the same caller's p50 when nothing else runs (the same
//! pause: only the upload differs; target ≤ 2×). Nothing leaves 127.0.0.1.

use super::fleet::{ProcessRig, TempDir};
use super::report::{Report, Row};
use super::ssh_call::{which, SshBins, SshClient, Sshd};
use super::stats::summarize;
use super::BenchOptions;
use gsv_client::AgentClient;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The node the files go to.
const NODE_ID: &str = "laptop";
/// gsv must move the file at least as fast as scp.
pub const TARGET_RATIO: f64 = 1.0;
/// The gateway may grow at most this much while a transfer runs (bytes).
pub const RSS_BUDGET: u64 = 32 * 1024 * 1024;
/// Calls during a transfer may take at most this multiple of their idle p50.
pub const CALLS_RATIO: f64 = 2.0;
/// The probing caller's pause between two calls, idle and during the uploads alike.
const PAUSE: Duration = Duration::from_millis(2);

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let (size, rounds, idle_calls) = if opts.quick {
        (16u64 << 20, 1, 20)
    } else {
        (1u64 << 30, 3, 200)
    };
    let bins = SshBins::find()?;
    let scp = which("scp").ok_or("scp not found: install openssh-client")?;
    let dir = TempDir::new(opts, "transfer")?;
    let src = dir.0.join("src.bin");
    write_file(&src, size)?;
    let rig = ProcessRig::start(&dir.0, NODE_ID, false).await?;
    std::fs::write(dir.0.join("workspace").join("probe.txt"), b"probe")
        .map_err(|e| format!("probe file: {e}"))?;
    let sshd = Sshd::start(&bins, &dir.0).await?;
    let client = SshClient::new(&bins, &sshd, &dir.0, false)?;
    let outcome = measure(&rig, &client, &scp, &dir.0, &src, size, rounds, idle_calls).await;
    client.close_master();
    drop(sshd);
    rig.stop().await;
    let m = outcome?;

    let mib = |bytes_per_s: f64| bytes_per_s / (1024.0 * 1024.0);
    let gsv_rate = mib(2.0 * size as f64 * m.rounds as f64 / m.gsv.as_secs_f64());
    let scp_rate = mib(2.0 * size as f64 * m.rounds as f64 / m.scp.as_secs_f64());
    Ok(Report::new(
        "transfer",
        format!(
            "{} MiB file, {} round(s) of local → node → local per side, alternating; gsv: \
             whole `gsv cp` processes against `gsv gateway` + `gsv node` on 127.0.0.1 \
             (up {:.0} ms, down {:.0} ms, mean); scp: `scp -q` to the harness's sshd on \
             127.0.0.1 through a warm ControlMaster (up {:.0} ms, down {:.0} ms, mean); \
             {} Read calls to the node idle and {} during {} more upload(s), each followed \
             by a 2 ms pause (idle back to back, p50 {:.1} µs)",
            size >> 20,
            m.rounds,
            m.gsv_up.as_secs_f64() * 1e3 / m.rounds as f64,
            m.gsv_down.as_secs_f64() * 1e3 / m.rounds as f64,
            m.scp_up.as_secs_f64() * 1e3 / m.rounds as f64,
            m.scp_down.as_secs_f64() * 1e3 / m.rounds as f64,
            m.idle.n,
            m.busy.n,
            m.rounds,
            m.back_to_back.p50_us,
        ),
        vec![
            Row::at_least(
                "`gsv cp` local → node → local, throughput",
                gsv_rate,
                "`scp` local → 127.0.0.1 → local, warm ControlMaster",
                scp_rate,
                "MiB/s",
                TARGET_RATIO,
            ),
            Row::at_most(
                format!(
                    "gateway RSS at its peak during an upload (grew {:.1} MiB)",
                    m.rss_growth as f64 / 1024.0 / 1024.0
                ),
                (m.rss_before + m.rss_growth) as f64 / 1024.0 / 1024.0,
                "its RSS before the upload + the 32 MiB budget",
                (m.rss_before + RSS_BUDGET) as f64 / 1024.0 / 1024.0,
                "MiB",
                1.0,
            ),
            Row::at_most(
                "Read call to the node during an upload, p50",
                m.busy.p50_us,
                "the same call with nothing else running, p50",
                m.idle.p50_us,
                "µs",
                CALLS_RATIO,
            ),
        ],
    ))
}

/// What one run measured.
struct Measured {
    rounds: u32,
    gsv_up: Duration,
    gsv_down: Duration,
    gsv: Duration,
    scp_up: Duration,
    scp_down: Duration,
    scp: Duration,
    rss_before: u64,
    rss_growth: u64,
    idle: super::stats::Summary,
    back_to_back: super::stats::Summary,
    busy: super::stats::Summary,
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    rig: &ProcessRig,
    client: &SshClient,
    scp: &Path,
    dir: &Path,
    src: &Path,
    size: u64,
    rounds: u32,
    idle_calls: usize,
) -> Result<Measured, String> {
    client.open_master()?;
    let agent = AgentClient::connect(&rig.gateway.url(), &rig.agent_token)
        .await
        .map_err(|e| format!("agent: {e}"))?;
    let probe_name = format!("{NODE_ID}__Read");
    let probe = || {
        agent.call(
            &probe_name,
            serde_json::json!({"path": "probe.txt"}),
            Some(10_000),
        )
    };
    // The same caller as during the uploads below: a call, a 2 ms pause, the next.
    let mut idle = Vec::with_capacity(idle_calls);
    for _ in 0..idle_calls {
        let t = Instant::now();
        probe().await.map_err(|e| format!("probe call: {e}"))?;
        idle.push(t.elapsed());
        tokio::time::sleep(PAUSE).await;
    }
    // For the record: the same calls back to back (a busier caller, a faster p50).
    let mut back_to_back = Vec::with_capacity(idle_calls);
    for _ in 0..idle_calls {
        let t = Instant::now();
        probe().await.map_err(|e| format!("probe call: {e}"))?;
        back_to_back.push(t.elapsed());
    }

    let src_s = src.display().to_string();
    let back = dir.join("back.bin");
    let back_s = back.display().to_string();
    let scp_remote = format!(":{}", dir.join("scp-remote.bin").display());
    let (mut gsv_up, mut gsv_down, mut scp_up, mut scp_down) = (
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    let mut busy = Vec::new();
    for round in 0..rounds {
        let gsv_first = round % 2 == 0;
        for side in [gsv_first, !gsv_first] {
            if side {
                let mut up = cp(rig, &src_s, &format!("{NODE_ID}:bench.bin"))?;
                gsv_up += tokio::task::spawn_blocking(move || timed(&mut up, "gsv cp up"))
                    .await
                    .map_err(|e| format!("gsv cp: {e}"))??;
                let _ = std::fs::remove_file(&back);
                let mut down = cp(rig, &format!("{NODE_ID}:bench.bin"), &back_s)?;
                gsv_down += tokio::task::spawn_blocking(move || timed(&mut down, "gsv cp down"))
                    .await
                    .map_err(|e| format!("gsv cp: {e}"))??;
                same_size(&back, size)?;
            } else {
                let mut up = client.scp_command(scp, &src_s, &scp_remote);
                scp_up += tokio::task::spawn_blocking(move || timed(&mut up, "scp up"))
                    .await
                    .map_err(|e| format!("scp: {e}"))??;
                let _ = std::fs::remove_file(&back);
                let mut down = client.scp_command(scp, &scp_remote, &back_s);
                scp_down += tokio::task::spawn_blocking(move || timed(&mut down, "scp down"))
                    .await
                    .map_err(|e| format!("scp: {e}"))??;
                same_size(&back, size)?;
            }
        }
    }
    // One more upload, not timed into the throughput: the gateway's RSS and calls to
    // the same node while it runs.
    let before = rig.gateway.rss_kib()? * 1024;
    let peak = Arc::new(AtomicU64::new(before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        let pid = rig.gateway.pid();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(kib) = super::fleet::rss_kib(pid) {
                    peak.fetch_max(kib * 1024, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // As many uploads as rounds, their calls pooled: one upload's p50 moves by a third
    // from run to run on a small machine.
    for _ in 0..rounds {
        let mut up = cp(rig, &src_s, &format!("{NODE_ID}:bench-busy.bin"))?;
        let upload = tokio::task::spawn_blocking(move || timed(&mut up, "gsv cp up"));
        while !upload.is_finished() {
            let t = Instant::now();
            probe().await.map_err(|e| format!("probe call: {e}"))?;
            busy.push(t.elapsed());
            // A caller that waits a little between calls, not a flood of its own.
            tokio::time::sleep(PAUSE).await;
        }
        upload.await.map_err(|e| format!("gsv cp: {e}"))??;
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let rss_growth = peak.load(Ordering::Relaxed).saturating_sub(before);
    if busy.is_empty() {
        return Err("no call finished while an upload ran".into());
    }
    Ok(Measured {
        rounds,
        gsv_up,
        gsv_down,
        gsv: gsv_up + gsv_down,
        scp_up,
        scp_down,
        scp: scp_up + scp_down,
        rss_before: before,
        rss_growth,
        idle: summarize(&idle),
        back_to_back: summarize(&back_to_back),
        busy: summarize(&busy),
    })
}

/// `gsv cp --gateway URL --data DATA FROM TO` with the rig's agent token.
fn cp(rig: &ProcessRig, from: &str, to: &str) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("cp")
        .arg("--gateway")
        .arg(rig.gateway.url())
        .arg("--data")
        .arg(&rig.gateway.data)
        .arg(from)
        .arg(to)
        .env("GSV_AGENT_TOKEN", &rig.agent_token)
        .stdin(Stdio::null());
    Ok(cmd)
}

/// Runs `cmd` to its end; how long it took, or why it failed.
fn timed(cmd: &mut Command, what: &str) -> Result<Duration, String> {
    let t = Instant::now();
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    let took = t.elapsed();
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(took)
}

fn same_size(path: &Path, size: u64) -> Result<(), String> {
    let got = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if got != size {
        return Err(format!("{} has {got} bytes, not {size}", path.display()));
    }
    Ok(())
}

/// `size` bytes that do not compress (xorshift), written in 8 MiB blocks.
fn write_file(path: &Path, size: u64) -> Result<(), String> {
    let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut block = vec![0u8; 8 << 20];
    let mut left = size;
    while left > 0 {
        for word in block.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])
            .map_err(|e| format!("{}: {e}", path.display()))?;
        left -= n as u64;
    }
    f.sync_all().map_err(|e| format!("{}: {e}", path.display()))
}
