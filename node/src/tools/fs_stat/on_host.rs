//! fs_stat on the far host of an SSH- or container-backed node, in the local tool's
//! shape. It reads the entry with GNU `find -printf` (the record format of
//! [`crate::tools::fs_list::on_host`]; a host whose `find` has no `-printf` gets a
//! clear error naming the package to add). The path check (`gsv_check`) is made on
//! the entry's directory and the entry itself is described, so a link pointing out of
//! a confined workspace is shown as a link and never followed, as on a local node;
//! the node's own directory on the host is never described.

use crate::remote::quote::quote;
use crate::remote::{Lane, RemoteHost};
use crate::tool::ToolContext;
use crate::tools::args::Args;
use crate::tools::file_info::{mime_of, mime_of_head, Kind};
use crate::tools::fs_list::on_host::{refusal, Record, NEED_GNU_FIND, RECORD};
use crate::tools::fs_stat::FsStatOutput;
use crate::tools::output;
use crate::tools::paths::on_host::check_line;
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::sync::Arc;

/// The far-host body of [`super::FsStat`] (made with `FsStat::on`): fs_stat on the host of an
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
        let path = match Args::new(&args, &["path"]).and_then(|a| a.required_str("path")) {
            Ok(path) => ctx.resolve_path(path),
            Err(message) => return ToolResult::error(format!("fs_stat: {message}")),
        };
        let shown = path.display().to_string();
        // The entry's directory is checked and the entry looked at in it, unfollowed
        // (and refused when it is the node's own directory).
        let (check, entry) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(dir), Some(name)) => (
                check_line(&ctx, dir),
                quote(name).map(|n| {
                    format!(
                        r#"gsv_e="${{gsv_p%/}}/"{n}
  if [ -n "$gsv_dr" ]; then
    case "${{gsv_c%/}}/"{n}/ in "$gsv_dr"/*) gsv_refuse protected "$gsv_e"; return 0;; esac
  fi"#
                    )
                }),
            ),
            _ => (check_line(&ctx, &path), Some(r#"gsv_e=$gsv_p"#.to_owned())),
        };
        let (Some(check), Some(entry)) = (check, entry) else {
            return ToolResult::error(format!("fs_stat: {shown} cannot be passed to the host"));
        };
        let script = format!(
            r#"gsv_main() {{
  {check}
  {entry}
  if [ ! -e "$gsv_e" ] && [ ! -L "$gsv_e" ]; then gsv_text error notfound; return 0; fi
{NEED_GNU_FIND}  gsv_o="$GSV_D/s.$$"
  find "$gsv_e" -maxdepth 0 -printf {RECORD} >"$gsv_o" 2>"$GSV_D/s.err.$$"
  gsv_file record "$gsv_o"; gsv_file err "$GSV_D/s.err.$$"
  rm -f "$gsv_o" "$GSV_D/s.err.$$"
  if [ -f "$gsv_e" ] && [ ! -L "$gsv_e" ] && [ -r "$gsv_e" ]; then gsv_head head "$gsv_e" 8192; fi
  gsv_text path "$gsv_e"
}}
gsv_main"#
        );
        let reply = match self
            .host
            .run(Lane::Work, ctx.owner(), &script, 64 * 1024)
            .await
        {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("fs_stat: {e}")),
        };
        if let Some(refused) = refusal(&reply, &shown, "fs_stat") {
            return refused;
        }
        let record = reply.get("record").unwrap_or_default();
        let Some(parsed) = Record::parse_all(record).into_iter().next() else {
            let err = reply.text("err").unwrap_or_default();
            return ToolResult::error(format!("Cannot stat {shown}: {}", err.trim()));
        };
        let mime = match parsed.info.kind {
            Kind::File => reply.get("head").map(mime_of_head),
            kind => mime_of(kind, None),
        };
        output::structured(&FsStatOutput {
            path: reply.text("path").unwrap_or(shown),
            info: parsed.info,
            owner: parsed.owner,
            mime,
        })
    }
}
