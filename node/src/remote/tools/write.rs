//! Write on a remote host: the content goes into a temporary file beside the target
//! and is renamed over it ([`super::files::put`]).

use super::files::put;
use crate::remote::RemoteHost;
use crate::tool::{Tool, ToolContext};
use crate::tools::write::{parse, written_result, Write};
use gsv_protocol::{ErrorShape, ToolDef, ToolResult};
use serde_json::Value;
use std::sync::Arc;

/// Write, on the host of an SSH- or container-backed node.
pub struct RemoteWrite {
    host: Arc<RemoteHost>,
}

impl RemoteWrite {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        RemoteWrite { host }
    }
}

#[async_trait::async_trait]
impl Tool for RemoteWrite {
    fn def(&self) -> ToolDef {
        Write.def()
    }

    async fn check(&self, _args: &Value, _ctx: &ToolContext) -> Result<(), ErrorShape> {
        self.host.ready().await.map_err(|e| e.shape())
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let (path, content) = match parse(&args) {
            Ok(parsed) => parsed,
            Err(message) => return ToolResult::error(format!("Write: {message}")),
        };
        let path = ctx.resolve_path(&path);
        match put(&self.host, &ctx, &path, &content, None, "Write").await {
            Ok(shown) => written_result(shown, content.len()),
            Err(refused) => refused,
        }
    }
}
