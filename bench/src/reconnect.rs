//! `gsv bench reconnect`: how long N nodes take to be registered again after the
//! gateway is killed and restarted.
//!
//! `gsv gateway` runs as a child process. N simulated nodes connect (200 dials at a
//! time), each reconnecting for ever with jittered backoff (0–500 ms first retry,
//! doubling, cap 5 s). The gateway is SIGKILLed and started again on the same address
//! and data directory; the figure is the time from the kill until every node has had
//! a new hello-ok. Target: at most 15 s.

use super::fleet::{mint_nodes, raise_nofile, GatewayProcess, TempDir};
use super::report::{Report, Row};
use super::sim::{self, Counters, NodeTemplate};
use super::BenchOptions;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Target, seconds.
pub const TARGET_S: f64 = 15.0;

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let limit = raise_nofile();
    let n = if opts.quick { 50 } else { 8000 };
    if limit < (n as u64) + 500 {
        return Err(format!("open-file limit {limit} is too low for {n} nodes"));
    }
    let dir = TempDir::new(opts, "reconnect")?;
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let creds = mint_nodes(&data, n)?;
    let template = Arc::new(NodeTemplate::standard(&dir.0)?);
    let mut gw = GatewayProcess::spawn(&data, "127.0.0.1:0").await?;
    let stop = CancellationToken::new();
    let counters = Arc::new(Counters::default());
    let sem = Arc::new(tokio::sync::Semaphore::new(200));
    let url = gw.node_url();
    let fleet = creds
        .into_iter()
        .map(|(id, token)| (id, token, vec![url.clone()]))
        .collect();
    sim::spawn_fleet(fleet, &template, &sem, &counters, &stop);
    let outcome = async {
        let wait_for = |target: usize, cap: Duration| {
            let counters = counters.clone();
            async move {
                let start = Instant::now();
                while counters.hello.load(Ordering::SeqCst) < target {
                    if start.elapsed() > cap {
                        return false;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                true
            }
        };
        if !wait_for(n, Duration::from_secs(120)).await {
            return Err(format!(
                "only {} of {n} nodes connected the first time",
                counters.hello.load(Ordering::SeqCst)
            ));
        }
        let failed_before = counters.failed.load(Ordering::SeqCst);
        let listen = gw.addr.to_string();
        let killed = Instant::now();
        gw.kill();
        let restarted_gw = GatewayProcess::spawn(&data, &listen).await?;
        let up = killed.elapsed();
        let cap = Duration::from_secs(if n > 1000 { 60 } else { 20 });
        let all = wait_for(2 * n, cap).await;
        let took = killed.elapsed();
        let again = counters.hello.load(Ordering::SeqCst) - n;
        let failed = counters.failed.load(Ordering::SeqCst) - failed_before;
        drop(restarted_gw);
        Ok((all, took, up, again, failed))
    }
    .await;
    stop.cancel();
    drop(gw);
    let (all, took, up, again, failed) = outcome?;
    let secs = took.as_secs_f64();
    let mut row = Row::at_most(
        format!("{n} nodes registered again after a gateway kill"),
        secs,
        format!("{TARGET_S} s budget"),
        TARGET_S,
        "s",
        1.0,
    );
    row.target = format!("≤ {TARGET_S} s");
    row.met = all && secs <= TARGET_S;
    Ok(Report::new(
        "reconnect",
        format!(
            "`gsv gateway` as a child process, SIGKILLed and restarted on the same address \
             and data dir (up again after {:.0} ms); {n} simulated nodes reconnecting with \
             jittered backoff (0–500 ms, doubling, cap 5 s, never giving up); {again} of {n} \
             registered again{}; {failed} failed dials/handshakes during the restart; time \
             from kill to the last hello-ok",
            up.as_secs_f64() * 1000.0,
            if all { "" } else { " before the cap (NOT all)" },
        ),
        vec![row],
    ))
}
