//! A bounded, incremental reader of `text/event-stream` bodies (the SSE part of MCP's
//! Streamable HTTP transport).
//!
//! Fed the body's chunks as they arrive, it yields the `data` of each complete
//! `message` event (the JSON-RPC message). Lines may end in CRLF, LF or CR, split
//! anywhere between chunks; comments (`: keep-alive`) and events of other types are
//! skipped, as are events with no data (rmcp's priming events). A line or an event
//! longer than the bound is an error: the stream is abandoned, never buffered without
//! limit.

use thiserror::Error;

/// The stream broke the bound.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SseError {
    #[error("an SSE event of the gateway is larger than {0} bytes")]
    TooLarge(usize),
}

/// The parser's state between chunks.
#[derive(Debug)]
pub struct SseReader {
    max: usize,
    /// The current line, not yet ended.
    line: Vec<u8>,
    /// The data lines of the current event, joined with `\n`.
    data: Vec<u8>,
    has_data: bool,
    /// The current event's type (`event:` field); empty means `message`.
    event: Vec<u8>,
    /// The previous chunk ended in CR: an LF at the start of the next one is the same
    /// line end.
    skip_lf: bool,
}

impl SseReader {
    /// A reader that refuses lines and events larger than `max` bytes.
    pub fn new(max: usize) -> SseReader {
        SseReader {
            max,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event: Vec::new(),
            skip_lf: false,
        }
    }

    /// Consumes one chunk of the body; pushes the data of each event it completes to
    /// `out` (bytes, as sent: the caller checks they are JSON).
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), SseError> {
        if self.skip_lf {
            self.skip_lf = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.push_line(chunk)?;
                    break;
                }
                Some(i) => {
                    self.push_line(&chunk[..i])?;
                    let mut next = i + 1;
                    if chunk[i] == b'\r' {
                        match chunk.get(next) {
                            Some(b'\n') => next += 1,
                            None => self.skip_lf = true,
                            Some(_) => {}
                        }
                    }
                    self.end_line(out)?;
                    chunk = &chunk[next..];
                }
            }
        }
        Ok(())
    }

    fn push_line(&mut self, part: &[u8]) -> Result<(), SseError> {
        // A line holds the field name besides the data.
        if self.line.len() + part.len() > self.max + 64 {
            return Err(SseError::TooLarge(self.max));
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<Vec<u8>>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &b""[..]),
        };
        match field {
            b"data" => {
                let extra = usize::from(self.has_data) + value.len();
                if self.data.len() + extra > self.max {
                    return Err(SseError::TooLarge(self.max));
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            // `id` and `retry` matter for resumption, which the gateway does not offer.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Vec<u8>>) {
        let data = std::mem::take(&mut self.data);
        let message = self.event.is_empty() || self.event == b"message";
        if self.has_data && message && !data.is_empty() {
            out.push(data);
        }
        self.has_data = false;
        self.event.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut r = SseReader::new(1024);
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c, &mut out).unwrap();
        }
        out.into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect()
    }

    #[test]
    fn events_of_every_line_ending_split_anywhere() {
        let body: &[u8] = b": keep-alive\r\n\r\nid: 0\r\ndata: {\"a\":1}\r\n\r\nevent: message\ndata: {\"b\":\ndata: 2}\n\ndata:{\"c\":3}\r\r";
        let want = vec![r#"{"a":1}"#, "{\"b\":\n2}", r#"{"c":3}"#];
        assert_eq!(events(&[body]), want);
        // Every split point, including between CR and LF.
        for i in 0..body.len() {
            assert_eq!(events(&[&body[..i], &body[i..]]), want, "split at {i}");
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(events(&bytes), want);
    }

    #[test]
    fn skips_priming_comments_and_other_event_types() {
        let body = b"id: 0\nretry: 3000\ndata:\n\nevent: ping\ndata: x\n\n: gsv: call running\n\ndata: y\n\n";
        assert_eq!(events(&[body]), vec!["y"]);
        // An event not yet ended by a blank line is not dispatched.
        assert!(events(&[b"data: z\n"]).is_empty());
    }

    #[test]
    fn refuses_lines_and_events_past_the_bound() {
        let mut r = SseReader::new(8);
        let mut out = Vec::new();
        assert_eq!(
            r.feed(b"data: 0123456789\n", &mut out),
            Err(SseError::TooLarge(8))
        );
        let mut r = SseReader::new(8);
        assert_eq!(
            r.feed(b"data: 01234\ndata: 5678\n", &mut out),
            Err(SseError::TooLarge(8))
        );
        let mut r = SseReader::new(8);
        let long = [b'x'; 80];
        assert_eq!(r.feed(&long, &mut out), Err(SseError::TooLarge(8)));
        let mut r = SseReader::new(8);
        r.feed(b"data: 0123\ndata: 45\n\n", &mut out).unwrap();
        assert_eq!(out, vec![b"0123\n45".to_vec()]);
    }
}
