//! What an operator is shown of a call that waits for approval.
//!
//! The operator decides on this text alone (`gsv approvals list`, `approval.requested`,
//! an MCP elicitation question), so it must show every argument that changes what runs
//! — not only a Bash `command` but its `workdir`, `background`, `pty`, `timeout` — and
//! nothing may be cut so that a dangerous tail hides behind a harmless head. Long values
//! are shortened with a count of what was left out, never silently. Control and bidi
//! characters in a tool call's arguments are left as they are here (the JSON carries
//! them escaped); every place that shows the summary to a person escapes them with the
//! one display rule (`gsv_protocol::display`: the CLI, the console, the webhook).
//! Agent-given values inside a sentence the gateway writes ([`quoted`]) are escaped
//! here already.

use serde_json::Value;

/// How many characters of the main text (Bash `command`) are shown before the rest is
/// replaced by a count.
const MAIN_CHARS: usize = 2_000;
/// How many characters of any other string argument are shown.
const VALUE_CHARS: usize = 200;

/// `laptop__Bash: rm -r build/  [background=true workdir="/srv"]`; other tools show
/// their arguments as JSON: `laptop__Write: {"content":"...","path":"a.txt"}`.
pub fn summary_of(name: &str, args: &Value) -> String {
    let Some(obj) = args.as_object() else {
        return format!("{name}: {}", shorten_json(args));
    };
    match obj.get("command").and_then(Value::as_str) {
        Some(cmd) => {
            let mut s = format!("{name}: {}", shorten(cmd, MAIN_CHARS));
            let rest: Vec<String> = obj
                .iter()
                .filter(|(k, _)| k.as_str() != "command")
                .map(|(k, v)| format!("{k}={}", shorten_json(v)))
                .collect();
            if !rest.is_empty() {
                s.push_str("  [");
                s.push_str(&rest.join(" "));
                s.push(']');
            }
            s
        }
        None => format!("{name}: {}", shorten_json(args)),
    }
}

/// `text`, or its first `max` characters and how many more there were.
fn shorten(text: &str, max: usize) -> String {
    gsv_protocol::display::cut(text, max).into_owned()
}

/// Most characters of one agent- or node-given value inside a sentence the gateway
/// writes (a copy's source or destination).
pub const QUOTED_CHARS: usize = 300;

/// An agent- or node-given value inside a sentence the gateway writes: in quotes, cut
/// to [`QUOTED_CHARS`] with the visible count, hidden characters and quotes escaped.
/// Escaped here and not only where it is shown: a sentence mixes the gateway's text
/// with the agent's, and a bidi override in the agent's part must not be able to
/// reorder the gateway's part after it on a surface that draws it raw.
pub fn quoted(text: &str) -> String {
    use gsv_protocol::display::{cut, safe};
    let cut = cut(text, QUOTED_CHARS);
    let plain = cut.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{}\"", safe(&plain))
}

/// A value as compact JSON, each string in it shortened to [`VALUE_CHARS`].
fn shorten_json(v: &Value) -> String {
    fn walk(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(shorten(s, VALUE_CHARS)),
            Value::Array(a) => Value::Array(a.iter().map(walk).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), walk(v))).collect())
            }
            other => other.clone(),
        }
    }
    walk(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bash_shows_every_argument_that_changes_what_runs() {
        let s = summary_of(
            "lab__Bash",
            &json!({"command": "git log", "workdir": "/etc", "background": true, "pty": true, "timeout": 5}),
        );
        assert!(s.starts_with("lab__Bash: git log  ["), "{s}");
        for part in [
            "workdir=\"/etc\"",
            "background=true",
            "pty=true",
            "timeout=5",
        ] {
            assert!(s.contains(part), "{part} missing from {s}");
        }
        assert_eq!(
            summary_of("lab__Bash", &json!({"command": "ls"})),
            "lab__Bash: ls"
        );
    }

    #[test]
    fn a_long_command_hides_nothing_silently() {
        let cmd = format!("echo tidy-up; {}; rm -rf ~", " ".repeat(3_000));
        let s = summary_of("lab__Bash", &json!({"command": cmd, "workdir": "/"}));
        assert!(s.contains("more characters)"), "{s}");
        assert!(
            s.contains("workdir=\"/\""),
            "options survive a long command: {s}"
        );
    }

    #[test]
    fn a_quoted_value_cannot_reorder_or_end_the_gateways_sentence() {
        let q = quoted("a\u{202E}b\"c\\d");
        assert_eq!(q, "\"a\\u{202e}b\\\"c\\\\d\"");
        assert!(!q.contains('\u{202E}'));
        let long = quoted(&"x".repeat(QUOTED_CHARS + 5));
        assert!(long.ends_with("…(+5 more characters)\""), "{long}");
    }

    #[test]
    fn other_tools_show_all_arguments_as_json() {
        let s = summary_of(
            "lab__Write",
            &json!({"path": "a", "content": "x".repeat(500)}),
        );
        assert!(s.contains("\"path\":\"a\""), "{s}");
        assert!(s.contains("(+300 more characters)"), "{s}");
    }
}
