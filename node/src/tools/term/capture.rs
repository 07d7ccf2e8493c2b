//! The term_capture tool: the text of a tmux pane (`tmux capture-pane -p`), read-only.
//!
//! Arguments: `target` (the pane, see [`super::Target`]), `lines` (scrollback lines
//! above the visible pane to include, default 0, at most [`MAX_LINES`]), `escapes`
//! (keep colour and attribute escape sequences, default false: plain text), `socket`
//! (the tmux server's name, see [`super`]). Wrapped lines are joined (`-J`), trailing
//! spaces and blank lines at the end dropped, and the text kept to its last
//! [`MAX_CAPTURE_BYTES`] (`truncated` says so).
//!
//! Result: `{target, text, lineCount, truncated}` ([`TermCaptureOutput`]). It reads any
//! pane of the node user's tmux servers: what a Bash call as that user could read too.

use super::{runner, Socket, Target, TmuxError, TmuxRun};
use crate::remote::RemoteHost;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use crate::tools::Host;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The most scrollback lines one capture asks for.
pub const MAX_LINES: u64 = 10_000;
/// The most text one capture returns, in bytes (its end is kept).
pub const MAX_CAPTURE_BYTES: usize = 256 * 1024;

/// The term_capture tool.
#[derive(Default)]
pub struct TermCapture {
    /// The far host whose tmux is read, or `None` for this machine's.
    host: Host,
}

impl TermCapture {
    /// term_capture of the node's own tmux.
    pub fn local() -> Self {
        TermCapture::default()
    }

    /// term_capture of the tmux on the host of an SSH- or container-backed node
    /// ([`super::on_host`]).
    pub fn on(host: Arc<RemoteHost>) -> Self {
        TermCapture { host: Some(host) }
    }
}

/// term_capture's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TermCaptureOutput {
    pub target: String,
    pub text: String,
    /// Lines in `text`.
    pub line_count: usize,
    /// Whether the beginning was cut to keep the text to 256 KiB.
    pub truncated: bool,
}

struct Request {
    target: Target,
    socket: Option<Socket>,
    lines: u64,
    escapes: bool,
}

impl Request {
    fn parse(args: &Value) -> Result<Request, String> {
        let a = Args::new(args, &["target", "lines", "escapes", "socket"])?;
        Ok(Request {
            target: Target::parse(a.required_str("target")?)?,
            socket: a.str("socket")?.map(Socket::parse).transpose()?,
            lines: a.u64_in("lines", 0, MAX_LINES)?.unwrap_or(0),
            escapes: a.bool("escapes")?.unwrap_or(false),
        })
    }
}

async fn capture(runner: &dyn TmuxRun, req: &Request) -> Result<TermCaptureOutput, TmuxError> {
    let start = format!("-{}", req.lines);
    let mut args = vec!["capture-pane", "-p", "-J"];
    if req.escapes {
        args.push("-e");
    }
    args.extend(["-t", req.target.tmux()]);
    if req.lines > 0 {
        args.extend(["-S", start.as_str()]);
    }
    let (raw, cut) = runner.run(req.socket.as_ref(), &args).await?;
    let text = String::from_utf8_lossy(&raw);
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut text = lines.join("\n");
    let mut truncated = cut;
    if text.len() > MAX_CAPTURE_BYTES {
        let mut from = text.len() - MAX_CAPTURE_BYTES;
        while !text.is_char_boundary(from) {
            from += 1;
        }
        text = text.split_off(from);
        truncated = true;
    }
    Ok(TermCaptureOutput {
        target: req.target.as_str().to_owned(),
        line_count: text.lines().count(),
        text,
        truncated,
    })
}

#[async_trait::async_trait]
impl Tool for TermCapture {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "term_capture".to_owned(),
            description: "Read a tmux pane's screen (a terminal an operator may also \
                          watch) as text."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "target": {
                        "type": "string",
                        "minLength": 1,
                        "description": "SESSION[:WINDOW[.PANE]] or %ID."
                    },
                    "lines": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_LINES,
                        "description": "Scrollback lines to add above it."
                    },
                    "escapes": {
                        "type": "boolean",
                        "description": "Keep escape sequences."
                    },
                    "socket": {
                        "type": "string",
                        "description": "tmux -L NAME."
                    }
                },
                "required": ["target"],
                "additionalProperties": false
            }),
            capability: Capability::TerminalControl.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("Read a tmux pane"),
            default_timeout_ms: None,
            requires_bins: vec!["tmux".to_owned()],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let req = match Request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("term_capture: {message}")),
        };
        match capture(runner(&self.host).as_ref(), &req).await {
            Ok(out) => output::with_text(out.text.clone(), &out),
            Err(e) => ToolResult::error(format!("term_capture: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        for bad in [
            json!({}),
            json!({"target": "-t"}),
            json!({"target": "w", "socket": "/tmp/x"}),
            json!({"target": "w", "lines": MAX_LINES + 1}),
            json!({"target": "w", "escapes": "yes"}),
            json!({"target": "w", "S": "x"}),
        ] {
            assert!(Request::parse(&bad).is_err(), "{bad}");
        }
        assert!(Request::parse(&json!({"target": "w:0.1", "lines": 5})).is_ok());
    }
}
