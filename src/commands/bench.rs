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
