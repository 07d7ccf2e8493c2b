//! Running git for the git tools: a fixed argv, no shell, a hardened environment and
//! bounded output.
//!
//! Every git the tools start runs with an empty environment but `PATH` and the
//! settings below, so nothing the node's own environment or the repository says can
//! make git run a program or look elsewhere:
//!
//! - configuration forced over every file ([`crate::guards::git_env::GIT_SETTINGS`]
//!   and [`crate::guards::git_env::READ_TOOL_SETTINGS`], through `GIT_CONFIG_COUNT`),
//!   plus, per repository, every `filter.<driver>.clean`/`smudge`/`process` and
//!   `diff.<driver>.textconv`/`command` its configuration defines set to empty (and
//!   `filter.<driver>.required` to false): git runs no filter whose command is empty.
//!   Those names are found by asking git itself (`git config --get-regexp`, includes
//!   followed) just before the command ([`driver_overrides`]);
//! - `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`, `GIT_ATTR_NOSYSTEM=1`:
//!   no system or user configuration or attributes;
//! - `GIT_OPTIONAL_LOCKS=0` (status does not rewrite the index), `GIT_NO_LAZY_FETCH=1`
//!   (a partial clone never fetches), `GIT_TERMINAL_PROMPT=0`, `GIT_LITERAL_PATHSPECS=1`
//!   (a `file` argument is a literal path, never pathspec magic), `GIT_PAGER=cat`,
//!   `LC_ALL=C`, and `--no-pager` on the command line;
//! - with `--confine`, `GIT_CEILING_DIRECTORIES` set to the workspace's parent, so
//!   discovery never leaves the workspace.
//!
//! Output is read up to [`MAX_OUTPUT`] bytes (the rest is cut and said so) and stderr
//! up to [`MAX_STDERR`]; git is killed when the call is cancelled or its deadline
//! passes.

use crate::guards::git_env::{config_env, GIT_SETTINGS, READ_TOOL_SETTINGS};
use crate::remote::{program, RemoteHost};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use thiserror::Error;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

/// Most stdout read from one git run (8 MiB).
pub const MAX_OUTPUT: usize = 8 * 1024 * 1024;
/// Most stderr kept from one git run, for the error message.
pub const MAX_STDERR: usize = 4096;
/// Longest one git run on a far host may take (the call's own deadline, which cancels
/// it, is usually shorter).
const HOST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Why a git run failed.
#[derive(Debug, Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// Running git on the host of an SSH- or container-backed node failed.
    #[error("cannot run git on the host: {0}")]
    Host(String),
    #[error("git {command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("git was cancelled")]
    Cancelled,
    #[error("cannot read git's output: {0}")]
    Read(#[source] std::io::Error),
    #[error("git's output could not be parsed: {0}")]
    Unparseable(String),
    #[error(
        "git {0} is too old: the git tools need git 2.31 or later (configuration from the \
         environment, which keeps the repository's programs from running)"
    )]
    TooOld(String),
}

/// The oldest git the tools run: `GIT_CONFIG_COUNT` (2.31) carries the forced settings;
/// an older git would silently ignore them.
pub const MIN_VERSION: (u32, u32) = (2, 31);

/// The installed git's version once it was found good enough.
static VERSION_OK: std::sync::OnceLock<()> = std::sync::OnceLock::new();

/// The `(major, minor)` of `git version` output (`git version 2.47.3`).
pub fn parse_version(out: &str) -> Option<(u32, u32)> {
    let v = out.trim().strip_prefix("git version ")?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// What a git run printed.
#[derive(Debug)]
pub struct Output {
    pub stdout: Vec<u8>,
    /// Whether stdout was longer than [`MAX_OUTPUT`] and cut.
    pub truncated: bool,
}

/// How git is run in one repository for one call.
#[derive(Debug, Clone)]
pub struct Git {
    /// The directory git runs in.
    dir: PathBuf,
    /// `GIT_CEILING_DIRECTORIES`, when confined.
    ceiling: Option<PathBuf>,
    /// The per-repository driver overrides ([`driver_overrides`]).
    overrides: Vec<(String, String)>,
    /// More forced settings, after all the others (the mutating tools': see
    /// [`super::write`]).
    settings: Vec<(String, String)>,
    /// More environment variables, set last.
    vars: Vec<(String, String)>,
    cancel: CancellationToken,
    /// Set when git runs on the host of an SSH- or container-backed node.
    on: Option<OnHost>,
}

/// The far host git runs on, and the caller whose share of its shells the runs use.
#[derive(Clone)]
pub struct OnHost {
    pub host: Arc<RemoteHost>,
    pub owner: Option<String>,
}

impl std::fmt::Debug for OnHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.host.shown())
    }
}

impl Git {
    /// git in `dir`, not looking above `ceiling`.
    pub fn new(dir: &Path, ceiling: Option<PathBuf>, cancel: CancellationToken) -> Self {
        Git {
            dir: dir.to_path_buf(),
            ceiling,
            overrides: Vec::new(),
            settings: Vec::new(),
            vars: Vec::new(),
            cancel,
            on: None,
        }
    }

    /// The same git, run on a far host ([`crate::remote::program`]): found in the
    /// host's system directories, with the same environment but that `PATH`.
    pub fn on_host(mut self, on: OnHost) -> Self {
        self.on = Some(on);
        self
    }

    /// The same git with `settings` forced after every other setting.
    pub fn with_settings(mut self, settings: impl IntoIterator<Item = (String, String)>) -> Self {
        self.settings.extend(settings);
        self
    }

    /// The same git with the environment variables `vars` set (after the others).
    pub fn with_vars(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        self.vars.extend(vars);
        self
    }

    /// The same git, run in `dir`.
    pub fn in_dir(&self, dir: &Path) -> Self {
        Git {
            dir: dir.to_path_buf(),
            ..self.clone()
        }
    }

    /// Refuses a git older than [`MIN_VERSION`] (checked once per node process).
    pub async fn check_version(&self) -> Result<(), GitError> {
        let known = match &self.on {
            Some(on) => on.host.noted("git-version"),
            None => VERSION_OK.get().is_some(),
        };
        if known {
            return Ok(());
        }
        let out = self.run(&["version"]).await?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        match parse_version(&text) {
            Some(v) if v >= MIN_VERSION => {
                match &self.on {
                    Some(on) => on.host.note("git-version"),
                    None => {
                        let _ = VERSION_OK.set(());
                    }
                }
                Ok(())
            }
            _ => Err(GitError::TooOld(text.trim().to_owned())),
        }
    }

    /// Finds the filter and diff drivers the repository's configuration defines and
    /// empties them for every later run.
    pub async fn neutralise_drivers(&mut self) -> Result<(), GitError> {
        let out = self
            .run_status(
                &[
                    "config",
                    "--null",
                    "--name-only",
                    "--get-regexp",
                    r"^(filter|diff)\..*\.(clean|smudge|process|textconv|command|required)$",
                ],
                &[0, 1],
            )
            .await?;
        self.overrides = driver_overrides(&out.stdout);
        Ok(())
    }

    /// Runs `git --no-pager <args>`; a non-zero exit is an error.
    pub async fn run(&self, args: &[&str]) -> Result<Output, GitError> {
        self.run_status(args, &[0]).await
    }

    /// Runs `git --no-pager <args>`, accepting the exit codes in `ok`.
    pub async fn run_status(&self, args: &[&str], ok: &[i32]) -> Result<Output, GitError> {
        if let Some(on) = &self.on {
            return self.run_on_host(on, args, ok).await;
        }
        let mut cmd = tokio::process::Command::new("git");
        cmd.arg("--no-pager")
            .args(args)
            .current_dir(&self.dir)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(GitError::Spawn)?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(GitError::Spawn(std::io::Error::other("no pipes")));
        };
        // stderr on its own task, drained past what is kept, so git never blocks on it.
        let errors = tokio::spawn(async move {
            let mut stderr = stderr;
            let mut err = Vec::new();
            let _ = (&mut stderr)
                .take(MAX_STDERR as u64)
                .read_to_end(&mut err)
                .await;
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            err
        });
        let _abort = AbortOnDrop(errors.abort_handle());
        let mut out = Vec::new();
        let mut stdout = stdout.take(MAX_OUTPUT as u64 + 1);
        tokio::select! {
            r = stdout.read_to_end(&mut out) => { r.map_err(GitError::Read)?; }
            _ = self.cancel.cancelled() => return Err(GitError::Cancelled),
        }
        let truncated = out.len() > MAX_OUTPUT;
        if truncated {
            // The rest is not wanted: git is stopped rather than left blocked.
            out.truncate(MAX_OUTPUT);
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Ok(Output {
                stdout: out,
                truncated,
            });
        }
        let status = tokio::select! {
            s = child.wait() => s.map_err(GitError::Read)?,
            _ = self.cancel.cancelled() => return Err(GitError::Cancelled),
        };
        let err = tokio::select! {
            e = errors => e.unwrap_or_default(),
            _ = self.cancel.cancelled() => return Err(GitError::Cancelled),
        };
        match status.code() {
            Some(code) if ok.contains(&code) => Ok(Output {
                stdout: out,
                truncated,
            }),
            _ => Err(GitError::Failed {
                command: args.first().copied().unwrap_or_default().to_owned(),
                stderr: String::from_utf8_lossy(&err).trim().to_owned(),
            }),
        }
    }

    /// [`Git::run_status`] on a far host.
    async fn run_on_host(
        &self,
        on: &OnHost,
        args: &[&str],
        ok: &[i32],
    ) -> Result<Output, GitError> {
        let text = |s: &std::ffi::OsStr| {
            s.to_str()
                .map(str::to_owned)
                .ok_or_else(|| GitError::Host(format!("{s:?} is not UTF-8")))
        };
        let mut env = Vec::new();
        for (k, v) in self.env() {
            if k != "PATH" {
                env.push((text(&k)?, text(&v)?));
            }
        }
        env.insert(0, ("PATH".to_owned(), program::SYSTEM_PATH.to_owned()));
        let program = program::Program {
            name: "git".into(),
            args: std::iter::once("--no-pager")
                .chain(args.iter().copied())
                .map(str::to_owned)
                .collect(),
            env,
            dir: text(self.dir.as_os_str())?,
            timeout: HOST_TIMEOUT,
            max_stdout: MAX_OUTPUT,
            max_stderr: MAX_STDERR,
        };
        let out = program::run(&on.host, on.owner.as_deref(), &program, &self.cancel)
            .await
            .map_err(|e| match e {
                program::ProgramError::Cancelled(_) => GitError::Cancelled,
                other => GitError::Host(other.to_string()),
            })?;
        if ok.contains(&out.status) {
            Ok(Output {
                stdout: out.stdout,
                truncated: out.truncated,
            })
        } else {
            Err(GitError::Failed {
                command: args.first().copied().unwrap_or_default().to_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    /// The whole environment of a git run.
    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        if let Some(path) = std::env::var_os("PATH") {
            env.push(("PATH".into(), path));
        }
        for (k, v) in [
            ("HOME", "/nonexistent"),
            ("LC_ALL", "C"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_ATTR_NOSYSTEM", "1"),
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("GIT_NO_LAZY_FETCH", "1"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_LITERAL_PATHSPECS", "1"),
            ("GIT_PAGER", "cat"),
            ("PAGER", "cat"),
        ] {
            env.push((k.into(), v.into()));
        }
        if let Some(ceiling) = &self.ceiling {
            env.push(("GIT_CEILING_DIRECTORIES".into(), ceiling.into()));
        }
        let settings = GIT_SETTINGS
            .iter()
            .chain(READ_TOOL_SETTINGS)
            .copied()
            .chain(self.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .chain(self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        env.extend(config_env(settings));
        for (k, v) in &self.vars {
            env.retain(|(name, _)| name != k.as_str());
            env.push((k.into(), v.into()));
        }
        env
    }
}

/// The overrides for the driver settings `names` lists (NUL-separated names from
/// `git config --null --name-only --get-regexp`): each command emptied, each
/// `required` false.
pub fn driver_overrides(names: &[u8]) -> Vec<(String, String)> {
    names
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .filter_map(|n| std::str::from_utf8(n).ok())
        .map(|name| {
            let value = if name.ends_with(".required") {
                "false"
            } else {
                ""
            };
            (name.trim().to_owned(), value.to_owned())
        })
        .collect()
}

/// Aborts a task when dropped (the stderr reader of a run that ends early).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Splits `bytes` at NULs (a trailing NUL ends the last field).
pub fn nul_fields(bytes: &[u8]) -> Vec<&[u8]> {
    let mut fields: Vec<&[u8]> = bytes.split(|b| *b == 0).collect();
    if fields.last().is_some_and(|f| f.is_empty()) {
        fields.pop();
    }
    fields
}

/// Lossy UTF-8 text of a field.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_are_emptied_and_not_required() {
        let o = driver_overrides(b"filter.evil.clean\0filter.evil.required\0diff.x.textconv\0");
        assert_eq!(
            o,
            vec![
                ("filter.evil.clean".to_owned(), String::new()),
                ("filter.evil.required".to_owned(), "false".to_owned()),
                ("diff.x.textconv".to_owned(), String::new()),
            ]
        );
        assert!(driver_overrides(b"").is_empty());
    }

    #[tokio::test]
    async fn output_past_the_cap_is_cut_and_git_stopped() {
        let tmp = tempfile::tempdir().unwrap();
        let git = Git::new(tmp.path(), None, CancellationToken::new());
        git.run(&["init", "-q"]).await.unwrap();
        std::fs::write(tmp.path().join("big"), vec![b'x'; MAX_OUTPUT + 4096]).unwrap();
        git.run(&["add", "big"]).await.unwrap();
        let run = git.run(&["cat-file", "blob", ":big"]);
        let out = tokio::time::timeout(std::time::Duration::from_secs(30), run)
            .await
            .expect("a cut run ends")
            .unwrap();
        assert!(out.truncated);
        assert_eq!(out.stdout.len(), MAX_OUTPUT);
        let small = git.run(&["cat-file", "-t", ":big"]).await.unwrap();
        assert!(!small.truncated);
        assert_eq!(small.stdout, b"blob\n");
        let e = git.run(&["cat-file", "-t", ":nope"]).await.unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[tokio::test]
    async fn added_settings_and_variables_come_last() {
        let tmp = tempfile::tempdir().unwrap();
        let git = Git::new(tmp.path(), None, CancellationToken::new())
            .with_settings([("core.hooksPath".to_owned(), "/elsewhere".to_owned())])
            .with_vars([("GIT_EDITOR".to_owned(), "ed".to_owned())]);
        let out = git.run(&["var", "GIT_EDITOR"]).await.unwrap();
        assert_eq!(out.stdout, b"ed\n");
        git.run(&["init", "-q"]).await.unwrap();
        let out = git
            .run(&["config", "--get", "core.hooksPath"])
            .await
            .unwrap();
        assert_eq!(out.stdout, b"/elsewhere\n");
        let moved = git.in_dir(Path::new("/"));
        assert_eq!(moved.dir, Path::new("/"));
        assert_eq!(moved.vars, git.vars);
    }

    #[test]
    fn versions_are_parsed() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(parse_version("git version 2.30.1.windows.1"), Some((2, 30)));
        assert!(parse_version("git version 2.30.1") < Some(MIN_VERSION));
        assert_eq!(parse_version("hub 1"), None);
    }

    #[test]
    fn fields_split_at_nul() {
        assert_eq!(nul_fields(b"a\0b\0"), vec![&b"a"[..], &b"b"[..]]);
        assert_eq!(nul_fields(b""), Vec::<&[u8]>::new());
    }
}
