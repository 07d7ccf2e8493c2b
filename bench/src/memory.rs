//! `gsv bench memory`: gateway memory per connected node.
//!
//! `gsv gateway` runs as a separate process; its VmRSS is read with no nodes, then
//! after N simulated nodes (each declaring the standard tools plus Echo, as a real node
//! does) have registered, for two N. The per-node figure is the RSS growth divided by
//! N; the target is at most 24 KiB per node.
//!
//! "No nodes" is a gateway that has served nodes before: [`WARM_UP`] nodes connect,
//! register and leave first. A gateway fresh from `exec` has not yet paged in the code
//! that runs a node's session (some 5 MiB of the executable, file-backed, shared with
//! the page cache, the same for one node as for a million), and counting that against
//! the first thousand nodes made the figure at 1,000 measure the size of the binary.
//! The figure from the cold gateway is reported beside it, for comparison. `--quick`
//! (a smoke run of 25 and 50 nodes, where a few nodes' worth of memory is within what
//! the allocator gives back after the warm-up) measures from the cold gateway only.

use super::fleet::{mint_nodes, raise_nofile, GatewayProcess, TempDir};
use super::report::{Report, Row};
use super::sim::{self, NodeTemplate};
use super::BenchOptions;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Budget per node, KiB.
pub const TARGET_KIB: f64 = 24.0;
/// Nodes that connect and leave before the baseline is read.
const WARM_UP: usize = 20;

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
    let warm = if opts.quick {
        Vec::new()
    } else {
        super::fleet::mint_nodes_named(&data, "warm", WARM_UP)?
    };
    let template = NodeTemplate::twelve(&dir.0)?;
    let gw = GatewayProcess::spawn(&data, "127.0.0.1:0").await?;
    let stop = CancellationToken::new();
    let outcome = measure(&gw, &template, &creds, &warm, levels, &stop).await;
    stop.cancel();
    drop(gw);
    let (cold, idle, points) = outcome?;
    let mut rows: Vec<Row> = points
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
    if let Some((n, rss)) = points.first().filter(|_| !opts.quick) {
        rows.push(
            Row::at_most(
                format!("(for comparison) same at {n} nodes, from the cold gateway"),
                (*rss as f64 - cold as f64) / *n as f64,
                format!("{TARGET_KIB} KiB budget (RSS fresh from exec {cold} KiB)"),
                TARGET_KIB,
                "KiB",
                1.0,
            )
            .for_info(),
        );
    }
    Ok(Report::new(
        "memory",
        format!(
            "`gsv gateway` as a child process; simulated nodes each declaring {} tools \
             (Echo and 11 of the standard set, as DESIGN.md §8 measures), connected 200 at a time; VmRSS read 2 s after the last \
             hello-ok; per node = (RSS − RSS with no nodes) / nodes, no nodes being the gateway \
             after {WARM_UP} nodes connected and left",
            template.tools.len()
        ),
        rows,
    ))
}

async fn measure(
    gw: &GatewayProcess,
    template: &NodeTemplate,
    creds: &[(String, String)],
    warm: &[(String, String)],
    levels: &[usize],
    stop: &CancellationToken,
) -> Result<(u64, u64, Vec<(usize, u64)>), String> {
    // Let the gateway settle and read its RSS fresh from exec; then let a few nodes
    // come and go, and read its idle RSS.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cold = gw.rss_kib()?;
    let url = gw.node_url();
    let idle = if warm.is_empty() {
        cold
    } else {
        let leave = CancellationToken::new();
        let warm_nodes = sim::connect_fleet(&url, template, warm, warm.len(), &leave).await?;
        leave.cancel();
        for n in warm_nodes {
            let _ = n.await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        gw.rss_kib()?
    };
    let mut connected = 0;
    let mut points = Vec::new();
    for &n in levels {
        sim::connect_fleet(&url, template, &creds[connected..n], 200, stop).await?;
        connected = n;
        tokio::time::sleep(Duration::from_secs(2)).await;
        points.push((n, gw.rss_kib()?));
    }
    Ok((cold, idle, points))
}
