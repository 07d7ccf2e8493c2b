//! `gsv bench SCENARIO [--json]`: loopback-only benchmarks (DESIGN §8).
//!
//! This crate holds the benchmark scenarios of `gsv bench`. They are a crate of their
//! own, kept out of the shipped `gsv` library (which the examples and tests link): only
//! the `gsv` binary depends on it, and calls [`cli::run`] for `gsv bench`.
//!
//! Every scenario measures a figure and its baseline in the same run and reports the
//! ratio, so the numbers mean the same thing on any machine. Workloads are bounded in
//! count and time and stop by themselves; nothing leaves 127.0.0.1.
//!
//! The scenarios that time the agent client (`latency`, `mcp`) measure `gsv call`'s
//! own, `gsv_client::AgentClient`.

pub mod bash_spawn;
pub mod cli;
pub mod cluster;
pub mod console;
pub mod exec_spawn;
pub mod fanout;
pub mod fleet;
pub mod fleet_worker;
pub mod grep_glob;
pub mod latency;
pub mod mcp;
pub mod mcp_listing;
pub mod memory;
pub mod nats;
pub mod reconnect;
pub mod report;
pub mod sim;
pub mod ssh_backend;
pub mod ssh_call;
pub mod sshd;
pub mod stats;
pub mod throughput;
pub mod transfer;

use report::Report;

/// The scenarios `gsv bench` knows, with a one-line description each.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "bash-spawn",
        "Bash tool running `true` vs `sh -c true` (and `$SHELL -c true`) spawned directly",
    ),
    (
        "exec-spawn",
        "exec tool running `/bin/true` vs `/bin/true` spawned directly",
    ),
    (
        "grep",
        "Grep tool vs `rg` on the cargo registry sources (rare and common patterns)",
    ),
    ("glob", "Glob tool vs `fd -g` on the cargo registry sources"),
    (
        "mcp",
        "Echo call latency through /mcp vs the WebSocket agent API, same run",
    ),
    (
        "mcp-listing",
        "bytes of /mcp tools/list per view at 1-1,000 nodes; fleet_call vs {node}__{tool}",
    ),
    (
        "console",
        "operator console's nodes page drawn in headless Chromium at 1,000 nodes vs 1 node",
    ),
    (
        "latency",
        "routed Echo call (1 agent, 1 node) vs 2 direct WebSocket round trips",
    ),
    (
        "throughput",
        "routed calls/s, 64 in flight over 16 nodes, vs a minimal id-prefix relay",
    ),
    (
        "fanout",
        "tools.fanout of Echo to 1,000 and 8,000 simulated nodes vs the same calls pipelined",
    ),
    (
        "memory",
        "gateway RSS per connected node at 1,000 and 8,000 simulated nodes",
    ),
    (
        "cluster",
        "6 gateway replicas over NATS: calls across replicas vs within one, RSS per node, a killed replica's nodes back elsewhere",
    ),
    (
        "reconnect",
        "8,000 simulated nodes registered again after a gateway kill and restart",
    ),
    (
        "ssh",
        "`gsv call laptop__Bash` `true` (whole process) vs `ssh` over a warm ControlMaster",
    ),
    (
        "ssh-backend",
        "`gsv call far__Bash true` and a 1 MiB Read through an SSH-backed node vs `ssh … true` / `cat` over a warm ControlMaster",
    ),
    (
        "transfer",
        "`gsv cp` of 1 GiB local → node → local vs `scp` over a warm ControlMaster; gateway RSS; calls during it",
    ),
];

/// Options shared by every scenario.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Tiny sizes for a smoke run (seconds), as the test suite uses.
    pub quick: bool,
    /// Directory to build fixtures in (a fresh temp dir when `None`).
    pub dir: Option<std::path::PathBuf>,
    /// Fleet sizes, for the scenarios that take them (`fanout`); `None`: theirs.
    pub nodes: Option<Vec<usize>>,
    /// Measured rounds per side, for the scenarios that take them (`fanout`).
    pub rounds: Option<usize>,
}

/// Runs one scenario by name.
/// `A` is the agent client the `latency`, `mcp` and `ssh` scenarios use.
pub async fn run(name: &str, opts: &BenchOptions) -> Result<Report, String> {
    match name {
        "bash-spawn" => bash_spawn::run(opts).await,
        "exec-spawn" => exec_spawn::run(opts).await,
        "grep" => grep_glob::grep(opts).await,
        "glob" => grep_glob::glob(opts).await,
        "mcp" => mcp::run(opts).await,
        "mcp-listing" => mcp_listing::run(opts).await,
        "console" => console::run(opts).await,
        "latency" => latency::run(opts).await,
        "throughput" => throughput::run(opts).await,
        "fanout" => fanout::run(opts).await,
        "memory" => memory::run(opts).await,
        "cluster" => cluster::run(opts).await,
        "reconnect" => reconnect::run(opts).await,
        "ssh" => ssh_call::run(opts).await,
        "ssh-backend" => ssh_backend::run(opts).await,
        "transfer" => transfer::run(opts).await,
        _ => Err(format!(
            "unknown scenario {name:?}; known: {}",
            SCENARIOS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
