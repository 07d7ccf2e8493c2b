//! Pseudo-terminal sessions: spawning a command on a pty, and turning the terminal
//! stream into plain text.
//!
//! Some programs behave differently, or refuse to run, without a terminal (`ssh`
//! asking for a password, `top`, REPLs, anything that checks `isatty`). With
//! `pty: true` the command gets a real pseudo-terminal (the `pty-process` crate) as its
//! stdin, stdout and stderr and as its controlling terminal; the child is a session
//! leader (`setsid`), so it leads its own process group as well and group kills work
//! as for piped commands.
//!
//! A terminal stream is full of escape sequences (colours, cursor movement, titles) and
//! uses `\r\n` line ends. [`AnsiStripper`] runs it through a `vte` parser and keeps only
//! printed characters, `\n` and `\t`, which is what `output`, `tail` and `log` show;
//! the raw bytes are kept in their own ring for `log` with `raw: true`. The parser keeps
//! its state between chunks, so an escape sequence or a UTF-8 character split across
//! two reads is handled like an unsplit one.

use crate::probe::LoginEnv;
use std::io;
use std::path::Path;

/// Terminal size given to pty sessions.
pub const ROWS: u16 = 40;
pub const COLS: u16 = 120;
/// `TERM` for pty sessions whose environment has none (or `dumb`).
const DEFAULT_TERM: &str = "xterm-256color";

/// Strips terminal escape sequences from a byte stream, incrementally.
#[derive(Default)]
pub struct AnsiStripper {
    parser: vte::Parser,
}

impl AnsiStripper {
    /// Feeds the next chunk of the stream, appending its printable text to `out`.
    pub fn strip(&mut self, bytes: &[u8], out: &mut String) {
        self.parser.advance(&mut Printer { out }, bytes);
    }
}

impl std::fmt::Debug for AnsiStripper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnsiStripper")
    }
}

struct Printer<'a> {
    out: &'a mut String,
}

impl vte::Perform for Printer<'_> {
    fn print(&mut self, c: char) {
        self.out.push(c);
    }

    fn execute(&mut self, byte: u8) {
        // Of the C0 controls only line feeds and tabs are text; `\r` of `\r\n`, bells,
        // backspaces and the like are terminal mechanics.
        if matches!(byte, b'\n' | b'\t') {
            self.out.push(byte as char);
        }
    }
}

/// A command started on a fresh pty.
pub struct PtyChild {
    pub child: tokio::process::Child,
    pub reader: pty_process::OwnedReadPty,
    pub writer: pty_process::OwnedWritePty,
}

/// Starts `shell -c command` in `workdir` on a new pty of [`ROWS`]×[`COLS`].
pub fn spawn(shell: &Path, command: &str, workdir: &Path, env: &LoginEnv) -> io::Result<PtyChild> {
    let (pty, pts) = pty_process::open().map_err(to_io)?;
    pty.resize(pty_process::Size::new(ROWS, COLS))
        .map_err(to_io)?;
    let term_missing = env.get("TERM").is_none_or(|t| t.is_empty() || t == "dumb");
    let mut cmd = pty_process::Command::new(shell)
        .arg("-c")
        .arg(command)
        .current_dir(workdir)
        .env_clear()
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(false);
    if term_missing {
        cmd = cmd.env("TERM", DEFAULT_TERM);
    }
    // `pts` is consumed: the parent keeps no handle on the terminal side, so reading
    // the pty ends (EIO) once every process holding it has exited.
    let child = cmd.spawn(pts).map_err(to_io)?;
    let (reader, writer) = pty.into_split();
    Ok(PtyChild {
        child,
        reader,
        writer,
    })
}

fn to_io(e: pty_process::Error) -> io::Error {
    match e {
        pty_process::Error::Io(e) => e,
        pty_process::Error::Rustix(e) => io::Error::from_raw_os_error(e.raw_os_error()),
        other => io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip_chunks(chunks: &[&[u8]]) -> String {
        let mut s = AnsiStripper::default();
        let mut out = String::new();
        for c in chunks {
            s.strip(c, &mut out);
        }
        out
    }

    #[test]
    fn escapes_are_stripped_across_chunks() {
        assert_eq!(
            strip_chunks(&[b"\x1b[31mred\x1b[0m\r\nnext\tcol\x07\r\n"]),
            "red\nnext\tcol\n"
        );
        assert_eq!(
            strip_chunks(&[b"a\x1b[3", b"1mb", b"\x1b]0;title\x07c"]),
            "abc"
        );
        let euro = "€".as_bytes();
        assert_eq!(strip_chunks(&[&euro[..1], &euro[1..]]), "€");
    }
}
