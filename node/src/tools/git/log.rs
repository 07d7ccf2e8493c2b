//! git_log: commits, newest first, as typed records (hash, parents, author, committer,
//! dates, subject, body).
//!
//! Runs `git log -z --no-color --no-show-signature --format=<fields separated by NUL>
//! --max-count=N [--end-of-options <rev>] -- [<file>]` and parses it ([`parse`]):
//! each commit is exactly [`FIELDS`] NUL-terminated fields, and a record whose hash is
//! not hexadecimal is an error rather than a guess. `maxCount` defaults to 20 and is
//! at most [`MAX_COUNT`]; a body is cut at [`MAX_BODY`] bytes.
//!
//! Result (`structuredContent`): [`LogOutput`].

use super::run::{nul_fields, text, GitError};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};

/// Most commits one git_log returns.
pub const MAX_COUNT: u64 = 500;
/// Commits returned when `maxCount` is not given.
pub const DEFAULT_COUNT: u64 = 20;
/// Longest commit body returned (bytes); longer ones are cut.
pub const MAX_BODY: usize = 16 * 1024;
/// The `--format` of one commit: [`FIELDS`] fields, NUL-separated (`-z` ends the last).
pub const FORMAT: &str = "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%s%x00%b";
/// Fields per commit in [`FORMAT`].
pub const FIELDS: usize = 10;

/// The git_log tool.
#[derive(Default)]
pub struct GitLog {
    host: super::Host,
}

impl GitLog {
    /// GitLog on the host of an SSH- or container-backed node.
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        GitLog { host: Some(host) }
    }
}

/// git_log's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogOutput {
    /// The work tree's top level.
    pub root: String,
    pub commits: Vec<Commit>,
    /// Whether git's output was cut at its size cap (later commits left out).
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// One commit.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Commit {
    pub hash: String,
    pub parents: Vec<String>,
    pub author: Person,
    pub committer: Person,
    /// The first line of the message.
    pub subject: String,
    /// The rest of the message (cut at [`MAX_BODY`] bytes).
    pub body: String,
    #[serde(skip_serializing_if = "is_false")]
    pub body_truncated: bool,
}

/// An author or committer.
#[derive(Debug, Serialize)]
pub struct Person {
    pub name: String,
    pub email: String,
    /// RFC 3339 (strict ISO 8601) with the person's offset.
    pub date: String,
}

/// Parses output made with [`FORMAT`] and `-z`; `cut` says the output was cut at its
/// size cap, so a last incomplete commit is left out rather than an error.
pub fn parse(out: &[u8], cut: bool) -> Result<Vec<Commit>, GitError> {
    let fields = nul_fields(out);
    let mut commits = Vec::new();
    for chunk in fields.chunks(FIELDS) {
        if cut && chunk.len() < FIELDS {
            break;
        }
        let [hash, parents, an, ae, ad, cn, ce, cd, subject, body] = chunk else {
            return Err(GitError::Unparseable(format!(
                "a commit with {} fields",
                chunk.len()
            )));
        };
        // Between records git may put a newline before the next hash.
        let hash = text(hash).trim_start_matches('\n').to_owned();
        if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(GitError::Unparseable(format!("commit id {hash:?}")));
        }
        let mut body = text(body);
        let body_truncated = body.len() > MAX_BODY;
        if body_truncated {
            let mut cut = MAX_BODY;
            while !body.is_char_boundary(cut) {
                cut -= 1;
            }
            body.truncate(cut);
        }
        commits.push(Commit {
            hash,
            parents: text(parents)
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            author: Person {
                name: text(an),
                email: text(ae),
                date: text(ad),
            },
            committer: Person {
                name: text(cn),
                email: text(ce),
                date: text(cd),
            },
            subject: text(subject),
            body: body.trim_end().to_owned(),
            body_truncated,
        });
    }
    Ok(commits)
}

#[async_trait::async_trait]
impl Tool for GitLog {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "git_log".to_owned(),
            description: "A git repository's commits, newest first: hash, parents, \
                          author, committer, dates, message. Runs no program the \
                          repository configures."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": super::path_schema(),
                    "rev": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Revision or range, e.g. origin/main..HEAD (default HEAD)."
                    },
                    "maxCount": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_COUNT,
                        "description": "Default 20."
                    },
                    "file": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Only commits touching this path."
                    }
                },
                "additionalProperties": false
            }),
            capability: Capability::VcsRead.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("git log"),
            default_timeout_ms: None,
            requires_bins: vec!["git".to_owned()],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let parsed = Args::new(&args, &["path", "rev", "maxCount", "file"]).and_then(|a| {
            Ok((
                a.str("path")?,
                super::revision(&a, "rev")?,
                a.u64_in("maxCount", 1, MAX_COUNT)?.unwrap_or(DEFAULT_COUNT),
                super::file(&a)?,
            ))
        });
        let (path, rev, count, file) = match parsed {
            Ok(p) => p,
            Err(message) => return ToolResult::error(format!("git_log: {message}")),
        };
        let repo = match super::open_on(path, &ctx, &self.host).await {
            Ok(repo) => repo,
            Err(e) => return e.into_result("git_log"),
        };
        let max = format!("--max-count={count}");
        let mut argv = vec![
            "log",
            "-z",
            "--no-color",
            "--no-show-signature",
            "--no-ext-diff",
            "--no-textconv",
            FORMAT,
            &max,
        ];
        if let Some(rev) = rev {
            argv.extend(["--end-of-options", rev]);
        }
        argv.push("--");
        if let Some(file) = file {
            argv.push(file);
        }
        let out = repo.git.run(&argv).await;
        match out.and_then(|o| parse(&o.stdout, o.truncated).map(|c| (c, o.truncated))) {
            Ok((commits, truncated)) => output::structured(&LogOutput {
                root: repo.root,
                commits,
                truncated,
            }),
            Err(e) => ToolResult::error(format!("git_log: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_parsed_and_checked() {
        let out = b"abc1\0p1 p2\0A\0a@x\0d1\0C\0c@x\0d2\0subj\0body\n\0\
\nabc2\0\0A\0a@x\0d1\0C\0c@x\0d2\0s2\0\0";
        let c = parse(out, false).unwrap();
        assert_eq!(parse(&out[..20], true).unwrap().len(), 0);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].parents, ["p1", "p2"]);
        assert_eq!(c[0].body, "body");
        assert_eq!(c[1].hash, "abc2");
        assert!(c[1].parents.is_empty());
        assert!(parse(b"zz\0", false).is_err());
        assert!(parse(b"not-hex\0\0\0\0\0\0\0\0\0\0", false).is_err());
    }
}
