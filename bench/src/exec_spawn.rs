//! `gsv bench exec-spawn`: what the exec tool adds on top of spawning a program.
//!
//! The figure is the exec tool running `/bin/true` (in process, through the real
//! session manager: argv resolution and canonicalisation, process group, pipes, ring
//! buffers, session bookkeeping). The baseline is `/bin/true` spawned directly with
//! piped output, in the same run, interleaved. Target: at most 1.1× at p50.
//!
//! A third row runs the same exec tool with a node journal (the sessions' records
//! written to a temporary directory, as every `gsv node` with a data dir does) against
//! the tool without one: what crash recovery costs an exec call.
//!
//! Both are measured from a task on the runtime's workers, as a node runs each call
//! (its dispatcher spawns one task per call): measured from the thread that blocks
//! on the runtime instead, every task the session starts would run on another thread
//! and hand its result back across threads, a cost no node call pays.

use super::report::{Report, Row};
use super::stats::summarize;
use super::BenchOptions;
use gsv_node::sessions::SessionManager;
use gsv_node::tools::exec::Exec;
use gsv_node::{EventSender, Tool, ToolContext};
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};

const PROGRAM: &str = "/bin/true";

async fn spawn_direct() -> Result<Duration, String> {
    let t = Instant::now();
    let out = tokio::process::Command::new(PROGRAM)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .map_err(|e| format!("spawning {PROGRAM}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{PROGRAM} failed"));
    }
    Ok(t.elapsed())
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let n = if opts.quick { 20 } else { 300 };
    tokio::spawn(measure(n))
        .await
        .map_err(|e| format!("the measuring task failed: {e}"))?
}

async fn measure(n: usize) -> Result<Report, String> {
    let workspace = std::env::temp_dir();
    let exec = Exec::new(SessionManager::new(EventSender::detached()));
    let journal_dir =
        std::env::temp_dir().join(format!("gsv-bench-journal-{}", std::process::id()));
    let journal = gsv_node::journal::Journal::open(&journal_dir, "bench")
        .map_err(|e| format!("opening a journal: {e}"))?;
    let journaled_sessions = SessionManager::new(EventSender::detached());
    journaled_sessions.attach_journal(journal.sessions_dir().to_owned());
    let journaled = Exec::new(journaled_sessions);
    // Warm up: the login environment capture and the page cache.
    for _ in 0..5 {
        let _ = exec
            .execute(
                json!({"argv": [PROGRAM]}),
                ToolContext::new(&workspace, "warm"),
            )
            .await;
        spawn_direct().await?;
        let _ = journaled
            .execute(
                json!({"argv": [PROGRAM]}),
                ToolContext::new(&workspace, "warm-j"),
            )
            .await;
    }
    let (mut tool, mut direct, mut with_journal) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let t = Instant::now();
        let r = exec
            .execute(
                json!({"argv": [PROGRAM]}),
                ToolContext::new(&workspace, format!("e{i}")),
            )
            .await;
        tool.push(t.elapsed());
        if r.is_error {
            return Err(format!("exec tool failed: {}", r.joined_text()));
        }
        direct.push(spawn_direct().await?);
        let t = Instant::now();
        let r = journaled
            .execute(
                json!({"argv": [PROGRAM]}),
                ToolContext::new(&workspace, format!("j{i}")),
            )
            .await;
        with_journal.push(t.elapsed());
        if r.is_error {
            return Err(format!("exec tool (journal) failed: {}", r.joined_text()));
        }
    }
    let _ = std::fs::remove_dir_all(&journal_dir);
    let (tool, direct, with_journal) = (
        summarize(&tool),
        summarize(&direct),
        summarize(&with_journal),
    );
    let rows = vec![
        Row::at_most(
            format!("exec tool `{PROGRAM}`, p50"),
            tool.p50_us,
            format!("`{PROGRAM}` spawned directly, p50"),
            direct.p50_us,
            "µs",
            1.1,
        ),
        Row::at_most(
            format!("exec tool `{PROGRAM}`, p99"),
            tool.p99_us,
            format!("`{PROGRAM}` spawned directly, p99"),
            direct.p99_us,
            "µs",
            2.0,
        ),
        Row::at_most(
            format!("exec tool `{PROGRAM}` with a journal, p50"),
            with_journal.p50_us,
            format!("exec tool `{PROGRAM}` without, p50"),
            tool.p50_us,
            "µs",
            1.3,
        ),
    ];
    Ok(Report::new(
        "exec-spawn",
        format!("{n} sequential runs of each, interleaved"),
        rows,
    ))
}
