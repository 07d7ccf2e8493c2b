//! The Glob tool: files whose path matches a glob, newest first.
//!
//! Patterns are `globset` globs matched against the path relative to the search
//! directory, with `literal_separator` on: `*` and `?` stay within one path component,
//! `**` crosses any number of them (`**/*.rs` also matches `main.rs` at the top),
//! `{a,b}` alternates and `[...]` is a class. A leading `./` is dropped; an absolute
//! pattern (`/etc/*.conf`) searches from its literal directory prefix instead of
//! `path`.
//!
//! The walk is `ignore`'s parallel walker, the one ripgrep and fd use: `.gitignore`,
//! `.ignore`, `.git/info/exclude` and global gitignore rules are honoured (also outside
//! git repositories) unless `noIgnore: true` is given, and hidden files and directories
//! (`.name`) are skipped like rg and fd do — unless the pattern itself names one (a
//! component starting with `.`, e.g. `.github/**/*.yml` or `**/.env*`), in which case
//! hidden entries are included except `.git` directories (included only when the
//! pattern mentions `.git`). Symlinks are listed but not followed. Only
//! non-directories are returned.
//!
//! Pruning: the pattern's leading literal components (`src/` in `src/**/*.rs`) become
//! the walk's root, and a pattern without `**` bounds the walk's depth.
//!
//! Results are sorted by modification time, newest first (ties by path), and capped
//! at [`MAX_MATCHES`]; when capped the result adds `"truncated": true` and `count`
//! is the number returned.
//!
//! Ignore rules can be written by anyone who can write files, so they must not hide a
//! file silently: the result counts the files matching the pattern that the rules
//! left out (`ignoredSkipped`: the files a second walk without the rules would list
//! that the first did not; [`crate::tools::ignored`]) and says so in its text when
//! there are any. That walk reads no file, and checks only the matching names the
//! first walk did not list the way the first walk checks its matches (so protected
//! files and links leading out of the workspace are not counted).
//!
//! Result (`structuredContent`): `{"pattern", "basePath", "matches": [absolute paths],
//! "count", "ignoredSkipped"}` plus `"truncated": true` when capped and
//! `"ignoredSkippedAtLeast": true` when the count of ignored files stopped at its cap
//! (it is then a lower bound) or was not made because the result was capped (the text
//! says which). `ignoredSkipped` is always present: `0` when no file was left out by
//! ignore rules, and with `noIgnore: true`.
//!
//! When the node is confined, the search directory must be inside the workspace, and
//! every match is opened beneath it before it is listed ([`crate::tools::paths`]):
//! symlinks that resolve outside it are left out, even when swapped in during the walk.
//! Protected directories (the node's and the gateway's data) are not entered and
//! protected files are not listed, confined or not.

pub mod on_host;

use crate::beneath::BeneathError;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::ignored::{self, Count, IgnoredSkipped, Seen};
use crate::tools::output::{self, is_false};
use crate::tools::paths::{PathPolicy, WalkAccess};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use ignore::{DirEntry, WalkBuilder, WalkState};
use rustix::fs::FileType;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio_util::sync::CancellationToken;

/// Most paths returned by one call.
pub const MAX_MATCHES: usize = 1000;

/// The Glob tool.
#[derive(Default)]
pub struct Glob {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl Glob {
    /// Glob on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Glob on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        Glob { host: Some(host) }
    }
}

/// Glob's structured content (see the module's documentation).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GlobOutput<'a> {
    pub pattern: &'a str,
    /// The directory searched.
    pub base_path: String,
    /// Absolute paths, newest first.
    pub matches: Vec<String>,
    /// Paths in `matches`.
    pub count: usize,
    /// Present (`true`) only when more files matched than `matches` holds.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
    #[serde(flatten)]
    pub ignored: IgnoredSkipped,
}

#[async_trait::async_trait]
impl Tool for Glob {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Glob".to_owned(),
            description: "Find files by glob (`**/*.{rs,toml}`), newest first, at most \
                          1000; .gitignore rules and hidden files respected unless named."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Relative to `path`."
                    },
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Directory to search (default: the workspace)."
                    },
                    "noIgnore": {
                        "type": "boolean",
                        "description": "Include what ignore rules leave out."
                    }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            capability: Capability::FilesystemList.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("Find files"),
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
        let request = match GlobRequest::parse(&args) {
            Ok(parsed) => parsed,
            Err(message) => return ToolResult::error(format!("Glob: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        let cancel = ctx.cancel.clone();
        match tokio::task::spawn_blocking(move || glob(&policy, &request, &cancel)).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Glob failed: {e}")),
        }
    }
}

pub(crate) struct GlobRequest {
    pub(crate) pattern: String,
    pub(crate) path: Option<String>,
    /// Walk without ignore rules.
    pub(crate) no_ignore: bool,
}

impl GlobRequest {
    pub(crate) fn parse(args: &Value) -> Result<GlobRequest, String> {
        let args = Args::new(args, &["pattern", "path", "noIgnore"])?;
        let pattern = args.required_str("pattern")?.to_owned();
        let path = match args.str("path")? {
            Some("") => return Err("\"path\" must not be empty".to_owned()),
            other => other.map(str::to_owned),
        };
        Ok(GlobRequest {
            pattern,
            path,
            no_ignore: args.bool("noIgnore")?.unwrap_or(false),
        })
    }
}

/// A pattern split into the directory to walk and the glob to match below it.
#[derive(Debug, PartialEq)]
pub(crate) struct Plan {
    /// Leading literal components, joined (`""` when the pattern starts with a glob).
    pub(crate) prefix: String,
    /// The rest, matched against paths relative to `prefix`.
    pub(crate) rest: String,
    /// Whether the pattern names hidden entries.
    pub(crate) hidden: bool,
    /// Whether the pattern mentions `.git`.
    pub(crate) git_dir: bool,
    /// Most components below the walk root, when the pattern has no `**`.
    pub(crate) max_depth: Option<usize>,
}

fn has_meta(component: &str) -> bool {
    component.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// Splits a relative pattern (without a leading `/`).
pub(crate) fn plan(pattern: &str) -> Plan {
    let mut components: Vec<&str> = pattern
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    // The last component is what is matched: it never becomes part of the root.
    let literal = components
        .iter()
        .take(components.len().saturating_sub(1))
        .take_while(|c| !has_meta(c))
        .count();
    let rest: Vec<&str> = components.split_off(literal);
    let names_hidden =
        |c: &&str| (c.starts_with('.') && *c != "..") || c.contains("{.") || c.contains(",.");
    Plan {
        prefix: components.join("/"),
        hidden: rest.iter().any(names_hidden),
        git_dir: pattern.contains(".git"),
        max_depth: (!rest.iter().any(|c| c.contains("**"))).then_some(rest.len()),
        rest: rest.join("/"),
    }
}

/// Runs one search (blocking).
fn glob(policy: &PathPolicy, request: &GlobRequest, cancel: &CancellationToken) -> ToolResult {
    let pattern = request.pattern.as_str();
    // An absolute pattern carries its own directory and ignores `path`.
    let absolute = pattern.starts_with('/');
    let plan = plan(pattern.trim_start_matches('/'));
    let matcher = match globset::GlobBuilder::new(&plan.rest)
        .literal_separator(true)
        .build()
    {
        Ok(glob) => glob.compile_matcher(),
        Err(e) => return ToolResult::error(format!("Invalid glob pattern {pattern:?}: {e}")),
    };
    let base_arg = if absolute {
        format!("/{}", plan.prefix)
    } else {
        request.path.as_deref().unwrap_or(".").to_owned()
    };
    let base = match policy.resolve(&base_arg) {
        Ok(base) => base,
        Err(e) => return e.into_result(),
    };
    let access = match policy.walk_access() {
        Ok(access) => access,
        Err(e) => return e.into_result(),
    };
    match access.base(&base) {
        Ok(Some(st)) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
        // A protected directory holds nothing a tool may list.
        Ok(None) => return render(pattern, &base, Vec::new(), 0, false, Count::default()),
        Ok(Some(_)) => {
            return ToolResult::error(format!(
                "Not a directory: {} (Glob searches directories)",
                base.display()
            ))
        }
        Err(BeneathError::Escapes) => return policy.escaped(&base).into_result(),
        Err(BeneathError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolResult::error(format!("Directory not found: {}", base.display()))
        }
        Err(BeneathError::Io(e)) => {
            return ToolResult::error(format!("Cannot search {}: {e}", base.display()))
        }
    }
    let root = if absolute || plan.prefix.is_empty() {
        base.clone()
    } else {
        match policy.resolve(base.join(&plan.prefix)) {
            Ok(root) => root,
            Err(e) => return e.into_result(),
        }
    };
    let (mut found, ignored) = match access.base(&root) {
        Ok(Some(st)) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            let walker = walker(&root, &plan, &access, !request.no_ignore);
            let found = walk(walker, &root, &matcher, &access, cancel);
            // A result cut short is not counted: the agent has to narrow the pattern
            // anyway, and the count would walk the whole tree again.
            let ignored = match request.no_ignore || cancel.is_cancelled() {
                true => Count::default(),
                false if found.len() > MAX_MATCHES => Count::not_counted(),
                false => count_ignored(&root, &plan, &matcher, &access, &found, cancel),
            };
            (found, ignored)
        }
        _ => (Vec::new(), Count::default()),
    };
    if cancel.is_cancelled() {
        return ToolResult::error("Glob was cancelled");
    }
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total = found.len();
    let truncated = total > MAX_MATCHES;
    found.truncate(MAX_MATCHES);
    let matches: Vec<String> = found
        .into_iter()
        .map(|(p, _)| p.to_string_lossy().into_owned())
        .collect();
    render(pattern, &base, matches, total, truncated, ignored)
}

pub(crate) fn render(
    pattern: &str,
    base: &Path,
    matches: Vec<String>,
    total: usize,
    truncated: bool,
    ignored: Count,
) -> ToolResult {
    let base = base.display().to_string();
    let count = matches.len();
    let mut text = if matches.is_empty() {
        format!("No files match {pattern:?} in {base}")
    } else {
        matches.join("\n")
    };
    if truncated {
        text.push_str(&format!(
            "\n\n[{total} files match; showing the newest {count}. Narrow the pattern or path to see the rest.]"
        ));
    }
    let ignored = ignored.report(&mut text, "listed");
    output::with_text(
        text,
        &GlobOutput {
            pattern,
            base_path: base,
            matches,
            count,
            truncated,
            ignored,
        },
    )
}

/// Walker threads: like rg, one per core, at most 12.
pub(crate) fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(12))
}

/// Entries collected by one walker thread, handed over when the thread is done.
struct Collector<T> {
    local: Vec<T>,
    shared: Arc<Mutex<Vec<T>>>,
}

impl<T> Drop for Collector<T> {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.append(&mut self.local);
        }
    }
}

/// The walk of `root` for `plan`, applying ignore rules or not.
fn walker(root: &Path, plan: &Plan, access: &WalkAccess, apply_rules: bool) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(!plan.hidden)
        .require_git(false)
        .follow_links(false)
        .max_depth(plan.max_depth)
        .threads(walk_threads());
    ignored::rules(&mut builder, apply_rules);
    let skip_git = plan.hidden && !plan.git_dir;
    let filter_access = access.clone();
    builder.filter_entry(move |e| {
        if !e.file_type().is_some_and(|t| t.is_dir()) {
            return true;
        }
        if skip_git && e.file_name() == ".git" {
            return false;
        }
        // Protected directories are not entered (checked by device and inode).
        !e.metadata()
            .is_ok_and(|m| filter_access.skips_dir(e.path(), &m, false))
    });
    builder
}

/// Walks with `builder` and returns the matching files with their modification times.
fn walk(
    builder: WalkBuilder,
    root: &Path,
    matcher: &globset::GlobMatcher,
    access: &WalkAccess,
    cancel: &CancellationToken,
) -> Vec<(PathBuf, SystemTime)> {
    let shared = Arc::new(Mutex::new(Vec::new()));
    builder.build_parallel().run(|| {
        let mut collector = Collector {
            local: Vec::new(),
            shared: Arc::clone(&shared),
        };
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            if let Ok(entry) = entry {
                if let Some(hit) = visit(&entry, root, matcher, access) {
                    collector.local.push(hit);
                }
            }
            WalkState::Continue
        })
    });
    let mut found = shared
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    found.shrink_to_fit();
    found
}

/// How many files matching the pattern the rules kept out of `found`: a walk of
/// `root` like [`walk`]'s without ignore rules ([`ignored::count_without_rules`]),
/// counting the files it would list that are not in `found`. Files listed are only
/// looked up by path; the others get [`visit`]'s second look, so a protected file or
/// one leading out of the workspace is not counted.
fn count_ignored(
    root: &Path,
    plan: &Plan,
    matcher: &globset::GlobMatcher,
    access: &WalkAccess,
    found: &[(PathBuf, SystemTime)],
    cancel: &CancellationToken,
) -> Count {
    let listed: HashSet<&Path> = found.iter().map(|(p, _)| p.as_path()).collect();
    let mut builder = walker(root, plan, access, false);
    ignored::count_without_rules(&mut builder, cancel, |entry| {
        // Only a matching name that was not listed costs a look (`visit`'s second one).
        match matches(entry, root, matcher)
            && !listed.contains(entry.path())
            && modified(entry, access).is_some()
        {
            true => Seen::Candidate,
            false => Seen::Other,
        }
    })
}

/// Whether `entry` is a non-directory (by its directory entry) the pattern matches.
fn matches(entry: &DirEntry, root: &Path, matcher: &globset::GlobMatcher) -> bool {
    if entry.file_type().is_none_or(|t| t.is_dir()) {
        return false;
    }
    entry
        .path()
        .strip_prefix(root)
        .is_ok_and(|relative| !relative.as_os_str().is_empty() && matcher.is_match(relative))
}

/// The entry and its modification time, if it is a file the pattern matches. It is
/// looked at again ([`WalkAccess::listing`]: when confined, opened `O_PATH` beneath the
/// workspace) and left out unless it is, at that moment, a non-directory that is not
/// protected: a name listed while a directory was swapped for a symlink pointing
/// out, or a symlink leading out of the workspace, does not come back.
fn visit(
    entry: &DirEntry,
    root: &Path,
    matcher: &globset::GlobMatcher,
    access: &WalkAccess,
) -> Option<(PathBuf, SystemTime)> {
    if !matches(entry, root, matcher) {
        return None;
    }
    Some((entry.path().to_path_buf(), modified(entry, access)?))
}

/// The entry's modification time, if it is listed ([`visit`]'s second look).
fn modified(entry: &DirEntry, access: &WalkAccess) -> Option<SystemTime> {
    let file_type = entry.file_type()?;
    let st = access.listing(entry.path(), file_type.is_symlink())?;
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        return None;
    }
    Some(
        std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(st.st_mtime).unwrap_or(0),
                u32::try_from(st.st_mtime_nsec).unwrap_or(0),
            ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_output() {
        let r = render(
            "**/*.rs",
            Path::new("/ws"),
            vec!["/ws/b.rs".to_owned(), "/ws/a.rs".to_owned()],
            2,
            false,
            Count::default(),
        );
        assert!(!r.is_error);
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({
                "pattern": "**/*.rs",
                "basePath": "/ws",
                "matches": ["/ws/b.rs", "/ws/a.rs"],
                "count": 2,
                "ignoredSkipped": 0,
            }))
        );
        assert_eq!(r.joined_text(), "/ws/b.rs\n/ws/a.rs");
        let r = render(
            "*",
            Path::new("/ws"),
            vec!["/ws/x".to_owned()],
            5,
            true,
            Count::not_counted(),
        );
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({
                "pattern": "*",
                "basePath": "/ws",
                "matches": ["/ws/x"],
                "count": 1,
                "truncated": true,
                "ignoredSkipped": 0,
                "ignoredSkippedAtLeast": true,
            }))
        );
        let r = render(
            "*.txt",
            Path::new("/ws"),
            Vec::new(),
            0,
            false,
            Count {
                n: 3,
                cut: true,
                skipped: false,
            },
        );
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({
                "pattern": "*.txt",
                "basePath": "/ws",
                "matches": [],
                "count": 0,
                "ignoredSkipped": 3,
                "ignoredSkippedAtLeast": true,
            }))
        );
        assert!(r
            .joined_text()
            .starts_with("No files match \"*.txt\" in /ws\n\n[At least 3 files"));
    }

    #[test]
    fn plans() {
        let p = plan("src/**/*.rs");
        assert_eq!((p.prefix.as_str(), p.rest.as_str()), ("src", "**/*.rs"));
        assert_eq!(p.max_depth, None);
        assert!(!p.hidden);
        let p = plan("./a/b/*.txt");
        assert_eq!((p.prefix.as_str(), p.rest.as_str()), ("a/b", "*.txt"));
        assert_eq!(p.max_depth, Some(1));
        let p = plan("*/x/*.md");
        assert_eq!((p.prefix.as_str(), p.rest.as_str()), ("", "*/x/*.md"));
        assert_eq!(p.max_depth, Some(3));
        let p = plan("README.md");
        assert_eq!((p.prefix.as_str(), p.rest.as_str()), ("", "README.md"));
        let p = plan("docs/README.md");
        assert_eq!((p.prefix.as_str(), p.rest.as_str()), ("docs", "README.md"));
        assert!(!plan(".github/**/*.yml").hidden);
        assert!(plan("**/.env*").hidden);
        assert!(plan("*.{rs,.gitignore}").hidden);
        assert!(plan("**/.git/config").git_dir);
        let p = plan("../other/*.rs");
        assert_eq!((p.prefix.as_str(), p.rest.as_str()), ("../other", "*.rs"));
    }
}
