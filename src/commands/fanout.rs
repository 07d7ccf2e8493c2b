//! `gsv call --select SEL TOOL ARGS`: one tool on every node a selector picks
//! (`tools.fanout`), printed one block per node as results arrive, then a summary.
//!
//! Node text is untrusted: every line of it is printed through [`safe`]. `--json`
//! prints only the final result. Exit 0 only when every node succeeded, else 1
//! ([`exit::TOOL_ERROR`]); a refused request (bad selector, bad tool, no gateway)
//! exits as `gsv call` does.

use crate::commands::client::{client_error, connect, print_json, Target};
use crate::exit;
use crate::terminal::safe;
use gsv_client::fanout_event;
use gsv_protocol::fanout::{Batch, FanoutSummary, NodeOutcome, NodeStatus, ToolsFanoutParams};
use gsv_protocol::ToolResult;
use std::collections::HashSet;
use std::time::Duration;

/// What `gsv call --select` was asked.
pub struct FanoutArgs<'a> {
    pub select: &'a str,
    pub tool: &'a str,
    /// The arguments' JSON text (already read from `-` or `@FILE`).
    pub args: serde_json::Value,
    pub batch: Option<Batch>,
    pub fail_fast: bool,
    pub json: bool,
    pub timeout_ms: Option<u64>,
    /// `--wait-offline`, in ms.
    pub wait_offline_ms: Option<u64>,
    /// `--async`: print the fan-out's job id and return at once.
    pub is_async: bool,
}

/// Why `--wait-offline` does not parse.
#[derive(Debug, thiserror::Error)]
#[error("--wait-offline takes a duration such as 30s, 5m or 1h (at most 1h), not {0:?}")]
pub struct BadWait(String);

/// Parses `--wait-offline DUR`: a number with `ms`, `s`, `m` or `h` (seconds when
/// bare), at most an hour; in ms.
pub fn parse_wait(text: &str) -> Result<u64, BadWait> {
    let bad = || BadWait(text.to_owned());
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let per = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    let ms = n.checked_mul(per).ok_or_else(bad)?;
    if ms > gsv_protocol::fanout::MAX_WAIT_OFFLINE_MS {
        return Err(bad());
    }
    Ok(ms)
}

/// Why `--batch` does not parse.
#[derive(Debug, thiserror::Error)]
#[error("--batch takes a count (10) or a percent (10%) from 1 to 100, not {0:?}")]
pub struct BadBatch(String);

/// Parses `--batch N` or `--batch N%`.
pub fn parse_batch(text: &str) -> Result<Batch, BadBatch> {
    let bad = || BadBatch(text.to_owned());
    let batch = match text.strip_suffix('%') {
        Some(p) => Batch::Percent(p.trim().parse().map_err(|_| bad())?),
        None => Batch::Count(text.trim().parse().map_err(|_| bad())?),
    };
    batch.size(1).map(|_| batch).ok_or_else(bad)
}

/// Runs the fan-out and prints it; gives the exit code.
pub async fn run(target: Target, a: FanoutArgs<'_>) -> u8 {
    let args = match serde_json::value::to_raw_value(&a.args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: invalid_args: {}", safe(&e.to_string()));
            return exit::USAGE;
        }
    };
    let client = match connect(&target).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let params = ToolsFanoutParams {
        tool: a.tool.to_owned(),
        select: a.select.to_owned(),
        args,
        batch: a.batch,
        fail_fast: a.fail_fast,
        timeout_ms: a.timeout_ms,
        wait_offline_ms: a.wait_offline_ms,
        is_async: a.is_async,
    };
    if a.is_async {
        return match client.fanout_async(&params).await {
            Ok(job) => {
                if a.json {
                    print_json(&gsv_protocol::job::AsyncCallResult { job });
                } else {
                    println!("{job}");
                }
                exit::OK
            }
            Err(e) => client_error(&e),
        };
    }
    let id = client.next_id();
    let mut printed = HashSet::new();
    let call = client.fanout_with_id(&id, &params);
    tokio::pin!(call);
    let outcome = loop {
        tokio::select! {
            biased;
            outcome = &mut call => break outcome,
            _ = super::shutdown_signal() => return super::interrupted(&client, &id, call).await,
            Some(event) = client.next_event(Duration::from_secs(3600)) => {
                if let Some(o) = fanout_event(&event, &id) {
                    if !a.json && printed.insert(o.node.clone()) {
                        print_block(&o);
                    }
                }
            }
        }
    };
    let result = match outcome {
        Ok(r) => r,
        Err(e) => return client_error(&e),
    };
    if a.json {
        print_json(&result);
    } else {
        // Events queued before the answer, and any the client had to drop.
        while let Some(event) = client.next_event(Duration::ZERO).await {
            if let Some(o) = fanout_event(&event, &id) {
                if printed.insert(o.node.clone()) {
                    print_block(&o);
                }
            }
        }
        for o in &result.results {
            if printed.insert(o.node.clone()) {
                print_block(o);
            }
        }
        println!("{}", summary_line(&result.summary));
    }
    if result.summary.all_ok() {
        exit::OK
    } else {
        exit::TOOL_ERROR
    }
}

/// `N ok, N failed, N offline, N denied` (and `, N skipped` when some were).
pub fn summary_line(s: &FanoutSummary) -> String {
    let mut line = format!(
        "{} ok, {} failed, {} offline, {} denied",
        s.ok, s.failed, s.offline, s.denied
    );
    if s.skipped > 0 {
        line.push_str(&format!(", {} skipped", s.skipped));
    }
    line
}

/// One node's block: `== node: ok`, `== node: error (code)`, `== node: offline
/// (node_offline)`..., then its text, each line escaped.
pub fn print_block(o: &NodeOutcome) {
    let (head, text) = block(o);
    println!("{head}");
    for line in text.lines() {
        println!("{}", safe(line));
    }
}

/// The head line and the text of one node's block.
pub fn block(o: &NodeOutcome) -> (String, String) {
    let node = safe(&o.node);
    let result: Option<ToolResult> = o
        .result
        .as_ref()
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    let text = match (&result, &o.error) {
        (Some(r), _) => r.joined_text(),
        (None, Some(e)) => e.message.clone(),
        (None, None) => String::new(),
    };
    let exit_code = o
        .result
        .as_ref()
        .and_then(|r| r.get("structuredContent"))
        .and_then(|sc| sc.get("exitCode"))
        .and_then(serde_json::Value::as_i64)
        .filter(|c| *c != 0);
    let code = match (&o.error, exit_code) {
        (Some(e), _) => e.code.as_str().to_owned(),
        (None, Some(c)) => format!("exit {c}"),
        (None, None) => "tool_error".to_owned(),
    };
    let head = match o.status {
        NodeStatus::Ok => format!("== {node}: ok"),
        NodeStatus::Failed => format!("== {node}: error ({code})"),
        NodeStatus::Offline => format!("== {node}: offline ({code})"),
        NodeStatus::Denied => format!("== {node}: denied ({code})"),
        NodeStatus::Skipped => format!("== {node}: skipped"),
    };
    (head, text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn fanout_wait_offline_parses_units_and_bounds() {
        assert_eq!(parse_wait("30s").ok(), Some(30_000));
        assert_eq!(parse_wait("90").ok(), Some(90_000));
        assert_eq!(parse_wait("5m").ok(), Some(300_000));
        assert_eq!(parse_wait("1h").ok(), Some(3_600_000));
        assert_eq!(parse_wait("250ms").ok(), Some(250));
        for bad in ["", "2h", "x", "5 minutes", "-1s", "99999999999999999999h"] {
            assert!(parse_wait(bad).is_err(), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn batches_parse() {
        assert_eq!(parse_batch("3").unwrap(), Batch::Count(3));
        assert_eq!(parse_batch("10%").unwrap(), Batch::Percent(10));
        assert!(parse_batch("0").is_err());
        assert!(parse_batch("0%").is_err());
        assert!(parse_batch("101%").is_err());
        assert!(parse_batch("x").is_err());
        assert!(parse_batch("-1").is_err());
    }

    #[test]
    fn summary_mentions_skipped_only_when_some() {
        let mut s = FanoutSummary::default();
        s.add(NodeStatus::Ok);
        assert_eq!(summary_line(&s), "1 ok, 0 failed, 0 offline, 0 denied");
        s.add(NodeStatus::Skipped);
        assert!(summary_line(&s).ends_with(", 1 skipped"));
    }
}
