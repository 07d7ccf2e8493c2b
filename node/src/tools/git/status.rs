//! git_status: the branch, its upstream and how far ahead and behind it is, and every
//! changed, untracked and conflicted file with its index and work-tree state.
//!
//! Runs `git status --porcelain=v2 --branch -z --untracked-files=all
//! --ignore-submodules=all --find-renames` (submodules are not entered: that would be
//! a git run in another repository) and parses it ([`parse`]). At most
//! [`MAX_FILES`] files are returned (`truncated` says when there were more).
//!
//! Result (`structuredContent`): [`StatusOutput`].

use super::run::{nul_fields, text, GitError};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};

/// Most files one git_status returns.
pub const MAX_FILES: usize = 2000;

/// The git_status tool.
#[derive(Default)]
pub struct GitStatus {
    host: super::Host,
}

impl GitStatus {
    /// GitStatus on the host of an SSH- or container-backed node.
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        GitStatus { host: Some(host) }
    }
}

/// git_status's structured content.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusOutput {
    /// The work tree's top level.
    pub root: String,
    pub branch: Branch,
    /// Changed, untracked and conflicted files, in git's order.
    pub files: Vec<FileStatus>,
    /// Whether nothing is changed, staged or untracked.
    pub clean: bool,
    /// Whether files were left out past [`MAX_FILES`].
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// The current branch.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    /// The branch name; absent when HEAD is detached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Whether HEAD is detached.
    pub detached: bool,
    /// HEAD's commit; absent before the first commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The upstream branch (`origin/main`), when one is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Commits on the branch and not its upstream (when the upstream exists).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u64>,
    /// Commits on the upstream and not the branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind: Option<u64>,
}

/// One file's state.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileStatus {
    /// The path, relative to the top level.
    pub path: String,
    /// The path before a rename or copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orig_path: Option<String>,
    /// In the index, against HEAD: `unmodified`, `modified`, `typeChanged`, `added`,
    /// `deleted`, `renamed`, `copied`, `untracked`, `conflicted`.
    pub index: &'static str,
    /// In the work tree, against the index (same words).
    pub worktree: &'static str,
    /// `true` for a file git does not track.
    #[serde(skip_serializing_if = "is_false")]
    pub untracked: bool,
    /// `true` for an unmerged file.
    #[serde(skip_serializing_if = "is_false")]
    pub conflicted: bool,
}

fn state(c: u8) -> &'static str {
    match c {
        b'M' => "modified",
        b'T' => "typeChanged",
        b'A' => "added",
        b'D' => "deleted",
        b'R' => "renamed",
        b'C' => "copied",
        b'U' => "conflicted",
        b'?' => "untracked",
        _ => "unmodified",
    }
}

fn xy(field: &[u8]) -> Result<(u8, u8), GitError> {
    match field {
        [x, y] => Ok((*x, *y)),
        _ => Err(GitError::Unparseable(format!(
            "status field {:?}",
            text(field)
        ))),
    }
}

/// Parses `git status --porcelain=v2 --branch -z` output.
pub fn parse(out: &[u8]) -> Result<StatusOutput, GitError> {
    let mut s = StatusOutput::default();
    let mut fields = nul_fields(out).into_iter();
    while let Some(record) = fields.next() {
        let line = text(record);
        if let Some(header) = line.strip_prefix("# ") {
            let (key, value) = header.split_once(' ').unwrap_or((header, ""));
            match key {
                "branch.oid" if value != "(initial)" => s.branch.commit = Some(value.to_owned()),
                "branch.head" if value == "(detached)" => s.branch.detached = true,
                "branch.head" => s.branch.head = Some(value.to_owned()),
                "branch.upstream" => s.branch.upstream = Some(value.to_owned()),
                "branch.ab" => {
                    let mut parts = value.split(' ');
                    let num = |p: Option<&str>, sign: char| {
                        p.and_then(|p| p.strip_prefix(sign))
                            .and_then(|n| n.parse::<u64>().ok())
                    };
                    s.branch.ahead = num(parts.next(), '+');
                    s.branch.behind = num(parts.next(), '-');
                }
                _ => {}
            }
            continue;
        }
        let file = match record.first() {
            Some(b'1') => {
                let parts: Vec<&str> = line.splitn(9, ' ').collect();
                let [_, code, _, _, _, _, _, _, path] = parts[..] else {
                    return Err(GitError::Unparseable(line));
                };
                let (x, y) = xy(code.as_bytes())?;
                FileStatus {
                    path: path.to_owned(),
                    orig_path: None,
                    index: state(x),
                    worktree: state(y),
                    untracked: false,
                    conflicted: false,
                }
            }
            Some(b'2') => {
                let parts: Vec<&str> = line.splitn(10, ' ').collect();
                let [_, code, _, _, _, _, _, _, _, path] = parts[..] else {
                    return Err(GitError::Unparseable(line));
                };
                let (x, y) = xy(code.as_bytes())?;
                let orig = fields
                    .next()
                    .ok_or_else(|| GitError::Unparseable(line.clone()))?;
                FileStatus {
                    path: path.to_owned(),
                    orig_path: Some(text(orig)),
                    index: state(x),
                    worktree: state(y),
                    untracked: false,
                    conflicted: false,
                }
            }
            Some(b'u') => {
                let parts: Vec<&str> = line.splitn(11, ' ').collect();
                let [_, code, _, _, _, _, _, _, _, _, path] = parts[..] else {
                    return Err(GitError::Unparseable(line));
                };
                let (x, y) = xy(code.as_bytes())?;
                FileStatus {
                    path: path.to_owned(),
                    orig_path: None,
                    index: state(x),
                    worktree: state(y),
                    untracked: false,
                    conflicted: true,
                }
            }
            Some(b'?') => FileStatus {
                path: line.get(2..).unwrap_or_default().to_owned(),
                orig_path: None,
                index: "untracked",
                worktree: "untracked",
                untracked: true,
                conflicted: false,
            },
            _ => continue,
        };
        if s.files.len() >= MAX_FILES {
            s.truncated = true;
            continue;
        }
        s.files.push(file);
    }
    s.clean = s.files.is_empty() && !s.truncated;
    Ok(s)
}

#[async_trait::async_trait]
impl Tool for GitStatus {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "git_status".to_owned(),
            description: "A git repository's branch, upstream, ahead/behind and changed \
                          files. Runs no program the repository configures."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": { "path": super::path_schema() },
                "additionalProperties": false
            }),
            capability: Capability::VcsRead.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("git status"),
            default_timeout_ms: None,
            requires_bins: vec!["git".to_owned()],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let path = match Args::new(&args, &["path"]).and_then(|a| a.str("path")) {
            Ok(path) => path,
            Err(message) => return ToolResult::error(format!("git_status: {message}")),
        };
        let repo = match super::open_on(path, &ctx, &self.host).await {
            Ok(repo) => repo,
            Err(e) => return e.into_result("git_status"),
        };
        let out = repo
            .git
            .run(&[
                "status",
                "--porcelain=v2",
                "--branch",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=all",
                "--find-renames",
            ])
            .await;
        match out.and_then(|o| parse(&o.stdout).map(|s| (s, o.truncated))) {
            Ok((mut s, cut)) => {
                s.root = repo.root;
                s.truncated |= cut;
                output::structured(&s)
            }
            Err(e) => ToolResult::error(format!("git_status: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_v2_is_parsed() {
        let out = b"# branch.oid abc\0# branch.head main\0# branch.upstream origin/main\0\
# branch.ab +2 -1\0\
1 M. N... 100644 100644 100644 aa bb a b.txt\0\
2 R. N... 100644 100644 100644 aa bb R100 new name\0old name\0\
u UU N... 100644 100644 100644 100644 a b c both\0\
? new file\0";
        let s = parse(out).unwrap();
        assert_eq!(s.branch.head.as_deref(), Some("main"));
        assert_eq!((s.branch.ahead, s.branch.behind), (Some(2), Some(1)));
        assert_eq!(s.files.len(), 4);
        assert_eq!(
            (s.files[0].path.as_str(), s.files[0].index),
            ("a b.txt", "modified")
        );
        assert_eq!(s.files[1].orig_path.as_deref(), Some("old name"));
        assert_eq!(s.files[1].index, "renamed");
        assert!(s.files[2].conflicted);
        assert!(s.files[3].untracked && s.files[3].path == "new file");
        assert!(!s.clean);
        assert!(parse(b"1 M\0").is_err());
    }
}
