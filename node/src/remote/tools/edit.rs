//! Edit on a remote host: the file comes over whole (at most the local limit), the
//! replacement is made here exactly as a local node makes it, and the result goes
//! back through the same atomic write as Write, which first checks the file is
//! still the one read.

use super::files::{check_line, put, reported, MUST_BE_FILE};
use crate::remote::{Lane, RemoteHost, MAX_REPLY};
use crate::tool::{Tool, ToolContext};
use crate::tools::edit::{edited_result, replaced, Edit, EditRequest, MAX_EDIT_BYTES};
use gsv_protocol::{ErrorShape, ToolDef, ToolResult};
use serde_json::Value;
use std::sync::Arc;

/// Edit, on the host of an SSH- or container-backed node.
pub struct RemoteEdit {
    host: Arc<RemoteHost>,
}

impl RemoteEdit {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        RemoteEdit { host }
    }
}

#[async_trait::async_trait]
impl Tool for RemoteEdit {
    fn def(&self) -> ToolDef {
        Edit.def()
    }

    async fn check(&self, _args: &Value, _ctx: &ToolContext) -> Result<(), ErrorShape> {
        self.host.ready().await.map_err(|e| e.shape())
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
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
