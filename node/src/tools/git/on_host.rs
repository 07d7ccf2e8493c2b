//! Opening a repository on the host of an SSH- or container-backed node, under the
//! same rules as [`super::open`] on a local one: the directory goes through the
//! remote path check (`gsv_check`: confined to the workspace with `--confine`, never
//! the node's own directory on the host), and so do the work tree's top level, the
//! git directory and the common git directory that git reports. git itself runs on
//! the host with the hardened environment of [`super::run`]
//! ([`super::run::Git::on_host`]).

use super::run::{Git, GitError, OnHost};
use super::{Repo, RepoError};
use crate::remote::channel::Reply;
use crate::remote::{Lane, RemoteHost};
use crate::tool::ToolContext;
use crate::tools::paths::AccessError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Opens the repository `path` names (default the workspace) on `host`.
pub async fn open(
    path: Option<&str>,
    ctx: &ToolContext,
    host: &Arc<RemoteHost>,
) -> Result<Repo, RepoError> {
    let wanted = ctx.resolve_path(path.unwrap_or("."));
    let shown = wanted.display().to_string();
    let check = check_line(ctx, &wanted)?;
    let script = format!(
        r#"gsv_main() {{
  {check}
  if [ ! -e "$gsv_p" ]; then gsv_text error notfound; return 0; fi
  if [ ! -d "$gsv_p" ]; then gsv_text error notdir; return 0; fi
  gsv_text dir "$gsv_p"
  gsv_text ws "$gsv_wr"
}}
gsv_main"#
    );
    let reply = ask(host, ctx, &script).await?;
    refused(&reply, &shown)?;
    let dir = reply
        .text("dir")
        .ok_or_else(|| RepoError::NotRepo(shown.clone()))?;
    let ceiling = if ctx.confine {
        reply
            .text("ws")
            .filter(|w| w.starts_with('/'))
            .and_then(|w| Path::new(&w).parent().map(Path::to_path_buf))
    } else {
        None
    };
    let on = OnHost {
        host: Arc::clone(host),
        owner: ctx.owner().map(str::to_owned),
    };
    let mut git = Git::new(Path::new(&dir), ceiling, ctx.cancel.clone()).on_host(on);
    let (root, git_dir, common) = super::locate(&git, &dir).await?;
    // What git names must pass the same check: a repository whose work tree or git
    // directory lies outside the workspace (a `.git` file pointing out) is refused.
    let mut script = String::from("gsv_main() {\n");
    for used in [
        PathBuf::from(&root),
        PathBuf::from(&git_dir),
        Path::new(&dir).join(common),
    ] {
        script.push_str("  ");
        script.push_str(&check_line(ctx, &used)?);
        script.push('\n');
    }
    script.push_str("}\ngsv_main");
    let reply = ask(host, ctx, &script).await?;
    refused(&reply, &dir)?;
    git.neutralise_drivers().await?;
    Ok(Repo {
        git,
        root: root.to_owned(),
    })
}

/// The `gsv_check` line for `path`, or the refusal of a path no shell word can hold.
fn check_line(ctx: &ToolContext, path: &Path) -> Result<String, RepoError> {
    crate::tools::paths::on_host::check_line(ctx, path).ok_or_else(|| {
        RepoError::Access(AccessError::Unresolvable(format!(
            "{} cannot be passed to the host",
            path.display()
        )))
    })
}

async fn ask(host: &RemoteHost, ctx: &ToolContext, script: &str) -> Result<Reply, RepoError> {
    host.run(Lane::Work, ctx.owner(), script, 64 * 1024)
        .await
        .map_err(|e| RepoError::Git(GitError::Host(e.to_string())))
}

/// The refusal the check reported, if any.
fn refused(reply: &Reply, shown: &str) -> Result<(), RepoError> {
    let Some(kind) = reply.text("error") else {
        return Ok(());
    };
    let msg = reply.text("msg").unwrap_or_default();
    Err(match kind.as_str() {
        "outside" => AccessError::Outside(msg).into(),
        "protected" => AccessError::Protected {
            path: if msg.is_empty() {
                shown.to_owned()
            } else {
                msg
            },
        }
        .into(),
        "notfound" => RepoError::NotDir(format!("{shown} (no such directory)")),
        "notdir" => RepoError::NotDir(shown.to_owned()),
        _ => AccessError::Unresolvable(if msg.is_empty() {
            format!("cannot check {shown} on the host")
        } else {
            msg
        })
        .into(),
    })
}
