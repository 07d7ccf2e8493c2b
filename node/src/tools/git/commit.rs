//! git_commit: stages the files asked for and records a commit, so an agent commits
//! without a shell command and without the repository's hooks running.
//!
//! Stages `files` (`git add -- <files>`, literal paths) and, with `all`, every tracked
//! change (`git add --update`), then runs `git commit --no-verify --no-gpg-sign
//! --message=<message>` with the hardened git of [`super::write`]: no hook
//! (pre-commit, commit-msg, post-commit...), no signing program, no editor, no clean
//! filter. Refuses an empty commit unless `allowEmpty`.
//!
//! Author and committer: the repository's own `user.name` / `user.email` (its
//! `.git/config` and what that includes); the user's `~/.gitconfig` is not read by the
//! hardened git. When the repository sets none, [`super::write::DEFAULT_NAME`]
//! `<`[`super::write::DEFAULT_EMAIL`]`>`.
//!
//! `dryRun: true` lists what the commit would hold (what is staged, plus what `files`
//! or `all` would stage) and who would author it, without touching the index.
//!
//! Result (`structuredContent`): [`CommitOutput`].

use super::run::{nul_fields, text};
use super::write::{self, ChangedFile, WriteError};
use super::{Repo, MAX_ARG_LEN};
use crate::protected::Protected;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use crate::tools::paths::{AccessError, PathPolicy};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The git_commit tool.
pub struct GitCommit;

const NAME: &str = "git_commit";
const KEYS: &[&str] = &["path", "message", "files", "all", "allowEmpty", "dryRun"];
/// Longest commit message accepted (64 KiB).
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Most entries in `files`.
pub const MAX_PATHS: usize = 1000;

/// git_commit's structured content.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitOutput {
    /// The new commit (absent for a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The branch committed to (absent on a detached HEAD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The message's first line.
    pub summary: String,
    /// Author and committer, `Name <email>`.
    pub author: String,
    /// The files the commit changes (or would).
    pub files: Vec<ChangedFile>,
    /// Whether this only said what would happen.
    #[serde(skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

struct Request {
    path: Option<String>,
    message: String,
    files: Vec<String>,
    all: bool,
    allow_empty: bool,
    dry_run: bool,
}

fn request(args: &Value) -> Result<Request, WriteError> {
    let a = Args::new(args, KEYS)?;
    let message = a.required_str("message")?.to_owned();
    if message.len() > MAX_MESSAGE || message.contains('\0') || message.trim().is_empty() {
        return Err(WriteError::Arg(format!(
            "\"message\" must be non-blank text of at most {MAX_MESSAGE} bytes without NUL"
        )));
    }
    let mut files = Vec::new();
    match args.get("files") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) if items.len() <= MAX_PATHS => {
            for item in items {
                match item.as_str() {
                    Some(f) if !f.is_empty() && f.len() <= MAX_ARG_LEN && !f.contains('\0') => {
                        files.push(f.to_owned())
                    }
                    _ => {
                        return Err(WriteError::Arg(format!(
                            "\"files\" must hold paths of 1 to {MAX_ARG_LEN} bytes, got {item}"
                        )))
                    }
                }
            }
        }
        Some(_) => {
            return Err(WriteError::Arg(format!(
                "\"files\" must be an array of at most {MAX_PATHS} paths"
            )))
        }
    }
    Ok(Request {
        path: a.str("path")?.map(str::to_owned),
        message,
        files,
        all: a.bool("all")?.unwrap_or(false),
        allow_empty: a.bool("allowEmpty")?.unwrap_or(false),
        dry_run: a.bool("dryRun")?.unwrap_or(false),
    })
}

fn summary(message: &str) -> String {
    message
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

async fn open(req: &Request, ctx: &ToolContext) -> Result<(Repo, String), WriteError> {
    let mut repo = super::open(req.path.as_deref(), ctx).await?;
    let (forced, who) = write::identity(&repo.git).await?;
    repo.git = write::harden(repo.git).with_settings(forced);
    Ok((repo, who))
}

/// What the commit would hold, touching nothing (`GIT_OPTIONAL_LOCKS=0`: the index is
/// not even refreshed).
async fn plan_of(req: &Request, ctx: &ToolContext) -> Result<CommitOutput, WriteError> {
    let (repo, who) = open(req, ctx).await?;
    let git = &repo.git;
    let staged = git
        .run(&["diff", "--cached", "--name-status", "-z", "--no-renames"])
        .await?;
    let mut files = write::parse_name_status(&staged.stdout);
    let mut add = |more: Vec<ChangedFile>| {
        for f in more {
            if !files.iter().any(|g| g.path == f.path) && files.len() < write::MAX_FILES {
                files.push(f);
            }
        }
    };
    if req.all {
        let tracked = git
            .run(&["diff", "--name-status", "-z", "--no-renames"])
            .await?;
        add(write::parse_name_status(&tracked.stdout));
    }
    if !req.files.is_empty() {
        let mut argv = vec![
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
            "--",
        ];
        argv.extend(req.files.iter().map(String::as_str));
        let out = git.run(&argv).await?;
        let listed = nul_fields(&out.stdout)
            .into_iter()
            .filter_map(|rec| {
                let (code, path) = (rec.get(..2)?, rec.get(3..)?);
                let letter = if code[1] != b' ' { code[1] } else { code[0] };
                Some(ChangedFile {
                    path: text(path),
                    status: match letter {
                        b'?' => "added",
                        other => write::status_word(other),
                    },
                })
            })
            .collect();
        add(listed);
    }
    Ok(CommitOutput {
        hash: None,
        branch: write::current_branch(git).await?,
        summary: summary(&req.message),
        author: who,
        files,
        dry_run: true,
    })
}

fn plan_text(p: &CommitOutput) -> String {
    let mut text = format!(
        "would commit {} file(s) on {} as {}: {}\n",
        p.files.len(),
        p.branch.as_deref().unwrap_or("a detached HEAD"),
        p.author,
        p.summary
    );
    for f in p.files.iter().take(20) {
        text.push_str(&format!("  {} {}\n", f.status, f.path));
    }
    if p.files.len() > 20 {
        text.push_str(&format!("  … and {} more\n", p.files.len() - 20));
    }
    text.trim_end().to_owned()
}

/// Refuses staging that would read a protected file into the repository (from where
/// a push could carry it off): a `files` entry that is, is inside or holds a protected
/// path, and `all` in a work tree that holds one (blocking).
fn check_protected(
    base: &Path,
    root: &Path,
    files: &[String],
    all: bool,
    protected: &Protected,
) -> Result<(), WriteError> {
    let guarded: Vec<PathBuf> = protected
        .paths()
        .iter()
        .map(|p| write::real_path(p))
        .collect();
    if guarded.is_empty() {
        return Ok(());
    }
    let snapshot = protected.snapshot();
    // By path, and by inode (a hard link to a protected file elsewhere in the tree).
    let touches = |real: &Path| {
        snapshot.covers_real_path(real)
            || guarded.iter().any(|g| g.starts_with(real))
            || std::fs::metadata(real).is_ok_and(|m| snapshot.covers_meta(&m))
    };
    for f in files {
        let real = write::real_path(&base.join(f));
        if touches(&real) {
            return Err(AccessError::Protected {
                path: real.display().to_string(),
            }
            .into());
        }
    }
    if all && write::protected_inside(root, protected).is_some() {
        return Err(WriteError::Refused(
            "\"all\" is refused in a work tree that holds a protected path; name the files \
             to stage in \"files\""
                .into(),
        ));
    }
    Ok(())
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolResult, WriteError> {
    let req = request(args)?;
    if req.dry_run {
        let p = plan_of(&req, ctx).await?;
        return Ok(output::with_text(plan_text(&p), &p));
    }
    let (repo, who) = open(&req, ctx).await?;
    let git = &repo.git;
    let base = PathPolicy::of(ctx).resolve(req.path.as_deref().unwrap_or("."))?;
    {
        let (root, files, all) = (PathBuf::from(&repo.root), req.files.clone(), req.all);
        let protected = Arc::clone(&ctx.protected);
        tokio::task::spawn_blocking(move || check_protected(&base, &root, &files, all, &protected))
            .await
            .map_err(|e| WriteError::Refused(format!("cannot check the files: {e}")))??;
    }
    if !req.files.is_empty() {
        let mut argv = vec!["add", "--"];
        argv.extend(req.files.iter().map(String::as_str));
        git.run(&argv).await?;
    }
    if req.all {
        git.run(&["add", "--update"]).await?;
    }
    let staged = git
        .run(&["diff", "--cached", "--name-only", "-z", "--no-renames"])
        .await?;
    let has_changes = !staged.stdout.is_empty();
    if !has_changes && !req.allow_empty {
        return Err(WriteError::Refused(
            "nothing to commit: nothing is staged (name the files in \"files\", set \"all\" \
             for tracked changes, or \"allowEmpty\")"
                .into(),
        ));
    }
    let message = format!("--message={}", req.message);
    let mut argv = vec![
        "commit",
        "--quiet",
        "--no-verify",
        "--no-gpg-sign",
        "--no-edit",
    ];
    if req.allow_empty {
        argv.push("--allow-empty");
    }
    argv.push(&message);
    tracing::info!(repo = ?repo.root, "git_commit");
    git.run(&argv).await?;
    let hash = write::resolve(git, "HEAD").await?;
    let changed = git
        .run(&[
            "diff-tree",
            "--root",
            "--no-commit-id",
            "--name-status",
            "-r",
            "-z",
            "--no-renames",
            "HEAD",
        ])
        .await?;
    let out = CommitOutput {
        hash,
        branch: write::current_branch(git).await?,
        summary: summary(&req.message),
        author: who,
        files: write::parse_name_status(&changed.stdout),
        dry_run: false,
    };
    Ok(output::structured(&out))
}

#[async_trait::async_trait]
impl Tool for GitCommit {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "Stage files and record a git commit. No hooks or signing \
                          programs run."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": super::path_schema(),
                    "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE, "description": "The commit message."},
                    "files": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": MAX_PATHS, "description": "Paths to stage first (literal, relative to the repository)."},
                    "all": {"type": "boolean", "description": "Stage every tracked change first (git add -u)."},
                    "allowEmpty": {"type": "boolean", "description": "Commit even with no change."},
                    "dryRun": write::dry_run_schema()
                },
                "required": ["message"],
                "additionalProperties": false
            }),
            capability: Capability::VcsWrite.as_str().to_owned(),
            annotations: ToolAnnotations::hints("git commit", false, false, false, false),
            default_timeout_ms: None,
            requires_bins: vec!["git".to_owned()],
            requires_approval: true,
        }
    }

    fn dry_run(&self, args: &Value) -> bool {
        write::is_dry_run(args)
    }

    async fn plan(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let req = request(args).ok()?;
        plan_of(&req, ctx).await.ok().map(|p| plan_text(&p))
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        match run(&args, &ctx).await {
            Ok(result) => result,
            Err(e) => e.into_result(NAME),
        }
    }
}
