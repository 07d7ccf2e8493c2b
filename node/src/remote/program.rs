//! Running one program on the far host for a structured tool (git, `ip`, `ss`,
//! `stat`…): an argv and an environment the tool built, never a shell command line.
//!
//! The program is looked up in the host's fixed system directories
//! ([`SYSTEM_PATH`]), not in the login `PATH`: an agent that can write files on the
//! host (`~/.profile`, a directory of the workspace) must not be able to put its own
//! `git` first, as on a local node. It runs with exactly the environment the tool
//! gives (`env -i`), stdin from `/dev/null`, in a session of its own (`setsid` where
//! the host has it), its stdout and stderr in files under the node's private
//! directory (`jobs/ID`, like a waiting Bash command's), read back up to the tool's
//! caps. When the timeout passes, or the call is cancelled or dropped, the program's
//! process group is killed ([`super::jobs::kill_group`]).

use super::host::{Lane, RemoteHost, MAX_REPLY};
use super::jobs::kill_group;
use super::quote::quote;
use super::RemoteError;
use crate::sessions::group::KILL_GRACE;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where programs are looked for on the host.
pub const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One program run on the host.
#[derive(Debug, Clone)]
pub struct Program {
    /// The program's name (looked up in [`SYSTEM_PATH`]).
    pub name: String,
    pub args: Vec<String>,
    /// The whole environment it runs with.
    pub env: Vec<(String, String)>,
    /// The directory it runs in.
    pub dir: String,
    pub timeout: Duration,
    /// Most bytes of stdout read back.
    pub max_stdout: usize,
    /// Most bytes of stderr read back.
    pub max_stderr: usize,
}

impl Program {
    /// `name args…` in `/`, with `PATH` = [`SYSTEM_PATH`], `HOME=/` and `LC_ALL=C`.
    pub fn new(name: &str, args: Vec<String>, timeout: Duration, max_output: usize) -> Self {
        Program {
            name: name.to_owned(),
            args,
            env: vec![
                ("PATH".into(), SYSTEM_PATH.into()),
                ("HOME".into(), "/".into()),
                ("LC_ALL".into(), "C".into()),
                ("LANG".into(), "C".into()),
            ],
            dir: "/".into(),
            timeout,
            max_stdout: max_output,
            max_stderr: max_output.min(64 * 1024),
        }
    }
}

/// What the program did.
#[derive(Debug, Clone, Default)]
pub struct ProgramOutput {
    /// Its exit status as the shell reports it (128+N for death by signal N).
    pub status: i32,
    pub stdout: Vec<u8>,
    /// Whether stdout was longer than the cap and cut.
    pub truncated: bool,
    pub stderr: Vec<u8>,
}

/// Why a program could not be run to an end.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error("{0} is not installed on the host (looked in {SYSTEM_PATH})")]
    NotInstalled(String),
    #[error("cannot use the directory {dir} on the host: {reason}")]
    Dir { dir: String, reason: String },
    #[error("{0} did not finish in time and was killed")]
    TimedOut(String),
    #[error("{0} was stopped: the call was cancelled")]
    Cancelled(String),
    #[error("{0} cannot be passed to the host (a NUL byte)")]
    Unquotable(String),
    #[error(transparent)]
    Remote(#[from] RemoteError),
}

/// Runs `program` on `host` for `owner` (whose share of the host's shells it uses).
pub async fn run(
    host: &Arc<RemoteHost>,
    owner: Option<&str>,
    program: &Program,
    cancel: &CancellationToken,
) -> Result<ProgramOutput, ProgramError> {
    let id = uuid::Uuid::new_v4().to_string();
    let script = script(program, &id)?;
    let kill = KillOnDrop::armed(Arc::clone(host), id.clone());
    let limit = (program.max_stdout + program.max_stderr + 4096).min(MAX_REPLY);
    let call = host.run(Lane::Work, owner, &script, limit);
    tokio::pin!(call);
    let reply = tokio::select! {
        r = &mut call => r?,
        _ = tokio::time::sleep(program.timeout) => {
            if let Err(e) = kill_group(host, &id).await {
                tracing::warn!(session_id = %id, error = ?e, "could not kill a program on the host");
            }
            let _ = tokio::time::timeout(KILL_GRACE + Duration::from_secs(5), &mut call).await;
            kill.disarm();
            return Err(ProgramError::TimedOut(program.name.clone()));
        }
        _ = cancel.cancelled() => return Err(ProgramError::Cancelled(program.name.clone())),
    };
    kill.disarm();
    if reply.get("missing").is_some() {
        return Err(ProgramError::NotInstalled(program.name.clone()));
    }
    if let Some(reason) = reply.text("cderr") {
        return Err(ProgramError::Dir {
            dir: program.dir.clone(),
            reason: reason.trim().to_owned(),
        });
    }
    if let Some(err) = reply.text("error") {
        return Err(RemoteError::Unsupported(err).into());
    }
    let total: u64 = reply
        .text("total")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let stdout = reply.get("out").unwrap_or_default().to_vec();
    Ok(ProgramOutput {
        status: reply.text("rc").and_then(|s| s.parse().ok()).unwrap_or(-1),
        truncated: total > stdout.len() as u64,
        stdout,
        stderr: reply.get("err").unwrap_or_default().to_vec(),
    })
}

/// The request's script; `id` names the run's directory.
fn script(p: &Program, id: &str) -> Result<String, ProgramError> {
    let unquotable = || ProgramError::Unquotable(p.name.clone());
    if p.name.is_empty() || p.name.contains('/') {
        return Err(unquotable());
    }
    let name = quote(&p.name).ok_or_else(unquotable)?;
    let dir = quote(&p.dir).ok_or_else(unquotable)?;
    let mut words = Vec::with_capacity(p.env.len() + p.args.len());
    for (k, v) in &p.env {
        if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(unquotable());
        }
        words.push(quote(&format!("{k}={v}")).ok_or_else(unquotable)?);
    }
    let env = words.join(" ");
    let args = p
        .args
        .iter()
        .map(|a| quote(a))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(unquotable)?
        .join(" ");
    let (out, err) = (p.max_stdout, p.max_stderr);
    Ok(format!(
        r#"gsv_main() {{
  gsv_x=$(PATH='{SYSTEM_PATH}'; command -v {name}) || {{ gsv_text missing 1; return 0; }}
  case $gsv_x in /*) ;; *) gsv_text missing 1; return 0;; esac
  gsv_j="$GSV_D/jobs/{id}"
  mkdir "$gsv_j" || {{ gsv_text error "cannot create $gsv_j"; return 0; }}
  if ! cd {dir} 2>"$gsv_j/err"; then gsv_file cderr "$gsv_j/err"; rm -rf "$gsv_j"; cd /; return 0; fi
  if command -v setsid >/dev/null 2>&1; then gsv_s=setsid; else gsv_s=; fi
  $gsv_s env -i {env} "$gsv_x" {args} >"$gsv_j/out" 2>"$gsv_j/err" </dev/null &
  gsv_pid=$!
  echo "$gsv_pid" >"$gsv_j/pid"
  wait "$gsv_pid"; gsv_rc=$?
  cd /
  gsv_text rc "$gsv_rc"
  gsv_size "$gsv_j/out"; gsv_text total "$gsv_n"
  gsv_head out "$gsv_j/out" {out}
  gsv_head err "$gsv_j/err" {err}
  rm -rf "$gsv_j"
}}
gsv_main"#
    ))
}

/// Kills a run's process group on the host when dropped armed: a call whose future
/// is dropped (cancelled, past its deadline) takes its program with it.
pub(crate) struct KillOnDrop(Option<(Arc<RemoteHost>, String)>);

impl KillOnDrop {
    pub(crate) fn armed(host: Arc<RemoteHost>, id: String) -> Self {
        KillOnDrop(Some((host, id)))
    }

    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some((host, id)) = self.0.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    if let Err(e) = kill_group(&host, &id).await {
                        tracing::warn!(session_id = %id, error = ?e, "could not kill a command on the host");
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_single_words_and_names_are_checked() {
        let mut p = Program::new(
            "git",
            vec!["log".into(), "a'b; rm -rf /".into()],
            Duration::from_secs(1),
            10,
        );
        p.env.push(("GIT_X".into(), "$(id)".into()));
        let s = script(&p, "x").unwrap();
        assert!(s.contains(r#"'a'\''b; rm -rf /'"#), "{s}");
        assert!(s.contains(r#"'GIT_X=$(id)'"#), "{s}");
        p.env.push(("A B".into(), "x".into()));
        assert!(script(&p, "x").is_err());
        let mut p = Program::new("/tmp/git", vec![], Duration::from_secs(1), 10);
        assert!(script(&p, "x").is_err());
        p.name = "git".into();
        p.args.push("a\0b".into());
        assert!(script(&p, "x").is_err());
    }
}
