//! Edit on a remote host: the file comes over whole (at most the local limit), the
//! replacement is made here exactly as a local node makes it, and the result goes
//! back through the same atomic write as Write, which first checks the file is
//! still the one read.

use crate::remote::{Lane, RemoteHost, MAX_REPLY};
use crate::tool::ToolContext;
use crate::tools::edit::{edited_result, replaced, EditRequest, MAX_EDIT_BYTES};
use crate::tools::paths::on_host::{check_line, put, reported, MUST_BE_FILE};
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::sync::Arc;

/// The far-host body of [`super::Edit`] (made with `Edit::on`): Edit on the host of an
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
        let request = match EditRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Edit: {message}")),
        };
        let path = ctx.resolve_path(&request.path);
        let shown = path.display().to_string();
        let Some(check) = check_line(&ctx, &path) else {
            return ToolResult::error(format!(
                "Edit: the path cannot be passed to the host: {shown:?}"
            ));
        };
        let script = format!(
            "gsv_main() {{\n  {check}\n{MUST_BE_FILE}\n  gsv_text path \"$gsv_p\"\n  \
             gsv_text inode \"$(ls -di \"$gsv_p\" | awk '{{ print $1 }}')\"\n  \
             gsv_head data \"$gsv_p\" {}\n}}\ngsv_main",
            MAX_EDIT_BYTES + 1
        );
        let reply = match self
            .host
            .run(Lane::Work, ctx.owner(), &script, MAX_REPLY)
            .await
        {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("Edit: {e}")),
        };
        if let Some(refused) = reported(&reply, &shown, "Edit") {
            return refused;
        }
        let shown = reply.text("path").unwrap_or(shown);
        let bytes = reply.get("data").unwrap_or_default();
        if bytes.len() as u64 > MAX_EDIT_BYTES {
            return ToolResult::error(format!(
                "File too large to edit: {shown} (more than {MAX_EDIT_BYTES} bytes)"
            ));
        }
        let (out, replacements) = match replaced(&shown, bytes, &request) {
            Ok(done) => done,
            Err(refused) => return refused,
        };
        let inode = reply.text("inode").unwrap_or_default();
        match put(
            &self.host,
            &ctx,
            std::path::Path::new(&shown),
            &out,
            Some(&inode),
            "Edit",
        )
        .await
        {
            Ok(_) => edited_result(shown, replacements),
            Err(refused) => refused,
        }
    }
}
