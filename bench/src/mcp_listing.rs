//! `gsv bench mcp-listing`: what `/mcp`'s `tools/list` costs a model's context in each
//! view, as the fleet grows, and what the fleet view's indirection costs a call.
//!
//! One in-process gateway on loopback and simulated nodes (each declares the standard
//! tool set plus Echo, as a real `gsv node --echo-tool` does), added in steps of 1, 2,
//! 5, 10, 100 and 1,000. At each size one MCP session per view (the default URL
//! `/mcp`, `/mcp?view=flat`, `/mcp?view=fleet`) lists every page of `tools/list`; the
//! figure is the bytes of the tool definitions it received (JSON, as they enter a
//! model's context; bytes / 4 as a rough token count). Targets: the default listing
//! at most 12 KB at one node and 48 KB at five, then at most 8 KB and constant once
//! the fleet view takes over; the fleet view's listing at most 6 KB and the same at
//! every size. Then the same Echo call is made through `fleet_call`, through
//! `{node}__Echo` in the flat view and through `{node}__Echo` in the fleet view,
//! interleaved call by call in one run: both fleet-view calls p50 within +10 %.

use super::fleet::{mint_agent, mint_nodes, raise_nofile, TempDir};
use super::mcp::McpConn;
use super::report::{Report, Row};
use super::sim::{connect_fleet, NodeTemplate};
use super::stats::summarize;
use super::BenchOptions;
use gsv_gateway::GatewayConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The fleet view's listing may be at most this many bytes, at every fleet size.
pub const FLEET_LISTING_MAX_BYTES: usize = 6 * 1024;
/// `fleet_call` may take at most this ratio of the direct call's p50.
pub const FLEET_CALL_MAX_RATIO: f64 = 1.10;
/// One node's reference seven as the flat view lists them, at most (issue 44).
pub const REFERENCE_MAX_BYTES: usize = 6 * 1024;
/// The default listing at one node, at most.
pub const DEFAULT_ONE_MAX_BYTES: usize = 12 * 1024;
/// The default listing up to five nodes, at most.
pub const DEFAULT_FIVE_MAX_BYTES: usize = 48 * 1024;
/// The default listing once the fleet view takes over, at most (and constant).
pub const DEFAULT_FLEET_MAX_BYTES: usize = 8 * 1024;

/// The fleet sizes measured.
fn sizes(quick: bool) -> &'static [usize] {
    if quick {
        &[1, 2, 5, 10]
    } else {
        &[1, 2, 5, 10, 100, 1000]
    }
}

/// Bytes of the tool definitions in one view's whole listing, and how many tools.
async fn listing(addr: SocketAddr, token: &str, view: &str) -> Result<(usize, usize), String> {
    let (bytes, tools) = listing_by_tool(addr, token, view).await?;
    Ok((bytes, tools.len()))
}

/// One view's whole listing: its bytes, and each tool's name and bytes.
async fn listing_by_tool(
    addr: SocketAddr,
    token: &str,
    view: &str,
) -> Result<(usize, Vec<(String, usize)>), String> {
    let path = match view {
        "" => "/mcp".to_owned(),
        v => format!("/mcp?view={v}"),
    };
    let mut conn = McpConn::open_at(addr, &path, token, "2025-11-25").await?;
    conn.initialize().await?;
    let tools = conn.list_tools().await?;
    let each: Vec<(String, usize)> = tools
        .iter()
        .map(|t| {
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            (name, serde_json::to_string(t).map(|s| s.len()).unwrap_or(0))
        })
        .collect();
    let bytes = each.iter().map(|(_, b)| b).sum::<usize>()
        // The array's brackets and commas, as one listing would carry them.
        + each.len().saturating_sub(1)
        + 2;
    Ok((bytes, each))
}

/// One node's tools as the flat view lists them: the reference seven's bytes in all,
/// and the other node tools' bytes each (the gateway's own tools left out).
struct PerTool {
    reference_bytes: usize,
    reference_tools: usize,
    others: Vec<(String, usize)>,
}

impl PerTool {
    fn of(node: &str, tools: Vec<(String, usize)>) -> PerTool {
        let prefix = format!("{node}__");
        let mut per = PerTool {
            reference_bytes: 0,
            reference_tools: 0,
            others: Vec::new(),
        };
        for (name, bytes) in tools {
            let Some(tool) = name.strip_prefix(&prefix) else {
                continue;
            };
            if gsv_gateway::mcp::listed::REFERENCE.contains(&tool) {
                per.reference_bytes += bytes;
                per.reference_tools += 1;
            } else {
                per.others.push((tool.to_owned(), bytes));
            }
        }
        per
    }
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    raise_nofile();
    let sizes = sizes(opts.quick);
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let dir = TempDir::new(opts, "mcp-listing")?;
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let creds = mint_nodes(&data, largest)?;
    let token = mint_agent(&data)?;
    let template = NodeTemplate::standard(&dir.0)?;
    let mut config = GatewayConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)), data.clone());
    config.write_addr_file = false;
    config.caps = super::fleet::bench_caps();
    let gateway = gsv_gateway::start(config)
        .await
        .map_err(|e| format!("gateway: {e}"))?;
    let stop = CancellationToken::new();
    let outcome = measure(
        &gateway, &creds, &template, &token, sizes, opts.quick, &stop,
    )
    .await;
    stop.cancel();
    gateway.stop().await;
    let (listings, per_tool, direct, fleet, by_name, n) = outcome?;

    let mut rows = Vec::new();
    // The default URL: reference tools flat while small, then the fleet view.
    let mut taken_over: Option<usize> = None;
    for l in &listings {
        let fleet_now = l.default_bytes == l.fleet_bytes && l.default_tools == l.fleet_tools;
        let mut row = Row::at_most(
            format!(
                "default `tools/list` (the URL as given), {} node(s), {} tools{}",
                l.nodes,
                l.default_tools,
                if fleet_now { " (fleet view)" } else { "" }
            ),
            l.default_bytes as f64,
            format!("flat view `tools/list`, {} tools", l.flat_tools),
            l.flat_bytes as f64,
            "bytes",
            f64::INFINITY,
        );
        let (target, met) = if fleet_now {
            let first = *taken_over.get_or_insert(l.default_bytes);
            (
                format!("≤ {DEFAULT_FLEET_MAX_BYTES} bytes, constant"),
                l.default_bytes <= DEFAULT_FLEET_MAX_BYTES && l.default_bytes == first,
            )
        } else if l.nodes == 1 {
            (
                format!("≤ {DEFAULT_ONE_MAX_BYTES} bytes"),
                l.default_bytes <= DEFAULT_ONE_MAX_BYTES,
            )
        } else {
            (
                format!("≤ {DEFAULT_FIVE_MAX_BYTES} bytes"),
                l.default_bytes <= DEFAULT_FIVE_MAX_BYTES,
            )
        };
        row.target = target;
        row.met = met;
        rows.push(row);
    }
    let first_fleet = listings.first().map(|l| l.fleet_bytes).unwrap_or(0);
    for l in &listings {
        let mut row = Row::at_most(
            format!(
                "fleet view `tools/list`, {} node(s), {} tools",
                l.nodes, l.fleet_tools
            ),
            l.fleet_bytes as f64,
            format!(
                "flat view `tools/list`, {} tools (≈ {} tokens)",
                l.flat_tools,
                l.flat_bytes / 4
            ),
            l.flat_bytes as f64,
            "bytes",
            f64::INFINITY,
        );
        row.target = format!("≤ {FLEET_LISTING_MAX_BYTES} bytes, same at every size");
        row.met = l.fleet_bytes <= FLEET_LISTING_MAX_BYTES && l.fleet_bytes == first_fleet;
        rows.push(row);
    }
    let flat_one = listings.first().map(|l| l.flat_bytes).unwrap_or(0);
    rows.extend(per_tool_rows(&per_tool, flat_one));
    rows.push(Row::at_most(
        "Echo via `fleet_call`, p50",
        fleet.p50_us,
        "Echo via `{node}__Echo` (flat view), p50",
        direct.p50_us,
        "µs",
        FLEET_CALL_MAX_RATIO,
    ));
    rows.push(Row::at_most(
        "Echo via `{node}__Echo` in the fleet view (not listed there), p50",
        by_name.p50_us,
        "Echo via `{node}__Echo` (flat view), p50",
        direct.p50_us,
        "µs",
        FLEET_CALL_MAX_RATIO,
    ));
    let mut tail = Row::at_most(
        "Echo via `fleet_call`, p99",
        fleet.p99_us,
        "Echo via `{node}__Echo` (flat view), p99",
        direct.p99_us,
        "µs",
        FLEET_CALL_MAX_RATIO,
    );
    tail.target = "(info)".into();
    tail.met = true;
    rows.push(tail);
    let flat_last = listings.last().map(|l| l.flat_bytes).unwrap_or(0);
    Ok(Report::new(
        "mcp-listing",
        format!(
            "`tools/list` of one MCP session per view (2025-11-25, every page) at {} \
             simulated nodes of {} tools each; bytes of the tool definitions (≈ bytes/4 \
             tokens): flat grows to {} bytes (≈ {} tokens), fleet stays {} bytes (≈ {} \
             tokens). Then {n} Echo calls through `fleet_call` and `{{node}}__Echo` each, \
             interleaved, in one run",
            sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            template.tools.len(),
            flat_last,
            flat_last / 4,
            first_fleet,
            first_fleet / 4,
        ),
        rows,
    ))
}

/// One node's definitions: the reference seven against their budget, and the other
/// tools' bytes per tool (mean and largest) beside the reference seven's.
fn per_tool_rows(per: &PerTool, flat_bytes: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut reference = Row::at_most(
        format!(
            "one node's reference tools ({}), flat view, bytes in all",
            per.reference_tools
        ),
        per.reference_bytes as f64,
        "one node's whole flat view `tools/list`",
        flat_bytes as f64,
        "bytes",
        f64::INFINITY,
    );
    reference.target = format!("≤ {REFERENCE_MAX_BYTES} bytes");
    reference.met = per.reference_bytes <= REFERENCE_MAX_BYTES && per.reference_tools == 7;
    rows.push(reference);
    let reference_mean = per.reference_bytes as f64 / per.reference_tools.max(1) as f64;
    let others: usize = per.others.iter().map(|(_, b)| b).sum();
    let mean = others as f64 / per.others.len().max(1) as f64;
    rows.push(
        Row::at_most(
            format!(
                "one node's other {} tools, bytes per tool (mean; {others} in all)",
                per.others.len()
            ),
            mean.round(),
            "its reference tools, bytes per tool (mean)",
            reference_mean.round(),
            "bytes",
            f64::INFINITY,
        )
        .for_info(),
    );
    if let Some((name, bytes)) = per.others.iter().max_by_key(|(_, b)| *b) {
        rows.push(
            Row::at_most(
                format!("one node's largest other tool definition (`{name}`)"),
                *bytes as f64,
                "its reference tools, bytes per tool (mean)",
                reference_mean.round(),
                "bytes",
                f64::INFINITY,
            )
            .for_info(),
        );
    }
    rows
}

/// One fleet size's listings.
struct Listing {
    nodes: usize,
    default_bytes: usize,
    default_tools: usize,
    flat_bytes: usize,
    flat_tools: usize,
    fleet_bytes: usize,
    fleet_tools: usize,
}

type Measured = (
    Vec<Listing>,
    PerTool,
    super::stats::Summary,
    super::stats::Summary,
    super::stats::Summary,
    usize,
);

async fn measure(
    gateway: &gsv_gateway::RunningGateway,
    creds: &[(String, String)],
    template: &NodeTemplate,
    token: &str,
    sizes: &[usize],
    quick: bool,
    stop: &CancellationToken,
) -> Result<Measured, String> {
    let addr = gateway.addr;
    let node_url = format!("ws://{addr}{}", gsv_protocol::endpoint::NODE_PATH);
    let mut listings = Vec::new();
    let mut per_tool = None;
    let mut connected = 0;
    let mut tasks = Vec::new();
    for &size in sizes {
        let more = &creds[connected..size];
        tasks.extend(connect_fleet(&node_url, template, more, 64, stop).await?);
        connected = size;
        let deadline = Instant::now() + Duration::from_secs(60);
        while gateway.connected_nodes() < size {
            if Instant::now() > deadline {
                return Err(format!(
                    "only {} of {size} nodes registered",
                    gateway.connected_nodes()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (flat_bytes, flat_each) = listing_by_tool(addr, token, "flat").await?;
        let flat_tools = flat_each.len();
        if per_tool.is_none() {
            let node = creds.first().map(|c| c.0.as_str()).unwrap_or("");
            per_tool = Some(PerTool::of(node, flat_each));
        }
        let (fleet_bytes, fleet_tools) = listing(addr, token, "fleet").await?;
        let (default_bytes, default_tools) = listing(addr, token, "").await?;
        // The flat view lists the gateway tools no node offers (fleet_run, ...) too.
        let gateway_tools = gsv_gateway::mcp::fleet_tools::flat_definitions().len();
        if flat_tools != size * template.tools.len() + gateway_tools {
            return Err(format!(
                "the flat view listed {flat_tools} tools for {size} nodes of {} tools \
                 and {gateway_tools} gateway tools",
                template.tools.len()
            ));
        }
        listings.push(Listing {
            nodes: size,
            default_bytes,
            default_tools,
            flat_bytes,
            flat_tools,
            fleet_bytes,
            fleet_tools,
        });
    }

    // The call: the same node and tool both ways, one session per view.
    let n = if quick { 30 } else { 2000 };
    let node = creds.first().map(|c| c.0.clone()).ok_or("no node")?;
    let mut flat = McpConn::open_at(addr, "/mcp?view=flat", token, "2025-11-25").await?;
    flat.initialize().await?;
    let mut fleet = McpConn::open_at(addr, "/mcp?view=fleet", token, "2025-11-25").await?;
    fleet.initialize().await?;
    let direct_name = format!("{node}__Echo");
    let args = json!({"text": "ping"});
    let fleet_args: Value = json!({"node": node, "tool": "Echo", "args": args});
    for _ in 0..20 {
        flat.call(&direct_name, args.clone()).await?;
        flat.finish().await?;
        fleet.call("fleet_call", fleet_args.clone()).await?;
        fleet.finish().await?;
    }
    let (mut d, mut f, mut b) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for _ in 0..n {
        let t = Instant::now();
        flat.call(&direct_name, args.clone()).await?;
        d.push(t.elapsed());
        flat.finish().await?;
        let t = Instant::now();
        fleet.call("fleet_call", fleet_args.clone()).await?;
        f.push(t.elapsed());
        fleet.finish().await?;
        let t = Instant::now();
        fleet.call(&direct_name, args.clone()).await?;
        b.push(t.elapsed());
        fleet.finish().await?;
    }
    drop(tasks);
    let per_tool = per_tool.ok_or("no fleet size measured")?;
    Ok((
        listings,
        per_tool,
        summarize(&d),
        summarize(&f),
        summarize(&b),
        n,
    ))
}
