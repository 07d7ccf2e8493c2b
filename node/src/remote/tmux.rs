//! tmux on the host a node works on: the runner behind term_capture and term_send
//! there, and `--tmux SESSION`, the pane an operator can attach to and watch, where
//! a waiting Bash command is typed and runs.
//!
//! In the pane a command runs through a small script in its job directory: it
//! prints the command line, runs it with its output shown in the pane and copied to
//! a file (`tee`), and records its exit status; the node waits for that status, so
//! the output it returns is exactly what the command printed, not a reading of the
//! screen. One command at a time: the pane is one terminal, and a call that finds it
//! taken by another call's command runs outside it instead. A pane busy with
//! something else than a shell (an editor, a pager, a REPL an operator started) is
//! never typed into.

use super::host::{Lane, RemoteHost};
use super::quote::quote;
use crate::tools::term::{Socket, TmuxError, TmuxRun, MAX_TMUX_OUTPUT};
use std::sync::Arc;

/// The tmux of a remote host.
pub struct RemoteTmux {
    host: Arc<RemoteHost>,
}

impl RemoteTmux {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        RemoteTmux { host }
    }
}

#[async_trait::async_trait]
impl TmuxRun for RemoteTmux {
    async fn run(
        &self,
        socket: Option<&Socket>,
        args: &[&str],
    ) -> Result<(Vec<u8>, bool), TmuxError> {
        let mut line = format!(
            "tmux -L {}",
            quote(socket.map_or("default", |s| s.name())).unwrap_or_default()
        );
        for a in args {
            let q = quote(a).ok_or_else(|| TmuxError::Args("a NUL byte in an argument".into()))?;
            line.push(' ');
            line.push_str(&q);
        }
        let script = format!(
            "(unset TMUX TMUX_PANE; exec {line}) > \"$GSV_D/x.$$\" 2> \"$GSV_D/y.$$\"\n\
             gsv_text rc \"$?\"\n\
             gsv_head out \"$GSV_D/x.$$\" {}\n\
             gsv_head err \"$GSV_D/y.$$\" 4096\n\
             rm -f \"$GSV_D/x.$$\" \"$GSV_D/y.$$\"",
            MAX_TMUX_OUTPUT + 1
        );
        let reply = self
            .host
            .run(Lane::Control, None, &script, MAX_TMUX_OUTPUT + 64 * 1024)
            .await
            .map_err(|e| TmuxError::Failed(e.to_string()))?;
        let rc: i32 = reply.text("rc").and_then(|r| r.parse().ok()).unwrap_or(-1);
        let mut out = reply.get("out").unwrap_or_default().to_vec();
        let cut = out.len() > MAX_TMUX_OUTPUT;
        out.truncate(MAX_TMUX_OUTPUT);
        match rc {
            0 => Ok((out, cut)),
            127 => Err(TmuxError::Failed(format!(
                "tmux is not installed on {} (or not on its PATH)",
                self.host.shown()
            ))),
            _ => {
                let err = reply.text("err").unwrap_or_default();
                Err(TmuxError::Failed(if err.trim().is_empty() {
                    format!("exited with status {rc}")
                } else {
                    err.trim().to_owned()
                }))
            }
        }
    }
}

/// A `--tmux` session name: letters, digits, `_` and `-` (not first).
pub fn check_session(name: &str) -> Result<&str, super::RemoteError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if ok {
        Ok(name)
    } else {
        Err(super::RemoteError::BadTarget(format!(
            "--tmux {name:?}: a session name (letters, digits, '_', '-')"
        )))
    }
}

/// The run script a pane runs for one command (`sh JOB/run`): it reads the command,
/// the working directory and the umask from files beside it.
pub const RUN_SCRIPT: &str = r#"j=$(dirname "$0")
echo $$ > "$j/pid"
printf '\n$ %s\n' "$(cat "$j/cmd")"
{ ( cd "$(cat "$j/wd")" && umask "$(cat "$j/umask")" && exec "${SHELL:-/bin/sh}" -c "$(cat "$j/cmd")" ) </dev/null 2>&1; echo $? > "$j/rc.t"; } | tee "$j/out"
mv "$j/rc.t" "$j/rc"
"#;

/// The script that types one command into the pane of `session` and waits for it;
/// the job directory is `$gsv_j`, which holds `cmd` and `wd` already.
pub fn pane_script(session: &str) -> Option<String> {
    let run = quote(RUN_SCRIPT)?;
    let s = quote(&format!("={session}:"))?;
    let has = quote(&format!("={session}"))?;
    let name = quote(session)?;
    Some(format!(
        r#"  printf '%s' "$gsv_umask" > "$gsv_j/umask"
  printf '%s' {run} > "$gsv_j/run"
  case "$gsv_j" in *"'"*) gsv_text error "the node's directory on the host has a quote in its path"; rm -rf "$gsv_j"; return 0;; esac
  gsv_t() {{ (unset TMUX TMUX_PANE; exec tmux -L default "$@"); }}
  if ! command -v tmux >/dev/null 2>&1; then gsv_text error "tmux is not installed on the host"; rm -rf "$gsv_j"; return 0; fi
  gsv_t has-session -t {has} 2>/dev/null || gsv_t new-session -d -s {name} -x 200 -y 50 || {{ gsv_text error "cannot start the tmux session"; rm -rf "$gsv_j"; return 0; }}
  gsv_pc=$(gsv_t display-message -p -t {s} '#{{pane_current_command}}' 2>/dev/null)
  case "$gsv_pc" in
    sh|bash|zsh|dash|ksh|ash|fish|mksh|-sh|-bash|-zsh) ;;
    *) gsv_text error "the pane of tmux session is busy running ${{gsv_pc:-something}}: it takes no command until that ends"; rm -rf "$gsv_j"; return 0;;
  esac
  gsv_t send-keys -t {s} -l "sh '$gsv_j/run'" && gsv_t send-keys -t {s} Enter
  gsv_w=0
  while [ ! -f "$gsv_j/rc" ]; do
    if [ -f "$gsv_j/pid" ]; then kill -0 "$(cat "$gsv_j/pid")" 2>/dev/null || break
    else gsv_w=$((gsv_w + 1)); [ "$gsv_w" -gt 200 ] && {{ gsv_text error "the pane did not start the command (is its shell waiting for input?)"; rm -rf "$gsv_j"; return 0; }}
    fi
    sleep 0.05
  done
  gsv_text pid "$(cat "$gsv_j/pid" 2>/dev/null)"
  gsv_text rc "$(cat "$gsv_j/rc" 2>/dev/null || echo 143)"
"#
    ))
}
