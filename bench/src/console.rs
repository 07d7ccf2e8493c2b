//! `gsv bench console`: how fast the operator console's nodes page draws a large
//! fleet, in a real browser.
//!
//! One in-process gateway on loopback with simulated nodes (the standard tool set plus
//! Echo each), first 1, then 1,000. At each size a one-time login link is minted in
//! process and `tests/console/nodes_timing.py` (Selenium, headless Chromium, from the
//! repository's `.venv`) opens the page several times; the figure is the median time
//! from the start of the navigation to the rows in the DOM (the page draws the first
//! 250 nodes of the list; the rest are pages away). Target: ≤ 300 ms at 1,000 nodes;
//! the baseline is the same page with one node, same run.

use super::fleet::{mint_nodes, raise_nofile, TempDir};
use super::report::{Report, Row};
use super::sim::{connect_fleet, NodeTemplate};
use super::BenchOptions;
use gsv_gateway::GatewayConfig;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The page must draw within this many milliseconds at the largest size.
pub const TARGET_MS: f64 = 300.0;

/// What one size's browser run measured.
#[derive(serde::Deserialize)]
struct Timing {
    rounds: Vec<f64>,
    rows: usize,
    total: usize,
}

/// The repository root (the bench crate lives in `bench/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Runs the browser script against `link`.
async fn browse(link: &str, rounds: usize) -> Result<Timing, String> {
    let script = repo().join("tests/console/nodes_timing.py");
    let venv = repo().join(".venv/bin/python");
    let python = if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    };
    if !Path::new("/usr/bin/chromium").exists() || !Path::new("/usr/bin/chromedriver").exists() {
        return Err("needs /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver)".into());
    }
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(link)
        .arg(rounds.to_string())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .map_err(|_| "the browser script took over 120 s".to_owned())?
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed (is `selenium` installed in .venv?): {}",
            python.display(),
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("the browser script's answer: {e}"))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    raise_nofile();
    let sizes: &[usize] = if opts.quick { &[1, 10] } else { &[1, 1000] };
    let rounds = opts.rounds.unwrap_or(if opts.quick { 2 } else { 7 });
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let dir = TempDir::new(opts, "console")?;
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let creds = mint_nodes(&data, largest)?;
    let template = NodeTemplate::standard(&dir.0)?;
    let mut config = GatewayConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)), data.clone());
    config.write_addr_file = false;
    config.caps = super::fleet::bench_caps();
    let gateway = gsv_gateway::start(config)
        .await
        .map_err(|e| format!("gateway: {e}"))?;
    let stop = CancellationToken::new();
    let node_url = format!("ws://{}{}", gateway.addr, gsv_protocol::endpoint::NODE_PATH);
    let mut measured = Vec::new();
    let mut connected = 0;
    let mut tasks = Vec::new();
    let mut failure = None;
    for &size in sizes {
        let more = &creds[connected..size];
        match connect_fleet(&node_url, &template, more, 64, &stop).await {
            Ok(t) => tasks.extend(t),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        connected = size;
        let deadline = Instant::now() + Duration::from_secs(60);
        while gateway.connected_nodes() < size && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let link = match gateway.console_login() {
            Ok(l) => l.url,
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        };
        match browse(&link, rounds).await {
            Ok(t) => measured.push((size, t)),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    stop.cancel();
    gateway.stop().await;
    for t in tasks {
        t.abort();
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let (small, large) = match (measured.first(), measured.last()) {
        (Some(s), Some(l)) => (s, l),
        _ => return Err("nothing measured".into()),
    };
    let value = median(&large.1.rounds);
    let mut row = Row::at_most(
        format!(
            "nodes page drawn, {} nodes ({} rows on the first page), median",
            large.1.total, large.1.rows
        ),
        value,
        format!("the same page, {} node(s), median", small.1.total),
        median(&small.1.rounds),
        "ms",
        f64::INFINITY,
    );
    row.target = format!("≤ {TARGET_MS} ms");
    row.met = value <= TARGET_MS;
    Ok(Report::new(
        "console",
        format!(
            "headless Chromium (Selenium), {rounds} fresh navigations to /ui/#/nodes per \
             size; time from navigation start to the rows in the DOM (page's \
             performance.now()); in-process gateway with {} simulated nodes",
            sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(" then ")
        ),
        vec![row],
    ))
}
