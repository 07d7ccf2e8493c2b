//! What the file tools share on the far host of an SSH- or container-backed node
//! (each tool's `on_host.rs` body): the path check every script starts with
//! ([`check_line`]), the refusals it reports, and putting bytes on the host. Bytes go
//! into a script as `printf` escapes with [`printf_lines`], which is transport
//! ([`crate::remote::quote`]) and re-exported here.

use super::AccessError;
use crate::remote::channel::Reply;
pub use crate::remote::quote::printf_lines;
use crate::remote::quote::quote;
use crate::remote::{Lane, RemoteHost};
use crate::tool::ToolContext;
use gsv_protocol::ToolResult;
use std::path::Path;

/// Bytes written into a script as `printf` escapes; more go through
/// [`RemoteHost::upload`].
pub const INLINE_BYTES: usize = 32 * 1024;

/// The script line that checks `path` for a call (`gsv_check`, see
/// [`crate::remote::channel`]) and leaves the usable path in `$gsv_p`, or returns
/// from `gsv_main` after reporting the refusal. `None`: the path cannot be passed
/// to a shell (a NUL byte).
pub fn check_line(ctx: &ToolContext, path: &Path) -> Option<String> {
    let p = quote(path.to_str()?)?;
    let ws = quote(ctx.workspace.to_str()?)?;
    let confine = if ctx.confine { 1 } else { 0 };
    Some(format!("gsv_check {p} {ws} {confine} || return 0"))
}

/// The refusal or failure a script reported (`error` and `msg` frames), as the tool's
/// result; `None` if it reported none. `shown` is the path as the call gave it,
/// resolved.
pub fn reported(reply: &Reply, shown: &str, verb: &str) -> Option<ToolResult> {
    let kind = reply.text("error")?;
    let msg = reply.text("msg").unwrap_or_default();
    Some(match kind.as_str() {
        "outside" => AccessError::Outside(msg).into_result(),
        "protected" => AccessError::Protected {
            path: shown.to_owned(),
        }
        .into_result(),
        "notfound" => ToolResult::error(format!("File not found: {shown}")),
        "denied" => ToolResult::error(format!("Permission denied: {shown}")),
        "isdir" => ToolResult::error(format!(
            "Is a directory, not a file: {shown} ({verb} only works on files)"
        )),
        "notfile" => ToolResult::error(format!(
            "Not a regular file: {shown} (devices, sockets and pipes are not {verb}-able)"
        )),
        _ => ToolResult::error(if msg.is_empty() {
            format!("{verb} failed on {shown}")
        } else {
            msg
        }),
    })
}

/// The script lines that report why `$gsv_p` cannot be read as a file, and return.
pub const MUST_BE_FILE: &str = r#"
  if [ -d "$gsv_p" ]; then gsv_text error isdir; return 0; fi
  if [ ! -e "$gsv_p" ]; then gsv_text error notfound; return 0; fi
  if [ ! -f "$gsv_p" ]; then gsv_text error notfile; return 0; fi
  if [ ! -r "$gsv_p" ]; then gsv_text error denied; return 0; fi
"#;

/// Replaces the file at `path` with `content` on the host, atomically (a temporary
/// file in the same directory, renamed over it), creating missing directories and
/// keeping an existing file's mode (and owner, where allowed). A symlink is written
/// through. With `inode`, the file must still be that one (Edit: it was not
/// replaced since it was read). Returns the path written, resolved, or the tool
/// result that says why nothing was.
pub async fn put(
    host: &RemoteHost,
    ctx: &ToolContext,
    path: &Path,
    content: &[u8],
    inode: Option<&str>,
    verb: &str,
) -> Result<String, ToolResult> {
    let shown = path.display().to_string();
    let Some(check) = check_line(ctx, path) else {
        return Err(ToolResult::error(format!(
            "{verb}: the path cannot be passed to the host: {shown:?}"
        )));
    };
    let (fill, uploaded) = if content.len() <= INLINE_BYTES {
        (printf_lines(content, "\"$gsv_tmp\""), None)
    } else {
        let name = host
            .upload(content)
            .await
            .map_err(|e| ToolResult::error(format!("{verb}: {e}")))?;
        (format!("cat \"$GSV_D/{name}\" > \"$gsv_tmp\""), Some(name))
    };
    let same = match inode {
        Some(i) => format!(
            "  if [ \"$(ls -di \"$gsv_p\" 2>/dev/null | awk '{{ print $1 }}')\" != {i} ]; then gsv_text error io; \
             gsv_text msg \"$gsv_p was replaced while it was being edited (the file was not changed); try again\"; return 0; fi\n",
            i = quote(i).unwrap_or_default()
        ),
        None => String::new(),
    };
    let cleanup = uploaded
        .as_deref()
        .map(|n| format!("rm -f \"$GSV_D/{n}\""))
        .unwrap_or_default();
    let script = format!(
        r#"gsv_main() {{
  {check}
  if [ -d "$gsv_p" ]; then gsv_text error isdir; return 0; fi
  if [ -e "$gsv_p" ] && [ ! -f "$gsv_p" ]; then gsv_text error notfile; return 0; fi
{same}  gsv_t=$gsv_p
  if [ -L "$gsv_p" ] && gsv_real "$gsv_p"; then gsv_t=$gsv_r; fi
  gsv_dir=$(dirname "$gsv_t")
  if ! (umask "$gsv_umask"; mkdir -p "$gsv_dir") 2>"$GSV_D/e.$$"; then
    gsv_text error io; gsv_text msg "Cannot create the directory $gsv_dir: $(cat "$GSV_D/e.$$")"; return 0
  fi
  if ! gsv_tmp=$(mktemp "$gsv_dir/.gsv-write.XXXXXX" 2>"$GSV_D/e.$$"); then
    gsv_text error io; gsv_text msg "Cannot write $gsv_t: $(cat "$GSV_D/e.$$")"; return 0
  fi
  if [ -f "$gsv_t" ]; then cp -p "$gsv_t" "$gsv_tmp" 2>/dev/null
  else chmod "$(printf '%o' $(( 0666 & ~0$gsv_umask )))" "$gsv_tmp" 2>/dev/null; fi
  if ! {{ {fill} ; }} 2>"$GSV_D/e.$$"; then
    rm -f "$gsv_tmp"; gsv_text error io; gsv_text msg "Cannot write $gsv_t: $(cat "$GSV_D/e.$$")"; return 0
  fi
  if ! mv -f "$gsv_tmp" "$gsv_t" 2>"$GSV_D/e.$$"; then
    rm -f "$gsv_tmp"; gsv_text error io; gsv_text msg "Cannot write $gsv_t: $(cat "$GSV_D/e.$$")"; return 0
  fi
  gsv_text path "$gsv_t"
}}
gsv_main; {cleanup}"#
    );
    let reply = host
        .run(Lane::Work, ctx.owner(), &script, 1 << 20)
        .await
        .map_err(|e| ToolResult::error(format!("{verb}: {e}")))?;
    if let Some(refused) = reported(&reply, &shown, verb) {
        return Err(refused);
    }
    Ok(reply.text("path").unwrap_or(shown))
}
