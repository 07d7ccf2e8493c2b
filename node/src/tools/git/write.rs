//! What the mutating git tools (`git_clone`, `git_commit`, `git_push`, `git_pull`)
//! share: the settings they force on top of the read tools' hardened git, name
//! checks, and their error type ([`super::remote`]: where their git may reach).
//!
//! These tools change a repository (or another one: a push), so each needs an
//! operator's approval by default ([`crate::guards::posture`]); `dryRun: true`
//! changes nothing (it may ask the remote, read-only), which is what lets it run
//! without one ([`crate::tool::Tool::dry_run`]) and be the plan an approval request
//! shows ([`crate::tool::Tool::plan`]). Their git is [`super::run::Git`] with, in
//! addition:
//!
//! - [`WRITE_SETTINGS`]: transports https, http, ssh, git and file allowed (the forced
//!   `protocol.allow=never` stays the default for every other, `ext::` and `fd::`
//!   included), no signing (`gpg.program` never runs), `core.editor=:` (git's "no
//!   editor"), no submodule recursion, no automatic gc or maintenance;
//! - `--upload-pack` / `--receive-pack` on every fetch, ls-remote, clone and push:
//!   git's own programs, so a repository's `remote.<name>.uploadpack` / `receivepack`
//!   never names the command a local fetch or push runs (and, for a local remote, the
//!   other repository's hooks do not run: [`super::remote::LOCAL_RECEIVE_PACK`]);
//! - for runs that reach a remote ([`network_vars`]): `GIT_SSH_COMMAND=ssh -o
//!   BatchMode=yes` (no `core.sshCommand` from the repository, no `GIT_SSH_COMMAND` of the node;
//!   the owner's `ssh` with its own `~/.ssh` configuration and keys, never a prompt),
//!   `GIT_PROXY_COMMAND=` (no `core.gitProxy`), `GIT_ASKPASS=` (no `core.askPass`), and
//!   the node's `SSH_AUTH_SOCK` passed through when it has one (the owner's agent).
//!   Credential helpers never run: `credential.helper` is forced empty and no user or
//!   system configuration is read, so https remotes that need a password fail.
//!
//! Hooks never run (`core.hooksPath=/dev/null`, `--no-verify`), nor do filters and
//! textconv drivers (emptied, as for the read tools) or merge drivers (a merge that
//! could run one is refused).
//!
//! A URL is refused unless it is `https://`, `http://`, `ssh://`, `git://`, `file://`,
//! scp-like `[user@]host:path`, or a local path; a local path (or `file://`) goes
//! through the file tools' path rules, so a confined node only clones, fetches from
//! or pushes to repositories inside its workspace — and, for a local repository, its
//! git directory, common directory and alternates too ([`super::remote::check_local_repo`]). The
//! URLs a remote really uses (after `insteadOf` rewriting) are checked the same way
//! before a fetch or push, and a remote naming a transport helper
//! (`remote.<name>.vcs`) is refused.

use super::run::{Git, GitError};
use super::RepoError;
use crate::protected::Protected;
use crate::tools::paths::AccessError;
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// Settings every mutating git tool forces, after the read tools' ones.
pub const WRITE_SETTINGS: &[(&str, &str)] = &[
    ("protocol.https.allow", "always"),
    ("protocol.http.allow", "always"),
    ("protocol.ssh.allow", "always"),
    ("protocol.git.allow", "always"),
    ("protocol.file.allow", "always"),
    ("protocol.ext.allow", "never"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("init.templateDir", ""),
    ("transfer.bundleURI", "false"),
    ("core.alternateRefsCommand", "true"),
    ("http.cookieFile", ""),
    ("fetch.bundleURI", ""),
    ("advice.detachedHead", "false"),
];

/// The identity a commit gets when the repository's configuration has none.
pub const DEFAULT_NAME: &str = "gsv node";
/// See [`DEFAULT_NAME`].
pub const DEFAULT_EMAIL: &str = "gsv-node@localhost";

/// Longest URL, remote or branch name accepted.
pub const MAX_NAME_LEN: usize = 1024;

/// Why a mutating git tool refused or failed a call.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{0}")]
    Arg(String),
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error("{0}")]
    Git(#[from] GitError),
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error("refused URL {url:?}: {why}")]
    Url { url: String, why: String },
    #[error("{0}")]
    Refused(String),
}

impl WriteError {
    /// The tool's error result (path refusals keep their structured content).
    pub fn into_result(self, tool: &str) -> ToolResult {
        match self {
            WriteError::Access(e) => e.into_result(),
            WriteError::Repo(e) => e.into_result(tool),
            other => ToolResult::error(format!("{tool}: {other}")),
        }
    }
}

impl From<String> for WriteError {
    fn from(message: String) -> Self {
        WriteError::Arg(message)
    }
}

/// Whether the call's arguments say `dryRun: true`.
/// What a dry run of `tool` that would contact the network remote `remote` answers
/// without an operator's approval: `approval_required`. A dry run changes nothing here,
/// but it connects to a host the agent named (`ls-remote`, `push --dry-run`), which a
/// node does for no agent without an operator (as `fetch_url` does not reach public
/// hosts on its own); local remotes need nobody.
pub fn ask_before_contacting(tool: &str, remote: &str) -> gsv_protocol::ErrorShape {
    let reason = format!(
        "a dry run of {tool} contacts the remote {remote}, a network address; a node connects \
         to a host an agent names only once an operator approves"
    );
    crate::guards::ask_operator("dry run", &reason, &format!("{tool} dry run: {remote}"))
}

/// The plan shown for a call that would contact the network remote `remote`: what the
/// call names, without contacting it before an operator approves.
pub fn unlooked_plan(what: String) -> String {
    format!(
        "{what}\n(the remote is on the network: what it holds is not looked up before an \
         operator approves)"
    )
}

pub fn is_dry_run(args: &Value) -> bool {
    args.get("dryRun") == Some(&Value::Bool(true))
}

/// The `dryRun` property of every mutating git tool's schema.
pub fn dry_run_schema() -> Value {
    serde_json::json!({
        "type": "boolean",
        "description": "Say what would happen, change nothing (no approval needed)."
    })
}

/// `git` made ready for a mutating tool: [`WRITE_SETTINGS`] and [`network_vars`].
pub fn harden(git: Git) -> Git {
    let settings = WRITE_SETTINGS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    git.with_settings(settings).with_vars(network_vars())
}

/// The environment of a git run that may reach a remote (see the module doc).
pub fn network_vars() -> Vec<(String, String)> {
    let mut vars = vec![
        (
            "GIT_SSH_COMMAND".to_owned(),
            "ssh -o BatchMode=yes".to_owned(),
        ),
        ("GIT_PROXY_COMMAND".to_owned(), String::new()),
        ("GIT_ASKPASS".to_owned(), String::new()),
        ("GIT_PROTOCOL_FROM_USER".to_owned(), "1".to_owned()),
    ];
    if let Ok(sock) = std::env::var("SSH_AUTH_SOCK") {
        vars.push(("SSH_AUTH_SOCK".to_owned(), sock));
    }
    vars
}

/// The identity settings to force when the repository configures none.
pub async fn identity(git: &Git) -> Result<(Vec<(String, String)>, String), GitError> {
    let mut forced = Vec::new();
    let mut shown = Vec::new();
    for (key, default) in [("user.name", DEFAULT_NAME), ("user.email", DEFAULT_EMAIL)] {
        let out = git.run_status(&["config", "--get", key], &[0, 1]).await?;
        let value = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if value.is_empty() {
            forced.push((key.to_owned(), default.to_owned()));
            shown.push(default.to_owned());
        } else {
            shown.push(value);
        }
    }
    let who = format!(
        "{} <{}>",
        shown.first().map(String::as_str).unwrap_or(DEFAULT_NAME),
        shown.get(1).map(String::as_str).unwrap_or(DEFAULT_EMAIL)
    );
    Ok((forced, who))
}

/// A name-like argument (remote, branch): refused when empty, too long, holding NUL
/// or control characters, or starting with `-`.
pub fn name_arg(name: &str, value: &str) -> Result<(), WriteError> {
    if value.is_empty() || value.len() > MAX_NAME_LEN {
        return Err(WriteError::Arg(format!(
            "{name:?} must be 1 to {MAX_NAME_LEN} bytes"
        )));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(WriteError::Arg(format!(
            "{name:?} must not hold NUL or control characters"
        )));
    }
    if value.starts_with('-') {
        return Err(WriteError::Arg(format!(
            "{name:?} must be a name, not an option: {value:?} starts with '-'"
        )));
    }
    Ok(())
}

/// A remote's name: letters, digits, `.`, `_`, `-` and `/`, not starting with `-`.
pub fn remote_arg(value: Option<&str>) -> Result<String, WriteError> {
    let value = value.unwrap_or("origin");
    name_arg("remote", value)?;
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
    {
        return Err(WriteError::Arg(format!(
            "\"remote\" must be the name of a configured remote (letters, digits, '.', '_', \
             '-', '/'), got {value:?}; URLs are not accepted here"
        )));
    }
    Ok(value.to_owned())
}

/// A branch name, checked by `git check-ref-format` as `refs/heads/<name>`.
pub async fn branch_arg(git: &Git, name: &str, value: &str) -> Result<String, WriteError> {
    name_arg(name, value)?;
    let value = value.strip_prefix("refs/heads/").unwrap_or(value);
    let full = format!("refs/heads/{value}");
    git.run(&["check-ref-format", &full])
        .await
        .map_err(|_| WriteError::Arg(format!("{name:?} is not a valid branch name: {value:?}")))?;
    Ok(value.to_owned())
}

/// The current branch (`None` when HEAD is detached).
pub async fn current_branch(git: &Git) -> Result<Option<String>, GitError> {
    let out = git
        .run_status(&["symbolic-ref", "--quiet", "--short", "HEAD"], &[0, 1])
        .await?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Ok((!name.is_empty()).then_some(name))
}

/// The commit a ref names, if it exists.
pub async fn resolve(git: &Git, rev: &str) -> Result<Option<String>, GitError> {
    let spec = format!("{rev}^{{commit}}");
    let out = git
        .run_status(
            &[
                "rev-parse",
                "--quiet",
                "--verify",
                "--end-of-options",
                &spec,
            ],
            &[0, 1],
        )
        .await?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Ok((!id.is_empty()).then_some(id))
}

/// `path` with its longest existing prefix resolved (symlinks followed), the rest
/// as given: where a directory created there would really be.
pub fn real_path(path: &Path) -> PathBuf {
    let parts: Vec<Component> = path.components().collect();
    for cut in (1..=parts.len()).rev() {
        let prefix: PathBuf = parts[..cut].iter().collect();
        let Ok(mut real) = std::fs::canonicalize(&prefix) else {
            continue;
        };
        // What does not exist is no symlink: its `.` and `..` are lexical.
        for part in &parts[cut..] {
            match part {
                Component::CurDir => {}
                Component::ParentDir => {
                    real.pop();
                }
                other => real.push(other.as_os_str()),
            }
        }
        return real;
    }
    path.to_path_buf()
}

/// The protected paths (as configured, resolved with [`real_path`], existing or not)
/// that lie inside `dir`, the first one if any (blocking): git would write there when
/// it checks files out into `dir`.
pub fn protected_inside(dir: &Path, protected: &Protected) -> Option<PathBuf> {
    let dir = real_path(dir);
    protected
        .paths()
        .iter()
        .map(|p| real_path(p))
        .find(|p| p.starts_with(&dir))
}

/// Refuses a checkout into `dir` (a clone's destination, a pull's work tree) when a
/// protected path lies inside it (blocking).
pub fn refuse_protected_inside(dir: &Path, protected: &Protected) -> Result<(), WriteError> {
    match protected_inside(dir, protected) {
        Some(p) => Err(WriteError::Refused(format!(
            "{} holds the protected path {}, which git would write into",
            dir.display(),
            p.display()
        ))),
        None => Ok(()),
    }
}

/// The first `n` characters of a commit id.
pub fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// A file and how a commit or a pull changed it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    pub path: String,
    /// `added`, `modified`, `deleted`, `typeChanged`, `renamed`, `copied`, `untracked`.
    pub status: &'static str,
}

/// Most files listed in one result.
pub const MAX_FILES: usize = 1000;

/// The status word of a `--name-status` letter.
pub fn status_word(letter: u8) -> &'static str {
    match letter {
        b'A' => "added",
        b'D' => "deleted",
        b'T' => "typeChanged",
        b'R' => "renamed",
        b'C' => "copied",
        b'?' => "untracked",
        b'U' => "conflicted",
        _ => "modified",
    }
}

/// Parses `--name-status -z --no-renames` output (status, path pairs).
pub fn parse_name_status(out: &[u8]) -> Vec<ChangedFile> {
    let fields = super::run::nul_fields(out);
    fields
        .chunks(2)
        .filter_map(|pair| match pair {
            [status, path] => Some(ChangedFile {
                path: super::run::text(path),
                status: status_word(status.first().copied().unwrap_or(b'M')),
            }),
            _ => None,
        })
        .take(MAX_FILES)
        .collect()
}

/// The files that differ between two commits (`git diff --name-status`).
pub async fn changed_files(git: &Git, from: &str, to: &str) -> Result<Vec<ChangedFile>, GitError> {
    let out = git
        .run(&[
            "diff",
            "--name-status",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=all",
            from,
            to,
            "--",
        ])
        .await?;
    Ok(parse_name_status(&out.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_paths_resolve_what_exists_and_normalise_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::write(base.join("f"), "").unwrap();
        assert_eq!(real_path(&base.join("./x/../f")), base.join("f"));
        assert_eq!(real_path(&base.join("a/b/../../f")), base.join("f"));
        assert_eq!(real_path(&base.join("new/dir")), base.join("new/dir"));
    }

    #[test]
    fn names_are_checked() {
        assert!(remote_arg(None).is_ok());
        assert!(remote_arg(Some("up-stream")).is_ok());
        assert!(remote_arg(Some("-x")).is_err());
        assert!(remote_arg(Some("https://x")).is_err());
        assert!(name_arg("branch", "a\nb").is_err());
    }

    #[test]
    fn name_status_is_parsed() {
        let files = parse_name_status(b"A\0new file\0M\0b\0");
        assert_eq!(files.len(), 2);
        assert_eq!(
            (files[0].path.as_str(), files[0].status),
            ("new file", "added")
        );
    }
}

#[cfg(test)]
mod plan_tests {
    use super::super::{clone::GitClone, commit::GitCommit, pull::GitPull, push::GitPush};
    use crate::tool::{Tool, ToolContext};
    use serde_json::json;
    use std::path::Path;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "A")
            .env("GIT_AUTHOR_EMAIL", "a@example.com")
            .env("GIT_COMMITTER_NAME", "A")
            .env("GIT_COMMITTER_EMAIL", "a@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn only_dry_run_true_is_a_dry_run() {
        for tool in [
            &GitClone as &dyn Tool,
            &GitCommit as &dyn Tool,
            &GitPush as &dyn Tool,
            &GitPull as &dyn Tool,
        ] {
            assert!(tool.dry_run(&json!({"dryRun": true})));
            assert!(!tool.dry_run(&json!({"dryRun": "true"})));
            assert!(!tool.dry_run(&json!({"dryRun": false})));
            assert!(!tool.dry_run(&json!({})));
            assert!(tool.def().requires_approval);
            assert_eq!(tool.def().annotations.read_only_hint, Some(false));
        }
    }

    #[tokio::test]
    async fn plans_describe_the_call_and_change_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        git(ws, &["init", "-q", "--bare", "-b", "main", "origin.git"]);
        git(ws, &["clone", "-q", "origin.git", "work"]);
        let work = ws.join("work");
        std::fs::write(work.join("a.txt"), "a\n").unwrap();
        git(&work, &["add", "a.txt"]);
        git(&work, &["commit", "-q", "-m", "a"]);
        git(&work, &["push", "-q", "origin", "main"]);
        std::fs::write(work.join("n.txt"), "n\n").unwrap();
        let ctx = ToolContext::new(ws, "t");

        let plan = GitClone
            .plan(&json!({"url": "origin.git", "path": "copy"}), &ctx)
            .await
            .unwrap();
        assert!(
            plan.contains("would clone") && plan.contains("main"),
            "{plan}"
        );
        assert!(!ws.join("copy").exists());

        let args = json!({"path": "work", "message": "n", "files": ["n.txt"]});
        let plan = GitCommit.plan(&args, &ctx).await.unwrap();
        assert!(plan.contains("would commit 1 file(s)"), "{plan}");
        assert!(plan.contains("added n.txt"), "{plan}");
        assert_eq!(git(&work, &["status", "--porcelain"]), "?? n.txt");

        let plan = GitPush.plan(&json!({"path": "work"}), &ctx).await.unwrap();
        assert!(plan.contains("upToDate"), "{plan}");
        let plan = GitPull.plan(&json!({"path": "work"}), &ctx).await.unwrap();
        assert!(plan.contains("up to date"), "{plan}");
        // Arguments that would be refused give no plan.
        assert!(GitCommit.plan(&json!({"bogus": 1}), &ctx).await.is_none());
    }
}
