//! The term_send tool: type into a tmux pane (`tmux send-keys`), like an operator at
//! the keyboard.
//!
//! Arguments: `target` (the pane, see [`super::Target`]), `text` (typed literally,
//! `send-keys -l`; newlines and tabs allowed, other control characters refused: name
//! them in `keys`), `keys` (tmux key names pressed in order, from [`KEYS`] and `C-a` …
//! `C-z`), `enter` (press Enter last), `socket` (the tmux server's name, see
//! [`super`]). At least one of them must send something; the order is text, keys,
//! Enter.
//!
//! **Its posture is Bash's**: no approval by default, not read-only, and under the
//! node's shell guard ([`crate::guards::ShellGuard`]) like Process input:
//!
//! - `text` passes the shell blocklist (`denied`, approved or not);
//! - in approve-shell mode (`--approve-shell`, or `--approve-exec`, which implies it)
//!   *every* call needs an operator's approval, even text an auto-approve pattern
//!   matches: a pane's line may already hold what the operator or an earlier call
//!   typed, so the node cannot know the command Enter will run.
//!
//! Result: `{target, sent}` ([`TermSendOutput`]); term_capture shows the effect.

use super::{runner, Socket, Target, TmuxError, TmuxRun};
use crate::guards::{ask_operator, ShellGuard};
use crate::remote::RemoteHost;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use crate::tools::Host;
use gsv_protocol::{Capability, ErrorShape, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The longest `text`, in bytes.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;
/// The most keys in one call.
pub const MAX_KEYS: usize = 64;

/// Key names accepted besides `C-a` … `C-z`, with the name tmux knows them by.
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "Enter"),
    ("Tab", "Tab"),
    ("Escape", "Escape"),
    ("Esc", "Escape"),
    ("Up", "Up"),
    ("Down", "Down"),
    ("Left", "Left"),
    ("Right", "Right"),
    ("Home", "Home"),
    ("End", "End"),
    ("PageUp", "PageUp"),
    ("PageDown", "PageDown"),
    ("Backspace", "BSpace"),
    ("BSpace", "BSpace"),
    ("Delete", "DC"),
    ("Space", "Space"),
    ("F1", "F1"),
    ("F2", "F2"),
    ("F3", "F3"),
    ("F4", "F4"),
    ("F5", "F5"),
    ("F6", "F6"),
    ("F7", "F7"),
    ("F8", "F8"),
    ("F9", "F9"),
    ("F10", "F10"),
    ("F11", "F11"),
    ("F12", "F12"),
];

/// The term_send tool.
pub struct TermSend {
    guard: ShellGuard,
    /// The far host whose tmux is typed into, or `None` for this machine's.
    host: Host,
}

impl TermSend {
    /// term_send under the node's shell guard.
    pub fn with_guard(guard: ShellGuard) -> Self {
        TermSend { guard, host: None }
    }

    /// term_send under `guard`, into the tmux on the host of an SSH- or
    /// container-backed node ([`super::on_host`]).
    pub fn on(host: Arc<RemoteHost>, guard: ShellGuard) -> Self {
        TermSend {
            guard,
            host: Some(host),
        }
    }
}

/// term_send's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TermSendOutput {
    pub target: String,
    /// What was sent, in order: `text:…`, then key names (tmux's), then `Enter`.
    pub sent: Vec<String>,
}

struct Request {
    target: Target,
    socket: Option<Socket>,
    text: Option<String>,
    keys: Vec<&'static str>,
    enter: bool,
}

/// tmux's name for the key `name`, if it is one term_send accepts.
fn tmux_key(name: &str) -> Option<&'static str> {
    if let Some(letter) = name.strip_prefix("C-") {
        let mut chars = letter.chars();
        return match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => CONTROL
                .iter()
                .copied()
                .find(|k| k.as_bytes()[2] == c.to_ascii_lowercase() as u8),
            _ => None,
        };
    }
    KEYS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

const CONTROL: &[&str] = &[
    "C-a", "C-b", "C-c", "C-d", "C-e", "C-f", "C-g", "C-h", "C-i", "C-j", "C-k", "C-l", "C-m",
    "C-n", "C-o", "C-p", "C-q", "C-r", "C-s", "C-t", "C-u", "C-v", "C-w", "C-x", "C-y", "C-z",
];

/// Every key name term_send accepts as one pattern, for the schema: shorter in a
/// listing than the names one by one (`C-a` … `C-Z`, then [`KEYS`]).
fn key_pattern() -> String {
    let named: Vec<&str> = KEYS.iter().map(|(n, _)| *n).collect();
    format!("^(C-[a-zA-Z]|{})$", named.join("|"))
}

impl Request {
    fn parse(args: &Value) -> Result<Request, String> {
        let a = Args::new(args, &["target", "text", "keys", "enter", "socket"])?;
        let text = a.str("text")?.filter(|t| !t.is_empty());
        if let Some(t) = text {
            if t.len() > MAX_TEXT_BYTES {
                return Err(format!("\"text\" is longer than {MAX_TEXT_BYTES} bytes"));
            }
            if let Some(c) = t
                .chars()
                .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
            {
                return Err(format!(
                    "\"text\" holds the control character {c:?}; send control keys by name in \"keys\""
                ));
            }
        }
        let keys = match args.get("keys") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                if items.len() > MAX_KEYS {
                    return Err(format!("\"keys\" holds more than {MAX_KEYS} keys"));
                }
                items
                    .iter()
                    .map(|k| {
                        k.as_str().and_then(tmux_key).ok_or_else(|| {
                            format!(
                                "\"keys\" must hold key names (C-a..C-z, {}), got {}",
                                KEYS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
                                k.to_string().chars().take(40).collect::<String>()
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
            Some(_) => return Err("\"keys\" must be an array of key names".into()),
        };
        let enter = a.bool("enter")?.unwrap_or(false);
        if text.is_none() && keys.is_empty() && !enter {
            return Err("nothing to send: give \"text\", \"keys\" or \"enter\": true".into());
        }
        Ok(Request {
            target: Target::parse(a.required_str("target")?)?,
            socket: a.str("socket")?.map(Socket::parse).transpose()?,
            text: text.map(str::to_owned),
            keys,
            enter,
        })
    }
}

/// `text` as one tmux argument that tmux passes on unchanged: an argument ending in
/// `;` ends a tmux command (even after `--`) unless the `;` is escaped as `\;`.
fn tmux_literal(text: &str) -> String {
    match text.strip_suffix(';') {
        Some(head) => format!("{head}\\;"),
        None => text.to_owned(),
    }
}

async fn send(runner: &dyn TmuxRun, req: &Request) -> Result<TermSendOutput, TmuxError> {
    let target = req.target.tmux();
    let socket = req.socket.as_ref();
    let mut sent = Vec::new();
    if let Some(text) = &req.text {
        let literal = tmux_literal(text);
        runner
            .run(socket, &["send-keys", "-l", "-t", target, "--", &literal])
            .await?;
        sent.push(format!("text:{text}"));
    }
    let mut keys = req.keys.clone();
    if req.enter {
        keys.push("Enter");
    }
    if !keys.is_empty() {
        let mut args = vec!["send-keys", "-t", target, "--"];
        args.extend(keys.iter().copied());
        runner.run(socket, &args).await?;
        sent.extend(keys.iter().map(|k| (*k).to_owned()));
    }
    tracing::info!(
        target,
        items = sent.len(),
        "term_send typed into a tmux pane"
    );
    Ok(TermSendOutput {
        target: req.target.as_str().to_owned(),
        sent,
    })
}

#[async_trait::async_trait]
impl Tool for TermSend {
    /// What is typed into a pane is a command like any other (see the module doc).
    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), ErrorShape> {
        let approval = ctx.approval.as_deref();
        if let Some(text) = args.get("text").and_then(Value::as_str) {
            self.guard
                .check(text.trim_end_matches(['\n', '\r']), approval)?;
        }
        if !self.guard.auto_approves(approval) {
            return Ok(());
        }
        let target = args.get("target").and_then(Value::as_str).unwrap_or("?");
        let text = args.get("text").and_then(Value::as_str).unwrap_or("");
        let keys: Vec<&str> = args
            .get("keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let enter = args.get("enter") == Some(&Value::Bool(true));
        let reason = "the node runs in approve-shell mode and input typed into a tmux pane is \
                      never auto-approved (the pane's line may already hold other input)";
        Err(ask_operator(
            "input",
            reason,
            &format!(
                "term_send {target}: {text:?} keys [{}]{}",
                keys.join(" "),
                if enter { " + Enter" } else { "" }
            ),
        ))
    }

    fn def(&self) -> ToolDef {
        ToolDef {
            name: "term_send".to_owned(),
            description: "Type into a tmux pane (a terminal an operator may also watch): \
                          `text`, then `keys`, then Enter if `enter`."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "target": {
                        "type": "string",
                        "minLength": 1,
                        "description": "SESSION[:WINDOW[.PANE]] or %ID."
                    },
                    "text": {
                        "type": "string",
                        "maxLength": MAX_TEXT_BYTES,
                        "description": "Typed literally; control keys go in keys."
                    },
                    "keys": {
                        "type": "array",
                        "items": {"type": "string", "pattern": key_pattern()},
                        "maxItems": MAX_KEYS,
                        "description": "Key names, e.g. C-c, Up."
                    },
                    "enter": {
                        "type": "boolean",
                        "description": "Press Enter last."
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
            annotations: ToolAnnotations::hints("Type into a tmux pane", false, true, false, false),
            default_timeout_ms: None,
            requires_bins: vec!["tmux".to_owned()],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let req = match Request::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("term_send: {message}")),
        };
        match send(runner(&self.host).as_ref(), &req).await {
            Ok(out) => output::structured(&out),
            Err(e) => ToolResult::error(format!("term_send: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::ErrorCode;

    #[test]
    fn arguments_are_checked() {
        for (bad, why) in [
            (json!({"target": "w"}), "nothing to send"),
            (
                json!({"target": "w", "text": "a\u{1b}[A"}),
                "control character",
            ),
            (
                json!({"target": "w", "keys": ["Enter; kill-server"]}),
                "key names",
            ),
            (json!({"target": "w", "keys": "Enter"}), "array"),
            (json!({"target": "w", "keys": ["C-1"]}), "key names"),
            (json!({"target": "-w", "enter": true}), "tmux pane"),
            (
                json!({"target": "w", "enter": true, "socket": "/tmp/s"}),
                "no paths",
            ),
            (
                json!({"target": "w", "text": "x".repeat(MAX_TEXT_BYTES + 1)}),
                "longer",
            ),
        ] {
            let e = Request::parse(&bad).err().unwrap();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let r =
            Request::parse(&json!({"target": "w:0", "keys": ["C-C", "Backspace"], "enter": true}))
                .unwrap();
        assert_eq!(r.keys, ["C-c", "BSpace"]);
    }

    #[test]
    fn the_schema_pattern_takes_exactly_the_keys_parse_takes() {
        let pattern = regex::Regex::new(&key_pattern()).expect("pattern");
        let named = KEYS.iter().map(|(n, _)| (*n).to_owned());
        let control = (b'a'..=b'z').flat_map(|c| {
            let c = c as char;
            [format!("C-{c}"), format!("C-{}", c.to_ascii_uppercase())]
        });
        for name in named.chain(control) {
            assert!(pattern.is_match(&name), "{name}");
            assert!(tmux_key(&name).is_some(), "{name}");
        }
        for bad in [
            "C-",
            "C-1",
            "C-cc",
            "enter",
            "F13",
            "",
            "xEnter",
            "Enter; kill-server",
        ] {
            assert!(!pattern.is_match(bad), "{bad}");
            assert!(tmux_key(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn trailing_semicolons_are_escaped_for_tmux() {
        assert_eq!(tmux_literal("ls;"), "ls\\;");
        assert_eq!(tmux_literal(";"), "\\;");
        assert_eq!(tmux_literal("a\\;"), "a\\\\;");
        assert_eq!(tmux_literal("a; b"), "a; b");
    }

    #[tokio::test]
    async fn input_is_guarded_like_bash() {
        let ctx = ToolContext::new("/", "1");
        let plain = TermSend::with_guard(ShellGuard::new());
        let e = plain
            .check(
                &json!({"target": "w", "text": "rm -rf /", "enter": true}),
                &ctx,
            )
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Denied);
        // A later line of the text is a command too.
        let e = plain
            .check(&json!({"target": "w", "text": "echo hi\nreboot\n"}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Denied);
        assert!(plain
            .check(&json!({"target": "w", "keys": ["C-c"]}), &ctx)
            .await
            .is_ok());
        let strict =
            TermSend::with_guard(ShellGuard::with_approve_shell(&["echo .*".into()]).unwrap());
        for args in [
            json!({"target": "w", "text": "echo hi", "enter": true}),
            json!({"target": "w", "keys": ["C-c"]}),
            json!({"target": "w", "enter": true}),
        ] {
            let e = strict.check(&args, &ctx).await.unwrap_err();
            assert_eq!(e.code, ErrorCode::ApprovalRequired, "{args}");
        }
        let mut approved = ctx.clone();
        approved.approval = Some("req-1".into());
        assert!(strict
            .check(
                &json!({"target": "w", "text": "touch x", "enter": true}),
                &approved
            )
            .await
            .is_ok());
    }
}
