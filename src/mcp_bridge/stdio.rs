//! The bridge's ends on the process's stdin and stdout (MCP's stdio transport: one
//! JSON-RPC message per line, UTF-8, no embedded newlines).
//!
//! Each runs on a plain thread of its own, not on the async runtime: a blocking read
//! of stdin cannot be interrupted, and the process must be able to exit while one is
//! pending (a signal, or stdout gone) without waiting for the client to write.

use std::io::{BufRead, Write};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Lines read but not yet taken by the bridge (each at most [`super::MAX_LINE_BYTES`]).
const IN_QUEUE: usize = 4;
/// Lines waiting to be written to stdout.
const OUT_QUEUE: usize = 256;

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line's bytes, without its end (`\n`; a `\r` before it is left in).
    Text(Vec<u8>),
    /// A line longer than the bound; its bytes were skipped up to its end.
    TooLong,
    /// The end of input.
    Eof,
}

/// Reads one line of at most `max` bytes from `r`. A longer line is read to its end
/// and dropped ([`Line::TooLong`]), so the bound holds whatever the client sends; a
/// last line without `\n` still counts.
pub fn read_line<R: BufRead>(r: &mut R, max: usize) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Text(buf)
            });
        }
        let end = chunk.iter().position(|&b| b == b'\n');
        let part = &chunk[..end.unwrap_or(chunk.len())];
        if !too_long {
            if buf.len() + part.len() > max {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let used = end.map_or(chunk.len(), |i| i + 1);
        r.consume(used);
        if end.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Text(buf)
            });
        }
    }
}

/// Starts the thread reading stdin; its lines arrive on the receiver, ending with
/// [`Line::Eof`] (also sent when stdin cannot be read).
pub fn stdin_lines(max: usize) -> std::io::Result<mpsc::Receiver<Line>> {
    let (tx, rx) = mpsc::channel(IN_QUEUE);
    std::thread::Builder::new()
        .name("gsv-mcp-stdin".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut r = stdin.lock();
            loop {
                let line = read_line(&mut r, max).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "cannot read stdin: ending");
                    Line::Eof
                });
                let eof = line == Line::Eof;
                if tx.blocking_send(line).is_err() || eof {
                    return;
                }
            }
        })?;
    Ok(rx)
}

/// Starts the thread writing stdout: each string sent is written as one line, in the
/// order sent, flushed whenever nothing else is waiting. When stdout is gone (the
/// client closed it) `gone` is cancelled and later lines are dropped. The receiver
/// fires once every sender is dropped and all lines are out.
pub fn stdout_writer(
    gone: CancellationToken,
) -> std::io::Result<(mpsc::Sender<String>, oneshot::Receiver<()>)> {
    let (tx, mut rx) = mpsc::channel::<String>(OUT_QUEUE);
    let (done, finished) = oneshot::channel();
    std::thread::Builder::new()
        .name("gsv-mcp-stdout".into())
        .spawn(move || {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
            let mut broken = false;
            while let Some(line) = rx.blocking_recv() {
                if broken {
                    continue;
                }
                let wrote = w
                    .write_all(line.as_bytes())
                    .and_then(|_| w.write_all(b"\n"))
                    .and_then(|_| if rx.is_empty() { w.flush() } else { Ok(()) });
                if let Err(e) = wrote {
                    tracing::debug!(error = %e, "stdout is closed: the client is gone");
                    broken = true;
                    gone.cancel();
                }
            }
            let _ = w.flush();
            let _ = done.send(());
        })?;
    Ok((tx, finished))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Line> {
        // A tiny buffer, so lines cross many reads.
        let mut r = std::io::BufReader::with_capacity(3, input);
        let mut out = Vec::new();
        loop {
            let l = read_line(&mut r, max).unwrap();
            let eof = l == Line::Eof;
            out.push(l);
            if eof {
                return out;
            }
        }
    }

    #[test]
    fn lines_are_bounded_and_the_last_needs_no_newline() {
        let t = |s: &str| Line::Text(s.as_bytes().to_vec());
        assert_eq!(
            lines(b"{\"a\":1}\n\nabcdefghij\r\nxyz", 8),
            vec![t("{\"a\":1}"), t(""), Line::TooLong, t("xyz"), Line::Eof]
        );
        assert_eq!(lines(b"", 8), vec![Line::Eof]);
        assert_eq!(
            lines(b"123456789", 8),
            vec![Line::TooLong, Line::Eof],
            "a long last line"
        );
        assert_eq!(lines(b"12345678\n", 8), vec![t("12345678"), Line::Eof]);
    }
}
