//! `gsv bench`: its arguments, and running a scenario and printing its report.
//!
//! The binary flattens [`BenchArgs`] into its command line and calls [`run`] with its
//! agent client; it prints an [`Error`] and picks the exit code.

use crate::{latency, BenchOptions, SCENARIOS};
use clap::Args;
use std::fmt;
use std::path::PathBuf;

/// The arguments of `gsv bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Scenario name (`gsv bench list` shows them)
    pub scenario: String,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Tiny sizes: a smoke run of a few seconds
    #[arg(long)]
    pub quick: bool,
    /// Directory for fixtures [default: a fresh temporary directory]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Fleet sizes, comma-separated (`fanout`; default 1000,8000)
    #[arg(long, value_name = "N,..", value_delimiter = ',')]
    pub nodes: Option<Vec<usize>>,
    /// Measured rounds per side (`fanout`; default 5)
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
}

/// Why `gsv bench` failed. It displays as its message alone; `gsv` prints it as
/// `error: bench: MESSAGE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The scenario could not run: an unknown name, a missing baseline tool, a failure
    /// on the way (`gsv` exits with its usage code, 2).
    Usage(String),
    /// The latency baseline's echo server (`gsv bench echo-server`) failed (`gsv`
    /// exits with its tool-error code, 1).
    Failed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// `gsv bench SCENARIO`: `list` prints the scenarios; a scenario's report is printed
/// as a table, or as JSON with `--json`. `A` is the agent client the scenarios time.
pub async fn run(args: BenchArgs) -> Result<(), Error> {
    let BenchArgs {
        scenario,
        json,
        quick,
        dir,
        nodes,
        rounds,
    } = args;
    if scenario == "list" {
        for (name, about) in SCENARIOS {
            println!("{name:<16} {about}");
        }
        return Ok(());
    }
    if scenario == crate::fleet_worker::FLEET_WORKER {
        // Not a scenario: a share of `cluster`'s simulated fleet, started by it.
        return crate::fleet_worker::serve_worker()
            .await
            .map_err(Error::Failed);
    }
    if scenario == latency::ECHO_SERVER {
        // Not a scenario: the latency baseline's echo server, started by `latency`.
        return latency::serve_echo_process().await.map_err(Error::Failed);
    }
    let report = crate::run(
        &scenario,
        &BenchOptions {
            quick,
            dir,
            nodes,
            rounds,
        },
    )
    .await
    .map_err(Error::Usage)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
