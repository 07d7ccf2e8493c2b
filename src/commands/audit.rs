//! `gsv audit verify|tail`: reads the audit log straight from the database, so both
//! work with the gateway stopped.

use crate::exit;
use crate::terminal::safe;
use gsv_gateway::audit;
use gsv_gateway::Store;
use std::path::Path;
use std::time::Duration;

fn open(data: &Path) -> Result<Store, u8> {
    if !data.join(gsv_gateway::datadir::DB_FILE).exists() {
        eprintln!("error: not_found: no gsv database in {}", data.display());
        return Err(exit::USAGE);
    }
    Store::open(data).map_err(|e| {
        eprintln!("error: internal: {e}");
        exit::TOOL_ERROR
    })
}

/// `gsv audit verify`: exit 0 if the chain verifies, 1 if it does not.
pub fn verify(data: &Path, json: bool) -> u8 {
    let store = match open(data) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match store.with_conn(|c| audit::verify(c)) {
        Ok(report) => {
            if json {
                crate::commands::client::print_json(&report);
            } else if let Some(bad) = report.first_bad_seq {
                println!(
                    "FAILED at row {bad}: {}",
                    report.problem.as_deref().unwrap_or("")
                );
            } else {
                println!("ok: {} audit rows verify", report.rows);
                match &report.cluster {
                    Some(c) if c.ok => println!(
                        "ok: {} rows of the cluster's audit chain verify (head {})",
                        c.rows, c.head
                    ),
                    Some(c) => println!(
                        "FAILED at cluster row {}: {}",
                        c.first_bad_seq.unwrap_or(0),
                        c.problem.as_deref().unwrap_or("")
                    ),
                    None => {}
                }
            }
            if report.ok {
                exit::OK
            } else {
                exit::TOOL_ERROR
            }
        }
        Err(e) => {
            eprintln!("error: internal: {e}");
            exit::TOOL_ERROR
        }
    }
}

fn print_row(r: &audit::AuditRow, json: bool) {
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
        return;
    }
    let e = &r.entry;
    let target = match (&e.node, &e.tool) {
        (Some(n), Some(t)) => format!("{n}__{t}"),
        (Some(n), None) => n.clone(),
        _ => String::new(),
    };
    println!(
        "{:>6}  {}  {:<10} {:<24} {:<32} {}{}",
        r.seq,
        gsv_gateway::time::rfc3339(r.ts),
        safe(&e.kind.to_string()),
        safe(&e.actor),
        safe(&target),
        safe(&e.outcome),
        e.duration_ms
            .map(|d| format!(" ({d} ms)"))
            .unwrap_or_default()
    );
}

/// `gsv audit tail [--lines N] [--follow]`.
pub async fn tail(data: &Path, lines: u32, follow: bool, json: bool) -> u8 {
    let store = match open(data) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let start = match store.with_conn(|c| audit::last_seq(c)) {
        Ok(last) => (last - i64::from(lines)).max(0),
        Err(e) => {
            eprintln!("error: internal: {e}");
            return exit::TOOL_ERROR;
        }
    };
    let mut after = start;
    loop {
        match store.with_conn(|c| audit::rows_after(c, after, 1000)) {
            Ok(rows) => {
                for r in &rows {
                    print_row(r, json);
                    after = r.seq;
                }
            }
            Err(e) => {
                eprintln!("error: internal: {e}");
                return exit::TOOL_ERROR;
            }
        }
        if !follow {
            return exit::OK;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = super::shutdown_signal() => return exit::OK,
        }
    }
}
