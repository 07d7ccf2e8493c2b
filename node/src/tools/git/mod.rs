//! The git tools: `git_status`, `git_log`, `git_diff` and `git_show`, structured,
//! read-only (capability `vcs.read`), with a git that runs no program the repository
//! names; and the mutating `git_clone`, `git_commit`, `git_push` and `git_pull`
//! (capability `vcs.write`, operator approval by default, `dryRun`), see [`self::write`].
//!
//! An agent that wants to know a repository's state would otherwise run `git status`
//! through Bash, whose output it has to parse and which a repository's configuration
//! can turn into "run this" (`core.fsmonitor`, hooks, pagers, external diffs,
//! textconv and clean filters). These tools answer with typed results and run git as
//! [`run`] describes: no shell, a fixed argv, a hardened environment.
//!
//! Arguments never become options: a revision is refused when it starts with `-` and
//! is passed after `--end-of-options`; a file is passed after `--` as a literal
//! pathspec (`GIT_LITERAL_PATHSPECS=1`); numbers are numbers. `path` (the repository
//! directory, default the workspace) goes through the file tools' path rules
//! ([`crate::tools::paths`]): with `--confine` it must be inside the workspace, and
//! so must the repository's top level and git directory that git reports; a
//! protected directory is refused.

pub mod clone;
pub mod commit;
pub mod diff;
pub mod log;
pub mod on_host;
pub mod pull;
pub mod push;
pub mod remote;
pub mod run;
pub mod show;
pub mod status;
pub mod write;

use crate::tool::ToolContext;
use crate::tools::args::Args;
use crate::tools::paths::{AccessError, PathPolicy};
use gsv_protocol::ToolResult;
use run::{Git, GitError};
use rustix::fs::OFlags;
use serde_json::json;
use std::path::PathBuf;

/// Longest revision or file argument accepted.
pub const MAX_ARG_LEN: usize = 1024;

/// The `path` property every git tool's schema has.
pub fn path_schema() -> serde_json::Value {
    json!({
        "type": "string",
        "minLength": 1,
        "description": "The repository (default: the workspace)."
    })
}

/// A repository a git tool works on, ready to run git in.
pub struct Repo {
    pub git: Git,
    /// The work tree's top level (absolute).
    pub root: String,
}

/// Why a call is refused before git runs for its command.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error("{0}")]
    Git(#[from] GitError),
    #[error("Not a directory: {0}")]
    NotDir(String),
    #[error("Not inside a git work tree: {0}")]
    NotRepo(String),
}

impl RepoError {
    /// The tool's error result (`denied` refusals keep their structured content).
    pub fn into_result(self, tool: &str) -> ToolResult {
        match self {
            RepoError::Access(e) => e.into_result(),
            other => ToolResult::error(format!("{tool}: {other}")),
        }
    }
}

/// Which machine the git tools work on ([`crate::tools::Host`], shared by every tool).
pub use crate::tools::Host;

/// [`open`] on this machine, or [`on_host::open`] on the node's far host.
pub async fn open_on(
    path: Option<&str>,
    ctx: &ToolContext,
    host: &Host,
) -> Result<Repo, RepoError> {
    match host {
        Some(host) => on_host::open(path, ctx, host).await,
        None => open(path, ctx).await,
    }
}

/// Opens the repository `path` names (default `.`, the workspace) under the path
/// rules, and checks what git says about it against them.
pub async fn open(path: Option<&str>, ctx: &ToolContext) -> Result<Repo, RepoError> {
    let policy = PathPolicy::of(ctx);
    let arg = path.unwrap_or(".").to_owned();
    let confined = policy.is_confined();
    let checked = tokio::task::spawn_blocking({
        let policy = policy.clone();
        move || -> Result<PathBuf, RepoError> {
            let opened = policy.open(&arg, OFlags::PATH)?;
            let is_dir = rustix::fs::fstat(&opened.fd)
                .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir());
            if !is_dir {
                return Err(RepoError::NotDir(opened.path.display().to_string()));
            }
            Ok(opened.path)
        }
    })
    .await
    .map_err(|e| RepoError::NotRepo(format!("{e}")))??;
    let workspace = if confined {
        Some(policy.resolve(".")?)
    } else {
        None
    };
    let ceiling = workspace
        .as_ref()
        .and_then(|w| w.parent().map(|p| p.to_path_buf()));
    let mut git = Git::new(&checked, ceiling, ctx.cancel.clone());
    let (root, git_dir, common) = locate(&git, &checked.display().to_string()).await?;
    let (root, git_dir, common) = (root.as_str(), git_dir.as_str(), common.as_str());
    let common = checked.join(common);
    let snapshot = ctx.protected.snapshot();
    for dir in [PathBuf::from(root), PathBuf::from(git_dir), common] {
        let real = std::fs::canonicalize(&dir).unwrap_or(dir);
        if let Some(ws) = &workspace {
            if !real.starts_with(ws) {
                return Err(AccessError::Outside(format!(
                    "Refused: the repository at {} uses {}, outside the workspace {} \
                     (this node is confined to its workspace)",
                    checked.display(),
                    real.display(),
                    ws.display()
                ))
                .into());
            }
        }
        if snapshot.covers_real_path(&real) {
            return Err(AccessError::Protected {
                path: real.display().to_string(),
            }
            .into());
        }
    }
    git.neutralise_drivers().await?;
    Ok(Repo {
        git,
        root: root.to_owned(),
    })
}

/// The repository `git` runs in, as git names it: its work tree's top level, its git
/// directory and its common git directory (as given, possibly relative). `shown`
/// names the directory in errors. Checks git's version first.
pub(crate) async fn locate(git: &Git, shown: &str) -> Result<(String, String, String), RepoError> {
    git.check_version().await?;
    let out = git
        .run(&[
            "rev-parse",
            "--show-toplevel",
            "--absolute-git-dir",
            "--git-common-dir",
        ])
        .await
        .map_err(|e| match e {
            GitError::Failed { stderr, .. } => RepoError::NotRepo(format!("{shown} ({stderr})")),
            other => RepoError::Git(other),
        })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    match (lines.next(), lines.next(), lines.next()) {
        (Some(root), Some(git_dir), Some(common)) => {
            Ok((root.to_owned(), git_dir.to_owned(), common.to_owned()))
        }
        _ => Err(RepoError::NotRepo(shown.to_owned())),
    }
}

/// An optional revision argument: refused when empty, too long, holding NUL or
/// starting with `-` (it would read as an option).
pub fn revision<'a>(args: &Args<'a>, name: &str) -> Result<Option<&'a str>, String> {
    let Some(rev) = args.str(name)? else {
        return Ok(None);
    };
    if rev.is_empty() || rev.len() > MAX_ARG_LEN || rev.contains('\0') {
        return Err(format!(
            "{name:?} must be a revision of 1 to {MAX_ARG_LEN} bytes"
        ));
    }
    if rev.starts_with('-') {
        return Err(format!(
            "{name:?} must be a revision, not an option: {rev:?} starts with '-'"
        ));
    }
    Ok(Some(rev))
}

/// An optional file argument (a literal path in the repository, passed after `--`).
pub fn file<'a>(args: &Args<'a>) -> Result<Option<&'a str>, String> {
    let Some(file) = args.str("file")? else {
        return Ok(None);
    };
    if file.is_empty() || file.len() > MAX_ARG_LEN || file.contains('\0') {
        return Err(format!(
            "\"file\" must be a path of 1 to {MAX_ARG_LEN} bytes"
        ));
    }
    Ok(Some(file))
}

/// Resolves `rev` to a commit id (`git rev-parse --verify --end-of-options
/// <rev>^{commit}`), so later commands get a hash, never the agent's text.
pub async fn commit_id(git: &Git, rev: &str) -> Result<String, GitError> {
    let spec = format!("{rev}^{{commit}}");
    let out = git
        .run(&["rev-parse", "--verify", "--end-of-options", &spec])
        .await?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(GitError::Unparseable(format!("rev-parse answered {id:?}")));
    }
    Ok(id)
}
