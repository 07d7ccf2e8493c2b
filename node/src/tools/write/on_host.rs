//! Write on a remote host: the content goes into a temporary file beside the target
//! and is renamed over it ([`super::files::put`]).

use crate::remote::RemoteHost;
use crate::tool::ToolContext;
use crate::tools::paths::on_host::put;
use crate::tools::write::{parse, written_result};
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::sync::Arc;

/// The far-host body of [`super::Write`] (made with `Write::on`): Write on the host of an
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
