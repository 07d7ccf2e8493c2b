//! git_clone: clones a repository into a new directory, so an agent gets a working
//! copy without a shell command whose URL could smuggle in options or transports.
//!
//! Runs `git clone --template= --no-recurse-submodules [--branch B] [--depth N]
//! --end-of-options <url> <path>` with the hardened git of [`super::write`]: the URL
//! must be an allowed scheme, scp-like address or local path (a local one under the
//! path rules); the destination goes through the path rules too and must not exist or
//! be an empty directory. No template hooks are copied, no submodule is cloned, and
//! no hook (post-checkout) or filter runs during the checkout. Runs outside any
//! repository (`/`), so no repository's configuration rewrites the URL.
//!
//! `dryRun: true` lists the remote (`git ls-remote --symref`): its default branch,
//! how many branches and tags, and whether `branch` exists; nothing is written.
//!
//! Result (`structuredContent`): [`CloneOutput`].

use super::remote::{self, Source};
use super::run::Git;
use super::write::{self, short, WriteError};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use crate::tools::paths::{AccessError, PathPolicy};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The git_clone tool.
pub struct GitClone;

const NAME: &str = "git_clone";
const KEYS: &[&str] = &["url", "path", "branch", "depth", "dryRun"];
/// Deepest `depth` accepted.
pub const MAX_DEPTH: u64 = 1_000_000;

/// git_clone's structured content.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneOutput {
    /// The URL cloned (a local path resolved).
    pub url: String,
    /// The new work tree (absolute).
    pub path: String,
    /// The branch checked out (for a dry run: the one that would be).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit checked out (or that would be); absent for an empty repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// How many branches the remote has.
    pub branches: usize,
    /// How many tags the remote has (dry run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<usize>,
    /// Whether this only said what would happen.
    #[serde(skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

struct Request {
    source: Source,
    dest: PathBuf,
    branch: Option<String>,
    depth: Option<u64>,
    dry_run: bool,
}

impl Request {
    fn is_local(&self) -> bool {
        matches!(self.source, Source::Local(_))
    }
}

/// A destination under the path rules: it must not exist, or be an empty directory.
fn check_dest(path: &str, ctx: &ToolContext) -> Result<PathBuf, WriteError> {
    let policy = PathPolicy::of(ctx);
    let dest = policy.resolve(path)?;
    let real = write::real_path(&dest);
    if ctx.protected.snapshot().covers_real_path(&real) {
        return Err(AccessError::Protected {
            path: real.display().to_string(),
        }
        .into());
    }
    write::refuse_protected_inside(&dest, &ctx.protected)?;
    match std::fs::symlink_metadata(&dest) {
        Err(_) => Ok(dest),
        Ok(meta) if meta.is_dir() => {
            let empty = std::fs::read_dir(&dest)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if empty {
                Ok(dest)
            } else {
                Err(WriteError::Refused(format!(
                    "the destination {} exists and is not empty",
                    dest.display()
                )))
            }
        }
        Ok(_) => Err(WriteError::Refused(format!(
            "the destination {} exists and is not a directory",
            dest.display()
        ))),
    }
}

async fn request(args: &Value, ctx: &ToolContext) -> Result<Request, WriteError> {
    let a = Args::new(args, KEYS)?;
    let url = a.required_str("url")?.to_owned();
    let path = a.required_str("path")?.to_owned();
    let depth = a.u64_in("depth", 1, MAX_DEPTH)?;
    let dry_run = a.bool("dryRun")?.unwrap_or(false);
    let branch = a.str("branch")?.map(str::to_owned);
    if let Some(b) = &branch {
        write::name_arg("branch", b)?;
    }
    if path.contains('\0') {
        return Err(WriteError::Arg("\"path\" must not hold NUL".into()));
    }
    let source = remote::check_url_async(url, ctx.workspace.clone(), ctx).await?;
    let dest = {
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || check_dest(&path, &ctx))
            .await
            .map_err(|e| WriteError::Refused(format!("cannot check the destination: {e}")))??
    };
    if let Source::Local(src) = &source {
        if dest.starts_with(src) {
            return Err(WriteError::Refused(
                "the destination is inside the repository being cloned".into(),
            ));
        }
    }
    Ok(Request {
        source,
        dest,
        branch,
        depth,
        dry_run,
    })
}

/// git outside any repository, hardened for writing.
async fn git_outside(ctx: &ToolContext) -> Result<Git, WriteError> {
    let git = Git::new(Path::new("/"), None, ctx.cancel.clone());
    git.check_version().await?;
    Ok(write::harden(git))
}

async fn plan_of(req: &Request, ctx: &ToolContext) -> Result<CloneOutput, WriteError> {
    let git = git_outside(ctx)
        .await?
        .with_vars([("GIT_DIR".to_owned(), "/nonexistent".to_owned())]);
    if let Some(b) = &req.branch {
        write::branch_arg(&git, "branch", b).await?;
    }
    let src = req.source.git_arg();
    let shown = req.source.shown();
    let out = git
        .run(&[
            "ls-remote",
            "--symref",
            &remote::upload_pack_option(req.is_local()),
            "--end-of-options",
            &src,
        ])
        .await?;
    let (refs, head) = remote::parse_ls_remote(&out.stdout);
    let branches = refs
        .iter()
        .filter(|r| r.name.starts_with("refs/heads/"))
        .count();
    let tags = refs
        .iter()
        .filter(|r| r.name.starts_with("refs/tags/") && !r.name.ends_with("^{}"))
        .count();
    let wanted = req.branch.clone().or(head);
    let commit = wanted.as_ref().and_then(|b| {
        let (h, t) = (format!("refs/heads/{b}"), format!("refs/tags/{b}"));
        refs.iter()
            .find(|r| r.name == h || r.name == t)
            .map(|r| r.id.clone())
    });
    if let (Some(b), None) = (&req.branch, &commit) {
        return Err(WriteError::Refused(format!(
            "the remote has no branch or tag {b:?}"
        )));
    }
    Ok(CloneOutput {
        url: shown,
        path: req.dest.display().to_string(),
        branch: wanted,
        head: commit,
        branches,
        tags: Some(tags),
        dry_run: true,
    })
}

fn plan_text(p: &CloneOutput) -> String {
    let mut text = format!("would clone {} into {}\n", p.url, p.path);
    match (&p.branch, &p.head) {
        (Some(b), Some(h)) => text.push_str(&format!("check out {b} at {}\n", short(h))),
        _ => text.push_str("the remote repository is empty\n"),
    }
    text.push_str(&format!(
        "the remote has {} branches and {} tags",
        p.branches,
        p.tags.unwrap_or(0)
    ));
    text
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolResult, WriteError> {
    let req = request(args, ctx).await?;
    if req.dry_run {
        let p = plan_of(&req, ctx).await?;
        return Ok(output::with_text(plan_text(&p), &p));
    }
    let git = git_outside(ctx).await?;
    let mut argv: Vec<String> = ["clone", "--quiet", "--template=", "--no-recurse-submodules"]
        .map(str::to_owned)
        .to_vec();
    argv.push(remote::upload_pack_option(req.is_local()));
    if let Some(b) = &req.branch {
        let b = write::branch_arg(&git, "branch", b).await?;
        argv.push(format!("--branch={b}"));
    }
    if let Some(d) = req.depth {
        argv.push(format!("--depth={d}"));
    }
    argv.push("--end-of-options".into());
    argv.push(req.source.git_arg());
    argv.push(req.dest.display().to_string());
    let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
    tracing::info!(url = ?req.source.shown(), dest = ?req.dest, "git_clone");
    git.run(&refs).await?;
    let cloned = git.in_dir(&req.dest);
    let branch = write::current_branch(&cloned).await?;
    let head = write::resolve(&cloned, "HEAD").await?;
    let listed = cloned
        .run(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/remotes/origin/",
        ])
        .await?;
    let branches = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|l| !l.ends_with("/HEAD"))
        .count();
    let out = CloneOutput {
        url: req.source.shown(),
        path: req.dest.display().to_string(),
        branch,
        head,
        branches,
        tags: None,
        dry_run: false,
    };
    Ok(output::structured(&out))
}

#[async_trait::async_trait]
impl Tool for GitClone {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "Clone a git repository into a new or empty directory. No \
                          submodules, hooks or filters run."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "minLength": 1, "description": "URL, user@host:path or local path."},
                    "path": {"type": "string", "minLength": 1, "description": "Destination: absent or empty."},
                    "branch": {"type": "string", "minLength": 1, "description": "Branch or tag (default: the remote's HEAD)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": "Commits of history (network URLs)."},
                    "dryRun": write::dry_run_schema()
                },
                "required": ["url", "path"],
                "additionalProperties": false
            }),
            capability: Capability::VcsWrite.as_str().to_owned(),
            annotations: ToolAnnotations::hints("git clone", false, false, false, true),
            default_timeout_ms: None,
            requires_bins: vec!["git".to_owned()],
            requires_approval: true,
        }
    }

    fn dry_run(&self, args: &Value) -> bool {
        write::is_dry_run(args)
    }

    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), gsv_protocol::ErrorShape> {
        if !write::is_dry_run(args) || ctx.approval.is_some() {
            return Ok(());
        }
        match args
            .get("url")
            .and_then(Value::as_str)
            .map(remote::classify)
        {
            Some(Ok(Ok(url))) => Err(write::ask_before_contacting(NAME, &remote::redact(&url))),
            _ => Ok(()),
        }
    }

    async fn plan(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let req = request(args, ctx).await.ok()?;
        if !req.is_local() {
            return Some(write::unlooked_plan(format!(
                "would clone {} into {}{}{}",
                req.source.shown(),
                req.dest.display(),
                req.branch
                    .as_deref()
                    .map(|b| format!(", branch {b}"))
                    .unwrap_or_default(),
                req.depth
                    .map(|d| format!(", depth {d}"))
                    .unwrap_or_default()
            )));
        }
        Some(match plan_of(&req, ctx).await {
            Ok(p) => plan_text(&p),
            Err(e) => format!(
                "would clone {} into {} ({e})",
                req.source.shown(),
                req.dest.display()
            ),
        })
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        match run(&args, &ctx).await {
            Ok(result) => result,
            Err(e) => e.into_result(NAME),
        }
    }
}
