//! git_push: pushes one local branch to a configured remote, reporting each ref
//! update, so an agent publishes work without a shell command and without the
//! repository naming a program for the push to run.
//!
//! Runs `git push --porcelain [--set-upstream] [--force-with-lease]
//! --end-of-options <remote> refs/heads/<branch>:refs/heads/<branch>` with the
//! hardened git of [`super::write`]: no pre-push or reference-transaction hook (nor, for
//! a local remote, its receive hooks), `remote.<name>.receivepack` pinned, and every
//! push URL of the remote (after `pushInsteadOf`) checked like git_clone's URL.
//!
//! Force: a plain `force` is refused. `forceWithLease: true` overwrites the remote
//! branch only if it is still where this clone last saw it (its remote-tracking
//! branch): someone else's newer commits are never lost silently.
//!
//! `dryRun: true` runs `git push --dry-run --porcelain` (the remote is asked, nothing
//! is sent or updated).
//!
//! Result (`structuredContent`): [`PushOutput`].

use super::remote;
use super::run::text;
use super::write::{self, WriteError};
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output::{self, is_false};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::Path;

/// The git_push tool.
pub struct GitPush;

const NAME: &str = "git_push";
const KEYS: &[&str] = &[
    "path",
    "remote",
    "branch",
    "setUpstream",
    "force",
    "forceWithLease",
    "dryRun",
];

/// git_push's structured content.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushOutput {
    pub remote: String,
    /// The remote's push URL(s) (local paths resolved).
    pub urls: Vec<String>,
    pub branch: String,
    /// Each ref update git reported.
    pub refs: Vec<RefUpdate>,
    /// Whether every ref was updated or already up to date.
    pub ok: bool,
    /// Whether this only said what would happen.
    #[serde(skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

/// One line of `git push --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefUpdate {
    /// `fastForward`, `forced`, `new`, `deleted`, `rejected` or `upToDate`.
    pub status: &'static str,
    pub from: String,
    pub to: String,
    /// git's summary (`abc..def`, `[new branch]`, `[rejected] (fetch first)`).
    pub summary: String,
}

/// Parses `git push --porcelain` output.
pub fn parse_porcelain(out: &[u8]) -> Vec<RefUpdate> {
    let out = text(out);
    out.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, '\t');
            let (flag, refs, summary) = (parts.next()?, parts.next()?, parts.next()?);
            let status = match flag {
                " " => "fastForward",
                "+" => "forced",
                "-" => "deleted",
                "*" => "new",
                "!" => "rejected",
                "=" => "upToDate",
                _ => return None,
            };
            let (from, to) = refs.split_once(':').unwrap_or((refs, ""));
            Some(RefUpdate {
                status,
                from: from.to_owned(),
                to: to.to_owned(),
                summary: summary.to_owned(),
            })
        })
        .collect()
}

struct Request {
    path: Option<String>,
    remote: String,
    branch: Option<String>,
    set_upstream: bool,
    lease: bool,
    dry_run: bool,
}

fn request(args: &Value) -> Result<Request, WriteError> {
    let a = Args::new(args, KEYS)?;
    if a.bool("force")? == Some(true) {
        return Err(WriteError::Refused(
            "\"force\" is refused: set \"forceWithLease\": true instead (it overwrites the \
             remote branch only if nobody else pushed to it since this clone last fetched)"
                .into(),
        ));
    }
    let branch = a.str("branch")?.map(str::to_owned);
    if let Some(b) = &branch {
        write::name_arg("branch", b)?;
    }
    Ok(Request {
        path: a.str("path")?.map(str::to_owned),
        remote: write::remote_arg(a.str("remote")?)?,
        branch,
        set_upstream: a.bool("setUpstream")?.unwrap_or(false),
        lease: a.bool("forceWithLease")?.unwrap_or(false),
        dry_run: a.bool("dryRun")?.unwrap_or(false),
    })
}

async fn push(req: &Request, dry_run: bool, ctx: &ToolContext) -> Result<PushOutput, WriteError> {
    let repo = super::open(req.path.as_deref(), ctx).await?;
    let sources =
        remote::remote_urls(&repo.git, &req.remote, true, Path::new(&repo.root), ctx).await?;
    let local = remote::all_local(&sources)?;
    let git = write::harden(repo.git);
    let branch = match &req.branch {
        Some(b) => write::branch_arg(&git, "branch", b).await?,
        None => write::current_branch(&git).await?.ok_or_else(|| {
            WriteError::Refused("HEAD is detached: name the \"branch\" to push".into())
        })?,
    };
    let local_ref = format!("refs/heads/{branch}");
    if write::resolve(&git, &local_ref).await?.is_none() {
        return Err(WriteError::Refused(format!("no local branch {branch:?}")));
    }
    let mut argv = vec![
        "push".to_owned(),
        "--porcelain".to_owned(),
        remote::receive_pack_option(local),
    ];
    if dry_run {
        argv.push("--dry-run".into());
    } else if req.set_upstream {
        argv.push("--set-upstream".into());
    }
    if req.lease {
        argv.push(format!("--force-with-lease={local_ref}"));
    }
    argv.push("--end-of-options".into());
    argv.push(req.remote.clone());
    argv.push(format!("{local_ref}:{local_ref}"));
    let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
    if !dry_run {
        tracing::info!(repo = ?repo.root, remote = ?req.remote, branch = ?branch, "git_push");
    }
    let out = git.run_status(&refs, &[0, 1]).await?;
    let updates = parse_porcelain(&out.stdout);
    if updates.is_empty() {
        return Err(WriteError::Refused(format!(
            "git push reported no ref update: {}",
            text(&out.stdout).trim()
        )));
    }
    Ok(PushOutput {
        remote: req.remote.clone(),
        urls: sources.iter().map(|s| s.shown()).collect(),
        branch,
        ok: updates.iter().all(|u| u.status != "rejected"),
        refs: updates,
        dry_run,
    })
}

fn plan_text(p: &PushOutput) -> String {
    let mut text = format!(
        "would push {} to {} ({})\n",
        p.branch,
        p.remote,
        p.urls.join(", ")
    );
    for r in &p.refs {
        text.push_str(&format!(
            "  {} {} -> {}: {}\n",
            r.status, r.from, r.to, r.summary
        ));
    }
    text.trim_end().to_owned()
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolResult, WriteError> {
    let req = request(args)?;
    let out = push(&req, req.dry_run, ctx).await?;
    if req.dry_run {
        return Ok(output::with_text(plan_text(&out), &out));
    }
    if !out.ok {
        let why: Vec<String> = out
            .refs
            .iter()
            .filter(|r| r.status == "rejected")
            .map(|r| format!("{} {}", r.to, r.summary))
            .collect();
        return Ok(output::error_with(
            format!("{NAME}: the remote rejected {}", why.join("; ")),
            &out,
        ));
    }
    Ok(output::structured(&out))
}

#[async_trait::async_trait]
impl Tool for GitPush {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: NAME.to_owned(),
            description: "Push a local branch to a configured remote. No hooks run; no \
                          force beyond forceWithLease."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": super::path_schema(),
                    "remote": {"type": "string", "minLength": 1, "description": "Default origin."},
                    "branch": {"type": "string", "minLength": 1, "description": "Default: the current one."},
                    "setUpstream": {"type": "boolean", "description": "Set it as upstream."},
                    "forceWithLease": {"type": "boolean", "description": "Overwrite it if still where this clone saw it."},
                    "force": {"type": "boolean", "description": "Refused: use forceWithLease."},
                    "dryRun": write::dry_run_schema()
                },
                "additionalProperties": false
            }),
            capability: Capability::VcsWrite.as_str().to_owned(),
            annotations: ToolAnnotations::hints("git push", false, true, false, true),
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
        remote::ask_before_network_dry_run(NAME, args, req.path.as_deref(), &req.remote, true, ctx)
            .await
    }

    async fn plan(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let req = request(args).ok()?;
        if let Some(urls) = remote::network_urls(req.path.as_deref(), &req.remote, true, ctx).await
        {
            return Some(write::unlooked_plan(format!(
                "would push {} to {} ({})",
                req.branch.as_deref().unwrap_or("the current branch"),
                req.remote,
                urls.join(", ")
            )));
        }
        Some(match push(&req, true, ctx).await {
            Ok(p) => plan_text(&p),
            Err(e) => format!("would push to {} (the dry run failed: {e})", req.remote),
        })
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        match run(&args, &ctx).await {
            Ok(result) => result,
            Err(e) => e.into_result(NAME),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_is_parsed() {
        let out = b"To /srv/o.git\n \trefs/heads/main:refs/heads/main\ta1..b2\n\
*\trefs/heads/x:refs/heads/x\t[new branch]\n\
!\trefs/heads/y:refs/heads/y\t[rejected] (fetch first)\nDone\n";
        let u = parse_porcelain(out);
        assert_eq!(u.len(), 3);
        assert_eq!(u[0].status, "fastForward");
        assert_eq!(u[1].status, "new");
        assert_eq!(
            (u[2].status, u[2].to.as_str()),
            ("rejected", "refs/heads/y")
        );
    }
}
