//! `gsv bench memory`: gateway memory per connected node.
//!
//! `gsv gateway` runs as a separate process; its VmRSS is read with no nodes, then
//! after N simulated nodes (each declaring the standard tools plus Echo, as a real node
//! does) have registered, for two N. The per-node figure is the RSS growth divided by
//! N; the target is at most 24 KiB per node.

use super::fleet::{mint_nodes, raise_nofile, GatewayProcess, TempDir};
use super::report::{Report, Row};
use super::sim::{self, NodeTemplate};
use super::BenchOptions;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Budget per node, KiB.
pub const TARGET_KIB: f64 = 24.0;

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let limit = raise_nofile();
    let levels: &[usize] = if opts.quick { &[25, 50] } else { &[1000, 8000] };
    let max = *levels.last().unwrap_or(&0);
    if limit < (max as u64) + 500 {
        return Err(format!(
            "open-file limit {limit} is too low for {max} nodes"
        ));
    }
    let dir = TempDir::new(opts, "memory")?;
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let creds = mint_nodes(&data, max)?;
    let template = NodeTemplate::twelve(&dir.0)?;
    let gw = GatewayProcess::spawn(&data, "127.0.0.1:0").await?;
    let stop = CancellationToken::new();
    let outcome = measure(&gw, &template, &creds, levels, &stop).await;
    stop.cancel();
    drop(gw);
    let (idle, points) = outcome?;
    let rows = points
        .iter()
        .map(|(n, rss)| {
            let per = (*rss as f64 - idle as f64) / *n as f64;
            Row::at_most(
                format!("gateway RSS per node at {n} nodes"),
                per,
                format!("{TARGET_KIB} KiB budget (RSS idle {idle} KiB, at {n}: {rss} KiB)"),
                TARGET_KIB,
                "KiB",
                1.0,
            )
        })
        .map(|mut r| {
            r.target = format!("≤ {TARGET_KIB} KiB");
            r
        })
        .collect();
    Ok(Report::new(
        "memory",
        format!(
            "`gsv gateway` as a child process; simulated nodes each declaring {} tools \
             (Echo and 11 of the standard set, as DESIGN.md §8 measures), connected 200 at a time; VmRSS read 2 s after the last \
             hello-ok; per node = (RSS − RSS with no nodes) / nodes",
            template.tools.len()
        ),
        rows,
    ))
}

async fn measure(
    gw: &GatewayProcess,
    template: &NodeTemplate,
    creds: &[(String, String)],
    levels: &[usize],
    stop: &CancellationToken,
) -> Result<(u64, Vec<(usize, u64)>), String> {
    // Let the gateway settle, then read its idle RSS.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = gw.rss_kib()?;
    let url = gw.node_url();
    let mut connected = 0;
    let mut points = Vec::new();
    for &n in levels {
        sim::connect_fleet(&url, template, &creds[connected..n], 200, stop).await?;
        connected = n;
        tokio::time::sleep(Duration::from_secs(2)).await;
        points.push((n, gw.rss_kib()?));
    }
    Ok((idle, points))
}
