//! git_show: one commit — its record as git_log gives it, and its changes per file as
//! git_diff gives them (against its first parent; a root commit against nothing).
//!
//! `rev` is resolved to a commit id first (`git rev-parse --verify --end-of-options
//! <rev>^{commit}`: a tag is peeled, a tree or blob refused), then `git log -1 -z
//! --format=...` and `git show --format= --diff-merges=first-parent` run on the id
//! alone, with the diff options and caps of [`super::diff`].
//!
//! Result (`structuredContent`): [`ShowOutput`].

use super::diff::{self, FileDiff, MAX_CONTEXT};
use super::log::{self, Commit};
use super::run::GitError;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};

/// The git_show tool.
#[derive(Default)]
pub struct GitShow {
    host: super::Host,
}

impl GitShow {
    /// GitShow on the host of an SSH- or container-backed node.
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        GitShow { host: Some(host) }
    }
}

/// git_show's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShowOutput {
    /// The work tree's top level.
    pub root: String,
    pub commit: Commit,
    /// Its changes against its first parent.
    pub files: Vec<FileDiff>,
    /// Whether files were left out ([`diff::MAX_FILES`] or git's output cap).
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
}

#[async_trait::async_trait]
impl Tool for GitShow {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "git_show".to_owned(),
            description: "One git commit and its changes per file against its first \
                          parent. Runs no program the repository configures."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": super::path_schema(),
                    "rev": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Hash, branch, tag, HEAD~2..."
                    },
                    "file": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Only this path."
                    },
                    "contextLines": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_CONTEXT,
                        "description": "Default 3."
                    }
                },
                "required": ["rev"],
                "additionalProperties": false
            }),
            capability: Capability::VcsRead.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("git show"),
            default_timeout_ms: None,
            requires_bins: vec!["git".to_owned()],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let parsed = Args::new(&args, &["path", "rev", "file", "contextLines"]).and_then(|a| {
            Ok((
                a.str("path")?,
                super::revision(&a, "rev")?.ok_or("missing required argument \"rev\"")?,
                super::file(&a)?,
                a.u64_in("contextLines", 0, MAX_CONTEXT)?.unwrap_or(3),
            ))
        });
        let (path, rev, file, context) = match parsed {
            Ok(p) => p,
            Err(message) => return ToolResult::error(format!("git_show: {message}")),
        };
        let repo = match super::open_on(path, &ctx, &self.host).await {
            Ok(repo) => repo,
            Err(e) => return e.into_result("git_show"),
        };
        let result = async {
            let id = super::commit_id(&repo.git, rev).await?;
            let out = repo
                .git
                .run(&[
                    "log",
                    "-1",
                    "-z",
                    "--no-color",
                    "--no-show-signature",
                    log::FORMAT,
                    &id,
                    "--",
                ])
                .await?;
            let commit = log::parse(&out.stdout, false)?
                .into_iter()
                .next()
                .ok_or_else(|| GitError::Unparseable(format!("no commit {id}")))?;
            let argv = ["show", "--format=", "--diff-merges=first-parent", &id];
            let (files, truncated) = diff::files(&repo.git, &argv, context, file).await?;
            Ok::<_, GitError>((commit, files, truncated))
        }
        .await;
        match result {
            Ok((commit, files, truncated)) => output::structured(&ShowOutput {
                root: repo.root,
                commit,
                files,
                truncated,
            }),
            Err(e) => ToolResult::error(format!("git_show: {e}")),
        }
    }
}
