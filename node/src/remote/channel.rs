//! One persistent POSIX shell on the far host, behind a local program (an `ssh`
//! session on the master connection, or the container engine's `exec -i`).
//!
//! A fresh process per call would cost an ssh session or an engine exec each time
//! (milliseconds to tens of milliseconds); a shell that stays up costs a fork on the
//! host. The node writes one script per request; the script writes only *frames* to
//! its standard output — `#TAG LEN\n` and then exactly LEN bytes — and the channel
//! ends every request with `#end STATUS\n`. Programs a script runs never write to
//! the channel directly (their output goes to files that are framed afterwards) and
//! never read from it (every script runs with `</dev/null`), so nothing a command
//! prints or reads can put the two ends out of step. Anything else on the stream is
//! a protocol error and the channel is dropped.

use super::error::RemoteError;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Longest frame header line.
const MAX_HEADER: usize = 256;
/// Junk (motd, rc-file output) skipped before the channel says it is ready.
const MAX_GREETING: usize = 64 * 1024;
/// How much of the local program's stderr is kept for error messages.
const STDERR_KEEP: usize = 4096;

/// Shell functions every script may use, installed once per channel.
///
/// - `gsv_file TAG FILE`: FILE's bytes as a frame. The length is taken first and the
///   bytes are cut or padded to it, so a file that changes meanwhile cannot put the
///   stream out of step (`gsv_size` after it tells whether it did).
/// - `gsv_head TAG FILE CAP`: at most CAP bytes from FILE's start.
/// - `gsv_tail TAG FILE CAP`: at most CAP bytes from FILE's end.
/// - `gsv_text TAG VALUE`: a string as a frame.
/// - `gsv_check PATH WORKSPACE CONFINE`: the path a file tool may use (`$gsv_p`),
///   or `error` and `msg` frames and status 1: never inside the node's own directory
///   on the host, and with CONFINE=1 resolved (symlinks and `..`) beneath the
///   resolved workspace. Checked by path, then used by path: unlike a local node's,
///   this check is not free of races with someone changing the host's files at the
///   same moment (docs/operations.md).
const FUNCTIONS: &str = r#"
gsv_size() { gsv_n=$(wc -c < "$1" 2>/dev/null) || gsv_n=0; gsv_n=$((gsv_n + 0)); }
gsv_emit() { printf '#%s %s\n' "$1" "$3"; cat "$2" /dev/zero 2>/dev/null | head -c "$3"; }
gsv_file() { gsv_size "$2"; gsv_emit "$1" "$2" "$gsv_n"; }
gsv_head() { gsv_size "$2"; [ "$gsv_n" -gt "$3" ] && gsv_n=$3; gsv_emit "$1" "$2" "$gsv_n"; }
gsv_tail() {
  gsv_size "$2"
  if [ "$gsv_n" -le "$3" ]; then gsv_emit "$1" "$2" "$gsv_n"; return; fi
  printf '#%s %s\n' "$1" "$3"
  { tail -c "$3" "$2" 2>/dev/null; cat /dev/zero; } | head -c "$3"
}
gsv_text() {
  case $2 in
    *[!\ -~]*) printf '%s' "$2" > "$GSV_D/t.$$"; gsv_file "$1" "$GSV_D/t.$$"; rm -f "$GSV_D/t.$$" ;;
    *) printf '#%s %s\n%s' "$1" "${#2}" "$2" ;;
  esac
}
gsv_real() {
  gsv_r=$(realpath "$1" 2>/dev/null) || gsv_r=$(readlink -f "$1" 2>/dev/null) || return 1
  [ -n "$gsv_r" ]
}
gsv_refuse() { gsv_text error "$1"; gsv_text msg "$2"; }
gsv_check() {
  gsv_p=$1
  gsv_q=$1; gsv_rest=
  while ! { [ -e "$gsv_q" ] || [ -L "$gsv_q" ]; }; do
    gsv_b=$(basename "$gsv_q")
    if [ "$gsv_b" = .. ]; then
      if [ "$3" = 1 ]; then gsv_refuse outside "Refused: $1 goes through '..' below a directory that does not exist, so it cannot be checked against the workspace $2 (this node is confined to its workspace)"; return 1; fi
    fi
    gsv_rest="/$gsv_b$gsv_rest"; gsv_q=$(dirname "$gsv_q")
  done
  if ! gsv_real "$gsv_q"; then
    if [ -L "$gsv_q" ] && [ "$3" = 1 ]; then gsv_refuse outside "Refused: $gsv_q is a symlink whose target does not exist, so it cannot be checked against the workspace $2 (this node is confined to its workspace)"; return 1; fi
    gsv_refuse unresolvable "Cannot resolve $1 on the host (it needs realpath or readlink -f)"; return 1
  fi
  gsv_c="${gsv_r%/}$gsv_rest"; [ -n "$gsv_c" ] || gsv_c=/
  if [ -z "$gsv_dr" ] && gsv_real "$GSV_D"; then gsv_dr=$gsv_r; fi
  if [ -n "$gsv_dr" ]; then
    case "$gsv_c/" in "$gsv_dr"/*) gsv_refuse protected "$1"; return 1;; esac
  fi
  if [ "$3" = 1 ]; then
    if [ "$gsv_wk" != "$2" ] || [ -z "$gsv_wr" ]; then
      gsv_real "$2" || { gsv_refuse unresolvable "Cannot resolve the workspace $2 on the host"; return 1; }
      gsv_wk=$2; gsv_wr=$gsv_r
    fi
    if [ "$gsv_wr" != / ]; then
      case "$gsv_c/" in "$gsv_wr"/*) ;; *) gsv_refuse outside "Refused: $1 resolves to $gsv_c, outside the workspace $gsv_wr (this node is confined to its workspace)"; return 1;; esac
    fi
    gsv_p=$gsv_c
  fi
  return 0
}
"#;

/// One frame of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub tag: String,
    pub data: Vec<u8>,
}

/// What a request's script wrote, and the status it ended with.
#[derive(Debug, Default)]
pub struct Reply {
    pub frames: Vec<Frame>,
    pub status: i32,
}

impl Reply {
    /// The first frame tagged `tag`.
    pub fn get(&self, tag: &str) -> Option<&[u8]> {
        self.frames
            .iter()
            .find(|f| f.tag == tag)
            .map(|f| f.data.as_slice())
    }

    /// The first frame tagged `tag`, as (lossy) text without a trailing newline.
    pub fn text(&self, tag: &str) -> Option<String> {
        self.get(tag)
            .map(|d| String::from_utf8_lossy(d).trim_end_matches('\n').to_owned())
    }

    /// Every frame tagged `tag`, in order.
    pub fn all<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.frames
            .iter()
            .filter(move |f| f.tag == tag)
            .map(|f| f.data.as_slice())
    }
}

/// A shell on the host, ready for requests one at a time.
pub struct Channel {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<String>>,
    /// Set while a request is under way and when the stream went out of step: a
    /// channel dropped in that state is not used again.
    dirty: bool,
}

impl Channel {
    /// Starts `cmd` (which must run a POSIX shell reading its standard input on the
    /// host), sends `prelude` and the helper functions, and waits (`wait` at most)
    /// until the shell answers. Output before that answer (a motd, an rc file's
    /// chatter) is skipped.
    pub async fn open(
        mut cmd: Command,
        prelude: &str,
        wait: Duration,
    ) -> Result<Channel, RemoteError> {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| RemoteError::io("starting the host's shell", e))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(RemoteError::Protocol(
                "the shell's pipes are missing".into(),
            ));
        };
        let kept = Arc::new(Mutex::new(String::new()));
        tokio::spawn(keep_stderr(stderr, Arc::clone(&kept)));
        let mut chan = Channel {
            child,
            stdin,
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            stderr: kept,
            dirty: true,
        };
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let hello = format!("{prelude}\n{FUNCTIONS}\nprintf '\\n#ready %s\\n' {nonce}\n");
        let ready = async {
            chan.send(hello.as_bytes()).await?;
            chan.greeting(&nonce).await
        };
        match tokio::time::timeout(wait, ready).await {
            Ok(Ok(())) => {
                chan.dirty = false;
                Ok(chan)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RemoteError::Protocol(format!(
                "the host's shell did not answer within {} s",
                wait.as_secs()
            ))),
        }
    }

    /// Runs `script` and reads its frames (at most `limit` bytes of them). The
    /// script runs with `</dev/null` in a `{ }` group of the channel's shell, so
    /// variables it sets stay set for later requests of this channel (use a
    /// subshell where that matters).
    pub async fn run(&mut self, script: &str, limit: usize) -> Result<Reply, RemoteError> {
        if self.dirty {
            return Err(RemoteError::Protocol("the channel is out of step".into()));
        }
        self.dirty = true;
        let wrapped = format!("{{\n{script}\n}} </dev/null\nprintf '#end %s\\n' \"$?\"\n");
        self.send(wrapped.as_bytes()).await?;
        let reply = self.read_reply(limit).await?;
        self.dirty = false;
        Ok(reply)
    }

    /// Whether the channel can take another request.
    pub fn usable(&mut self) -> bool {
        !self.dirty && matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines the local program (ssh, the engine) wrote to its stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr
            .lock()
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    }

    /// Waits (briefly) for the local program to exit and returns what it said:
    /// for the error message of a channel that could not be opened.
    pub async fn ended(mut self) -> String {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        // Let the stderr task take the last bytes.
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.stderr_tail()
    }

    /// The shell's output ended `when`: what the local program said about it.
    fn ended_early(&self, when: &str) -> RemoteError {
        let said = self.stderr_tail();
        RemoteError::Protocol(if said.is_empty() {
            format!("the host's shell ended {when}")
        } else {
            format!("the host's shell ended {when}: {said}")
        })
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), RemoteError> {
        let write = async {
            self.stdin.write_all(bytes).await?;
            self.stdin.flush().await
        };
        write.await.map_err(|e| {
            let said = self.stderr_tail();
            RemoteError::Gone(if said.is_empty() { e.to_string() } else { said })
        })
    }

    async fn greeting(&mut self, nonce: &str) -> Result<(), RemoteError> {
        let want = format!("#ready {nonce}");
        let mut skipped = 0usize;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut self.stdout)
                .take((MAX_GREETING - skipped.min(MAX_GREETING)) as u64 + 1)
                .read_until(b'\n', &mut line)
                .await
                .map_err(|e| RemoteError::io("reading the host's shell", e))?;
            if n == 0 {
                return Err(self.ended_early("before it was ready"));
            }
            if line.strip_suffix(b"\n").unwrap_or(&line) == want.as_bytes() {
                return Ok(());
            }
            skipped += n;
            if skipped > MAX_GREETING {
                return Err(RemoteError::Protocol(
                    "over 64 KiB of output before the shell was ready".into(),
                ));
            }
        }
    }

    async fn read_reply(&mut self, limit: usize) -> Result<Reply, RemoteError> {
        let mut reply = Reply::default();
        let mut total = 0usize;
        let mut line = Vec::with_capacity(64);
        loop {
            line.clear();
            let n = (&mut self.stdout)
                .take(MAX_HEADER as u64)
                .read_until(b'\n', &mut line)
                .await
                .map_err(|e| RemoteError::io("reading the host's shell", e))?;
            if n == 0 {
                return Err(self.ended_early("mid-request"));
            }
            let (tag, len) = parse_header(&line)?;
            if tag == "end" {
                reply.status = i32::try_from(len).unwrap_or(i32::MAX);
                return Ok(reply);
            }
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            total = total.saturating_add(len);
            if total > limit {
                return Err(RemoteError::Protocol(format!(
                    "the reply is over its {limit}-byte limit"
                )));
            }
            let mut data = vec![0u8; len];
            self.stdout
                .read_exact(&mut data)
                .await
                .map_err(|e| RemoteError::io("reading the host's shell", e))?;
            reply.frames.push(Frame { tag, data });
        }
    }
}

/// `#TAG LEN\n` → (TAG, LEN).
fn parse_header(line: &[u8]) -> Result<(String, u64), RemoteError> {
    let text = std::str::from_utf8(line)
        .ok()
        .and_then(|l| l.strip_suffix('\n'))
        .and_then(|l| l.strip_prefix('#'));
    let parsed = text.and_then(|l| {
        let (tag, len) = l.split_once(' ')?;
        let ok = !tag.is_empty() && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        Some((ok.then(|| tag.to_owned())?, len.trim().parse::<u64>().ok()?))
    });
    parsed.ok_or_else(|| {
        let shown: String = String::from_utf8_lossy(line).chars().take(80).collect();
        RemoteError::Protocol(format!("expected a frame header, got {shown:?}"))
    })
}

/// Keeps the last [`STDERR_KEEP`] bytes the local program writes to stderr.
async fn keep_stderr(mut from: tokio::process::ChildStderr, into: Arc<Mutex<String>>) {
    let mut buf = vec![0u8; 4096];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Ok(mut kept) = into.lock() {
                    kept.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if kept.len() > STDERR_KEEP {
                        let mut cut = kept.len() - STDERR_KEEP;
                        while !kept.is_char_boundary(cut) {
                            cut += 1;
                        }
                        kept.drain(..cut);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn local() -> Channel {
        let mut cmd = Command::new("sh");
        // Chatter before the greeting is skipped.
        cmd.arg("-c").arg("echo motd; exec sh");
        let dir = std::env::temp_dir().join(format!("gsv-chan-{}", uuid::Uuid::new_v4().simple()));
        let prelude = format!("GSV_D={}; mkdir -p \"$GSV_D\"", dir.display());
        Channel::open(cmd, &prelude, Duration::from_secs(10))
            .await
            .expect("opens")
    }

    #[tokio::test]
    async fn frames_round_trip_binary_bytes_and_statuses() {
        let mut c = local().await;
        let r = c
            .run("printf 'a\\000b\\n' > \"$GSV_D/f\"; gsv_file data \"$GSV_D/f\"; gsv_text t 'hi there'; (exit 3)", 1 << 20)
            .await
            .unwrap();
        assert_eq!(r.get("data"), Some(&b"a\0b\n"[..]));
        assert_eq!(r.text("t").as_deref(), Some("hi there"));
        assert_eq!(r.status, 3);
        // Commands that read stdin get nothing from the channel; it stays in step.
        let r = c
            .run("cat; read x; gsv_text x \"${x:-none}\"", 1 << 20)
            .await
            .unwrap();
        assert_eq!(r.text("x").as_deref(), Some("none"));
        let r = c
            .run("printf '0123456789' > \"$GSV_D/g\"; gsv_head h \"$GSV_D/g\" 4; gsv_tail t \"$GSV_D/g\" 3; gsv_head all \"$GSV_D/g\" 100", 1 << 20)
            .await
            .unwrap();
        assert_eq!(r.get("h"), Some(&b"0123"[..]));
        assert_eq!(r.get("t"), Some(&b"789"[..]));
        assert_eq!(r.get("all"), Some(&b"0123456789"[..]));
        assert!(c.usable());
    }

    #[tokio::test]
    async fn stray_output_and_oversized_replies_break_the_channel() {
        let mut c = local().await;
        assert!(c.run("echo oops", 1 << 20).await.is_err());
        assert!(!c.usable());
        let mut c = local().await;
        assert!(c.run("gsv_text big 0123456789", 5).await.is_err());
        assert!(!c.usable());
        let mut c = local().await;
        assert!(c.run("exit 0", 1 << 20).await.is_err(), "the shell ended");
    }
}
