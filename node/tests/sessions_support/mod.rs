//! Helpers shared by the Bash / Process / session-manager tests: a workspace, the
//! tools around one manager, calls, and checks on processes.

#![allow(dead_code)]

use gsv_node::sessions::{Limits, SessionManager};
use gsv_node::tools::bash::Bash;
use gsv_node::tools::process::Process;
use gsv_node::{EventSender, Tool, ToolContext};
use gsv_protocol::ToolResult;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A workspace directory and the Bash and Process tools over one manager.
pub struct Node {
    pub dir: tempfile::TempDir,
    pub sessions: Arc<SessionManager>,
    pub bash: Bash,
    pub process: Process,
    pub events: EventSender,
}

impl Node {
    pub fn new() -> Node {
        Node::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Node {
        let events = EventSender::detached();
        let sessions = SessionManager::with_limits(events.clone(), limits);
        Node {
            dir: tempfile::tempdir().unwrap(),
            bash: Bash::new(Arc::clone(&sessions)),
            process: Process::new(Arc::clone(&sessions)),
            sessions,
            events,
        }
    }

    pub fn ctx(&self) -> ToolContext {
        ToolContext::new(self.dir.path(), "test-call")
    }

    /// Runs Bash with `args`.
    pub async fn bash(&self, args: Value) -> ToolResult {
        self.bash.execute(args, self.ctx()).await
    }

    /// Runs Bash and returns its structured result, failing on a tool error.
    pub async fn bash_ok(&self, args: Value) -> Value {
        let r = self.bash(args.clone()).await;
        assert!(!r.is_error, "{args}: {}", r.joined_text());
        r.structured_content
            .expect("Bash returns structured content")
    }

    /// Runs Process with `args`.
    pub async fn process(&self, args: Value) -> ToolResult {
        self.process.execute(args, self.ctx()).await
    }

    pub async fn process_ok(&self, args: Value) -> Value {
        let r = self.process(args.clone()).await;
        assert!(!r.is_error, "{args}: {}", r.joined_text());
        r.structured_content
            .expect("Process returns structured content")
    }

    /// The error text of a Process call that must fail.
    pub async fn process_err(&self, args: Value) -> String {
        let r = self.process(args.clone()).await;
        assert!(r.is_error, "{args} should fail: {}", r.joined_text());
        r.joined_text()
    }

    /// Starts a background command and returns its session id.
    pub async fn start(&self, command: &str) -> String {
        let v = self
            .bash_ok(json!({"command": command, "background": true}))
            .await;
        assert_eq!(v["status"], "running", "{v}");
        v["sessionId"].as_str().unwrap().to_owned()
    }

    /// Polls until the session has finished (10 s at most) and returns the poll.
    pub async fn wait_done(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self
                .process_ok(json!({"action": "poll", "sessionId": id, "waitMs": 2000}))
                .await;
            if v["status"] != "running" {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "session {id} did not finish: {v}"
            );
        }
    }

    /// Polls until the tail satisfies `pred` (10 s at most).
    pub async fn wait_tail(&self, id: &str, pred: impl Fn(&str) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self
                .process_ok(json!({"action": "poll", "sessionId": id, "waitMs": 1000}))
                .await;
            if pred(v["tail"].as_str().unwrap_or_default()) {
                return v;
            }
            assert!(Instant::now() < deadline, "tail never matched: {v}");
        }
    }
}

/// Whether process `pid` is gone (no such process, or a zombie waiting to be reaped).
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Waits (5 s at most) until every pid in `pids` is gone.
pub async fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids.iter().all(|&p| gone(p)) {
        assert!(
            Instant::now() < deadline,
            "still alive: {:?}",
            pids.iter().filter(|&&p| !gone(p)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The numbers that make up whole lines of `text`.
pub fn pids_in(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .collect()
}

pub fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
}
