//! Read on a remote host: one round trip for a text page or a byte range (the host
//! skips to the page's first line and sends at most a page's bytes), a second one
//! only for an image larger than the first look at the file.

use crate::remote::{Lane, RemoteHost, MAX_REPLY};
use crate::tool::ToolContext;
use crate::tools::encoding::Encoding;
use crate::tools::paths::on_host::{check_line, reported, MUST_BE_FILE};
use crate::tools::read::{
    base64_limit, base64_result, image_result, looks_binary, read_text_from, ReadRequest,
    MAX_IMAGE_BYTES, MAX_TEXT_BYTES, SNIFF_BYTES,
};
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::io::Cursor;
use std::sync::Arc;

/// The far-host body of [`super::Read`] (made with `Read::on`): Read on the host of an
/// SSH- or container-backed node. Not a tool of its own: the tool dispatches here.
pub(crate) struct OnHost {
    host: Arc<RemoteHost>,
}

impl OnHost {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        OnHost { host }
    }
}

impl OnHost {
    pub(crate) async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let request = match ReadRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Read: {message}")),
        };
        let path = ctx.resolve_path(&request.path);
        let shown = path.display().to_string();
        let Some(check) = check_line(&ctx, &path) else {
            return ToolResult::error(format!(
                "Read: the path cannot be passed to the host: {shown:?}"
            ));
        };
        let body = match request.encoding {
            Encoding::Base64 => format!(
                "gsv_size \"$gsv_p\"; gsv_text size \"$gsv_n\"\n\
                 tail -c +{} \"$gsv_p\" 2>/dev/null | head -c {} > \"$GSV_D/r.$$\"\n\
                 gsv_file data \"$GSV_D/r.$$\"; rm -f \"$GSV_D/r.$$\"",
                request.offset as u128 + 1,
                request
                    .limit
                    .unwrap_or(usize::MAX)
                    .min(crate::tools::encoding::MAX_BASE64_BYTES)
            ),
            Encoding::Utf8 => {
                let first = request.offset as u128 + 1;
                let cap = MAX_TEXT_BYTES + 1;
                format!(
                    "gsv_size \"$gsv_p\"; gsv_text size \"$gsv_n\"\n\
                     if [ {first} -eq 1 ]; then gsv_head body \"$gsv_p\" {cap}; else\n\
                     gsv_head head \"$gsv_p\" {SNIFF_BYTES}\n\
                     tail -n +{first} \"$gsv_p\" 2>/dev/null | head -c {cap} > \"$GSV_D/r.$$\"\n\
                     gsv_file body \"$GSV_D/r.$$\"\n\
                     [ -s \"$GSV_D/r.$$\" ] || gsv_text lines \"$(awk 'END {{ print NR }}' \"$gsv_p\" 2>/dev/null)\"\n\
                     rm -f \"$GSV_D/r.$$\"\n\
                     fi"
                )
            }
        };
        let script = format!(
            "gsv_main() {{\n  {check}\n{MUST_BE_FILE}\n  gsv_text path \"$gsv_p\"\n{body}\n}}\ngsv_main"
        );
        let reply = match self
            .host
            .run(Lane::Work, ctx.owner(), &script, MAX_REPLY)
            .await
        {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("Read: {e}")),
        };
        if let Some(refused) = reported(&reply, &shown, "Read") {
            return refused;
        }
        let shown = reply.text("path").unwrap_or(shown);
        let size: u64 = reply.text("size").and_then(|s| s.parse().ok()).unwrap_or(0);
        if request.encoding == Encoding::Base64 {
            let limit = match base64_limit(&shown, size, &request) {
                Ok(l) => l,
                Err(refused) => return refused,
            };
            let data = reply.get("data").unwrap_or_default();
            let data = &data[..data.len().min(limit as usize)];
            return base64_result(shown, request.offset as u64, size, data);
        }
        // From the start, the page's bytes are the file's first bytes: no separate
        // look at them was sent.
        let head = match reply.get("head") {
            Some(h) => h,
            None => {
                let body = reply.get("body").unwrap_or_default();
                &body[..body.len().min(SNIFF_BYTES as usize)]
            }
        };
        let name = std::path::Path::new(&shown)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| shown.clone());
        let kind = infer::get(head);
        if let Some(kind) = kind.filter(|k| k.matcher_type() == infer::MatcherType::Image) {
            return self
                .image(&ctx, &shown, &name, kind.mime_type(), size, head)
                .await;
        }
        if looks_binary(head, (head.len() as u64) < SNIFF_BYTES) {
            let mime = kind.map_or("application/octet-stream", |k| k.mime_type());
            return ToolResult::error(format!(
                "Binary file: {name} ({mime}, {size} bytes) — not a text or image file"
            ));
        }
        let body = reply.get("body").unwrap_or_default();
        let request = if body.is_empty() && request.offset > 0 {
            // Past the end: the host counted the lines instead.
            let total: usize = reply
                .text("lines")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            return read_past_end(shown, total, &request);
        } else {
            request
        };
        match read_text_from(Cursor::new(body), request.offset, &request, &ctx.cancel) {
            Ok(page) => page.into_result(shown, request.offset),
            Err(e) => ToolResult::error(crate::tools::read::describe_io_error(&shown, &e)),
        }
    }
}

impl OnHost {
    async fn image(
        &self,
        ctx: &ToolContext,
        shown: &str,
        name: &str,
        mime: &str,
        size: u64,
        head: &[u8],
    ) -> ToolResult {
        if size > MAX_IMAGE_BYTES {
            return ToolResult::error(format!(
                "Image file too large: {name} ({mime}, {size} bytes) — the limit is {MAX_IMAGE_BYTES} bytes (10 MB)"
            ));
        }
        if (head.len() as u64) >= size {
            return image_result(name, mime, head);
        }
        let Some(p) = crate::remote::quote::quote(shown) else {
            return ToolResult::error(format!(
                "Read: the path cannot be passed to the host: {shown:?}"
            ));
        };
        let script = format!("gsv_head img {p} {}", MAX_IMAGE_BYTES + 1);
        match self
            .host
            .run(Lane::Work, ctx.owner(), &script, MAX_REPLY)
            .await
        {
            Ok(r) => {
                let bytes = r.get("img").unwrap_or_default();
                if bytes.len() as u64 > MAX_IMAGE_BYTES {
                    return ToolResult::error(format!(
                        "Image file too large: {name} ({mime}, more than {MAX_IMAGE_BYTES} bytes)"
                    ));
                }
                image_result(name, mime, bytes)
            }
            Err(e) => ToolResult::error(format!("Read: {e}")),
        }
    }
}

/// The page of a read that starts past the last of `total` lines.
fn read_past_end(shown: String, total: usize, request: &ReadRequest) -> ToolResult {
    let empty: &[u8] = &[];
    // Starting the reader at the file's end gives the local tool's own answer.
    match read_text_from(Cursor::new(empty), total, request, &Default::default()) {
        Ok(page) => page.into_result(shown, request.offset),
        Err(e) => ToolResult::error(crate::tools::read::describe_io_error(&shown, &e)),
    }
}
