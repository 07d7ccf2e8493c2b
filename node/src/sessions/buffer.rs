//! Output capture: a byte ring per stream, a lossless incremental UTF-8 decoder, and
//! the character-capped text buffer that `output`, `tail` and `log` read.
//!
//! Pipes deliver bytes in arbitrary chunks, so a multi-byte character is often split
//! between two reads; decoding each chunk on its own would turn both halves into
//! U+FFFD. [`Utf8Decoder`] carries an incomplete trailing sequence over to the next
//! chunk, so any chunking of the same bytes decodes to the same text (invalid bytes
//! become U+FFFD exactly as `String::from_utf8_lossy` would make them). Memory stays
//! bounded whatever a command prints: [`TextBuffer`] keeps the last N characters and
//! [`ByteRing`] the last N bytes, and both count what they dropped.

use std::collections::VecDeque;

/// Incremental UTF-8 decoder that never splits a character across chunks.
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    /// An incomplete sequence at the end of the last chunk (at most 3 bytes).
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Decodes `bytes` (the next chunk of the stream), appending the text to `out`.
    pub fn decode(&mut self, bytes: &[u8], out: &mut String) {
        if self.pending.is_empty() {
            self.decode_from(bytes, out);
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(bytes);
            self.decode_from(&joined, out);
        }
    }

    /// Ends the stream: an incomplete sequence left over becomes one U+FFFD.
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            self.pending.clear();
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }

    fn decode_from(&mut self, mut rest: &[u8], out: &mut String) {
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    if let Ok(text) = std::str::from_utf8(valid) {
                        out.push_str(text);
                    }
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        None => {
                            // A sequence cut by the end of the chunk: wait for the rest.
                            self.pending.extend_from_slice(after);
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Text capped at a number of characters, keeping the most recent.
#[derive(Debug)]
pub struct TextBuffer {
    text: String,
    chars: usize,
    cap: usize,
    dropped_chars: u64,
}

impl TextBuffer {
    /// An empty buffer keeping at most `cap` characters.
    pub fn new(cap: usize) -> Self {
        TextBuffer {
            text: String::new(),
            chars: 0,
            cap,
            dropped_chars: 0,
        }
    }

    /// Appends `s`, dropping the oldest characters beyond the cap.
    pub fn push_str(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.text.push_str(s);
        self.chars += s.chars().count();
        if self.chars > self.cap {
            let excess = self.chars - self.cap;
            let cut = self
                .text
                .char_indices()
                .nth(excess)
                .map_or(self.text.len(), |(i, _)| i);
            self.text.drain(..cut);
            self.chars = self.cap;
            self.dropped_chars += excess as u64;
        }
    }

    /// The retained text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Characters retained.
    pub fn chars(&self) -> usize {
        self.chars
    }

    /// Characters ever pushed (retained plus dropped).
    pub fn total_chars(&self) -> u64 {
        self.dropped_chars + self.chars as u64
    }

    /// Whether older text was dropped.
    pub fn truncated(&self) -> bool {
        self.dropped_chars > 0
    }

    /// The last `n` characters.
    pub fn tail(&self, n: usize) -> &str {
        tail_chars(&self.text, n)
    }

    /// Heap bytes held.
    pub fn retained_bytes(&self) -> usize {
        self.text.len()
    }
}

/// The last `n` characters of `s`.
pub fn tail_chars(s: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    match s.char_indices().rev().nth(n - 1) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

/// The last `cap` bytes of a stream.
#[derive(Debug)]
pub struct ByteRing {
    buf: VecDeque<u8>,
    cap: usize,
    total: u64,
}

impl ByteRing {
    /// An empty ring keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        ByteRing {
            buf: VecDeque::new(),
            cap,
            total: 0,
        }
    }

    /// Appends `bytes`, dropping the oldest beyond the cap.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if bytes.len() >= self.cap {
            self.buf.clear();
            self.buf.extend(&bytes[bytes.len() - self.cap..]);
            return;
        }
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..over);
        self.buf.extend(bytes);
    }

    /// Bytes retained.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes ever pushed.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether older bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.total > self.buf.len() as u64
    }

    /// The retained bytes as text: decoded losslessly, without the continuation bytes
    /// of a character the ring cut in half at its start.
    pub fn to_text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut bytes = Vec::with_capacity(self.buf.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        let mut start = 0;
        if self.truncated() {
            while start < bytes.len().min(3) && (0x80..0xc0).contains(&bytes[start]) {
                start += 1;
            }
        }
        let mut out = String::with_capacity(bytes.len() - start);
        let mut decoder = Utf8Decoder::default();
        decoder.decode(&bytes[start..], &mut out);
        decoder.finish(&mut out);
        out
    }
}

/// One page of lines of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinePage {
    /// The lines of the page joined by `\n`.
    pub text: String,
    /// Lines in the page.
    pub lines: usize,
    /// Lines in the whole text.
    pub total_lines: usize,
    /// Characters in the whole text.
    pub total_chars: usize,
    /// The offset of the next page, if there is more.
    pub next_offset: Option<usize>,
}

/// Lines `offset..offset + limit` of `text` (a final `\n` does not start a line).
pub fn page_lines(text: &str, offset: usize, limit: usize) -> LinePage {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let total_lines = if text.is_empty() {
        0
    } else {
        body.split('\n').count()
    };
    let mut page: Vec<&str> = Vec::new();
    if !text.is_empty() {
        page = body.split('\n').skip(offset).take(limit).collect();
    }
    let end = offset.saturating_add(page.len());
    LinePage {
        text: page.join("\n"),
        lines: page.len(),
        total_lines,
        total_chars: text.chars().count(),
        next_offset: (end < total_lines).then_some(end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_chunks(bytes: &[u8], cuts: &[usize]) -> String {
        let mut decoder = Utf8Decoder::default();
        let mut out = String::new();
        let mut start = 0;
        for &cut in cuts {
            decoder.decode(&bytes[start..cut], &mut out);
            start = cut;
        }
        decoder.decode(&bytes[start..], &mut out);
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn split_characters_and_invalid_bytes() {
        let euro = "€".as_bytes();
        assert_eq!(decode_chunks(euro, &[1, 2]), "€");
        assert_eq!(decode_chunks(&euro[..2], &[1]), "\u{FFFD}");
        assert_eq!(decode_chunks(b"a\xffb", &[2]), "a\u{FFFD}b");
        assert_eq!(decode_chunks(b"\xe2\x82A", &[1]), "\u{FFFD}A");
    }

    #[test]
    fn text_buffer_keeps_the_tail() {
        let mut b = TextBuffer::new(5);
        b.push_str("héllo");
        assert!(!b.truncated());
        b.push_str("wörld!");
        assert_eq!(b.as_str(), "örld!");
        assert_eq!(b.chars(), 5);
        assert_eq!(b.total_chars(), 11);
        assert!(b.truncated());
        assert_eq!(b.tail(2), "d!");
        assert_eq!(b.tail(50), "örld!");
        assert_eq!(b.tail(0), "");
        b.push_str(&"x".repeat(100));
        assert_eq!(b.as_str(), "xxxxx");
    }

    #[test]
    fn byte_ring_keeps_the_last_bytes() {
        let mut r = ByteRing::new(4);
        r.push(b"ab");
        assert_eq!(r.to_text(), "ab");
        assert!(!r.truncated());
        r.push(b"cde");
        assert_eq!(r.to_text(), "bcde");
        r.push(b"0123456789");
        assert_eq!(r.to_text(), "6789");
        assert_eq!(r.total(), 15);
        assert_eq!(r.len(), 4);
        // A character cut at the start of the ring is dropped, not replaced.
        let mut r = ByteRing::new(3);
        r.push("x€".as_bytes());
        assert_eq!(r.to_text(), "€");
        r.push("é".as_bytes());
        assert_eq!(r.to_text(), "é");
    }

    #[test]
    fn line_pages() {
        let p = page_lines("a\nb\nc\n", 0, 2);
        assert_eq!(p.text, "a\nb");
        assert_eq!((p.lines, p.total_lines, p.total_chars), (2, 3, 6));
        assert_eq!(p.next_offset, Some(2));
        let p = page_lines("a\nb\nc", 2, 5);
        assert_eq!((p.text.as_str(), p.lines, p.next_offset), ("c", 1, None));
        let p = page_lines("a\n\nb", 0, 10);
        assert_eq!((p.text.as_str(), p.total_lines), ("a\n\nb", 3));
        let p = page_lines("", 0, 10);
        assert_eq!((p.lines, p.total_lines, p.next_offset), (0, 0, None));
        let p = page_lines("a\nb", 9, 10);
        assert_eq!((p.lines, p.total_lines, p.next_offset), (0, 2, None));
    }
}
