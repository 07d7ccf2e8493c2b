//! Glob on the far host of an SSH- or container-backed node, through the host's
//! `rg` when it has one (the same walker and ignore rules as a local node's), and a
//! stated fallback otherwise: `find` (no ignore rules, results by path, not by time).
//! Glob matching itself is done here with the local tool's matcher, on the paths the
//! host lists. Results have the local tool's shape; a fallback says so in its text.

use crate::remote::quote::quote;
use crate::remote::{Lane, RemoteHost, MAX_REPLY};
use crate::tool::ToolContext;
use crate::tools::glob::{self, GlobRequest, MAX_MATCHES as GLOB_MAX};
use crate::tools::ignored::{Count, COUNT_CAP};
use crate::tools::paths::on_host::check_line;
use gsv_protocol::ToolResult;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The far-host body of [`super::Glob`] (made with `Glob::on`): Glob on the host of an
/// SSH- or container-backed node. Not a tool of its own: the tool dispatches here.
pub(crate) struct OnHost {
    host: Arc<RemoteHost>,
}

impl OnHost {
    pub fn new(host: Arc<RemoteHost>) -> Self {
        OnHost { host }
    }
}

/// The note a fallback result carries.
const FIND_NOTE: &str = "[The host has no rg: files were listed with find, so .gitignore/.ignore rules were not applied and they are sorted by path, not by time.]";

/// The lines of a listing frame, as paths.
pub(crate) fn lines(data: Option<&[u8]>) -> Vec<String> {
    String::from_utf8_lossy(data.unwrap_or_default())
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `path` lies in the node's own directory on the host (`dr`).
pub(crate) fn protected(path: &str, dr: Option<&str>) -> bool {
    dr.is_some_and(|d| !d.is_empty() && (path == d || path.starts_with(&format!("{d}/"))))
}

impl OnHost {
    pub(crate) async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let request = match GlobRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Glob: {message}")),
        };
        let pattern = request.pattern.as_str();
        let absolute = pattern.starts_with('/');
        let plan = glob::plan(pattern.trim_start_matches('/'));
        let matcher = match globset::GlobBuilder::new(&plan.rest)
            .literal_separator(true)
            .build()
        {
            Ok(g) => g.compile_matcher(),
            Err(e) => return ToolResult::error(format!("Invalid glob pattern {pattern:?}: {e}")),
        };
        let base_arg = if absolute {
            format!("/{}", plan.prefix)
        } else {
            request.path.clone().unwrap_or_else(|| ".".into())
        };
        let base = ctx.resolve_path(&base_arg);
        let prefix = if absolute || plan.prefix.is_empty() {
            String::new()
        } else {
            format!("/{}", plan.prefix)
        };
        let (Some(check), Some(prefix)) = (check_line(&ctx, &base), quote(&prefix)) else {
            return ToolResult::error("Glob: the path cannot be passed to the host");
        };
        let mut rg = String::from("--files --no-require-git --sortr modified");
        let mut find_prune = String::from("\\( -name '.*' ! -path \"$gsv_root\" -prune \\) -o");
        if plan.hidden {
            rg.push_str(" --hidden");
            find_prune = if plan.git_dir {
                String::new()
            } else {
                "\\( -name .git -prune \\) -o".into()
            };
            if !plan.git_dir {
                rg.push_str(" -g '!.git'");
            }
        }
        let depth = plan
            .max_depth
            .map(|d| (format!(" --max-depth {d}"), format!("-maxdepth {d}")))
            .unwrap_or_default();
        rg.push_str(&depth.0);
        let first = if request.no_ignore {
            " --no-ignore"
        } else {
            ""
        };
        let again = if request.no_ignore {
            String::new()
        } else {
            format!(
                "rg {rg} --no-ignore -- \"$gsv_root\" 2>/dev/null | head -n {COUNT_CAP} > \"$GSV_D/h.$$\"; gsv_file all \"$GSV_D/h.$$\"; rm -f \"$GSV_D/h.$$\""
            )
        };
        let script = format!(
            r#"gsv_main() {{
  {check}
  if [ ! -e "$gsv_p" ]; then gsv_text error io; gsv_text msg "Directory not found: $gsv_p"; return 0; fi
  if [ ! -d "$gsv_p" ]; then gsv_text error io; gsv_text msg "Not a directory: $gsv_p (Glob searches directories)"; return 0; fi
  gsv_text base "$gsv_p"
  [ -n "$gsv_dr" ] && gsv_text dr "$gsv_dr"
  gsv_root="$gsv_p"{prefix}
  gsv_text root "$gsv_root"
  [ -d "$gsv_root" ] || return 0
  if command -v rg >/dev/null 2>&1; then
    rg {rg}{first} -- "$gsv_root" 2>/dev/null | head -n {COUNT_CAP} > "$GSV_D/g.$$"; gsv_file list "$GSV_D/g.$$"
    {again}
  else
    gsv_text fallback 1
    find "$gsv_root" {depth_find} {find_prune} \( -type f -o -type l \) -print 2>/dev/null | head -n {COUNT_CAP} > "$GSV_D/g.$$"; gsv_file list "$GSV_D/g.$$"
  fi
  rm -f "$GSV_D/g.$$"
}}
gsv_main"#,
            depth_find = depth.1,
        );
        let reply = match self
            .host
            .run(Lane::Work, ctx.owner(), &script, MAX_REPLY)
            .await
        {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("Glob: {e}")),
        };
        if let Some(refused) =
            crate::tools::paths::on_host::reported(&reply, &base.display().to_string(), "Glob")
        {
            return refused;
        }
        let base = PathBuf::from(
            reply
                .text("base")
                .unwrap_or_else(|| base.display().to_string()),
        );
        let root = PathBuf::from(reply.text("root").unwrap_or_default());
        let dr = reply.text("dr");
        let fallback = reply.text("fallback").is_some();
        let wanted = |p: &String| {
            !protected(p, dr.as_deref())
                && Path::new(p)
                    .strip_prefix(&root)
                    .is_ok_and(|rel| matcher.is_match(rel))
        };
        let mut found: Vec<String> = lines(reply.get("list"))
            .into_iter()
            .filter(wanted)
            .collect();
        if fallback {
            found.sort();
        }
        let listed: HashSet<&String> = found.iter().collect();
        let ignored = match reply.get("all") {
            Some(all) if found.len() <= GLOB_MAX => {
                let n = lines(Some(all))
                    .iter()
                    .filter(|p| wanted(p) && !listed.contains(p))
                    .count();
                Count {
                    n: n.min(COUNT_CAP),
                    cut: n >= COUNT_CAP,
                    skipped: false,
                }
            }
            Some(_) => Count::not_counted(),
            None => Count::default(),
        };
        let total = found.len();
        let truncated = total > GLOB_MAX;
        found.truncate(GLOB_MAX);
        let mut result = glob::render(pattern, &base, found, total, truncated, ignored);
        if fallback {
            add_note(&mut result, FIND_NOTE);
        }
        result
    }
}

/// Adds `note` to the result's text.
pub(crate) fn add_note(result: &mut ToolResult, note: &str) {
    if let Some(gsv_protocol::ContentBlock::Text { text }) = result.content.first_mut() {
        text.push_str("\n\n");
        text.push_str(note);
    }
}
