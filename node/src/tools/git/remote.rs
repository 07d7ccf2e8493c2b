//! Where the mutating git tools' git reaches: which URLs it may use, what a local
//! repository must satisfy, which URLs a configured remote really uses, and the
//! upload-pack and receive-pack commands pinned on every fetch, clone and push.
//!
//! A URL is refused unless it is `https://`, `http://`, `ssh://`, `git://`, `file://`,
//! scp-like `[user@]host:path`, or a local path ([`classify`]); helpers
//! (`<helper>::…`, such as `ext::` and `fd::`) and anything starting with `-` never
//! reach git. A local path goes through the file tools' path rules, and so do the
//! repository's git directory, common directory and alternates
//! ([`check_local_repo`]): a confined node only clones, fetches from or pushes to
//! repositories inside its workspace.

use super::run::{Git, GitError};
use super::write::{WriteError, MAX_NAME_LEN};
use crate::tool::ToolContext;
use crate::tools::paths::{AccessError, PathPolicy};
use rustix::fs::OFlags;
use std::path::{Path, PathBuf};

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

/// The URLs of `remote` in the repository at `path`, shown, when any of them is on the
/// network (`None`: all local, or the repository or remote cannot be read — the call
/// itself then reports that). Reads the repository's configuration only.
pub async fn network_urls(
    path: Option<&str>,
    remote: &str,
    push: bool,
    ctx: &ToolContext,
) -> Option<Vec<String>> {
    let repo = super::open(path, ctx).await.ok()?;
    let sources = remote_urls(&repo.git, remote, push, Path::new(&repo.root), ctx)
        .await
        .ok()?;
    sources
        .iter()
        .any(|s| matches!(s, Source::Remote(_)))
        .then(|| sources.iter().map(Source::shown).collect())
}

/// The `check` of git_push and git_pull: a dry run (`args`) that would contact a
/// network URL of `remote` waits for an operator unless it carries an approval.
pub async fn ask_before_network_dry_run(
    tool: &str,
    args: &serde_json::Value,
    path: Option<&str>,
    remote: &str,
    push: bool,
    ctx: &ToolContext,
) -> Result<(), gsv_protocol::ErrorShape> {
    if !super::write::is_dry_run(args) || ctx.approval.is_some() {
        return Ok(());
    }
    match network_urls(path, remote, push, ctx).await {
        Some(urls) => Err(super::write::ask_before_contacting(tool, &urls.join(", "))),
        None => Ok(()),
    }
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
    fn ls_remote_is_parsed() {
        let (refs, head) =
            parse_ls_remote(b"ref: refs/heads/main\tHEAD\nabc\tHEAD\nabc\trefs/heads/main\n");
        assert_eq!(head.as_deref(), Some("main"));
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[1].name, "refs/heads/main");
    }
}
