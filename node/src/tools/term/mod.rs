//! tmux panes on the node: term_capture reads one, term_send types into one. For
//! programs an operator also watches (a long build, a REPL, a server console), where
//! the agent works in the same terminal the human sees.
//!
//! Both run `tmux` from an argv (no shell), with every agent-given value checked
//! first ([`Target`], [`Socket`]): nothing an agent sends can become a tmux option
//! or command.
//!
//! **Which tmux server.** Only servers of the node's own user, by name: without
//! `socket`, the default server (`tmux -L default`, whatever `$TMUX` the node
//! inherited, which is removed from tmux's environment); with `socket: NAME`,
//! `tmux -L NAME`. Socket paths (`-S`) are refused: a path would let an agent reach a
//! socket of another user or program that the node's user can open. tmux itself
//! refuses a server owned by another user.

pub mod capture;
pub mod on_host;
pub mod send;

pub use capture::TermCapture;
pub use send::TermSend;

use std::process::Stdio;
use std::time::Duration;
use thiserror::Error;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How long one tmux command may take.
pub const TMUX_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes read from one tmux command's output (more is cut).
pub const MAX_TMUX_OUTPUT: usize = 4 * 1024 * 1024;
/// The longest target or socket name.
const MAX_NAME: usize = 128;

/// Why a tmux command failed.
#[derive(Debug, Error)]
pub enum TmuxError {
    #[error("{0}")]
    Args(String),
    #[error("cannot run tmux (is it installed and on the node's PATH?): {0}")]
    Spawn(std::io::Error),
    #[error("tmux did not answer within {} s", TMUX_TIMEOUT.as_secs())]
    Timeout,
    #[error("tmux: {0}")]
    Failed(String),
    #[error("reading tmux's output failed: {0}")]
    Io(std::io::Error),
}

/// A pane, as tmux's `-t` takes it: `%ID`, or `SESSION[:WINDOW[.PANE]]` where the
/// session and a window name are letters, digits, `_` and `-` (not first), a window
/// may be an index, and a pane is an index.
///
/// Names are matched exactly: tmux would otherwise take `work` for a session
/// `workbench` when no `work` exists (a prefix match), and type into a pane nobody
/// named. The form given to tmux ([`Target::tmux`]) marks session and window names
/// with tmux's `=` (exact match).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    given: String,
    tmux: String,
}

impl Target {
    pub fn parse(text: &str) -> Result<Target, String> {
        let bad = || {
            format!(
                "\"target\" must be a tmux pane like \"work\", \"work:1\", \"work:editor.0\" or \"%3\", got {:?}",
                text.chars().take(MAX_NAME).collect::<String>()
            )
        };
        if text.len() > MAX_NAME {
            return Err(bad());
        }
        if let Some(id) = text.strip_prefix('%') {
            if !digits(id) {
                return Err(bad());
            }
            return Ok(Target {
                given: text.to_owned(),
                tmux: text.to_owned(),
            });
        }
        let (session, rest) = match text.split_once(':') {
            Some((s, r)) => (s, Some(r)),
            None => (text, None),
        };
        if !word(session) {
            return Err(bad());
        }
        // The colon makes tmux read `=SESSION` as a session (its current window).
        let mut tmux = format!("={session}:");
        if let Some(rest) = rest {
            let (window, pane) = match rest.split_once('.') {
                Some((w, p)) => (w, Some(p)),
                None => (rest, None),
            };
            if !(digits(window) || word(window)) || pane.is_some_and(|p| !digits(p)) {
                return Err(bad());
            }
            if !digits(window) {
                tmux.push('=');
            }
            tmux.push_str(window);
            if let Some(pane) = pane {
                tmux.push('.');
                tmux.push_str(pane);
            }
        }
        Ok(Target {
            given: text.to_owned(),
            tmux,
        })
    }

    /// The target as the caller gave it.
    pub fn as_str(&self) -> &str {
        &self.given
    }

    /// The target as tmux is given it (names marked for exact match).
    pub fn tmux(&self) -> &str {
        &self.tmux
    }
}

/// A tmux server name (`-L`): letters, digits, `_`, `-` and `.`, not starting with
/// `-` or `.`; never a path.
#[derive(Debug, Clone, PartialEq)]
pub struct Socket(String);

impl Socket {
    pub fn parse(text: &str) -> Result<Socket, String> {
        let ok = !text.is_empty()
            && text.len() <= MAX_NAME
            && !text.starts_with(['-', '.'])
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(Socket(text.to_owned()))
        } else {
            Err(format!(
                "\"socket\" must be a tmux server name (tmux -L: letters, digits, _ - .; no \
                 paths), got {:?}",
                text.chars().take(MAX_NAME).collect::<String>()
            ))
        }
    }
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit())
}

fn word(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// Where tmux runs: on the node itself ([`LocalTmux`]), or on the far host of an SSH-
/// or container-backed node ([`on_host::HostTmux`]). The tools build the same checked argv either way.
#[async_trait::async_trait]
pub trait TmuxRun: Send + Sync {
    /// `tmux -L SOCKET ARGS…` (`default` without a socket): its output (cut to
    /// [`MAX_TMUX_OUTPUT`]) and whether it was cut.
    async fn run(
        &self,
        socket: Option<&Socket>,
        args: &[&str],
    ) -> Result<(Vec<u8>, bool), TmuxError>;
}

/// The tmux a term tool made for `host` runs: this machine's, or the far host's.
fn runner(host: &crate::tools::Host) -> std::sync::Arc<dyn TmuxRun> {
    match host {
        Some(host) => std::sync::Arc::new(on_host::HostTmux::new(std::sync::Arc::clone(host))),
        None => std::sync::Arc::new(LocalTmux),
    }
}

/// tmux on the node's own machine.
pub struct LocalTmux;

#[async_trait::async_trait]
impl TmuxRun for LocalTmux {
    async fn run(
        &self,
        socket: Option<&Socket>,
        args: &[&str],
    ) -> Result<(Vec<u8>, bool), TmuxError> {
        tmux(socket, args).await
    }
}

impl Socket {
    /// The server name given to `tmux -L`.
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// Runs `tmux [-L socket] ARGS…` and returns its standard output (cut to
/// [`MAX_TMUX_OUTPUT`]) and whether it was cut. A non-zero exit is
/// [`TmuxError::Failed`] with tmux's own message.
pub async fn tmux(socket: Option<&Socket>, args: &[&str]) -> Result<(Vec<u8>, bool), TmuxError> {
    let mut cmd = Command::new("tmux");
    cmd.arg("-L")
        .arg(socket.map_or("default", |s| s.0.as_str()))
        .args(args)
        .env_remove("TMUX")
        .env_remove("TMUX_PANE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(TmuxError::Spawn)?;
    let run = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let read_out = async {
            if let Some(s) = stdout {
                s.take(MAX_TMUX_OUTPUT as u64 + 1)
                    .read_to_end(&mut out)
                    .await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let read_err = async {
            if let Some(s) = stderr {
                s.take(4096).read_to_end(&mut err).await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let (a, b) = tokio::join!(read_out, read_err);
        a.and(b).map_err(TmuxError::Io)?;
        let cut = out.len() > MAX_TMUX_OUTPUT;
        if cut {
            out.truncate(MAX_TMUX_OUTPUT);
            // The rest of the output is not read: stop tmux rather than wait on it.
            let _ = child.start_kill();
        }
        let status = child.wait().await.map_err(TmuxError::Io)?;
        if !cut && !status.success() {
            let message = String::from_utf8_lossy(&err).trim().to_owned();
            return Err(TmuxError::Failed(if message.is_empty() {
                format!("exited with {status}")
            } else {
                message
            }));
        }
        Ok((out, cut))
    };
    match tokio::time::timeout(TMUX_TIMEOUT, run).await {
        Ok(result) => result,
        Err(_) => Err(TmuxError::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        for ok in [
            "work",
            "work:1",
            "work:1.0",
            "work:editor.2",
            "my-sess_2:win",
            "%12",
        ] {
            assert!(Target::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-t",
            "work;kill-server",
            "work:",
            "work:.1",
            "work:1.x",
            "%",
            "%x",
            "a b",
            "work:-1",
            "-",
            "/tmp/x",
            "work:1.0.0",
            "wörk",
            "=work",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Target::parse(&"a".repeat(MAX_NAME + 1)).is_err());
        for (given, tmux) in [
            ("work", "=work:"),
            ("work:1", "=work:1"),
            ("work:editor.2", "=work:=editor.2"),
            ("%7", "%7"),
        ] {
            assert_eq!(Target::parse(given).unwrap().tmux(), tmux);
        }
    }

    #[test]
    fn sockets() {
        for ok in ["default", "gsv-test-1", "a.b_c"] {
            assert!(Socket::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-S", "/tmp/sock", "../x", ".hidden", "a/b", "a b"] {
            assert!(Socket::parse(bad).is_err(), "{bad:?}");
        }
    }
}
