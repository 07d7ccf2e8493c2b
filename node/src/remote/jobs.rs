//! Commands that outlive their call on a remote host: Bash `background` and
//! `yieldMs`, managed with Process.
//!
//! Each job is a directory under the node's private directory on the host
//! (`jobs/ID`): `meta` (owner, start time), `cmd`, `wd`, `in` (a FIFO: the
//! command's stdin), `out` (its combined output), `pid`, and `rc` (exit status and
//! end time) once it ends, plus `killed` / `timedout` markers. The command runs under
//! a small supervisor shell in a session of its own (`setsid` where the host has
//! it), detached from the channel that started it: it goes on when the SSH link
//! drops or the node restarts, and the directory *is* the record — a node that
//! starts again finds its jobs there. Finished jobs are kept 30 minutes, as on a
//! local node.

use super::host::{Lane, RemoteHost, MAX_REPLY};
use super::quote::quote;
use super::RemoteError;
use crate::sessions::group::{signal_name, KILL_GRACE};
use crate::sessions::{Snapshot, Status, MAX_OUTPUT_CHARS, TAIL_CHARS};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a finished job is kept (seconds).
const KEEP_FINISHED_SECS: u64 = 30 * 60;

/// The supervisor: runs the command with the FIFO as stdin and the output file, kills
/// its group when its timeout passes, records the status. It ignores SIGTERM (a kill
/// of the group ends the command, and the supervisor records how); `$1` the user's
/// shell, `$2` the command, `$3` the job directory, `$4` the timeout in seconds or
/// empty.
const SUPERVISOR: &str = r#"trap : HUP INT QUIT TERM
j=$3
w=
if [ -n "$4" ]; then
  ( sleep "$4"; [ -f "$j/rc" ] || { : > "$j/timedout"; kill -TERM 0; sleep 2; kill -KILL 0; } ) >/dev/null 2>&1 &
  w=$!
fi
"$1" -c "$2" <>"$j/in" >"$j/out" 2>&1
s=$?
[ -n "$w" ] && kill "$w" 2>/dev/null
printf '%s %s\n' "$s" "$(date +%s)" > "$j/rc.t" && mv "$j/rc.t" "$j/rc"
"#;

/// What a job needs to start.
pub struct JobSpec<'a> {
    pub id: &'a str,
    pub command: &'a str,
    pub workdir: &'a str,
    pub owner: Option<&'a str>,
    pub timeout: Option<Duration>,
    /// `K=V; export K;` lines for the command's environment.
    pub exports: &'a str,
}

/// Why a job did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot use the working directory {path}: {problem}")]
    Workdir { path: String, problem: String },
    #[error("{0}")]
    Remote(#[from] RemoteError),
}

/// A job as the host describes it.
#[derive(Debug, Clone, Default)]
pub struct Job {
    pub id: String,
    pub owner: Option<String>,
    pub command: String,
    pub workdir: String,
    pub started_at: u64,
    pub pid: u32,
    /// Exit status and end time (ms), once it ended.
    pub rc: Option<(i32, u64)>,
    pub alive: bool,
    pub killed: bool,
    pub timed_out: bool,
    /// Bytes of output so far.
    pub size: u64,
    /// The retained output (its last [`MAX_OUTPUT_CHARS`] characters), when asked.
    pub output: Option<String>,
}

impl Job {
    pub fn status(&self) -> Status {
        match self.rc {
            None if self.alive => Status::Running,
            Some((0, _)) if !self.killed && !self.timed_out => Status::Completed,
            _ => Status::Failed,
        }
    }

    /// The job as a local session's snapshot, for the shared result shapes.
    pub fn snapshot(&self) -> Snapshot {
        let status = self.status();
        let now = now_ms();
        let ended_at = match (status, self.rc) {
            (Status::Running, _) => None,
            (_, Some((_, end))) => Some(end.max(self.started_at)),
            (_, None) => Some(now),
        };
        let (exit_code, signal) = match self.rc {
            // A shell says 128+N for death by signal N; only a kill of ours is
            // sure to be one.
            Some((code, _)) if (self.killed || self.timed_out) && code > 128 => {
                (None, Some(signal_name(code - 128)))
            }
            Some((code, _)) => (Some(code), None),
            None if status == Status::Running => (None, None),
            // Gone without a status: the supervisor itself was killed.
            None => (None, self.killed.then(|| "SIGKILL".to_owned())),
        };
        let output = self.output.clone().unwrap_or_default();
        let chars = output.chars().count();
        let tail: String = output
            .chars()
            .skip(chars.saturating_sub(TAIL_CHARS))
            .collect();
        Snapshot {
            session_id: self.id.clone(),
            status,
            pid: self.pid,
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            pty: false,
            background: true,
            started_at: self.started_at,
            ended_at,
            duration_ms: ended_at.unwrap_or(now).saturating_sub(self.started_at),
            exit_code,
            signal,
            timed_out: self.timed_out,
            tail,
            truncated: self.size > output.len() as u64 || chars > MAX_OUTPUT_CHARS,
            total_chars: self.size,
            owner: self.owner.clone(),
        }
    }
}

/// The jobs of one remote host.
pub struct Jobs {
    host: Arc<RemoteHost>,
}

impl Jobs {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        Jobs { host }
    }

    /// Starts a job and returns its pid on the host.
    pub async fn start(&self, spec: &JobSpec<'_>) -> Result<u32, StartError> {
        let q = |s: &str| quote(s).ok_or_else(|| RemoteError::BadTarget("a NUL byte".into()));
        let (cmd, wd, sup) = (q(spec.command)?, q(spec.workdir)?, q(SUPERVISOR)?);
        let id = check_id(spec.id)?;
        let owner = q(spec.owner.unwrap_or(""))?;
        let timeout = spec
            .timeout
            .map(|t| t.as_secs().max(1).to_string())
            .unwrap_or_default();
        let exports = spec.exports;
        let script = format!(
            r#"gsv_main() {{
  gsv_j="$GSV_D/jobs/{id}"
  mkdir -p "$gsv_j" || {{ gsv_text error "cannot create $gsv_j"; return 0; }}
  if ! cd {wd} 2>"$gsv_j/err"; then gsv_file cderr "$gsv_j/err"; rm -rf "$gsv_j"; cd /; return 0; fi
  printf '%s\n%s\n' {owner} {started} > "$gsv_j/meta"
  printf '%s' {cmd} > "$gsv_j/cmd"
  printf '%s' {wd} > "$gsv_j/wd"
  mkfifo "$gsv_j/in" || {{ gsv_text error "cannot make a FIFO in $gsv_j"; return 0; }}
  : > "$gsv_j/out"
  if command -v setsid >/dev/null 2>&1; then gsv_s=setsid; else gsv_s=; fi
  ( umask "$gsv_umask"; {exports}exec $gsv_s sh -c {sup} gsv-job "${{SHELL:-/bin/sh}}" {cmd} "$gsv_j" '{timeout}' ) >/dev/null 2>&1 </dev/null &
  echo "$!" > "$gsv_j/pid"
  gsv_text pid "$!"
  cd /
}}
gsv_main"#,
            started = now_ms(),
        );
        let reply = self
            .host
            .run(Lane::Work, spec.owner, &script, 1 << 20)
            .await?;
        if let Some(err) = reply.text("cderr") {
            return Err(StartError::Workdir {
                path: spec.workdir.to_owned(),
                problem: err.trim().to_owned(),
            });
        }
        if let Some(err) = reply.text("error") {
            return Err(RemoteError::Protocol(err).into());
        }
        self.host.job_started().notify_one();
        Ok(reply.text("pid").and_then(|p| p.parse().ok()).unwrap_or(0))
    }

    /// The job `id` (with its retained output when `output`), `None` if there is no
    /// such job.
    pub async fn get(&self, id: &str, output: bool) -> Result<Option<Job>, RemoteError> {
        let id = check_id(id)?;
        let out = if output {
            format!("  gsv_tail out \"$gsv_j/out\" {}\n", MAX_OUTPUT_CHARS * 4)
        } else {
            String::new()
        };
        let script = format!(
            "gsv_main() {{\n  gsv_j=\"$GSV_D/jobs/{id}\"\n  [ -f \"$gsv_j/meta\" ] || return 0\n{DESCRIBE}{out}}}\ngsv_main"
        );
        let reply = self
            .host
            .run(Lane::Control, None, &script, MAX_REPLY)
            .await?;
        Ok(parse_jobs(&reply).into_iter().next())
    }

    /// Every job on the host (finished ones older than 30 minutes are removed).
    pub async fn list(&self) -> Result<Vec<Job>, RemoteError> {
        let script = format!(
            "gsv_now=$(date +%s)\nfor gsv_j in \"$GSV_D\"/jobs/*; do\n  [ -f \"$gsv_j/meta\" ] || continue\n  \
             if [ -f \"$gsv_j/rc\" ]; then read gsv_c gsv_e < \"$gsv_j/rc\"; \
             if [ $((gsv_now - ${{gsv_e:-0}})) -gt {KEEP_FINISHED_SECS} ]; then rm -rf \"$gsv_j\"; continue; fi; fi\n\
             {DESCRIBE}done"
        );
        let reply = self
            .host
            .run(Lane::Control, None, &script, MAX_REPLY)
            .await?;
        let mut jobs = parse_jobs(&reply);
        jobs.sort_by_key(|j| std::cmp::Reverse(j.started_at));
        Ok(jobs)
    }

    /// Sends `data` to the job's stdin; the bytes sent.
    pub async fn write(&self, id: &str, data: &[u8]) -> Result<usize, RemoteError> {
        let id = check_id(id)?;
        let fill = super::quote::printf_lines(data, "&3");
        let script = format!(
            "gsv_j=\"$GSV_D/jobs/{id}\"\nif [ -p \"$gsv_j/in\" ]; then exec 3<>\"$gsv_j/in\"; {fill}; exec 3>&-; gsv_text ok 1; fi"
        );
        let reply = self.host.run(Lane::Control, None, &script, 1 << 20).await?;
        Ok(if reply.text("ok").is_some() {
            data.len()
        } else {
            0
        })
    }

    /// Marks the job killed and ends its process group: SIGTERM now, SIGKILL after
    /// the grace period.
    pub async fn kill(&self, id: &str) -> Result<(), RemoteError> {
        let id = check_id(id)?;
        let script = format!("[ -d \"$GSV_D/jobs/{id}\" ] && : > \"$GSV_D/jobs/{id}/killed\"\n:");
        self.host.run(Lane::Control, None, &script, 1024).await?;
        kill_group(&self.host, id).await
    }

    /// Forgets a finished job (its directory goes).
    pub async fn remove(&self, id: &str) -> Result<(), RemoteError> {
        let id = check_id(id)?;
        let script = format!("[ -f \"$GSV_D/jobs/{id}/rc\" ] && rm -rf \"$GSV_D/jobs/{id}\"\n:");
        self.host
            .run(Lane::Control, None, &script, 1024)
            .await
            .map(|_| ())
    }
}

/// The script lines that describe the job in `$gsv_j` as frames (an `id` frame
/// first). Whether the supervisor is alive is asked *before* its `rc` is read: the
/// supervisor writes `rc` before it exits, so a supervisor found gone has its `rc`
/// in place by then (the other order could see no `rc` yet and then no process, and
/// call a job that just completed failed).
const DESCRIBE: &str = r#"  gsv_text id "$(basename "$gsv_j")"
  gsv_file meta "$gsv_j/meta"
  gsv_head cmd "$gsv_j/cmd" 65536
  gsv_file wd "$gsv_j/wd"
  gsv_p=$(cat "$gsv_j/pid" 2>/dev/null); gsv_text pid "$gsv_p"
  if [ -n "$gsv_p" ] && kill -0 "$gsv_p" 2>/dev/null; then gsv_text alive 1; fi
  if [ -f "$gsv_j/rc" ]; then gsv_file rc "$gsv_j/rc"; fi
  if [ -f "$gsv_j/killed" ]; then gsv_text killed 1; fi
  if [ -f "$gsv_j/timedout" ]; then gsv_text timedout 1; fi
  gsv_size "$gsv_j/out"; gsv_text size "$gsv_n"
"#;

/// The jobs a reply describes, in order.
fn parse_jobs(reply: &super::channel::Reply) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    for f in &reply.frames {
        let text = || String::from_utf8_lossy(&f.data).into_owned();
        if f.tag == "id" {
            jobs.push(Job {
                id: text(),
                ..Job::default()
            });
            continue;
        }
        let Some(job) = jobs.last_mut() else { continue };
        match f.tag.as_str() {
            "meta" => {
                let t = text();
                let mut lines = t.lines();
                job.owner = lines.next().filter(|o| !o.is_empty()).map(str::to_owned);
                job.started_at = lines.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            }
            "cmd" => job.command = text(),
            "wd" => job.workdir = text(),
            "pid" => job.pid = text().trim().parse().unwrap_or(0),
            "rc" => {
                let t = text();
                let mut parts = t.split_whitespace();
                let code = parts.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
                let end = parts
                    .next()
                    .and_then(|e| e.parse::<u64>().ok())
                    .unwrap_or(0);
                job.rc = Some((code, end.saturating_mul(1000)));
            }
            "alive" => job.alive = true,
            "killed" => job.killed = true,
            "timedout" => job.timed_out = true,
            "size" => job.size = text().trim().parse().unwrap_or(0),
            "out" => {
                let t = String::from_utf8_lossy(&f.data);
                let n = t.chars().count();
                job.output = Some(t.chars().skip(n.saturating_sub(MAX_OUTPUT_CHARS)).collect());
            }
            _ => {}
        }
    }
    jobs
}

/// A session id as it may appear in a path on the host (the node makes them:
/// UUIDs); anything else names no job.
fn check_id(id: &str) -> Result<&str, RemoteError> {
    if !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        Ok(id)
    } else {
        Err(RemoteError::BadTarget(format!("no session {id:?}")))
    }
}

/// SIGTERM to the job's process group now, SIGKILL after [`KILL_GRACE`] (on the
/// host, from a shell of the control lane). Works for jobs and for the commands a
/// waiting Bash call runs (both keep their pid in `jobs/ID/pid`).
pub async fn kill_group(host: &RemoteHost, id: &str) -> Result<(), RemoteError> {
    let id = check_id(id)?;
    let grace = KILL_GRACE.as_secs().max(1);
    let script = format!(
        r#"gsv_k="$GSV_D/jobs/{id}/pid"
if [ -f "$gsv_k" ]; then
  gsv_kp=$(cat "$gsv_k")
  kill -TERM "-$gsv_kp" 2>/dev/null || kill -TERM "$gsv_kp" 2>/dev/null
  ( sleep {grace}; kill -KILL "-$gsv_kp" 2>/dev/null || kill -KILL "$gsv_kp" 2>/dev/null ) >/dev/null 2>&1 &
fi
:"#
    );
    host.run(Lane::Control, None, &script, 1024)
        .await
        .map(|_| ())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
