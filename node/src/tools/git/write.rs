//! What the mutating git tools (`git_clone`, `git_commit`, `git_push`, `git_pull`)
//! share: the settings they force on top of the read tools' hardened git, the URL
//! rules, name checks, and their error type.
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
//!   other repository's hooks do not run: [`LOCAL_RECEIVE_PACK`]);
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
//! git directory, common directory and alternates too ([`check_local_repo`]). The
//! URLs a remote really uses (after `insteadOf` rewriting) are checked the same way
//! before a fetch or push, and a remote naming a transport helper
//! (`remote.<name>.vcs`) is refused.

use super::run::{Git, GitError};
use super::RepoError;
use crate::tool::ToolContext;
use crate::tools::paths::{AccessError, PathPolicy};
use gsv_protocol::ToolResult;
use rustix::fs::OFlags;
use serde_json::Value;
use std::path::{Path, PathBuf};

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
pub fn is_dry_run(args: &Value) -> bool {
    args.get("dryRun") == Some(&Value::Bool(true))
}

/// The `dryRun` property of every mutating git tool's schema.
pub fn dry_run_schema() -> Value {
    serde_json::json!({
        "type": "boolean",
        "description": "Only say what would happen (reads the remote, changes nothing); runs without approval."
    })
}

/// The upload-pack and receive-pack commands git runs *here* for a local remote
/// (`file://` or a path): git removes the forced configuration from that child's
/// environment (`GIT_CONFIG_COUNT` is one of its "repository-local" variables), so
/// it is given again on the command line, and the other repository's hooks
/// (pre-receive, update, post-receive...) and fsmonitor do not run either.
pub const LOCAL_UPLOAD_PACK: &str =
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.allow=never upload-pack";
/// See [`LOCAL_UPLOAD_PACK`].
pub const LOCAL_RECEIVE_PACK: &str =
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.allow=never receive-pack";

/// `git` made ready for a mutating tool: [`WRITE_SETTINGS`] and [`network_vars`].
pub fn harden(git: Git) -> Git {
    let settings = WRITE_SETTINGS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    git.with_settings(settings).with_vars(network_vars())
}

/// The `--upload-pack=` option every fetch, clone and ls-remote gets: a repository's
/// `remote.<name>.uploadpack` cannot be overridden by configuration (git keeps the
/// first one it reads), but the option wins. git's own program for a network remote
/// (the name the server runs), [`LOCAL_UPLOAD_PACK`] for a local one.
pub fn upload_pack_option(local: bool) -> String {
    let program = if local {
        LOCAL_UPLOAD_PACK
    } else {
        "git-upload-pack"
    };
    format!("--upload-pack={program}")
}

/// The `--receive-pack=` option every push gets (see [`upload_pack_option`]).
pub fn receive_pack_option(local: bool) -> String {
    let program = if local {
        LOCAL_RECEIVE_PACK
    } else {
        "git-receive-pack"
    };
    format!("--receive-pack={program}")
}

/// Whether `sources` are all local (`Some(true)`), all network (`Some(false)`), or
/// mixed (`None`: refused, as one pinned upload-pack cannot suit both).
pub fn all_local(sources: &[Source]) -> Result<bool, WriteError> {
    let local = sources
        .iter()
        .filter(|s| matches!(s, Source::Local(_)))
        .count();
    match local {
        0 => Ok(false),
        n if n == sources.len() => Ok(true),
        _ => Err(WriteError::Refused(
            "the remote has both local and network URLs; use a remote with one kind".into(),
        )),
    }
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

/// What a URL names, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A network URL (or scp-like address), passed to git as it is.
    Remote(String),
    /// A local repository, by its resolved path.
    Local(PathBuf),
}

impl Source {
    /// How results, plans and the log show it: a password in the URL is masked.
    pub fn shown(&self) -> String {
        match self {
            Source::Remote(url) => redact(url),
            Source::Local(path) => path.display().to_string(),
        }
    }

    /// What git gets.
    pub fn git_arg(&self) -> String {
        match self {
            Source::Remote(url) => url.clone(),
            Source::Local(path) => path.display().to_string(),
        }
    }
}

/// `url` with the password of its `user:password@` part masked (`user:***@`).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &authority[..at];
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// Classifies `url` by its form (no file system access): which scheme, or a local
/// path (returned as given, to resolve against `base` and the path rules).
pub fn classify(url: &str) -> Result<Result<String, String>, WriteError> {
    let refuse = |why: &str| WriteError::Url {
        url: url.to_owned(),
        why: why.to_owned(),
    };
    if url.is_empty() || url.len() > MAX_NAME_LEN {
        return Err(refuse("a URL must be 1 to 1024 bytes"));
    }
    if url.chars().any(|c| c.is_control()) {
        return Err(refuse("control characters"));
    }
    if url.starts_with('-') {
        return Err(refuse("it starts with '-' and would read as an option"));
    }
    let first_slash = url.find('/').unwrap_or(url.len());
    if url[..first_slash].contains("::") {
        return Err(refuse(
            "transport helpers (`<helper>::<address>`, such as ext:: and fd::) are not allowed",
        ));
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        return match scheme.to_ascii_lowercase().as_str() {
            "https" | "http" | "ssh" | "git" | "git+ssh" | "ssh+git" => {
                let host = rest.split(['/', ':']).next().unwrap_or_default();
                let host = host.rsplit('@').next().unwrap_or_default();
                if host.is_empty() || host.starts_with('-') {
                    return Err(refuse("no host, or a host starting with '-'"));
                }
                Ok(Ok(url.to_owned()))
            }
            "file" => {
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(refuse("a file:// URL needs an absolute path"));
                }
                Ok(Err(path.to_owned()))
            }
            _ => Err(refuse(
                "only https, http, ssh, git and file URLs, scp-like host:path and local \
                 paths are allowed",
            )),
        };
    }
    if let Some(colon) = url.find(':') {
        if colon < first_slash {
            let host = url[..colon].rsplit('@').next().unwrap_or_default();
            if host.is_empty() || host.starts_with('-') {
                return Err(refuse("no host, or a host starting with '-'"));
            }
            return Ok(Ok(url.to_owned()));
        }
    }
    Ok(Err(url.to_owned()))
}

/// Checks `url` ([`classify`]); a local path is resolved against `base` under the
/// call's path rules and must be a directory (blocking when local).
pub fn check_url(url: &str, base: &Path, ctx: &ToolContext) -> Result<Source, WriteError> {
    let path = match classify(url)? {
        Ok(remote) => return Ok(Source::Remote(remote)),
        Err(path) => path,
    };
    let policy = PathPolicy::of(ctx);
    let opened = policy.open(base.join(path), OFlags::PATH)?;
    let is_dir = rustix::fs::fstat(&opened.fd)
        .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir());
    if !is_dir {
        return Err(WriteError::Url {
            url: url.to_owned(),
            why: format!("{} is not a directory", opened.path.display()),
        });
    }
    Ok(Source::Local(opened.path))
}

/// Checks `url` ([`check_url`], on a blocking thread), and for a local repository
/// also where git would really read it ([`check_local_repo`]).
pub async fn check_url_async(
    url: String,
    base: PathBuf,
    ctx: &ToolContext,
) -> Result<Source, WriteError> {
    let source = {
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || check_url(&url, &base, &ctx))
            .await
            .map_err(|e| WriteError::Refused(format!("cannot check the URL: {e}")))??
    };
    if let Source::Local(path) = &source {
        check_local_repo(path, ctx).await?;
    }
    Ok(source)
}

/// A local repository (a clone source or a remote) is read where its git directory,
/// common directory and object alternates are, which a `.git` file or
/// `objects/info/alternates` can put anywhere: those must pass the path rules too
/// (inside the workspace when confined, never protected). Alternates are refused on
/// a confined node.
pub async fn check_local_repo(path: &Path, ctx: &ToolContext) -> Result<(), WriteError> {
    let ceiling = path.parent().map(Path::to_path_buf);
    let git = Git::new(path, ceiling, ctx.cancel.clone());
    git.check_version().await?;
    let out = git
        .run(&["rev-parse", "--absolute-git-dir", "--git-common-dir"])
        .await
        .map_err(|_| WriteError::Url {
            url: path.display().to_string(),
            why: "not a git repository".into(),
        })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let dirs: Vec<PathBuf> = text.lines().map(|l| path.join(l)).collect();
    let policy = PathPolicy::of(ctx);
    let protected = ctx.protected.clone();
    let shown = path.display().to_string();
    tokio::task::spawn_blocking(move || -> Result<(), WriteError> {
        let workspace = if policy.is_confined() {
            Some(policy.resolve(".")?)
        } else {
            None
        };
        let snapshot = protected.snapshot();
        for dir in dirs {
            let real = std::fs::canonicalize(&dir).unwrap_or(dir);
            if let Some(ws) = &workspace {
                if !real.starts_with(ws) {
                    return Err(AccessError::Outside(format!(
                        "Refused: the repository at {shown} uses {}, outside the workspace {} \
                         (this node is confined to its workspace)",
                        real.display(),
                        ws.display()
                    ))
                    .into());
                }
                if real.join("objects/info/alternates").exists() {
                    return Err(AccessError::Outside(format!(
                        "Refused: the repository at {shown} borrows objects from elsewhere \
                         (objects/info/alternates), which a confined node does not follow"
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
        Ok(())
    })
    .await
    .map_err(|e| WriteError::Refused(format!("cannot check the repository: {e}")))?
}

/// The URLs `remote` really uses (fetch, or push when `push`), after `insteadOf`
/// rewriting, each checked with [`check_url`] (relative paths against `root`).
pub async fn remote_urls(
    git: &Git,
    remote: &str,
    push: bool,
    root: &Path,
    ctx: &ToolContext,
) -> Result<Vec<Source>, WriteError> {
    let vcs_key = format!("remote.{remote}.vcs");
    let vcs = git
        .run_status(&["config", "--get", &vcs_key], &[0, 1])
        .await?;
    if !vcs.stdout.trim_ascii().is_empty() {
        return Err(WriteError::Refused(format!(
            "the remote {remote:?} names a transport helper ({vcs_key}), a program git would \
             run; use a remote with a plain URL"
        )));
    }
    let mut argv = vec!["remote", "get-url", "--all"];
    if push {
        argv.push("--push");
    }
    argv.push(remote);
    let out = git.run(&argv).await.map_err(|e| match e {
        GitError::Failed { stderr, .. } => WriteError::Arg(format!(
            "no remote {remote:?} in this repository ({stderr})"
        )),
        other => WriteError::Git(other),
    })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut sources = Vec::new();
    for url in text.lines().filter(|l| !l.is_empty()) {
        sources.push(check_url_async(url.to_owned(), root.to_path_buf(), ctx).await?);
    }
    if sources.is_empty() {
        return Err(WriteError::Arg(format!("remote {remote:?} has no URL")));
    }
    Ok(sources)
}

/// One line of `git ls-remote`: a ref and its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRef {
    pub name: String,
    pub id: String,
}

/// Parses `git ls-remote --symref` output: the refs, and the branch HEAD points to.
pub fn parse_ls_remote(out: &[u8]) -> (Vec<RemoteRef>, Option<String>) {
    let text = String::from_utf8_lossy(out);
    let mut refs = Vec::new();
    let mut head = None;
    for line in text.lines() {
        if let Some(sym) = line.strip_prefix("ref: ") {
            if let Some((target, "HEAD")) = sym.split_once('\t') {
                head = Some(
                    target
                        .strip_prefix("refs/heads/")
                        .unwrap_or(target)
                        .to_owned(),
                );
            }
            continue;
        }
        if let Some((id, name)) = line.split_once('\t') {
            refs.push(RemoteRef {
                name: name.to_owned(),
                id: id.to_owned(),
            });
        }
    }
    (refs, head)
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

    fn kind(url: &str) -> Result<bool, String> {
        classify(url).map(|c| c.is_ok()).map_err(|e| e.to_string())
    }

    #[test]
    fn urls_are_classified_and_helpers_refused() {
        for remote in [
            "https://example.com/a.git",
            "http://example.com/a",
            "ssh://git@example.com:22/a.git",
            "git://example.com/a",
            "git@example.com:owner/repo.git",
            "example.com:repo",
        ] {
            assert_eq!(kind(remote), Ok(true), "{remote}");
        }
        for local in ["repo", "./a:b", "/srv/x.git", "file:///srv/x.git"] {
            assert_eq!(kind(local), Ok(false), "{local}");
        }
        assert_eq!(
            classify("file:///srv/x.git").unwrap(),
            Err("/srv/x.git".to_owned())
        );
        for bad in [
            "ext::sh -c touch% /tmp/x",
            "fd::3",
            "--upload-pack=touch /tmp/x",
            "-oProxyCommand=x",
            "ssh://-oProxyCommand=x/a",
            "-host:path",
            "ftp://example.com/a",
            "file://relative",
            "a\0b",
            "",
            "transport::https://x",
        ] {
            assert!(kind(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn passwords_in_urls_are_masked() {
        assert_eq!(
            redact("https://me:s3cret@example.com/a.git"),
            "https://me:***@example.com/a.git"
        );
        assert_eq!(
            redact("https://me@example.com/a"),
            "https://me@example.com/a"
        );
        assert_eq!(redact("git@example.com:a.git"), "git@example.com:a.git");
        assert_eq!(
            redact("https://example.com/a@b:c"),
            "https://example.com/a@b:c"
        );
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
    fn ls_remote_is_parsed() {
        let (refs, head) =
            parse_ls_remote(b"ref: refs/heads/main\tHEAD\nabc\tHEAD\nabc\trefs/heads/main\n");
        assert_eq!(head.as_deref(), Some("main"));
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[1].name, "refs/heads/main");
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
