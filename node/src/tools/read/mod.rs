//! The Read tool: a file's lines, numbered, or an image the model can see.
//!
//! Text comes back as `{n}\t{line}` lines from `offset + 1`, paged by `offset`/`limit`
//! and capped in bytes so one call can never flood a model's context (the result says
//! how to continue). Images, recognised by their magic bytes, come back as an image
//! block; any other binary is refused with what it appears to be. The file is streamed
//! line by line on a blocking thread, so a huge log costs no more memory than the page
//! asked for.
//!
//! With `encoding: "base64"` any regular file comes back byte for byte as base64
//! ([`crate::tools::encoding`]): `offset` and `limit` then count bytes, and one call
//! returns at most 4 MiB; a larger file without `limit` is refused with its size, so
//! an agent never takes a prefix for the whole file. The text block is the base64
//! alone (`gsv call ... | base64 -d` restores the file); `structuredContent` is
//! `{path, encoding, offset, bytes, size, data}` ([`ReadBase64Output`]).

pub mod on_host;

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::encoding::{self, Encoding, MAX_BASE64_BYTES};
use crate::tools::output::{self, is_false};
use crate::tools::paths::{AccessError, PathPolicy};
use base64::Engine;
use gsv_protocol::{Capability, ContentBlock, ToolAnnotations, ToolDef, ToolResult};
use rustix::fs::OFlags;
use serde::Serialize;
use serde_json::{json, Value};
use std::fs::{File, Metadata};
use std::io::{self, BufRead, BufReader, Cursor, Read as _};
use tokio_util::sync::CancellationToken;

/// Largest image returned (10 MiB).
pub const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;
/// Most text returned by one call, measured as escaped JSON (2 MiB).
pub const MAX_TEXT_BYTES: usize = 2 * 1024 * 1024;
/// Bytes read up front to recognise images and binaries.
pub(crate) const SNIFF_BYTES: u64 = 64 * 1024;
/// How often (in lines) a long read checks for cancellation.
const CANCEL_CHECK_LINES: usize = 4096;

/// The Read tool.
#[derive(Default)]
pub struct Read {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl Read {
    /// Read on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        Read { host: Some(host) }
    }
}

/// Read's structured content with `encoding: "base64"`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadBase64Output {
    /// The file, resolved (absolute).
    pub path: String,
    /// Always `"base64"`.
    pub encoding: &'static str,
    /// The first byte returned, 0-based.
    pub offset: u64,
    /// Bytes in `data` (decoded).
    pub bytes: usize,
    /// The whole file's size.
    pub size: u64,
    /// The bytes, standard base64.
    pub data: String,
}

/// Read's structured content for a text file (an image has none: it is the image
/// block).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    /// The file, resolved (absolute).
    pub path: String,
    /// The page: `{n}\t{line}` lines joined by `\n`.
    pub content: String,
    /// Lines in `content`.
    pub lines: usize,
    /// Present (`true`) only when the byte cap ended the page early.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// The `offset` to continue with, when `truncated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for Read {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Read".to_owned(),
            description: "Read a file: text as numbered lines, images as images, other \
                          bytes with `encoding: \"base64\"`."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Relative to the workspace."
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "First line, 0-based."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Most lines (default: all, up to about 2 MB)."
                    },
                    "encoding": Encoding::schema("bytes (offset and limit count bytes) as")
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            capability: Capability::FilesystemRead.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("Read file"),
            default_timeout_ms: None,
            requires_bins: Vec::new(),
            requires_approval: false,
        }
    }

    async fn check(
        &self,
        _args: &Value,
        _ctx: &ToolContext,
    ) -> Result<(), gsv_protocol::ErrorShape> {
        crate::tools::host_ready(&self.host).await
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        if let Some(host) = &self.host {
            return on_host::OnHost::new(std::sync::Arc::clone(host))
                .execute(args, ctx)
                .await;
        }
        let request = match ReadRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Read: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        let cancel = ctx.cancel.clone();
        let run = move || read(&policy, &request, &cancel);
        match tokio::task::spawn_blocking(run).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Read failed: {e}")),
        }
    }
}

pub(crate) struct ReadRequest {
    pub(crate) path: String,
    pub(crate) offset: usize,
    pub(crate) limit: Option<usize>,
    pub(crate) encoding: Encoding,
}

impl ReadRequest {
    pub(crate) fn parse(args: &Value) -> Result<ReadRequest, String> {
        let args = Args::new(args, &["path", "offset", "limit", "encoding"])?;
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Ok(ReadRequest {
            path: args.required_str("path")?.to_owned(),
            offset: args.u64_in("offset", 0, u64::MAX)?.map_or(0, to_usize),
            limit: args.u64_in("limit", 1, u64::MAX)?.map(to_usize),
            encoding: Encoding::parse(args.str("encoding")?)?,
        })
    }
}

/// Reads the file `request.path` names (blocking). It is opened once, through the
/// path policy (beneath the workspace when confined, never a protected file), and
/// everything after works on that descriptor.
fn read(policy: &PathPolicy, request: &ReadRequest, cancel: &CancellationToken) -> ToolResult {
    // `O_NONBLOCK` so a FIFO swapped in cannot hang the open; it changes nothing for
    // the regular files that are read.
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let opened = match policy.open(&request.path, flags) {
        Ok(opened) => opened,
        Err(AccessError::Io { path, source }) => {
            return ToolResult::error(describe_io_error(&path.display().to_string(), &source))
        }
        Err(e) => return e.into_result(),
    };
    let path = opened.path.as_path();
    let shown = path.display().to_string();
    let mut file = File::from(opened.fd);
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return ToolResult::error(describe_io_error(&shown, &e)),
    };
    if meta.is_dir() {
        return ToolResult::error(format!(
            "Is a directory, not a file: {shown} (Read only reads files)"
        ));
    }
    if !meta.is_file() {
        return ToolResult::error(format!(
            "Not a regular file: {shown} (devices, sockets and pipes are not read)"
        ));
    }
    if request.encoding == Encoding::Base64 {
        return read_base64(shown, &meta, file, request);
    }
    let mut head = Vec::new();
    if let Err(e) = (&mut file).take(SNIFF_BYTES).read_to_end(&mut head) {
        return ToolResult::error(describe_io_error(&shown, &e));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| shown.clone());
    let kind = infer::get(&head);
    if let Some(kind) = kind.filter(|k| k.matcher_type() == infer::MatcherType::Image) {
        return read_image(&shown, &name, kind.mime_type(), &meta, head, file);
    }
    let complete = (head.len() as u64) < SNIFF_BYTES;
    if looks_binary(&head, complete) {
        let mime = kind.map_or("application/octet-stream", |k| k.mime_type());
        return ToolResult::error(format!(
            "Binary file: {name} ({mime}, {} bytes) — not a text or image file",
            meta.len()
        ));
    }
    let reader = BufReader::new(Cursor::new(head).chain(file));
    match read_text(reader, request, cancel) {
        Ok(page) => page.into_result(shown, request.offset),
        Err(e) => ToolResult::error(describe_io_error(&shown, &e)),
    }
}

/// The bytes `request` asks for, as base64 (at most [`MAX_BASE64_BYTES`]).
fn read_base64(
    shown: String,
    meta: &Metadata,
    mut file: File,
    request: &ReadRequest,
) -> ToolResult {
    let size = meta.len();
    let offset = request.offset as u64;
    let limit = match base64_limit(&shown, size, request) {
        Ok(limit) => limit,
        Err(refused) => return refused,
    };
    let mut bytes = Vec::new();
    let read = io::Seek::seek(&mut file, io::SeekFrom::Start(offset))
        .and_then(|_| (&mut file).take(limit).read_to_end(&mut bytes));
    if let Err(e) = read {
        return ToolResult::error(describe_io_error(&shown, &e));
    }
    base64_result(shown, offset, size, &bytes)
}

/// How many bytes a base64 read of a `size`-byte file may return, or why none.
pub(crate) fn base64_limit(
    shown: &str,
    size: u64,
    request: &ReadRequest,
) -> Result<u64, ToolResult> {
    let offset = request.offset as u64;
    match request.limit {
        Some(limit) if limit > MAX_BASE64_BYTES => Err(ToolResult::error(format!(
            "\"limit\" {limit} is over the base64 limit of {MAX_BASE64_BYTES} bytes (4 MiB) per call"
        ))),
        Some(limit) => Ok(limit as u64),
        None if size.saturating_sub(offset) > MAX_BASE64_BYTES as u64 => {
            Err(ToolResult::error(format!(
                "File too large for one base64 read: {shown} is {size} bytes from offset {offset}, \
                 over the limit of {MAX_BASE64_BYTES} bytes (4 MiB) per call; read it in pieces \
                 with offset and limit (in bytes)"
            )))
        }
        None => Ok(MAX_BASE64_BYTES as u64),
    }
}

/// The result of a base64 read of `bytes` from `offset` of a `size`-byte file.
pub(crate) fn base64_result(shown: String, offset: u64, size: u64, bytes: &[u8]) -> ToolResult {
    let data = encoding::encode(bytes);
    output::with_text(
        data.clone(),
        &ReadBase64Output {
            path: shown,
            encoding: "base64",
            offset,
            bytes: bytes.len(),
            size,
            data,
        },
    )
}

pub(crate) fn describe_io_error(shown: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("File not found: {shown}"),
        io::ErrorKind::PermissionDenied => format!("Permission denied: {shown}"),
        _ => format!("Cannot read {shown}: {e}"),
    }
}

/// Text is valid UTF-8 without NUL bytes. `complete` says whether `head` is the whole
/// file; if not, a multi-byte character cut at its end is not held against it.
pub(crate) fn looks_binary(head: &[u8], complete: bool) -> bool {
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        Err(e) => complete || e.error_len().is_some(),
    }
}

fn read_image(
    shown: &str,
    name: &str,
    mime: &str,
    meta: &Metadata,
    mut bytes: Vec<u8>,
    file: File,
) -> ToolResult {
    let too_large = |size: u64| {
        ToolResult::error(format!(
            "Image file too large: {name} ({mime}, {size} bytes) — the limit is {MAX_IMAGE_BYTES} bytes (10 MB)"
        ))
    };
    if meta.len() > MAX_IMAGE_BYTES {
        return too_large(meta.len());
    }
    // Read one byte past the cap so a file that grew since `stat` is still caught.
    if let Err(e) = file.take(MAX_IMAGE_BYTES + 1).read_to_end(&mut bytes) {
        return ToolResult::error(describe_io_error(shown, &e));
    }
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return too_large(bytes.len() as u64);
    }
    image_result(name, mime, &bytes)
}

/// The result of reading an image: a line naming it, and the image block.
pub(crate) fn image_result(name: &str, mime: &str, bytes: &[u8]) -> ToolResult {
    ToolResult {
        content: vec![
            ContentBlock::Text {
                text: format!("Image file: {name} ({mime}, {} bytes)", bytes.len()),
            },
            ContentBlock::Image {
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                mime_type: mime.to_owned(),
            },
        ],
        structured_content: None,
        is_error: false,
    }
}

/// One page of a text file.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Page {
    /// `{n}\t{line}` lines joined by `\n`.
    content: String,
    /// Lines in `content`.
    lines: usize,
    /// Whether the byte cap stopped the page before `limit` or the end of the file.
    truncated: bool,
    /// Whether the last line in `content` was itself cut at the byte cap.
    line_cut: bool,
    /// Lines in the file, when the read reached its end before returning any line.
    total_if_short: Option<usize>,
}

impl Page {
    pub(crate) fn into_result(self, path: String, offset: usize) -> ToolResult {
        let next_offset = offset + self.lines;
        let mut text = self.content.clone();
        if self.truncated {
            let what = if self.line_cut {
                format!("line {next_offset} is longer than that and was cut")
            } else {
                format!("continue with offset={next_offset}")
            };
            text.push_str(&format!(
                "\n\n[Output truncated at {} MB after line {next_offset}: {what}; use offset and limit to read other parts]",
                MAX_TEXT_BYTES / (1024 * 1024)
            ));
        } else if self.lines == 0 {
            text = match self.total_if_short {
                Some(0) => "(the file is empty)".to_owned(),
                Some(total) => format!(
                    "(no lines from offset {offset}: the file has {total} line{})",
                    if total == 1 { "" } else { "s" }
                ),
                None => "(no lines)".to_owned(),
            };
        }
        output::with_text(
            text,
            &ReadOutput {
                path,
                content: self.content,
                lines: self.lines,
                truncated: self.truncated,
                next_offset: self.truncated.then_some(next_offset),
            },
        )
    }
}

/// Streams lines from `reader`: skips `offset`, then collects up to `limit` lines within
/// [`MAX_TEXT_BYTES`].
fn read_text(
    reader: impl BufRead,
    request: &ReadRequest,
    cancel: &CancellationToken,
) -> io::Result<Page> {
    read_text_from(reader, 0, request, cancel)
}

/// [`read_text`] of a reader that starts at line `start` (0-based) of the file: the
/// lines before it were skipped elsewhere (on a remote host).
pub(crate) fn read_text_from(
    mut reader: impl BufRead,
    start: usize,
    request: &ReadRequest,
    cancel: &CancellationToken,
) -> io::Result<Page> {
    let cancelled = || io::Error::new(io::ErrorKind::Interrupted, "the call was cancelled");
    let mut line = Vec::new();
    let mut seen = start;
    while seen < request.offset {
        if seen % CANCEL_CHECK_LINES == 0 && cancel.is_cancelled() {
            return Err(cancelled());
        }
        line.clear();
        if read_line_capped(&mut reader, &mut line, 0)?.is_none() {
            return Ok(Page {
                total_if_short: Some(seen),
                ..Page::default()
            });
        }
        seen += 1;
    }

    let mut page = Page::default();
    let mut used = 0usize;
    while request.limit.is_none_or(|limit| page.lines < limit) {
        if page.lines % CANCEL_CHECK_LINES == 0 && cancel.is_cancelled() {
            return Err(cancelled());
        }
        line.clear();
        // Never hold more of one line than could be returned.
        if read_line_capped(&mut reader, &mut line, MAX_TEXT_BYTES + 1)?.is_none() {
            if page.lines == 0 {
                page.total_if_short = Some(seen);
            }
            break;
        }
        let number = seen + 1;
        let text = String::from_utf8_lossy(&line);
        let entry = format!("{number}\t{text}");
        let separator = usize::from(page.lines > 0);
        let cost = json_len(&entry) + separator;
        if used + cost > MAX_TEXT_BYTES {
            page.truncated = true;
            if page.lines == 0 {
                // A single line over the cap: return as much of it as fits.
                page.content = cut_to_json_len(&entry, MAX_TEXT_BYTES).to_owned();
                page.lines = 1;
                page.line_cut = true;
            }
            break;
        }
        if separator == 1 {
            page.content.push('\n');
        }
        page.content.push_str(&entry);
        used += cost;
        page.lines += 1;
        seen += 1;
    }
    Ok(page)
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `cap` bytes of it and
/// consuming the rest. `None` at end of file.
fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<()>> {
    let mut any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(any.then_some(()));
        }
        any = true;
        let newline = available.iter().position(|&b| b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let consumed = newline.map_or(available.len(), |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(Some(()));
        }
    }
}

/// Length of `s` once escaped inside a JSON string.
fn json_len(s: &str) -> usize {
    s.bytes().map(escaped_len).sum()
}

fn escaped_len(b: u8) -> usize {
    match b {
        b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
        0x00..=0x1f => 6,
        _ => 1,
    }
}

/// The longest prefix of `s`, on a character boundary, whose escaped length fits `max`.
fn cut_to_json_len(s: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        let mut utf8 = [0u8; 4];
        used += c
            .encode_utf8(&mut utf8)
            .bytes()
            .map(escaped_len)
            .sum::<usize>();
        if used > max {
            return &s[..i];
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let dir = std::env::temp_dir().join(format!("gsv-read-{}", uuid::Uuid::new_v4()));
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
        fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
            let path = self.0.join(name);
            fs::write(&path, bytes).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    async fn call(dir: &TempDir, args: Value) -> ToolResult {
        Read::new()
            .execute(args, ToolContext::new(&dir.0, "t"))
            .await
    }

    fn structured(r: &ToolResult) -> &Value {
        r.structured_content.as_ref().expect("structured content")
    }

    /// A 1×1 transparent PNG.
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];

    #[tokio::test]
    async fn text_with_numbered_lines() {
        let dir = TempDir::new();
        let path = dir.write("a.txt", "alpha\nbeta\n\ngamma é\n");
        let r = call(&dir, json!({"path": "a.txt"})).await;
        assert!(!r.is_error, "{}", r.joined_text());
        let s = structured(&r);
        assert_eq!(s["path"], json!(path.display().to_string()));
        assert_eq!(s["content"], json!("1\talpha\n2\tbeta\n3\t\n4\tgamma é"));
        assert_eq!(s["lines"], json!(4));
        assert!(s.get("truncated").is_none());
        assert_eq!(r.joined_text(), "1\talpha\n2\tbeta\n3\t\n4\tgamma é");
        // The absolute path reads the same file.
        let r2 = call(&dir, json!({"path": path.display().to_string()})).await;
        assert_eq!(r2, r);
        assert_eq!(ToolContext::new(&dir.0, "t").resolve_path("a.txt"), path);
    }

    #[tokio::test]
    async fn offset_and_limit_page() {
        let dir = TempDir::new();
        let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        dir.write("ten.txt", &body);
        let r = call(&dir, json!({"path": "ten.txt", "offset": 3, "limit": 2})).await;
        let s = structured(&r);
        assert_eq!(s["content"], json!("4\tline 4\n5\tline 5"));
        assert_eq!(s["lines"], json!(2));
        let r = call(&dir, json!({"path": "ten.txt", "offset": 8})).await;
        assert_eq!(structured(&r)["content"], json!("9\tline 9\n10\tline 10"));
        // No trailing newline: the last line still counts.
        dir.write("nonl.txt", "a\nb");
        let r = call(&dir, json!({"path": "nonl.txt"})).await;
        assert_eq!(structured(&r)["lines"], json!(2));
    }

    #[tokio::test]
    async fn past_the_end_and_empty_files() {
        let dir = TempDir::new();
        dir.write("three.txt", "a\nb\nc\n");
        let r = call(&dir, json!({"path": "three.txt", "offset": 5})).await;
        assert!(!r.is_error);
        assert_eq!(structured(&r)["lines"], json!(0));
        assert_eq!(structured(&r)["content"], json!(""));
        assert!(
            r.joined_text().contains("the file has 3 lines"),
            "{}",
            r.joined_text()
        );
        dir.write("empty.txt", "");
        let r = call(&dir, json!({"path": "empty.txt"})).await;
        assert!(!r.is_error);
        assert_eq!(structured(&r)["lines"], json!(0));
        assert_eq!(r.joined_text(), "(the file is empty)");
    }

    #[tokio::test]
    async fn png_comes_back_as_an_image() {
        let dir = TempDir::new();
        dir.write("dot.png", PNG);
        let r = call(&dir, json!({"path": "dot.png", "offset": 10})).await;
        assert!(!r.is_error, "{}", r.joined_text());
        assert_eq!(r.content.len(), 2);
        assert_eq!(
            r.content[0],
            ContentBlock::Text {
                text: format!("Image file: dot.png (image/png, {} bytes)", PNG.len())
            }
        );
        match &r.content[1] {
            ContentBlock::Image { data, mime_type } => {
                assert_eq!(mime_type, "image/png");
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap();
                assert_eq!(decoded, PNG);
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn oversized_image_is_refused() {
        let dir = TempDir::new();
        let mut big = PNG.to_vec();
        big.resize(MAX_IMAGE_BYTES as usize + 1, 0);
        dir.write("big.png", &big);
        let r = call(&dir, json!({"path": "big.png"})).await;
        assert!(r.is_error);
        let text = r.joined_text();
        assert!(
            text.starts_with("Image file too large: big.png (image/png, 10485761 bytes)"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn other_binaries_are_refused() {
        let dir = TempDir::new();
        // gzip magic, then bytes that are not UTF-8.
        dir.write("a.gz", [0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00, 0x01]);
        let r = call(&dir, json!({"path": "a.gz"})).await;
        assert!(r.is_error);
        assert_eq!(
            r.joined_text(),
            "Binary file: a.gz (application/gzip, 8 bytes) — not a text or image file"
        );
        dir.write("blob.bin", [0xc3, 0x28, 0xa0, 0xa1]);
        let r = call(&dir, json!({"path": "blob.bin"})).await;
        assert_eq!(
            r.joined_text(),
            "Binary file: blob.bin (application/octet-stream, 4 bytes) — not a text or image file"
        );
        // NUL bytes mark binaries even when they are valid UTF-8.
        dir.write("nul.dat", b"abc\0def");
        assert!(call(&dir, json!({"path": "nul.dat"})).await.is_error);
    }

    #[tokio::test]
    async fn directories_and_missing_files_are_clear_errors() {
        let dir = TempDir::new();
        fs::create_dir(dir.0.join("sub")).unwrap();
        let r = call(&dir, json!({"path": "sub"})).await;
        assert!(r.is_error);
        assert!(
            r.joined_text().starts_with("Is a directory, not a file: "),
            "{}",
            r.joined_text()
        );
        let r = call(&dir, json!({"path": "nope.txt"})).await;
        assert!(r.is_error);
        assert_eq!(
            r.joined_text(),
            format!("File not found: {}", dir.0.join("nope.txt").display())
        );
    }

    #[tokio::test]
    async fn bad_arguments_are_tool_errors() {
        let dir = TempDir::new();
        for args in [
            json!({}),
            json!({"path": ""}),
            json!({"path": 3}),
            json!({"path": "a", "offset": -1}),
            json!({"path": "a", "limit": 0}),
            json!({"path": "a", "limit": "10"}),
            json!({"path": "a", "mode": "x"}),
            json!(["a"]),
        ] {
            let r = call(&dir, args.clone()).await;
            assert!(r.is_error, "{args}");
            assert!(r.joined_text().starts_with("Read: "), "{}", r.joined_text());
        }
    }

    #[tokio::test]
    async fn huge_text_is_capped_with_a_way_to_continue() {
        let dir = TempDir::new();
        let line = "x".repeat(999);
        let body: String = (0..3000).map(|_| format!("{line}\n")).collect();
        dir.write("big.txt", &body);
        let r = call(&dir, json!({"path": "big.txt"})).await;
        assert!(!r.is_error);
        let s = structured(&r);
        assert_eq!(s["truncated"], json!(true));
        let lines = s["lines"].as_u64().unwrap();
        assert!(lines > 1000 && lines < 3000, "{lines}");
        assert_eq!(s["nextOffset"], json!(lines));
        assert!(s["content"].as_str().unwrap().len() <= MAX_TEXT_BYTES);
        assert!(r
            .joined_text()
            .contains(&format!("continue with offset={lines}")));
        // Paging on from there picks up the next line.
        let r = call(
            &dir,
            json!({"path": "big.txt", "offset": lines, "limit": 1}),
        )
        .await;
        assert_eq!(
            structured(&r)["content"],
            json!(format!("{}\t{line}", lines + 1))
        );
    }

    #[tokio::test]
    async fn one_giant_line_is_cut() {
        let dir = TempDir::new();
        dir.write("one.txt", "y".repeat(MAX_TEXT_BYTES * 2));
        let r = call(&dir, json!({"path": "one.txt"})).await;
        assert!(!r.is_error);
        let s = structured(&r);
        assert_eq!(s["truncated"], json!(true));
        assert_eq!(s["lines"], json!(1));
        let len = s["content"].as_str().unwrap().len();
        assert!(len > MAX_TEXT_BYTES - 8 && len <= MAX_TEXT_BYTES, "{len}");
        assert!(r.joined_text().contains("was cut"));
    }

    #[test]
    fn structured_output() {
        let page = Page {
            content: "3\tc\n4\td".to_owned(),
            lines: 2,
            ..Page::default()
        };
        let r = page.into_result("/ws/f.txt".to_owned(), 2);
        assert_eq!(
            r.structured_content,
            Some(json!({"path": "/ws/f.txt", "content": "3\tc\n4\td", "lines": 2}))
        );
        let page = Page {
            content: "1\ta".to_owned(),
            lines: 1,
            truncated: true,
            ..Page::default()
        };
        let r = page.into_result("/ws/f.txt".to_owned(), 0);
        assert_eq!(
            r.structured_content,
            Some(json!({
                "path": "/ws/f.txt",
                "content": "1\ta",
                "lines": 1,
                "truncated": true,
                "nextOffset": 1,
            }))
        );
        let page = Page {
            total_if_short: Some(0),
            ..Page::default()
        };
        let r = page.into_result("/ws/empty".to_owned(), 0);
        assert_eq!(
            r.structured_content,
            Some(json!({"path": "/ws/empty", "content": "", "lines": 0}))
        );
        assert_eq!(r.joined_text(), "(the file is empty)");
    }

    #[test]
    fn binary_detection() {
        assert!(!looks_binary(b"plain text", true));
        assert!(looks_binary(b"a\0b", true));
        assert!(looks_binary(&[0xff, 0xfe], true));
        // "é" cut in half at the end of the sniffed head is fine if the file goes on.
        assert!(!looks_binary(&[b'a', 0xc3], false));
        assert!(looks_binary(&[b'a', 0xc3], true));
    }

    #[test]
    fn json_lengths() {
        assert_eq!(json_len("ab"), 2);
        assert_eq!(json_len("a\tb\"\\"), 8);
        assert_eq!(json_len("\u{1}"), 6);
        assert_eq!(json_len("é"), 2);
        assert_eq!(cut_to_json_len("aéb", 2), "a");
        assert_eq!(cut_to_json_len("aéb", 3), "aé");
        assert_eq!(cut_to_json_len("abc", 10), "abc");
    }

    #[test]
    fn cancellation_stops_a_long_read() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let body = "l\n".repeat(10_000);
        let request = ReadRequest {
            path: String::new(),
            offset: 5000,
            limit: None,
            encoding: Encoding::Utf8,
        };
        let err = read_text(Cursor::new(body), &request, &cancel).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Interrupted);
    }
}
