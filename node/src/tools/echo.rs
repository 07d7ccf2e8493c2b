//! The Echo tool: returns its text, optionally after a delay.
//!
//! It touches nothing on the host, which makes it the yardstick for routing latency in
//! benchmarks and the probe for cancellation, deadlines and mid-call disconnects in
//! tests. Registered only when the node is started with the echo tool enabled.
//!
//! It is also the test hook of the approval posture ([`crate::guards::posture`]): with
//! `gsv node --echo-needs-approval` (hidden) it declares `requiresApproval`, so the
//! end-to-end tests can show a call waiting for an operator without a tool that
//! changes anything, and a dry-run plan (what it would answer) in the request.

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::time::Duration;

/// Longest `delayMs` accepted (10 minutes).
pub const MAX_DELAY_MS: u64 = 600_000;

/// The Echo tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo {
    requires_approval: bool,
}

impl Echo {
    /// Echo, declaring `requiresApproval` when `requires_approval` (a test hook).
    pub fn new(requires_approval: bool) -> Self {
        Echo { requires_approval }
    }
}

/// Echo's structured content: `{text}`, the text it was given.
#[derive(Debug, Serialize)]
pub struct EchoOutput<'a> {
    pub text: &'a str,
}

#[async_trait::async_trait]
impl Tool for Echo {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Echo".to_owned(),
            description: "Return `text` unchanged (after `delayMs`). Touches nothing; for \
                          tests."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Returned as is."},
                    "delayMs": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_DELAY_MS,
                        "description": "Milliseconds to wait first."
                    }
                },
                "required": ["text"],
                "additionalProperties": false
            }),
            capability: Capability::DiagnosticsEcho.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("Echo"),
            default_timeout_ms: None,
            requires_bins: Vec::new(),
            requires_approval: self.requires_approval,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let (text, delay_ms) = match parse(&args) {
            Ok(parsed) => parsed,
            Err(message) => return ToolResult::error(format!("Echo: {message}")),
        };
        if delay_ms > 0 {
            tokio::select! {
                _ = ctx.cancel.cancelled() => return ToolResult::error("Echo: cancelled"),
                _ = tokio::time::sleep(Duration::from_millis(delay_ms)) => {}
            }
        }
        output::with_text(text.clone(), &EchoOutput { text: &text })
    }

    /// In its approval-posture test mode, the plan an operator sees: what it would
    /// answer (so the tests can follow a plan from a tool to `gsv approvals list`).
    async fn plan(&self, args: &Value, _ctx: &ToolContext) -> Option<String> {
        if !self.requires_approval {
            return None;
        }
        let (text, _) = parse(args).ok()?;
        Some(format!(
            "would answer {} characters:\n{text}",
            text.chars().count()
        ))
    }

    /// Without `delayMs` it answers at once; with it, it pauses on its timer and the
    /// dispatcher moves it to a task of its own.
    fn instant(&self) -> bool {
        true
    }
}

fn parse(args: &Value) -> Result<(String, u64), String> {
    let args = Args::new(args, &["text", "delayMs"])?;
    let text = match args.str("text")? {
        Some(text) => text.to_owned(),
        None => return Err("missing required argument \"text\"".to_owned()),
    };
    let delay_ms = args.u64_in("delayMs", 0, MAX_DELAY_MS)?.unwrap_or(0);
    Ok((text, delay_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echoes_text() {
        let r = Echo::default()
            .execute(json!({"text": "héllo"}), ToolContext::new("/", "1"))
            .await;
        assert!(!r.is_error);
        assert_eq!(r.joined_text(), "héllo");
        assert_eq!(r.structured_content, Some(json!({"text": "héllo"})));
        // The empty string is a valid text.
        let r = Echo::default()
            .execute(json!({"text": ""}), ToolContext::new("/", "1"))
            .await;
        assert!(!r.is_error);
    }

    #[tokio::test]
    async fn bad_args_are_tool_errors() {
        for args in [
            json!({}),
            json!({"text": 1}),
            json!({"text": "a", "delayMs": -1}),
            json!({"text": "a", "delayMs": MAX_DELAY_MS + 1}),
            json!({"text": "a", "other": 1}),
            json!("text"),
        ] {
            let r = Echo::default()
                .execute(args.clone(), ToolContext::new("/", "1"))
                .await;
            assert!(r.is_error, "{args}");
            assert!(r.joined_text().starts_with("Echo: "), "{}", r.joined_text());
        }
    }

    #[tokio::test]
    async fn delay_waits_and_is_cancellable() {
        let start = tokio::time::Instant::now();
        let r = Echo::default()
            .execute(
                json!({"text": "a", "delayMs": 50}),
                ToolContext::new("/", "1"),
            )
            .await;
        assert!(!r.is_error);
        assert!(start.elapsed() >= Duration::from_millis(50));

        let ctx = ToolContext::new("/", "2");
        let cancel = ctx.cancel.clone();
        let call = tokio::spawn(async move {
            Echo::default()
                .execute(json!({"text": "a", "delayMs": MAX_DELAY_MS}), ctx)
                .await
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        cancel.cancel();
        let r = call.await.unwrap();
        assert!(r.is_error);
        assert!(r.joined_text().contains("cancelled"));
    }
}
