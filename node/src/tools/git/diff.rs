//! git_diff: changes per file — status, paths, line counts, binary or not, and the
//! patch — between the work tree, the index and commits.
//!
//! What is compared: the work tree against the index (default); the index against
//! HEAD (`staged`); the work tree, or the index with `staged`, against `rev`; or `rev`
//! against `revTo`. Revisions are first resolved to commit ids (`git rev-parse
//! --verify --end-of-options <rev>^{commit}`), so git's diff commands only ever see
//! hashes. Every diff runs with `--no-ext-diff --no-textconv --no-color
//! --ignore-submodules=all`, twice: `--raw --numstat -z` for the file list and counts,
//! then `-p` for the patches, split at each `diff --git ` line (content lines always
//! start with ` `, `+`, `-` or `\`, so the split is exact) and matched to the list in
//! order ([`files`], shared with git_show; when the counts differ — an unmerged path
//! prints a combined diff — no patch is given).
//!
//! Caps: at most [`MAX_FILES`] files; a patch is cut at [`MAX_PATCH`] bytes and all
//! patches together at [`MAX_PATCHES`] (later files keep their counts, without patch);
//! each says so. Result (`structuredContent`): [`DiffOutput`].

use super::run::{nul_fields, text, Git, GitError};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};

/// Most files one diff returns.
pub const MAX_FILES: usize = 1000;
/// Longest patch returned for one file (bytes).
pub const MAX_PATCH: usize = 64 * 1024;
/// Most patch text returned by one call (bytes).
pub const MAX_PATCHES: usize = 1024 * 1024;
/// Largest `contextLines`.
pub const MAX_CONTEXT: u64 = 100;

/// The options every diff runs with.
pub const DIFF_OPTIONS: &[&str] = &[
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--ignore-submodules=all",
    "--find-renames",
];

/// The git_diff tool.
#[derive(Default)]
pub struct GitDiff {
    host: super::Host,
}

impl GitDiff {
    /// GitDiff on the host of an SSH- or container-backed node.
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        GitDiff { host: Some(host) }
    }
}

/// git_diff's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffOutput {
    /// The work tree's top level.
    pub root: String,
    pub files: Vec<FileDiff>,
    /// Whether files were left out (past [`MAX_FILES`] or git's output cap).
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// One file's change.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    /// The path (after a rename), relative to the top level.
    pub path: String,
    /// The path before a rename or copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// `added`, `modified`, `deleted`, `renamed`, `copied`, `typeChanged`,
    /// `unmerged` or `unknown`.
    pub status: &'static str,
    /// Rename or copy similarity, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<u32>,
    /// Lines added (absent for a binary file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additions: Option<u64>,
    /// Lines removed (absent for a binary file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletions: Option<u64>,
    #[serde(skip_serializing_if = "is_false")]
    pub binary: bool,
    /// The unified diff of this file (`diff --git ...` on); absent past
    /// [`MAX_PATCHES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    pub patch_truncated: bool,
}

fn status_word(c: u8) -> &'static str {
    match c {
        b'A' => "added",
        b'M' => "modified",
        b'D' => "deleted",
        b'R' => "renamed",
        b'C' => "copied",
        b'T' => "typeChanged",
        b'U' => "unmerged",
        _ => "unknown",
    }
}

/// Parses `--raw --numstat -z` output into the file list (no patches yet).
pub fn parse_summary(out: &[u8]) -> Result<Vec<FileDiff>, GitError> {
    let mut files: Vec<FileDiff> = Vec::new();
    let mut fields = nul_fields(out).into_iter().peekable();
    // --raw: ":<modes> <ids> <status>" then one path, or two for a rename or copy.
    while let Some(head) = fields.peek() {
        let head = text(head);
        let head = head.trim_start_matches('\n');
        if !head.starts_with(':') {
            break;
        }
        fields.next();
        let code = head.rsplit(' ').next().unwrap_or_default();
        let letter = code.bytes().next().unwrap_or(b'X');
        let similarity = code.get(1..).and_then(|n| n.parse::<u32>().ok());
        let first = fields
            .next()
            .ok_or_else(|| GitError::Unparseable(format!("raw entry {head:?}")))?;
        let mut file = FileDiff {
            path: text(first),
            status: status_word(letter),
            similarity,
            ..FileDiff::default()
        };
        if matches!(letter, b'R' | b'C') {
            let second = fields
                .next()
                .ok_or_else(|| GitError::Unparseable(format!("raw entry {head:?}")))?;
            file.old_path = Some(std::mem::replace(&mut file.path, text(second)));
        }
        files.push(file);
    }
    // --numstat: "<added>\t<deleted>\t<path>", or "<added>\t<deleted>\t" then two paths.
    let mut i = 0;
    while let Some(entry) = fields.next() {
        let entry = text(entry);
        let mut parts = entry.trim_start_matches('\n').splitn(3, '\t');
        let (Some(a), Some(d), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(GitError::Unparseable(format!("numstat entry {entry:?}")));
        };
        if path.is_empty() {
            fields.next();
            fields.next();
        }
        let Some(file) = files.get_mut(i) else {
            return Err(GitError::Unparseable("more counts than files".to_owned()));
        };
        file.binary = a == "-" && d == "-";
        file.additions = a.parse().ok();
        file.deletions = d.parse().ok();
        i += 1;
    }
    Ok(files)
}

/// Splits `-p` output into one patch per file, at each `diff --git ` line.
pub fn split_patches(out: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut at = 0;
    for line in out.split_inclusive(|b| *b == b'\n') {
        if line.starts_with(b"diff --git ") {
            starts.push(at);
        }
        at += line.len();
    }
    let mut patches = Vec::new();
    for (n, start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(out.len());
        patches.push(&out[*start..end]);
    }
    patches
}

/// The files a diff (`diff_args`: the command and what it compares, without options
/// or paths) changes, with their patches; and whether the list was cut.
pub async fn files(
    git: &Git,
    diff_args: &[&str],
    context: u64,
    file: Option<&str>,
) -> Result<(Vec<FileDiff>, bool), GitError> {
    let with = |extra: &[&str]| {
        let mut argv: Vec<String> = diff_args.iter().map(|s| (*s).to_owned()).collect();
        argv.extend(DIFF_OPTIONS.iter().map(|s| (*s).to_owned()));
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        argv.push("--".to_owned());
        argv.extend(file.map(str::to_owned));
        argv
    };
    let summary_argv = with(&["--raw", "--numstat", "-z"]);
    let summary_refs: Vec<&str> = summary_argv.iter().map(String::as_str).collect();
    let summary = git.run(&summary_refs).await?;
    let mut truncated = summary.truncated;
    let mut files = if summary.truncated {
        Vec::new()
    } else {
        parse_summary(&summary.stdout)?
    };
    if files.len() > MAX_FILES {
        files.truncate(MAX_FILES);
        truncated = true;
    }
    let unified = format!("--unified={context}");
    let patch_argv = with(&["-p", &unified]);
    let patch_refs: Vec<&str> = patch_argv.iter().map(String::as_str).collect();
    let patch = git.run(&patch_refs).await?;
    let patches = split_patches(&patch.stdout);
    // Unmerged paths print a combined diff (`diff --cc`): then patches cannot be
    // matched to files by order, and none are given.
    let patches = if patches.len() == files.len() || patch.truncated || truncated {
        patches
    } else {
        Vec::new()
    };
    let mut budget = MAX_PATCHES;
    for (f, p) in files.iter_mut().zip(patches) {
        if budget == 0 {
            f.patch_truncated = true;
            continue;
        }
        let keep = p.len().min(MAX_PATCH).min(budget);
        budget -= keep;
        f.patch_truncated = keep < p.len();
        f.patch = Some(String::from_utf8_lossy(&p[..keep]).into_owned());
    }
    Ok((files, truncated || patch.truncated))
}

#[async_trait::async_trait]
impl Tool for GitDiff {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "git_diff".to_owned(),
            description: "A git repository's changes per file (status, paths, lines \
                          added/removed, patch): work tree against the index unless told. \
                          Runs no program the repository configures."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": super::path_schema(),
                    "staged": {
                        "type": "boolean",
                        "description": "The index against HEAD."
                    },
                    "rev": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Compare against this commit."
                    },
                    "revTo": {
                        "type": "string",
                        "minLength": 1,
                        "description": "With rev: rev against this commit."
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
                "additionalProperties": false
            }),
            capability: Capability::VcsRead.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("git diff"),
            default_timeout_ms: None,
            requires_bins: vec!["git".to_owned()],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let allowed = ["path", "staged", "rev", "revTo", "file", "contextLines"];
        let parsed = Args::new(&args, &allowed).and_then(|a| {
            Ok((
                a.str("path")?,
                a.bool("staged")?.unwrap_or(false),
                super::revision(&a, "rev")?,
                super::revision(&a, "revTo")?,
                super::file(&a)?,
                a.u64_in("contextLines", 0, MAX_CONTEXT)?.unwrap_or(3),
            ))
        });
        let (path, staged, rev, rev_to, file, context) = match parsed {
            Ok(p) => p,
            Err(message) => return ToolResult::error(format!("git_diff: {message}")),
        };
        if rev_to.is_some() && (rev.is_none() || staged) {
            return ToolResult::error(
                "git_diff: revTo needs rev, and compares two commits (not with staged)",
            );
        }
        let repo = match super::open_on(path, &ctx, &self.host).await {
            Ok(repo) => repo,
            Err(e) => return e.into_result("git_diff"),
        };
        let result = async {
            let mut ids = Vec::new();
            for rev in [rev, rev_to].into_iter().flatten() {
                ids.push(super::commit_id(&repo.git, rev).await?);
            }
            let mut argv = vec!["diff"];
            if staged {
                argv.push("--cached");
            }
            argv.extend(ids.iter().map(String::as_str));
            files(&repo.git, &argv, context, file).await
        }
        .await;
        match result {
            Ok((files, truncated)) => output::structured(&DiffOutput {
                root: repo.root,
                files,
                truncated,
            }),
            Err(e) => ToolResult::error(format!("git_diff: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_numstat_are_matched() {
        let out = b":100644 100644 aa bb M\0a.txt\0:100644 100644 aa bb R090\0old\0new\0\
:100644 100644 aa bb M\0img.png\0\
1\t2\ta.txt\0\x33\t0\t\0old\0new\0-\t-\timg.png\0";
        let f = parse_summary(out).unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!((f[0].additions, f[0].deletions), (Some(1), Some(2)));
        assert_eq!(
            (
                f[1].path.as_str(),
                f[1].old_path.as_deref(),
                f[1].similarity
            ),
            ("new", Some("old"), Some(90))
        );
        assert_eq!(f[1].additions, Some(3));
        assert!(f[2].binary && f[2].additions.is_none());
        assert!(parse_summary(b":100644 100644 aa bb M\0").is_err());
    }

    #[test]
    fn patches_split_at_diff_lines_only() {
        let out = b"diff --git a/x b/x\n+diff --git a/y b/y\ndiff --git a/z b/z\n-z\n";
        let p = split_patches(out);
        assert_eq!(p.len(), 2);
        assert!(p[0].ends_with(b"+diff --git a/y b/y\n"));
        assert!(p[1].starts_with(b"diff --git a/z"));
    }
}
