//! git_pull: fetches a remote branch and brings the current branch up to it, so an
//! agent updates a clone without a shell command, and never gets a merge commit it did
//! not ask for.
//!
//! Runs `git fetch --no-tags <remote> +refs/heads/<b>:refs/remotes/<remote>/<b>`
//! then `git merge --ff-only <commit>` (with `ffOnly: false`, `git merge --no-edit`,
//! refused when the repository configures a merge driver, a program the merge would
//! run). The hardened git of [`super::write`]: no hooks (post-merge, post-checkout),
//! filters or signature checks; `remote.<name>.uploadpack` pinned; every fetch URL of
//! the remote (after `insteadOf`) checked like git_clone's URL.
//!
//! A merge commit (`ffOnly: false`) gets git_commit's author and committer.
//!
//! `remote` defaults to `origin`; `branch` (the remote's branch) to the current
//! branch's upstream on that remote, else the current branch's name.
//!
//! `dryRun: true` asks the remote where the branch is (`git ls-remote`, nothing is
//! fetched) and compares with HEAD: up to date, a fast-forward of N commits (when the
//! commits are already here), ahead, diverged, or "not fetched yet".
//!
//! Result (`structuredContent`): [`PullOutput`].

use super::remote;
use super::run::{nul_fields, text, Git};
use super::write::{self, short, ChangedFile, WriteError};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The git_pull tool.
pub struct GitPull;

const NAME: &str = "git_pull";
const KEYS: &[&str] = &["path", "remote", "branch", "ffOnly", "dryRun"];
/// Most commits listed.
pub const MAX_COMMITS: usize = 200;

/// git_pull's structured content.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullOutput {
    pub remote: String,
    /// The remote's branch.
    pub branch: String,
    /// HEAD before.
    pub old_head: String,
    /// HEAD after (for a dry run: the remote's commit).
    pub new_head: String,
    /// `upToDate`, `fastForward`, `merged`, `ahead`, `diverged` or `notFetched` (dry
    /// run: the remote has commits this clone does not have yet).
    pub state: &'static str,
    /// The commits pulled (or that would be), newest first.
    pub commits: Vec<Commit>,
    /// The files that changed (or would).
    pub files: Vec<ChangedFile>,
    /// Whether this only said what would happen.
    #[serde(skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

/// A commit pulled.
#[derive(Debug, Clone, Serialize)]
pub struct Commit {
    pub hash: String,
    pub subject: String,
}

struct Request {
    path: Option<String>,
    remote: String,
    branch: Option<String>,
    ff_only: bool,
    dry_run: bool,
}

fn request(args: &Value) -> Result<Request, WriteError> {
    let a = Args::new(args, KEYS)?;
    let branch = a.str("branch")?.map(str::to_owned);
    if let Some(b) = &branch {
        write::name_arg("branch", b)?;
    }
    Ok(Request {
        path: a.str("path")?.map(str::to_owned),
        remote: write::remote_arg(a.str("remote")?)?,
        branch,
        ff_only: a.bool("ffOnly")?.unwrap_or(true),
        dry_run: a.bool("dryRun")?.unwrap_or(false),
    })
}

/// Everything checked before git reaches the remote.
struct Prepared {
    git: Git,
    root: String,
    branch: String,
    old: String,
    /// `--upload-pack=…` for this remote.
    upload_pack: String,
}

async fn prepare(req: &Request, ctx: &ToolContext) -> Result<Prepared, WriteError> {
    let repo = super::open(req.path.as_deref(), ctx).await?;
    let sources =
        remote::remote_urls(&repo.git, &req.remote, false, Path::new(&repo.root), ctx).await?;
    let local = remote::all_local(&sources)?;
    let (identity, _) = write::identity(&repo.git).await?;
    let git = write::harden(repo.git).with_settings(identity);
    let current = write::current_branch(&git).await?.ok_or_else(|| {
        WriteError::Refused("HEAD is detached: check out a branch to pull into".into())
    })?;
    let old = write::resolve(&git, "HEAD")
        .await?
        .ok_or_else(|| WriteError::Refused(format!("{current:?} has no commit yet")))?;
    let branch = match &req.branch {
        Some(b) => b.clone(),
        None => upstream(&git, &current, &req.remote)
            .await?
            .unwrap_or(current),
    };
    // The default comes from the repository's configuration: checked the same way.
    let branch = write::branch_arg(&git, "branch", &branch).await?;
    Ok(Prepared {
        git,
        root: repo.root,
        branch,
        old,
        upload_pack: remote::upload_pack_option(local),
    })
}

/// The current branch's upstream branch name, when its upstream is on `remote`.
async fn upstream(git: &Git, current: &str, remote: &str) -> Result<Option<String>, WriteError> {
    let key = format!("branch.{current}.remote");
    let configured = git.run_status(&["config", "--get", &key], &[0, 1]).await?;
    if text(&configured.stdout).trim() != remote {
        return Ok(None);
    }
    let key = format!("branch.{current}.merge");
    let merge = git.run_status(&["config", "--get", &key], &[0, 1]).await?;
    let merge = text(&merge.stdout).trim().to_owned();
    Ok(merge
        .strip_prefix("refs/heads/")
        .filter(|b| !b.is_empty() && !b.starts_with('-'))
        .map(str::to_owned))
}

async fn commits(git: &Git, from: &str, to: &str) -> Result<Vec<Commit>, WriteError> {
    let range = format!("{from}..{to}");
    let max = format!("--max-count={MAX_COMMITS}");
    let out = git
        .run(&[
            "log",
            "-z",
            "--format=%H%x00%s",
            &max,
            "--end-of-options",
            &range,
        ])
        .await?;
    let fields = nul_fields(&out.stdout);
    Ok(fields
        .chunks(2)
        .filter_map(|c| match c {
            [hash, subject] => Some(Commit {
                hash: text(hash).trim().to_owned(),
                subject: text(subject),
            }),
            _ => None,
        })
        .collect())
}

/// Whether commit `a` is an ancestor of (or is) commit `b` (both full ids).
async fn is_ancestor(git: &Git, a: &str, b: &str) -> Result<bool, WriteError> {
    let out = git
        .run_status(&["merge-base", "--end-of-options", a, b], &[0, 1])
        .await?;
    Ok(text(&out.stdout).trim() == a)
}

async fn plan_of(req: &Request, ctx: &ToolContext) -> Result<PullOutput, WriteError> {
    let p = prepare(req, ctx).await?;
    let wanted = format!("refs/heads/{}", p.branch);
    let out = p
        .git
        .run(&[
            "ls-remote",
            &p.upload_pack,
            "--end-of-options",
            &req.remote,
            &wanted,
        ])
        .await?;
    let (refs, _) = remote::parse_ls_remote(&out.stdout);
    let Some(remote) = refs.into_iter().find(|r| r.name == wanted) else {
        return Err(WriteError::Refused(format!(
            "the remote {} has no branch {:?}",
            req.remote, p.branch
        )));
    };
    let mut plan = PullOutput {
        remote: req.remote.clone(),
        branch: p.branch.clone(),
        old_head: p.old.clone(),
        new_head: remote.id.clone(),
        dry_run: true,
        ..Default::default()
    };
    let known = write::resolve(&p.git, &remote.id).await?.is_some();
    plan.state = if remote.id == p.old {
        "upToDate"
    } else if !known {
        "notFetched"
    } else if is_ancestor(&p.git, &p.old, &remote.id).await? {
        plan.commits = commits(&p.git, &p.old, &remote.id).await?;
        plan.files = write::changed_files(&p.git, &p.old, &remote.id).await?;
        "fastForward"
    } else if is_ancestor(&p.git, &remote.id, &p.old).await? {
        "ahead"
    } else {
        "diverged"
    };
    Ok(plan)
}

fn plan_text(p: &PullOutput) -> String {
    let what = match p.state {
        "upToDate" => "nothing to pull: up to date".to_owned(),
        "notFetched" => format!(
            "would fetch {} (not in this clone yet) and fast-forward only if it descends \
             from HEAD {}",
            short(&p.new_head),
            short(&p.old_head)
        ),
        "fastForward" => format!(
            "would fast-forward {} -> {}: {} commit(s), {} file(s)",
            short(&p.old_head),
            short(&p.new_head),
            p.commits.len(),
            p.files.len()
        ),
        "ahead" => "nothing to pull: HEAD already contains the remote branch".to_owned(),
        _ => format!(
            "HEAD {} and {} have diverged: a fast-forward-only pull would be refused",
            short(&p.old_head),
            short(&p.new_head)
        ),
    };
    let mut text = format!("pull {}/{}: {what}\n", p.remote, p.branch);
    for c in p.commits.iter().take(10) {
        text.push_str(&format!("  {} {}\n", short(&c.hash), c.subject));
    }
    text.trim_end().to_owned()
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolResult, WriteError> {
    let req = request(args)?;
    if req.dry_run {
        let p = plan_of(&req, ctx).await?;
        return Ok(output::with_text(plan_text(&p), &p));
    }
    let p = prepare(&req, ctx).await?;
    let git = &p.git;
    {
        let (root, protected) = (PathBuf::from(&p.root), Arc::clone(&ctx.protected));
        tokio::task::spawn_blocking(move || write::refuse_protected_inside(&root, &protected))
            .await
            .map_err(|e| WriteError::Refused(format!("cannot check the work tree: {e}")))??;
    }
    if !req.ff_only {
        let drivers = git
            .run_status(
                &[
                    "config",
                    "--name-only",
                    "--get-regexp",
                    r"^merge\..*\.driver$",
                ],
                &[0, 1],
            )
            .await?;
        let names = text(&drivers.stdout);
        if !names.trim().is_empty() {
            return Err(WriteError::Refused(format!(
                "the repository configures merge drivers ({}), programs a merge would run; \
                 pull with ffOnly, or remove them",
                names.split_whitespace().collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let tracking = format!("refs/remotes/{}/{}", req.remote, p.branch);
    let refspec = format!("+refs/heads/{}:{tracking}", p.branch);
    tracing::info!(repo = ?p.root, remote = ?req.remote, branch = ?p.branch, "git_pull");
    git.run(&[
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-recurse-submodules",
        &p.upload_pack,
        "--end-of-options",
        &req.remote,
        &refspec,
    ])
    .await?;
    let target = write::resolve(git, &tracking)
        .await?
        .ok_or_else(|| WriteError::Refused(format!("fetched nothing for {tracking}")))?;
    let mut out = PullOutput {
        remote: req.remote.clone(),
        branch: p.branch.clone(),
        old_head: p.old.clone(),
        ..Default::default()
    };
    if is_ancestor(git, &target, &p.old).await? {
        out.new_head = p.old.clone();
        out.state = if target == p.old { "upToDate" } else { "ahead" };
        return Ok(output::structured(&out));
    }
    let fast_forward = is_ancestor(git, &p.old, &target).await?;
    if req.ff_only && !fast_forward {
        return Err(WriteError::Refused(format!(
            "HEAD {} and {}/{} ({}) have diverged and ffOnly is set: nothing was merged \
             (the remote branch was fetched)",
            short(&p.old),
            req.remote,
            p.branch,
            short(&target)
        )));
    }
    let message = format!("--message=Merge branch '{}' of {}", p.branch, req.remote);
    let mut argv = vec![
        "merge",
        "--quiet",
        "--no-verify",
        "--no-edit",
        "--no-gpg-sign",
    ];
    if req.ff_only {
        argv.push("--ff-only");
    } else {
        argv.push(&message);
    }
    argv.push("--end-of-options");
    argv.push(&target);
    git.run(&argv).await?;
    let new = write::resolve(git, "HEAD").await?.unwrap_or_default();
    out.commits = commits(git, &p.old, &new).await?;
    out.files = write::changed_files(git, &p.old, &new).await?;
    out.state = if fast_forward {
        "fastForward"
    } else {
        "merged"
    };
    out.new_head = new;
    Ok(output::structured(&out))
}

#[async_trait::async_trait]
impl Tool for GitPull {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "Fetch a remote branch and fast-forward the current branch to \
                          it. No hooks or filters run."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": super::path_schema(),
                    "remote": {"type": "string", "minLength": 1, "description": "Default origin."},
                    "branch": {"type": "string", "minLength": 1, "description": "Default: the upstream."},
                    "ffOnly": {"type": "boolean", "description": "Default true; false may make a merge commit."},
                    "dryRun": write::dry_run_schema()
                },
                "additionalProperties": false
            }),
            capability: Capability::VcsWrite.as_str().to_owned(),
            annotations: ToolAnnotations::hints("git pull", false, false, false, true),
            default_timeout_ms: None,
            requires_bins: vec!["git".to_owned()],
            requires_approval: true,
        }
    }

    fn dry_run(&self, args: &Value) -> bool {
        write::is_dry_run(args)
    }

    async fn check(&self, args: &Value, ctx: &ToolContext) -> Result<(), gsv_protocol::ErrorShape> {
        let Ok(req) = request(args) else {
            return Ok(());
        };
        remote::ask_before_network_dry_run(NAME, args, req.path.as_deref(), &req.remote, false, ctx)
            .await
    }

    async fn plan(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let req = request(args).ok()?;
        if let Some(urls) = remote::network_urls(req.path.as_deref(), &req.remote, false, ctx).await
        {
            return Some(write::unlooked_plan(format!(
                "would pull {} from {} ({})",
                req.branch.as_deref().unwrap_or("the current branch"),
                req.remote,
                urls.join(", ")
            )));
        }
        Some(match plan_of(&req, ctx).await {
            Ok(p) => plan_text(&p),
            Err(e) => format!("would pull from {} (the dry run failed: {e})", req.remote),
        })
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        match run(&args, &ctx).await {
            Ok(result) => result,
            Err(e) => e.into_result(NAME),
        }
    }
}
