//! Grep on the far host of an SSH- or container-backed node, through the host's
//! `rg` when it has one (the same walker and ignore rules as a local node's, the same
//! regex syntax), and a stated fallback otherwise: `grep -E` (POSIX extended regular
//! expressions, no ignore rules). Grep does not follow symlinks there (a local node's
//! does). Results have the local tool's shape; a fallback says so in its text.

use crate::remote::quote::quote;
use crate::remote::{Lane, RemoteHost, MAX_REPLY};
use crate::tool::ToolContext;
use crate::tools::glob::on_host::{add_note, protected};
use crate::tools::grep::{self, cut_line, include_matcher, GrepRequest, Hit, MAX_MATCHES};
use crate::tools::ignored::{Count, COUNT_CAP};
use crate::tools::paths::on_host::check_line;
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// The far-host body of [`super::Grep`] (made with `Grep::on`): Grep on the host of an
/// SSH- or container-backed node. Not a tool of its own: the tool dispatches here.
pub(crate) struct OnHost {
    host: Arc<RemoteHost>,
}

impl OnHost {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        OnHost { host }
    }
}

const GREP_NOTE: &str = "[The host has no rg: its grep searched, so the pattern was read as a POSIX extended regular expression and .gitignore/.ignore rules were not applied.]";

impl OnHost {
    pub(crate) async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let request = match GrepRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Grep: {message}")),
        };
        if let Err(e) = regex::Regex::new(&request.pattern) {
            return ToolResult::error(format!("Invalid regex {:?}: {e}", request.pattern));
        }
        if let Some(inc) = &request.include {
            if let Err(e) = include_matcher(inc) {
                return ToolResult::error(e);
            }
        }
        let base = ctx.resolve_path(request.path.as_deref().unwrap_or("."));
        let Some(check) = check_line(&ctx, &base) else {
            return ToolResult::error("Grep: the path cannot be passed to the host");
        };
        let Some(pattern) = quote(&request.pattern) else {
            return ToolResult::error("Grep: the pattern cannot be passed to the host");
        };
        let (rg_inc, grep_inc) = match request.include.as_deref().map(quote) {
            Some(Some(q)) => (format!(" -g {q}"), format!(" --include={q}")),
            Some(None) => {
                return ToolResult::error("Grep: the include glob cannot be passed to the host")
            }
            None => (String::new(), String::new()),
        };
        // Links are not followed on a remote host (unlike a local node's Grep): the
        // host's rg cannot be told to keep out of the node's own directory there
        // (other tokens' job output) behind a link, nor out of the workspace.
        let follow = "";
        let no_ignore = if request.no_ignore {
            " --no-ignore"
        } else {
            ""
        };
        let count = if request.no_ignore {
            String::new()
        } else {
            format!(
                "gsv_text kept \"$(rg --files --no-require-git{follow}{rg_inc} -- \"$gsv_p\" 2>/dev/null | head -n {COUNT_CAP} | wc -l)\"\n    \
                 gsv_text every \"$(rg --files --no-require-git --no-ignore{follow}{rg_inc} -- \"$gsv_p\" 2>/dev/null | head -n {COUNT_CAP} | wc -l)\""
            )
        };
        let over = MAX_MATCHES + 1;
        let script = format!(
            r#"gsv_main() {{
  {check}
  if [ ! -e "$gsv_p" ]; then gsv_text error io; gsv_text msg "Path not found: $gsv_p"; return 0; fi
  gsv_text base "$gsv_p"
  [ -n "$gsv_dr" ] && gsv_text dr "$gsv_dr"
  if command -v rg >/dev/null 2>&1; then
    rg --json --no-require-git{follow}{no_ignore}{rg_inc} -e {pattern} -- "$gsv_p" 2>/dev/null | grep -m {over} '^{{"type":"match"' > "$GSV_D/s.$$"
    gsv_file hits "$GSV_D/s.$$"
    {count}
  else
    gsv_text fallback 1
    grep -rnIEZ{grep_inc} -e {pattern} -- "$gsv_p" 2>/dev/null | head -n {over} > "$GSV_D/s.$$"
    gsv_file lines "$GSV_D/s.$$"
  fi
  rm -f "$GSV_D/s.$$"
}}
gsv_main"#
        );
        let reply = match self
            .host
            .run(Lane::Work, ctx.owner(), &script, MAX_REPLY)
            .await
        {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("Grep: {e}")),
        };
        if let Some(refused) =
            crate::tools::paths::on_host::reported(&reply, &base.display().to_string(), "Grep")
        {
            return refused;
        }
        let base = PathBuf::from(
            reply
                .text("base")
                .unwrap_or_else(|| base.display().to_string()),
        );
        let dr = reply.text("dr");
        let fallback = reply.text("fallback").is_some();
        let mut hits: Vec<Hit> = if fallback {
            grep_hits(reply.get("lines").unwrap_or_default())
        } else {
            rg_hits(reply.get("hits").unwrap_or_default())
        };
        hits.retain(|h| !protected(&h.path.to_string_lossy(), dr.as_deref()));
        let truncated = hits.len() > MAX_MATCHES;
        hits.sort();
        hits.truncate(MAX_MATCHES);
        let ignored = match (reply.text("kept"), reply.text("every")) {
            _ if truncated => Count::not_counted(),
            (Some(kept), Some(every)) => {
                let (kept, every): (usize, usize) = (
                    kept.trim().parse().unwrap_or(0),
                    every.trim().parse().unwrap_or(0),
                );
                let n = every.saturating_sub(kept);
                Count {
                    n: n.min(COUNT_CAP),
                    cut: every >= COUNT_CAP,
                    skipped: false,
                }
            }
            _ => Count::default(),
        };
        let mut result = grep::render(&request.pattern, &base, hits, truncated, ignored);
        if fallback {
            add_note(&mut result, GREP_NOTE);
        }
        result
    }
}

/// Matches from `rg --json` `match` events.
fn rg_hits(data: &[u8]) -> Vec<Hit> {
    String::from_utf8_lossy(data)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let d = v.get("data")?;
            let path = text_or_bytes(d.get("path")?)?;
            let line = d.get("line_number")?.as_u64()?;
            let content = text_or_bytes(d.get("lines")?)?;
            Some(Hit {
                path: PathBuf::from(String::from_utf8_lossy(&path).into_owned()),
                line,
                content: cut_line(&content),
            })
        })
        .collect()
}

/// An rg JSON string field: `{"text": ...}` or `{"bytes": base64}`.
fn text_or_bytes(v: &Value) -> Option<Vec<u8>> {
    use base64::Engine;
    if let Some(t) = v.get("text").and_then(Value::as_str) {
        return Some(t.as_bytes().to_vec());
    }
    let b = v.get("bytes").and_then(Value::as_str)?;
    base64::engine::general_purpose::STANDARD.decode(b).ok()
}

/// Matches from `grep -rnZ` lines: `PATH\0LINE:CONTENT`.
fn grep_hits(data: &[u8]) -> Vec<Hit> {
    data.split(|b| *b == b'\n')
        .filter_map(|l| {
            let nul = l.iter().position(|b| *b == 0)?;
            let (path, rest) = (&l[..nul], &l[nul + 1..]);
            let colon = rest.iter().position(|b| *b == b':')?;
            let line = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
            Some(Hit {
                path: PathBuf::from(String::from_utf8_lossy(path).into_owned()),
                line,
                content: cut_line(&rest[colon + 1..]),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rg_and_grep_lines_are_read() {
        let rg = br#"{"type":"match","data":{"path":{"text":"/w/a.rs"},"lines":{"text":"fn main() {}\n"},"line_number":3,"absolute_offset":0,"submatches":[]}}
{"type":"match","data":{"path":{"bytes":"L3cvYv9j"},"lines":{"bytes":"eP8K"},"line_number":1,"absolute_offset":0,"submatches":[]}}"#;
        let hits = rg_hits(rg);
        assert_eq!(hits.len(), 2);
        assert_eq!(
            (hits[0].line, hits[0].content.as_str()),
            (3, "fn main() {}")
        );
        assert_eq!(hits[1].path, PathBuf::from("/w/b\u{fffd}c"));
        let grep = b"/w/x:y.txt\x0012:a: b\n/w/z\x001:c\n";
        let hits = grep_hits(grep);
        assert_eq!(hits[0].path, PathBuf::from("/w/x:y.txt"));
        assert_eq!((hits[0].line, hits[0].content.as_str()), (12, "a: b"));
        assert_eq!(hits[1].line, 1);
        assert!(protected(
            "/h/.local/state/gsv/x/jobs/a",
            Some("/h/.local/state/gsv/x")
        ));
        assert!(!protected(
            "/h/.local/state/gsv/xy",
            Some("/h/.local/state/gsv/x")
        ));
    }
}
