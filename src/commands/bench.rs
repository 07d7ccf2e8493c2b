//! `gsv bench`: runs a scenario from `crate::bench` and prints its report.

use crate::bench::{self, BenchOptions};
use crate::exit;

pub async fn run(scenario: String, json: bool, opts: BenchOptions) -> u8 {
    if scenario == "list" {
        for (name, about) in bench::SCENARIOS {
            println!("{name:<16} {about}");
        }
        return exit::OK;
    }
    if scenario == bench::latency::ECHO_SERVER {
        // Not a scenario: the latency baseline's echo server, started by `latency`.
        return match bench::latency::serve_echo_process().await {
            Ok(()) => exit::OK,
            Err(e) => {
                eprintln!("error: bench: {e}");
                exit::TOOL_ERROR
            }
        };
    }
    match bench::run(&scenario, &opts).await {
        Ok(report) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else {
                print!("{}", report.table());
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: bench: {e}");
            exit::USAGE
        }
    }
}
