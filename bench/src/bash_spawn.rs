//! `gsv bench bash-spawn`: what the Bash tool adds on top of spawning a shell.
//!
//! The figure is the Bash tool running `true` (in process, through the real session
//! manager: process group, pipes, ring buffers, UTF-8 decoding, session bookkeeping).
//! The baseline is `sh -c true` spawned directly with piped output, in the same run.
//! A second row compares against the tool's own shell (`$SHELL -c true`), which
//! separates gsv's overhead from the choice of shell (bash starts slower than dash).
//! A last row runs the Bash tool with a node journal (as every `gsv node` with a data
//! dir does: the command under its `/bin/sh` supervisor, output to files, a record and
//! a status file) against the tool without one: what crash recovery costs a command.

use super::report::{Report, Row};
use super::stats::summarize;
use super::BenchOptions;
use gsv_node::sessions::SessionManager;
use gsv_node::tools::bash::Bash;
use gsv_node::{EventSender, Tool, ToolContext};
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};

async fn spawn_direct(shell: &str) -> Result<Duration, String> {
    let t = Instant::now();
    let out = tokio::process::Command::new(shell)
        .args(["-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .map_err(|e| format!("spawning {shell}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{shell} -c true failed"));
    }
    Ok(t.elapsed())
}

pub async fn run(opts: &BenchOptions) -> Result<Report, String> {
    let n = if opts.quick { 20 } else { 300 };
    let workspace = std::env::temp_dir();
    let bash = Bash::new(SessionManager::new(EventSender::detached()));
    let journal_dir =
        std::env::temp_dir().join(format!("gsv-bench-journal-{}", std::process::id()));
    let journal = gsv_node::journal::Journal::open(&journal_dir, "bench")
        .map_err(|e| format!("opening a journal: {e}"))?;
    let journaled_sessions = SessionManager::new(EventSender::detached());
    journaled_sessions.attach_journal(journal.sessions_dir().to_owned());
    let journaled = Bash::new(journaled_sessions);
    let shell = gsv_node::probe::user_shell();
    let shell = shell.to_string_lossy().into_owned();
    // Warm up: the login environment capture and the page cache.
    for _ in 0..5 {
        let _ = bash
            .execute(
                json!({"command": "true"}),
                ToolContext::new(&workspace, "warm"),
            )
            .await;
        spawn_direct("sh").await?;
        spawn_direct(&shell).await?;
        let _ = journaled
            .execute(
                json!({"command": "true"}),
                ToolContext::new(&workspace, "warm-j"),
            )
            .await;
    }
    let (mut tool, mut sh, mut own) = (Vec::new(), Vec::new(), Vec::new());
    let mut with_journal = Vec::new();
    // Interleaved so drift in machine load hits all three alike.
    for i in 0..n {
        let t = Instant::now();
        let r = bash
            .execute(
                json!({"command": "true"}),
                ToolContext::new(&workspace, format!("b{i}")),
            )
            .await;
        tool.push(t.elapsed());
        if r.is_error {
            return Err(format!("Bash tool failed: {}", r.joined_text()));
        }
        sh.push(spawn_direct("sh").await?);
        own.push(spawn_direct(&shell).await?);
        let t = Instant::now();
        let r = journaled
            .execute(
                json!({"command": "true"}),
                ToolContext::new(&workspace, format!("j{i}")),
            )
            .await;
        with_journal.push(t.elapsed());
        if r.is_error {
            return Err(format!("Bash tool (journal) failed: {}", r.joined_text()));
        }
    }
    let _ = std::fs::remove_dir_all(&journal_dir);
    let (tool, sh, own) = (summarize(&tool), summarize(&sh), summarize(&own));
    let with_journal = summarize(&with_journal);
    let rows = vec![
        Row::at_most(
            "Bash tool `true`, p50",
            tool.p50_us,
            "`sh -c true` spawned directly, p50",
            sh.p50_us,
            "µs",
            1.2,
        ),
        Row::at_most(
            "Bash tool `true`, p50",
            tool.p50_us,
            format!("`{shell} -c true` spawned directly, p50"),
            own.p50_us,
            "µs",
            1.2,
        ),
        Row::at_most(
            "Bash tool `true`, p99",
            tool.p99_us,
            format!("`{shell} -c true` spawned directly, p99"),
            own.p99_us,
            "µs",
            2.0,
        ),
        Row::at_most(
            "Bash tool `true` with a journal, p50",
            with_journal.p50_us,
            "Bash tool `true` without, p50",
            tool.p50_us,
            "µs",
            2.0,
        ),
    ];
    Ok(Report::new(
        "bash-spawn",
        format!("{n} sequential runs of each, interleaved; tool shell: {shell}"),
        rows,
    ))
}
