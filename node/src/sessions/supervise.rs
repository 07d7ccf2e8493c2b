//! Commands that outlive the node process: a journaled node (one with a data
//! directory) runs each non-terminal Bash command under a minimal `/bin/sh`
//! supervisor, with its output going to files in the journal instead of pipes.
//!
//! Why: with pipes, a node killed with SIGKILL takes the read ends with it (the
//! command dies of SIGPIPE at its next write, or runs on unseen), and nobody is left
//! to learn its exit status (it is reparented to init, which reaps it silently). Here
//! the supervisor — the session's process group leader, the node's child — runs
//! `$SHELL -c COMMAND` in the foreground, waits for it and writes its status (`$?`,
//! one line) to `status` in the session's directory; stdout and stderr are appended
//! to `stdout` and `stderr` there. A restarted node finds all three and re-adopts the
//! session ([`super::adopt`]).
//!
//! The supervisor traps HUP, INT, QUIT and TERM with a no-op (the command itself gets
//! default actions back, as any trapped signal is reset on exec), so a group kill
//! (Process `kill`, a timeout) ends the command and still leaves the status written;
//! only SIGKILL after the grace period takes the supervisor too (its status is then the
//! kill). A status above 128 is read as the signal it stands for, as shells report it
//! (`exit 143` from a command is indistinguishable from SIGTERM).
//!
//! While the node runs it reads the files as they grow ([`follow`]); once it has read
//! more than [`PUNCH_AFTER`] bytes of one, the part already read (all but the last
//! [`RAW_RING_BYTES`]) is punched out of it (`fallocate(PUNCH_HOLE)`), so a chatty
//! command costs bounded disk space.

use crate::journal::files;
use crate::probe::LoginEnv;
use crate::sessions::group;
use crate::sessions::session::{Session, Stream};
use crate::sessions::spawn::{Launched, OutputSource};
use crate::sessions::RAW_RING_BYTES;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::debug;

/// The supervisor: `sh -c SCRIPT gsv-supervise SHELL STATUS_FILE`, the command in
/// [`COMMAND_VAR`] (not in its argv: process listings show the command once, in the
/// shell that runs it, and other users cannot read it from the supervisor's argv).
///
/// With a stdin, the command reads it from the named pipe `$3`, opened by a subshell
/// after its fork (a subshell's redirections are applied in the child): the supervisor
/// never holds the pipe, so the node's writes fail with `EPIPE` once the command has
/// closed it, as with a plain pipe.
pub(crate) const SCRIPT: &str = "trap : HUP INT QUIT TERM\nc=$GSV_SUPERVISED_COMMAND\nunset GSV_SUPERVISED_COMMAND\nif [ -n \"$3\" ]; then (\"$1\" -c \"$c\") <\"$3\"; else \"$1\" -c \"$c\"; fi\ns=$?\nprintf '%s\\n' \"$s\" >\"$2\"\nexit \"$s\"\n";
/// The variable the supervisor reads the command from (and unsets before running it).
pub(crate) const COMMAND_VAR: &str = "GSV_SUPERVISED_COMMAND";
/// The supervisor's shell.
const SUPERVISOR_SHELL: &str = "/bin/sh";
/// The exit status file in a session's directory.
pub(crate) const STATUS: &str = "status";
/// The named pipe a supervised command with a stdin reads it from.
pub(crate) const STDIN: &str = "stdin";
/// How long the node waits for a supervised command to open its stdin.
const STDIN_OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of an output file read before the read part is punched out.
pub const PUNCH_AFTER: u64 = 8 * 1024 * 1024;
/// Longest pause between two reads of an output file that had nothing new.
const FOLLOW_MAX_PAUSE: Duration = Duration::from_millis(100);
const READ_CHUNK: usize = 64 * 1024;

/// The output file of `stream` in a session's directory.
pub(crate) fn output_file(stream: Stream) -> &'static str {
    match stream {
        Stream::Stderr => "stderr",
        _ => "stdout",
    }
}

/// Starts `shell -c command` under the supervisor in `workdir` with `env`, in its own
/// process group, its output appended to files in the session directory `dir`.
pub(crate) fn launch(
    shell: &Path,
    command: &str,
    workdir: &Path,
    env: &LoginEnv,
    stdin: bool,
    dir: &Path,
) -> io::Result<Launched> {
    let create =
        |stream| files::create_append(&dir.join(output_file(stream))).map_err(io::Error::other);
    let (stdout, stderr) = (create(Stream::Stdout)?, create(Stream::Stderr)?);
    let fifo = dir.join(STDIN);
    if stdin {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )?;
    }
    let mut cmd = tokio::process::Command::new(SUPERVISOR_SHELL);
    cmd.arg("-c")
        .arg(SCRIPT)
        .arg("gsv-supervise")
        .arg(shell)
        .arg(dir.join(STATUS))
        .arg(if stdin { fifo.as_os_str() } else { "".as_ref() })
        .current_dir(workdir)
        .env_clear()
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .env(COMMAND_VAR, command)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(false);
    let child = cmd.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the child exited before it had a pid"))?;
    let input = None;
    let mut outputs = Vec::new();
    for stream in [Stream::Stdout, Stream::Stderr] {
        let file = open_output(dir, stream).map_err(io::Error::other)?;
        outputs.push((stream, OutputSource::File(file)));
    }
    Ok(Launched {
        child,
        pid,
        input,
        outputs,
    })
}

/// Opens the writing end of the session's stdin pipe (in `dir`) once the command has
/// opened its end, and gives it to `session`. With `wait`, keeps trying (the command
/// opens it as it starts) for [`STDIN_OPEN_TIMEOUT`] or until the session ends;
/// without, tries once (a re-adopted session: its command opened it long ago).
pub(crate) async fn open_stdin(session: Arc<Session>, dir: std::path::PathBuf, wait: bool) {
    open_stdin_inner(&session, &dir, wait).await;
    session.stdin_settled();
}

async fn open_stdin_inner(session: &Arc<Session>, dir: &Path, wait: bool) {
    let path = dir.join(STDIN);
    let deadline = tokio::time::Instant::now() + STDIN_OPEN_TIMEOUT;
    let mut pause = Duration::from_micros(200);
    loop {
        match tokio::net::unix::pipe::OpenOptions::new().open_sender(&path) {
            Ok(sender) => {
                session
                    .set_input(crate::sessions::session::Input::Fifo(sender))
                    .await;
                return;
            }
            // No reader yet (or any more).
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && wait => {
                if session.is_finished() || tokio::time::Instant::now() >= deadline {
                    debug!("the command never opened its stdin");
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => {
                debug!(error = %e, "no stdin for this session");
                return;
            }
        }
    }
}

/// Opens an output file of the session directory `dir` to follow it (read and write:
/// punching holes needs a writable descriptor).
pub(crate) fn open_output(
    dir: &Path,
    stream: Stream,
) -> Result<File, crate::journal::JournalError> {
    let path = dir.join(output_file(stream));
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|error| crate::journal::JournalError::File { path, error })
}

/// How the command ended, from the status file of the session directory `dir`:
/// `None` while it is missing or not complete (one line).
pub(crate) fn read_status(dir: &Path) -> Option<(Option<i32>, Option<String>)> {
    let bytes = files::read_capped(&dir.join(STATUS), 64).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let line = text.strip_suffix('\n')?;
    let status: i32 = line.trim().parse().ok()?;
    Some(decode_status(status))
}

/// A shell's `$?` as (exit code, signal name).
pub(crate) fn decode_status(status: i32) -> (Option<i32>, Option<String>) {
    if (129..=128 + 64).contains(&status) {
        (None, Some(group::signal_name(status - 128)))
    } else {
        (Some(status), None)
    }
}

/// Reads the output file `file` into `session` as it grows, until `exited` says the
/// supervisor is gone and the file has been read to its end.
pub(crate) async fn follow(
    session: Arc<Session>,
    stream: Stream,
    mut file: File,
    mut exited: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut pause = Duration::from_millis(1);
    let mut punched = 0u64;
    loop {
        // Checked before the read: everything written before the exit is then read.
        let done = *exited.borrow_and_update() || exited.has_changed().is_err();
        match file.read(&mut buf) {
            Ok(0) if done => break,
            Ok(0) => {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = exited.changed() => {}
                }
                pause = (pause * 2).min(FOLLOW_MAX_PAUSE);
            }
            Ok(n) => {
                session.push_output(stream, &buf[..n]);
                pause = Duration::from_millis(1);
                punched = punch_read_part(&mut file, punched);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                debug!(?stream, error = %e, "reading an output file failed");
                break;
            }
        }
    }
}

/// Frees the disk blocks of what was read of `file`, all but its last
/// [`RAW_RING_BYTES`], once more than [`PUNCH_AFTER`] bytes were read; returns the
/// offset freed up to.
fn punch_read_part(file: &mut File, punched: u64) -> u64 {
    let Ok(at) = file.stream_position() else {
        return punched;
    };
    if at < PUNCH_AFTER {
        return punched;
    }
    let upto = at.saturating_sub(RAW_RING_BYTES as u64) & !4095;
    if upto <= punched + 1024 * 1024 {
        return punched;
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::FallocateFlags;
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        if let Err(e) = rustix::fs::fallocate(&*file, flags, 0, upto) {
            debug!(error = %e, "could not free the read part of an output file");
            return u64::MAX; // not supported here: stop trying
        }
    }
    upto
}

/// Loads the last [`RAW_RING_BYTES`] of the output file of `stream` in `dir` into
/// `session`; returns the file, positioned at its end, to follow it.
pub(crate) fn load_tail(session: &Session, dir: &Path, stream: Stream) -> Option<File> {
    let mut file = match open_output(dir, stream) {
        Ok(file) => file,
        Err(e) => {
            debug!(error = %e, "no output file");
            return None;
        }
    };
    let len = file.metadata().ok()?.len();
    let from = len.saturating_sub(RAW_RING_BYTES as u64);
    file.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    (&mut file).take(len - from).read_to_end(&mut bytes).ok()?;
    if !bytes.is_empty() {
        session.push_output(stream, &bytes);
    }
    Some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(decode_status(0), (Some(0), None));
        assert_eq!(decode_status(1), (Some(1), None));
        assert_eq!(decode_status(143), (None, Some("SIGTERM".to_owned())));
        assert_eq!(decode_status(255), (Some(255), None));
    }

    #[test]
    fn the_status_file_counts_only_once_complete() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_status(dir.path()), None);
        std::fs::write(dir.path().join(STATUS), "14").unwrap();
        assert_eq!(read_status(dir.path()), None, "no newline yet");
        std::fs::write(dir.path().join(STATUS), "0\n").unwrap();
        assert_eq!(read_status(dir.path()), Some((Some(0), None)));
        std::fs::write(dir.path().join(STATUS), "x\n").unwrap();
        assert_eq!(read_status(dir.path()), None);
    }
}
