//! Where a directory copy to a node goes, as the node resolves it, for the operator's
//! question and for the copy itself.
//!
//! `gsv cp -r SRC lab:dest` makes `dest` the tree's top, or `dest/NAME` when `dest` is
//! a directory already. The agent's `dest` may be a symlink it planted; so before a
//! tree under `confirm` is put to an operator, the node is asked (`paths.resolve`)
//! what `dest` and `dest/NAME` name, the question shows that directory (symlinks
//! resolved, `..` collapsed, new or there already) with the agent's own text only as
//! "the agent named it", and the directories step is sent with exactly that absolute
//! top. Every later step and file of the tree goes under the top the node answered,
//! which the approval's grant covers. Where the node cannot tell, the question says
//! so and the copy goes as the agent wrote it.

use crate::registry::NodeHandle;
use crate::summary::quoted;
use gsv_protocol::resolve::Resolved;
use std::time::Duration;

/// How long the question waits for the node's answer.
const ANSWER: Duration = Duration::from_secs(5);

/// The tree's top for the question and for the `dirs` step.
pub(super) struct Top {
    /// `lab:"/srv/real/dest" (a new directory; the agent named it "dest")`.
    pub shown: String,
    /// The `path` and `into` the directories step is sent with.
    pub path: String,
    pub into: Option<String>,
}

/// Asks `node` where a tree placed at `path` (into `into` when `path` is a directory)
/// goes.
pub(super) async fn resolve(node: &NodeHandle, path: &str, into: Option<&str>) -> Top {
    let node_id = node.id.as_str();
    let mut paths = vec![path.to_owned()];
    if let Some(into) = into {
        paths.push(format!("{}/{into}", path.trim_end_matches('/')));
    }
    let answer = node.resolve_paths(paths, ANSWER).await;
    let as_written = |why: &str| Top {
        shown: format!(
            "{node_id}:{} (not resolved on the node: {}; the copy goes as written)",
            quoted(&written(path, into)),
            quoted(why)
        ),
        path: path.to_owned(),
        into: into.map(str::to_owned),
    };
    let found = match answer {
        Ok(found) => found,
        Err(why) => {
            tracing::warn!(node_id, error = %why, "paths.resolve failed for a tree's top");
            return as_written(&why);
        }
    };
    // `path` itself, or `path/into` when `path` is a directory there now.
    let top = match (&found[0], found.get(1)) {
        (dest, Some(inner)) if dest.exists && dest.kind.as_deref() == Some("dir") => inner,
        (dest, _) => dest,
    };
    if let Some(error) = &top.error {
        return as_written(error);
    }
    if !top.resolved || top.path.is_empty() {
        return as_written("the node could not resolve it");
    }
    Top {
        shown: format!(
            "{node_id}:{} ({}; the agent named it {})",
            quoted(&top.path),
            what(top),
            quoted(&top.asked)
        ),
        path: top.path.clone(),
        into: None,
    }
}

/// The agent's own text for the top, before the node said which it is.
fn written(path: &str, into: Option<&str>) -> String {
    match into {
        Some(into) => format!("{path} (or {path}/{into})"),
        None => path.to_owned(),
    }
}

/// What stands at the top now.
fn what(top: &Resolved) -> &'static str {
    match (top.exists, top.kind.as_deref()) {
        (false, _) => "a new directory",
        (true, Some("dir")) => {
            "a directory there already; its files with the tree's names are replaced"
        }
        // The directories step refuses to make a tree over anything else.
        (true, _) => "something that is not a directory stands there; the copy will be refused",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_stands_there_reads_plainly() {
        let r = |exists, kind: Option<&str>| Resolved {
            exists,
            kind: kind.map(str::to_owned),
            ..Resolved::default()
        };
        assert_eq!(what(&r(false, None)), "a new directory");
        assert!(what(&r(true, Some("dir"))).starts_with("a directory there already"));
        assert!(what(&r(true, Some("file"))).contains("refused"));
        assert_eq!(written("d", Some("src")), "d (or d/src)");
    }
}
