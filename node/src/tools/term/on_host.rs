//! tmux on the far host of an SSH- or container-backed node: the runner behind
//! term_capture and term_send there ([`HostTmux`]), and `--tmux SESSION`: a window of that session, named [`WINDOW`], where a
//! waiting Bash command runs and an operator can attach and watch it.
//!
//! The window is gsv's own: it is made when missing (`new-window -d`, so nobody's
//! current window changes), and each command replaces what it shows
//! (`respawn-pane -k`, the script `exec`ed so it leads the pane's process group and
//! a kill of the group ends all of it), so no key is ever typed into a pane a person
//! uses, and no
//! half-typed line of theirs is sent with an Enter. The window keeps the last
//! command's output on screen after it ends (`remain-on-exit`).
//!
//! A command runs through a small script in its job directory: it prints the command
//! line, runs it with its output shown in the window and copied to a file (`tee`),
//! and records its exit status; the node waits for that status, so the output it
//! returns is exactly what the command printed, not a reading of the screen. The
//! command gets a clean environment (`env -i`, then `HOME`, `USER`, `LOGNAME`,
//! `SHELL`, `PATH`, `LANG` of the node's own SSH session): nothing the tmux server
//! or a person's shell exported reaches it. It runs as the tmux server's user, which
//! is the node's SSH user (the server is found by that user's socket), never as a
//! shell someone raised with `sudo -s`. One command at a time: the window is one
//! terminal, and a call that finds it taken by another call's command runs outside
//! it instead.

use super::{Socket, TmuxError, TmuxRun, MAX_TMUX_OUTPUT};
use crate::remote::quote::quote;
use crate::remote::{Lane, RemoteError, RemoteHost};
use std::sync::Arc;

/// The tmux of the far host of an SSH- or container-backed node: the runner
/// term_capture and term_send use when made with `on` (see `runner` in [`super`]).
pub struct HostTmux {
    host: Arc<RemoteHost>,
}

impl HostTmux {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        HostTmux { host }
    }
}

#[async_trait::async_trait]
impl TmuxRun for HostTmux {
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
pub fn check_session(name: &str) -> Result<&str, RemoteError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if ok {
        Ok(name)
    } else {
        Err(RemoteError::BadTarget(format!(
            "--tmux {name:?}: a session name (letters, digits, '_', '-')"
        )))
    }
}

/// The name of gsv's window in the `--tmux` session.
pub const WINDOW: &str = "gsv";

/// The run script the window runs for one command (`sh JOB/run`): it reads the
/// command, the working directory, the umask and the environment to give it from
/// files beside it.
pub const RUN_SCRIPT: &str = r#"j=$(dirname "$0")
trap 'echo 143 > "$j/rc"; exit 143' TERM HUP INT
echo $$ > "$j/pid"
printf '\n$ %s\n' "$(cat "$j/cmd")"
{ ( cd "$(cat "$j/wd")" && umask "$(cat "$j/umask")" && exec env -i HOME="$(cat "$j/home")" USER="$(cat "$j/user")" LOGNAME="$(cat "$j/user")" SHELL="$(cat "$j/shell")" PATH="$(cat "$j/path")" LANG="$(cat "$j/lang")" TERM=screen "$(cat "$j/shell")" -c "$(cat "$j/cmd")" ) </dev/null 2>&1; echo $? > "$j/rc.t"; } | tee "$j/out"
mv "$j/rc.t" "$j/rc"
"#;

/// The script that runs one command in gsv's window of `session` and waits for it;
/// the job directory is `$gsv_j`, which holds `cmd` and `wd` already.
pub fn pane_script(session: &str) -> Option<String> {
    let run = quote(RUN_SCRIPT)?;
    let window_name = quote(WINDOW)?;
    let window = quote(&format!("={session}:{WINDOW}"))?;
    let at = quote(&format!("={session}:"))?;
    let has = quote(&format!("={session}"))?;
    let name = quote(session)?;
    Some(format!(
        r#"  printf '%s' "$gsv_umask" > "$gsv_j/umask"
  printf '%s' {run} > "$gsv_j/run"
  printf '%s' "$HOME" > "$gsv_j/home"; printf '%s' "${{USER:-$(id -un)}}" > "$gsv_j/user"
  printf '%s' "${{SHELL:-/bin/sh}}" > "$gsv_j/shell"; printf '%s' "$PATH" > "$gsv_j/path"
  printf '%s' "${{LANG:-C.UTF-8}}" > "$gsv_j/lang"
  case "$gsv_j" in *"'"*) gsv_text error "the node's directory on the host has a quote in its path"; rm -rf "$gsv_j"; return 0;; esac
  gsv_t() {{ (unset TMUX TMUX_PANE; exec tmux -L default "$@"); }}
  if ! command -v tmux >/dev/null 2>&1; then gsv_text error "tmux is not installed on the host"; rm -rf "$gsv_j"; return 0; fi
  gsv_t has-session -t {has} 2>/dev/null || gsv_t new-session -d -s {name} -x 200 -y 50 || {{ gsv_text error "cannot start the tmux session"; rm -rf "$gsv_j"; return 0; }}
  if ! gsv_t list-windows -t {has} -F '#{{window_name}}' 2>/dev/null | grep -qx {window_name}; then
    gsv_t new-window -d -t {at} -n {window_name} 'sleep 86400' || {{ gsv_text error "cannot open gsv's tmux window"; rm -rf "$gsv_j"; return 0; }}
  fi
  gsv_t set-option -w -t {window} remain-on-exit on 2>/dev/null
  gsv_t respawn-pane -k -t {window} "exec sh '$gsv_j/run'" || {{ gsv_text error "cannot run in gsv's tmux window"; rm -rf "$gsv_j"; return 0; }}
  # Gone, or a zombie the tmux server has not reaped yet.
  gsv_alive() {{ kill -0 "$1" 2>/dev/null || return 1; [ -r "/proc/$1/stat" ] || return 0; case "$(cut -d' ' -f3 "/proc/$1/stat")" in Z) return 1;; esac; return 0; }}
  gsv_w=0
  while [ ! -f "$gsv_j/rc" ]; do
    if [ -f "$gsv_j/pid" ]; then gsv_alive "$(cat "$gsv_j/pid")" || break
    else gsv_w=$((gsv_w + 1)); [ "$gsv_w" -gt 200 ] && {{ gsv_text error "gsv's tmux window did not start the command"; rm -rf "$gsv_j"; return 0; }}
    fi
    sleep 0.05
  done
  gsv_text pid "$(cat "$gsv_j/pid" 2>/dev/null)"
  gsv_text rc "$(cat "$gsv_j/rc" 2>/dev/null || echo 143)"
"#
    ))
}
