//! What a waiting call's paths name on its node, shown on the operator's question and
//! then used by the call.
//!
//! An agent's `docs/notes.txt` may be a symlink it planted to somewhere else; an
//! operator who reads only the agent's text approves the wrong file. So before a call
//! whose tool reads, writes or runs in a path (`path`, `workdir`) is put to an
//! operator, the node is asked (`paths.resolve`) what each names — the workspace
//! applied, every symlink of the part that exists resolved, `..` collapsed, whether
//! something stands there — and the answer is the question's `plan`. Once approved,
//! the call is sent with each such argument replaced by the absolute path the operator
//! read, so a symlink swapped while the operator decides cannot redirect it. Where the
//! node cannot tell (it works on another host, is older, or does not answer in time)
//! the question says so and the call goes as it was asked.

use crate::registry::NodeHandle;
use crate::state::Shared;
use crate::summary::quoted;
use gsv_protocol::resolve::Resolved;
use gsv_protocol::tool_class::{ToolClass, ToolClasses};
use serde_json::Value;
use std::time::Duration;

/// The arguments that name a path the tool touches or runs in.
const PATH_ARGS: [&str; 2] = ["path", "workdir"];

/// How long the question waits for the node's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The node's answer for the question, and the arguments the approved call is sent
/// with (`None`: as asked).
pub(super) struct Resolution {
    pub plan: String,
    pub args: Option<Value>,
}

/// Asks `node` what the path arguments of a call of a tool of `classes` name.
/// `None`: the call has none (or the tool touches no files).
pub(super) async fn for_question(
    node: &NodeHandle,
    classes: ToolClasses,
    args: &Value,
) -> Option<Resolution> {
    let files = [ToolClass::Read, ToolClass::Write, ToolClass::Run];
    if !files.iter().any(|c| classes.contains(*c)) {
        return None;
    }
    let obj = args.as_object()?;
    let asked: Vec<(&str, &str)> = PATH_ARGS
        .iter()
        .filter_map(|k| obj.get(*k).and_then(Value::as_str).map(|v| (*k, v)))
        .collect();
    if asked.is_empty() {
        return None;
    }
    let paths = asked.iter().map(|(_, v)| (*v).to_owned()).collect();
    let answer = node.resolve_paths(paths, ANSWER_TIMEOUT).await;
    let found = match answer {
        Ok(found) => found,
        Err(why) => {
            tracing::warn!(node_id = %node.id, error = %why, "paths.resolve failed");
            return Some(Resolution {
                plan: format!(
                    "on the node: not resolved ({}); the call goes with its paths as written",
                    quoted(&why)
                ),
                args: None,
            });
        }
    };
    let mut lines = Vec::with_capacity(found.len());
    let mut rewritten = args.clone();
    let mut changed = false;
    for ((key, _), r) in asked.iter().zip(&found) {
        lines.push(line(key, r));
        if r.resolved && r.error.is_none() && !r.path.is_empty() && r.path != r.asked {
            rewritten[*key] = Value::String(r.path.clone());
            changed = true;
        }
    }
    Some(Resolution {
        plan: lines.join("\n"),
        args: changed.then_some(rewritten),
    })
}

/// The plan a question about `name` (on a node this replica holds) would show,
/// asked of the node now: for a caller's user asked before the call is routed (MCP
/// 2026-07-28's first round), so that the answer holds only for what they read.
pub async fn plan_for(shared: &Shared, name: &str, args: &Value) -> Option<String> {
    let name = gsv_protocol::NamespacedName::parse(name).ok()?;
    let node = shared.registry.get(name.node.as_str())?;
    let spec = shared.registry.tool(&node, name.tool.as_str())?;
    for_question(&node, spec.classes, args)
        .await
        .map(|r| r.plan)
}

/// `path "docs/a.txt" is "/srv/real/a.txt" on the node: a file that exists`.
fn line(key: &str, r: &Resolved) -> String {
    if let Some(error) = &r.error {
        return format!(
            "{key} {}: not resolved on the node ({}); the call goes with it as written",
            quoted(&r.asked),
            quoted(error)
        );
    }
    let what = match (r.exists, r.kind.as_deref()) {
        (false, _) => "nothing there yet".to_owned(),
        (true, Some("file")) => "a file that exists".to_owned(),
        (true, Some("dir")) => "a directory".to_owned(),
        (true, Some("symlink")) => match &r.link {
            Some(to) => format!("a symlink to {} that leads nowhere", quoted(to)),
            None => "a symlink that leads nowhere".to_owned(),
        },
        (true, _) => "a special file".to_owned(),
    };
    let how = if r.resolved {
        ""
    } else {
        " (the node could not resolve it further)"
    };
    format!(
        "{key} {} is {} on the node{how}: {what}",
        quoted(&r.asked),
        quoted(&r.path)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_reads_as_what_runs() {
        let r = Resolved {
            asked: "docs/notes.txt".into(),
            path: "/home/u/.ssh/authorized_keys".into(),
            resolved: true,
            exists: true,
            kind: Some("file".into()),
            ..Resolved::default()
        };
        assert_eq!(
            line("path", &r),
            "path \"docs/notes.txt\" is \"/home/u/.ssh/authorized_keys\" on the node: a file that exists"
        );
        let r = Resolved {
            asked: "x\u{202E}y".into(),
            error: Some("outside the workspace".into()),
            ..Resolved::default()
        };
        let l = line("path", &r);
        assert!(l.contains("\\u{202e}") && l.contains("not resolved"), "{l}");
    }
}
