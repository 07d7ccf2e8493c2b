//! The fs_list tool: the entries of a directory, with what each one is.
//!
//! Unlike Glob (files matching a pattern, newest first), fs_list lists a directory
//! like `ls -la`/`find -maxdepth`: every entry down to `depth` levels (default 1),
//! directories included, each with its kind, size, modification time, permission bits
//! and, for a symlink, its target as written ([`crate::tools::file_info::FileInfo`]).
//! Symlinks are listed, never followed or entered. `glob` keeps only the entries whose
//! path relative to the listed directory matches (`globset`, `*` within one
//! component, `**` across, `{a,b}`); directories are still walked when they do not
//! match. Entries come sorted by path and capped at [`MAX_ENTRIES`].
//!
//! Hidden entries (`.name`) are left out unless `hidden: true`; entries that
//! `.gitignore`, `.ignore`, `.git/info/exclude` or the global gitignore rules exclude
//! are left out unless `ignored: true`, and, as for Glob and Grep, the result counts
//! the entries the rules hid (`ignoredSkipped`; [`crate::tools::ignored`]), so a rule
//! planted next to a file cannot hide it silently.
//!
//! Path rules as for Glob ([`crate::tools::paths`]): the directory must be inside the
//! workspace when confined, and every entry is looked at through its directory opened
//! beneath the workspace, so one swapped for a symlink during the walk is left out;
//! protected directories are not entered and protected entries not listed (naming a
//! protected directory is refused).
//!
//! Result (`structuredContent`): `{path, entries: [{path, kind, size, mtime, mode,
//! linkTarget?}], count, truncated?, ignoredSkipped, ignoredSkippedAtLeast?}`
//! ([`FsListOutput`]), entry paths relative to `path`.

pub mod on_host;

use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::file_info::{FileInfo, Kind};
use crate::tools::glob::walk_threads;
use crate::tools::ignored::{self, Count, IgnoredSkipped, Seen};
use crate::tools::output::{self, is_false};
use crate::tools::paths::{AccessError, PathPolicy, WalkAccess};
use globset::GlobMatcher;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use ignore::WalkBuilder;
use rustix::fs::{FileType, OFlags};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Most entries returned by one call.
pub const MAX_ENTRIES: usize = 1000;
/// Deepest `depth` accepted.
pub const MAX_DEPTH: u64 = 64;

/// The fs_list tool.
#[derive(Default)]
pub struct FsList {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl FsList {
    /// FsList on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// FsList on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        FsList { host: Some(host) }
    }
}

/// fs_list's structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsListOutput {
    /// The directory listed, resolved (absolute).
    pub path: String,
    /// Entries sorted by path.
    pub entries: Vec<ListedEntry>,
    /// Entries in `entries`.
    pub count: usize,
    /// Present (`true`) only when more entries were found than `entries` holds.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
    #[serde(flatten)]
    pub ignored: IgnoredSkipped,
}

/// One listed entry.
#[derive(Debug, Serialize)]
pub struct ListedEntry {
    /// Relative to the listed directory, `/`-separated.
    pub path: String,
    #[serde(flatten)]
    pub info: FileInfo,
}

#[async_trait::async_trait]
impl Tool for FsList {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "fs_list".to_owned(),
            description: "List a directory's entries, sorted by path, at most 1000: kind, \
                          size, modification time, mode, symlink target (not followed)."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Default: the workspace."
                    },
                    "glob": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Relative paths to keep, e.g. \"**/*.{md,txt}\"."
                    },
                    "hidden": {
                        "type": "boolean",
                        "description": "Include names starting with `.`."
                    },
                    "ignored": {
                        "type": "boolean",
                        "description": "Include what .gitignore/.ignore exclude."
                    },
                    "depth": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_DEPTH,
                        "description": "Levels to descend (default 1: its own entries)."
                    }
                },
                "additionalProperties": false
            }),
            capability: Capability::FilesystemList.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("List a directory"),
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
        let request = match ListRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("fs_list: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        let cancel = ctx.cancel.clone();
        match tokio::task::spawn_blocking(move || list(&policy, &request, &cancel)).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("fs_list failed: {e}")),
        }
    }
}

pub(crate) struct ListRequest {
    pub(crate) path: String,
    glob: Option<GlobMatcher>,
    pub(crate) hidden: bool,
    pub(crate) ignored: bool,
    pub(crate) depth: usize,
}

impl ListRequest {
    pub(crate) fn parse(args: &Value) -> Result<ListRequest, String> {
        let args = Args::new(args, &["path", "glob", "hidden", "ignored", "depth"])?;
        let path = match args.str("path")? {
            Some("") => return Err("\"path\" must not be empty".to_owned()),
            other => other.unwrap_or(".").to_owned(),
        };
        let glob = match args.str("glob")? {
            None => None,
            Some(pattern) => Some(
                globset::GlobBuilder::new(pattern.trim_start_matches("./"))
                    .literal_separator(true)
                    .build()
                    .map_err(|e| format!("invalid glob {pattern:?}: {}", e.kind()))?
                    .compile_matcher(),
            ),
        };
        let depth = args.u64_in("depth", 1, MAX_DEPTH)?.unwrap_or(1);
        Ok(ListRequest {
            path,
            glob,
            hidden: args.bool("hidden")?.unwrap_or(false),
            ignored: args.bool("ignored")?.unwrap_or(false),
            depth: usize::try_from(depth).unwrap_or(1),
        })
    }

    /// Whether the entry at `relative` is wanted (by `glob`).
    pub(crate) fn wants(&self, relative: &Path) -> bool {
        !relative.as_os_str().is_empty() && self.glob.as_ref().is_none_or(|g| g.is_match(relative))
    }
}

/// Lists one directory (blocking).
fn list(policy: &PathPolicy, request: &ListRequest, cancel: &CancellationToken) -> ToolResult {
    let opened = match policy.open(&request.path, OFlags::PATH) {
        Ok(opened) => opened,
        Err(AccessError::Io { path, source }) => {
            let shown = path.display();
            return ToolResult::error(match source.kind() {
                std::io::ErrorKind::NotFound => format!("Directory not found: {shown}"),
                std::io::ErrorKind::PermissionDenied => format!("Permission denied: {shown}"),
                _ => format!("Cannot list {shown}: {source}"),
            });
        }
        Err(e) => return e.into_result(),
    };
    let is_dir = rustix::fs::fstat(&opened.fd)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
    if !is_dir {
        return ToolResult::error(format!(
            "Not a directory: {} (fs_list lists directories; fs_stat describes a file)",
            opened.path.display()
        ));
    }
    let root = opened.path;
    let access = match policy.walk_access() {
        Ok(access) => access,
        Err(e) => return e.into_result(),
    };
    let mut found: Vec<ListedEntry> = Vec::new();
    for entry in walker(&root, request, &access, !request.ignored).build() {
        if cancel.is_cancelled() {
            return ToolResult::error("fs_list was cancelled");
        }
        let Ok(entry) = entry else { continue };
        let Ok(relative) = entry.path().strip_prefix(&root) else {
            continue;
        };
        if !request.wants(relative) {
            continue;
        }
        // Looked at again through its directory (beneath the workspace when confined).
        let Some(looked) = access.entry(entry.path()) else {
            continue;
        };
        found.push(ListedEntry {
            path: relative.to_string_lossy().into_owned(),
            info: FileInfo::of(&looked),
        });
        // One past the cap says there are more.
        if found.len() > MAX_ENTRIES {
            break;
        }
    }
    let truncated = found.len() > MAX_ENTRIES;
    let ignored = match request.ignored || cancel.is_cancelled() {
        true => Count::default(),
        false if truncated => Count::not_counted(),
        false => count_ignored(&root, request, &access, &found, cancel),
    };
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.truncate(MAX_ENTRIES);
    render(&root, found, truncated, ignored)
}

/// The walk of `root` for `request`, applying ignore rules or not. Symlinks are not
/// followed, protected directories not entered.
fn walker(
    root: &Path,
    request: &ListRequest,
    access: &WalkAccess,
    apply_rules: bool,
) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(!request.hidden)
        .require_git(false)
        .follow_links(false)
        .max_depth(Some(request.depth))
        .threads(walk_threads());
    ignored::rules(&mut builder, apply_rules);
    let filter_access = access.clone();
    builder.filter_entry(move |e| {
        !(e.file_type().is_some_and(|t| t.is_dir())
            && e.metadata()
                .is_ok_and(|m| filter_access.skips_dir(e.path(), &m, false)))
    });
    builder
}

/// How many entries the ignore rules kept out of `found`: the same walk without the
/// rules, counting wanted entries not listed that would have been listed.
fn count_ignored(
    root: &Path,
    request: &ListRequest,
    access: &WalkAccess,
    found: &[ListedEntry],
    cancel: &CancellationToken,
) -> Count {
    let listed: HashSet<PathBuf> = found.iter().map(|e| root.join(&e.path)).collect();
    let mut builder = walker(root, request, access, false);
    ignored::count_without_rules(&mut builder, cancel, |entry| {
        let wanted = entry
            .path()
            .strip_prefix(root)
            .is_ok_and(|relative| request.wants(relative));
        match wanted && !listed.contains(entry.path()) && access.entry(entry.path()).is_some() {
            true => Seen::Candidate,
            false => Seen::Other,
        }
    })
}

pub(crate) fn render(
    root: &Path,
    entries: Vec<ListedEntry>,
    truncated: bool,
    ignored: Count,
) -> ToolResult {
    let path = root.display().to_string();
    let count = entries.len();
    let mut text = if entries.is_empty() {
        format!("No entries in {path}")
    } else {
        entries.iter().map(line).collect::<Vec<_>>().join("\n")
    };
    if truncated {
        text.push_str(&format!(
            "\n\n[More than {MAX_ENTRIES} entries; showing the first {count} by path. Use a smaller depth, a glob or a deeper path.]"
        ));
    }
    let fields = IgnoredSkipped {
        ignored_skipped: ignored.n,
        ignored_skipped_at_least: ignored.cut,
    };
    if ignored.n > 0 || ignored.skipped {
        text.push_str(&format!(
            "\n\n[{}{} {} hidden by .gitignore/.ignore rules; pass ignored: true to include them.]",
            if ignored.cut { "At least " } else { "" },
            ignored.n,
            if ignored.n == 1 {
                "entry is"
            } else {
                "entries are"
            },
        ));
    }
    output::with_text(
        text,
        &FsListOutput {
            path,
            entries,
            count,
            truncated,
            ignored: fields,
        },
    )
}

/// `d 0755 4096 2024-05-01T12:00:00Z src/`, `l 0777 5 ... link -> target`.
fn line(e: &ListedEntry) -> String {
    let i = &e.info;
    let (tag, suffix) = match i.kind {
        Kind::Dir => ('d', "/".to_owned()),
        Kind::Symlink => (
            'l',
            format!(" -> {}", i.link_target.as_deref().unwrap_or("?")),
        ),
        Kind::File => ('-', String::new()),
        Kind::Fifo => ('p', String::new()),
        Kind::Socket => ('s', String::new()),
        Kind::Char => ('c', String::new()),
        Kind::Block => ('b', String::new()),
        Kind::Unknown => ('?', String::new()),
    };
    format!("{tag} {} {} {} {}{suffix}", i.mode, i.size, i.mtime, e.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    async fn call(ws: &Path, confine: bool, args: Value) -> ToolResult {
        let mut ctx = ToolContext::new(ws, "1");
        ctx.confine = confine;
        FsList::new().execute(args, ctx).await
    }

    fn paths(r: &ToolResult) -> Vec<String> {
        let v = r.structured_content.as_ref().expect("structured");
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_owned())
            .collect()
    }

    #[tokio::test]
    async fn lists_with_depth_hidden_ignored_and_glob() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path();
        std::fs::create_dir_all(ws.join("src/deep")).unwrap();
        std::fs::write(ws.join("src/a.rs"), "a").unwrap();
        std::fs::write(ws.join("src/deep/b.rs"), "b").unwrap();
        std::fs::write(ws.join(".env"), "x").unwrap();
        std::fs::write(ws.join(".gitignore"), "build.log\n").unwrap();
        std::fs::write(ws.join("build.log"), "log").unwrap();
        symlink("/etc", ws.join("etc")).unwrap();
        let r = call(ws, false, json!({})).await;
        assert_eq!(paths(&r), ["etc", "src"]);
        let v = r.structured_content.as_ref().unwrap();
        assert_eq!(v["ignoredSkipped"], 1);
        assert!(r.joined_text().contains("l 0777"), "{}", r.joined_text());
        let r = call(ws, false, json!({"hidden": true, "ignored": true})).await;
        assert_eq!(paths(&r), [".env", ".gitignore", "build.log", "etc", "src"]);
        let r = call(ws, false, json!({"depth": 3, "glob": "**/*.rs"})).await;
        assert_eq!(paths(&r), ["src/a.rs", "src/deep/b.rs"]);
        let r = call(ws, false, json!({"path": "src", "depth": 2})).await;
        assert_eq!(paths(&r), ["a.rs", "deep", "deep/b.rs"]);
        // Links are not entered, even deep.
        let r = call(ws, false, json!({"depth": 5})).await;
        assert!(
            paths(&r).iter().all(|p| !p.starts_with("etc/")),
            "{:?}",
            paths(&r)
        );
        // Confined: the link is listed (as a link), a path outside is refused.
        let r = call(ws, true, json!({})).await;
        assert_eq!(paths(&r), ["etc", "src"]);
        for out in ["..", "/etc", "etc"] {
            let r = call(ws, true, json!({"path": out})).await;
            assert!(r.is_error, "{out}: {}", r.joined_text());
        }
        let r = call(ws, false, json!({"path": "src/a.rs"})).await;
        assert!(r.is_error && r.joined_text().contains("Not a directory"));
    }
}
