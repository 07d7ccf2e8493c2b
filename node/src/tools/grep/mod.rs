//! The Grep tool: lines that match a regex, across a directory tree.
//!
//! Built from ripgrep's own parts so it searches like `rg`: `ignore`'s parallel walker
//! (one thread per core), `grep-regex` (the `regex` crate's syntax and engine, with
//! `^`/`$` matching at line starts and ends) and `grep-searcher` (whole-buffer search
//! with line numbers, no per-line regex calls). Matching is line by line: a pattern
//! cannot match a line break.
//!
//! - Walk: `.gitignore`/`.ignore`/`.git/info/exclude`/global gitignore rules honoured
//!   (also outside git repositories) unless `noIgnore: true` is given, hidden files
//!   and directories skipped, symlinks followed — `ignore` detects loops (a directory
//!   linking to its ancestor) and skips them. `path` may also name a single file.
//! - Ignore rules can be written by anyone who can write files, so they must not hide
//!   a file silently: `ignoredSkipped` counts the files in scope (passing `include`)
//!   that the rules kept out, and the text says so when there are any. The count is
//!   the files a second, path-only walk without the rules meets minus those the search
//!   met ([`crate::tools::ignored`]); it never reads a file. A search that stops
//!   early (enough matches) is not counted ([`ignored::Count::not_counted`]): its
//!   result is cut short anyway, and the count would walk the whole tree.
//! - `include`: a glob matched against the file *name* only (`*.md`, `*.{rs,ts}`);
//!   one with a `/` is refused with a hint to use `path`.
//! - Binary files are skipped: a NUL byte in what is read (like rg, the first
//!   buffer and every later one read before the search stops) discards the file's
//!   matches. Other non-UTF-8 text is searched, and lines are returned lossily decoded.
//! - At most [`MAX_MATCHES`] matching lines are returned. The search stops as soon as
//!   one more is found (the walk is cancelled), and the result then carries
//!   `"truncated": true` instead of `count`, as the reference specifies. Which files
//!   were searched before the stop depends on the walk's timing, so a truncated
//!   result is *some* 100 matches, not the first 100 in path order.
//! - Each line is cut to [`MAX_LINE_CHARS`] characters (on a character boundary),
//!   without its line terminator.
//! - Matches are sorted by path, then line number, so an untruncated result is
//!   deterministic.
//! - Cancellation (`ctx.cancel`) stops the walk and the file being searched.
//!
//! Result (`structuredContent`): `{"pattern", "basePath", "matches": [{"path", "line",
//! "content"}], "count", "ignoredSkipped"}`, or `"truncated": true` in place of
//! `count`. Paths are absolute. `ignoredSkipped` is always present (`0` when no file
//! was left out by ignore rules, and with `noIgnore: true`); `"ignoredSkippedAtLeast":
//! true` is added when counting stopped at its cap (the number is then a lower bound,
//! possibly 0).
//!
//! When the node is confined, the search path must be inside the workspace, symlinks
//! that resolve outside it are not descended into, and every file is opened beneath
//! the workspace before it is searched ([`crate::tools::paths`]), so a directory
//! swapped for a symlink during the walk cannot bring in a file from outside.
//! Protected directories are not entered and protected files not searched, confined
//! or not.

pub mod on_host;

use crate::beneath::BeneathError;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::glob::walk_threads;
use crate::tools::ignored::{self, Count, IgnoredSkipped, Seen};
use crate::tools::output::{self, is_false};
use crate::tools::paths::{PathPolicy, WalkAccess, WalkGuard};
use globset::GlobMatcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use ignore::{DirEntry, WalkBuilder, WalkState};
use rustix::fs::OFlags;
use serde::Serialize;
use serde_json::{json, Value};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// Most matching lines returned.
pub const MAX_MATCHES: usize = 100;
/// Longest line content returned, in characters.
pub const MAX_LINE_CHARS: usize = 200;

/// The Grep tool.
#[derive(Default)]
pub struct Grep {
    /// The far host the tool works on, or `None` for this machine.
    host: super::Host,
}

impl Grep {
    /// Grep on this machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grep on the host of an SSH- or container-backed node ([`on_host`]).
    pub fn on(host: std::sync::Arc<crate::remote::RemoteHost>) -> Self {
        Grep { host: Some(host) }
    }
}

/// Grep's structured content (see the module's documentation).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrepOutput<'a> {
    pub pattern: &'a str,
    /// The directory (or file) searched.
    pub base_path: String,
    pub matches: Vec<GrepMatch>,
    /// Present (`true`) only when more lines matched than [`MAX_MATCHES`]; `count`
    /// is then left out.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// Lines in `matches`, when not `truncated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(flatten)]
    pub ignored: IgnoredSkipped,
}

/// One matching line.
#[derive(Debug, Serialize)]
pub struct GrepMatch {
    /// The file, absolute.
    pub path: String,
    /// 1-based line number.
    pub line: u64,
    /// The line, without its line ending, cut at [`MAX_LINE_CHARS`] characters.
    pub content: String,
}

#[async_trait::async_trait]
impl Tool for Grep {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Grep".to_owned(),
            description: "Search files by regular expression (Rust syntax; `(?i)` ignores \
                          case): up to 100 matching lines; ignored, hidden, binary files skipped."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "minLength": 1
                    },
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "File or directory (default: the workspace)."
                    },
                    "include": {
                        "type": "string",
                        "minLength": 1,
                        "description": "File name glob, e.g. \"*.{rs,ts}\"."
                    },
                    "noIgnore": {
                        "type": "boolean",
                        "description": "Also search what ignore rules leave out."
                    }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            capability: Capability::TextSearch.as_str().to_owned(),
            annotations: ToolAnnotations::local_read_only("Search file contents"),
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
        let request = match GrepRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("Grep: {message}")),
        };
        let policy = PathPolicy::of(&ctx);
        let cancel = ctx.cancel.clone();
        match tokio::task::spawn_blocking(move || grep(&policy, &request, &cancel)).await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("Grep failed: {e}")),
        }
    }
}

pub(crate) struct GrepRequest {
    pub(crate) pattern: String,
    pub(crate) path: Option<String>,
    pub(crate) include: Option<String>,
    /// Walk without ignore rules.
    pub(crate) no_ignore: bool,
}

impl GrepRequest {
    pub(crate) fn parse(args: &Value) -> Result<GrepRequest, String> {
        let args = Args::new(args, &["pattern", "path", "include", "noIgnore"])?;
        let optional = |name: &str| match args.str(name)? {
            Some("") => Err(format!("{name:?} must not be empty")),
            other => Ok(other.map(str::to_owned)),
        };
        Ok(GrepRequest {
            pattern: args.required_str("pattern")?.to_owned(),
            path: optional("path")?,
            include: optional("include")?,
            no_ignore: args.bool("noIgnore")?.unwrap_or(false),
        })
    }
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Hit {
    pub(crate) path: PathBuf,
    pub(crate) line: u64,
    pub(crate) content: String,
}

/// Runs one search (blocking).
fn grep(policy: &PathPolicy, request: &GrepRequest, cancel: &CancellationToken) -> ToolResult {
    let matcher = match RegexMatcherBuilder::new()
        .multi_line(true)
        .line_terminator(Some(b'\n'))
        .build(&request.pattern)
    {
        Ok(matcher) => matcher,
        Err(e) => return ToolResult::error(format!("Invalid regex {:?}: {e}", request.pattern)),
    };
    let include = match request.include.as_deref().map(include_matcher).transpose() {
        Ok(include) => include,
        Err(message) => return ToolResult::error(message),
    };
    let base = match policy.resolve(request.path.as_deref().unwrap_or(".")) {
        Ok(base) => base,
        Err(e) => return e.into_result(),
    };
    let access = match policy.walk_access() {
        Ok(access) => access,
        Err(e) => return e.into_result(),
    };
    match access.base(&base) {
        Ok(Some(_)) => {}
        // A protected file or directory: nothing in it is searched.
        Ok(None) => return render(&request.pattern, &base, Vec::new(), false, Count::default()),
        Err(BeneathError::Escapes) => return policy.escaped(&base).into_result(),
        Err(BeneathError::Io(e)) => {
            return ToolResult::error(match e.kind() {
                io::ErrorKind::NotFound => format!("Path not found: {}", base.display()),
                io::ErrorKind::PermissionDenied => {
                    format!("Permission denied: {}", base.display())
                }
                _ => format!("Cannot search {}: {e}", base.display()),
            })
        }
    }
    let guard = match policy.walk_guard() {
        Ok(guard) => guard,
        Err(e) => return e.into_result(),
    };
    let search = Search {
        matcher,
        include,
        guard,
        access,
        cancel: cancel.clone(),
        count_scope: !request.no_ignore,
        found: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        in_scope: AtomicUsize::new(0),
        hits: Mutex::new(Vec::new()),
    };
    search.run(&base);
    let ignored = search.ignored(&base);
    if cancel.is_cancelled() {
        return ToolResult::error("Grep was cancelled");
    }
    let mut hits = search.hits.into_inner().unwrap_or_else(|e| e.into_inner());
    hits.sort_unstable();
    let truncated = hits.len() > MAX_MATCHES;
    hits.truncate(MAX_MATCHES);
    render(&request.pattern, &base, hits, truncated, ignored)
}

/// The `include` glob, matched against file names.
pub(crate) fn include_matcher(include: &str) -> Result<GlobMatcher, String> {
    if include.contains('/') {
        return Err(format!(
            "include {include:?} contains '/': it is matched against file names only; \
             put the directory in `path` (e.g. path \"src\", include \"*.rs\")"
        ));
    }
    globset::GlobBuilder::new(include)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("Invalid include glob {include:?}: {e}"))
}

pub(crate) fn render(
    pattern: &str,
    base: &Path,
    hits: Vec<Hit>,
    truncated: bool,
    ignored: Count,
) -> ToolResult {
    let base = base.display().to_string();
    let mut text = String::new();
    for hit in &hits {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "{}:{}: {}",
            hit.path.display(),
            hit.line,
            hit.content
        ));
    }
    if hits.is_empty() {
        text = format!("No matches for {pattern:?} in {base}");
    } else if truncated {
        text.push_str(&format!(
            "\n\n[More than {MAX_MATCHES} matching lines; showing {MAX_MATCHES}. Narrow the \
             pattern, path or include to see the rest.]"
        ));
    }
    let count = hits.len();
    let matches = hits
        .into_iter()
        .map(|h| GrepMatch {
            path: h.path.to_string_lossy().into_owned(),
            line: h.line,
            content: h.content,
        })
        .collect();
    let ignored = ignored.report(&mut text, "searched");
    output::with_text(
        text,
        &GrepOutput {
            pattern,
            base_path: base,
            matches,
            truncated,
            count: (!truncated).then_some(count),
            ignored,
        },
    )
}

/// State shared by the walker threads of one search.
struct Search {
    matcher: RegexMatcher,
    include: Option<GlobMatcher>,
    guard: Option<WalkGuard>,
    access: WalkAccess,
    cancel: CancellationToken,
    /// Whether the files in scope are counted (ignore rules apply).
    count_scope: bool,
    /// Matching lines found so far (in files fully searched).
    found: AtomicUsize,
    /// Set once more than [`MAX_MATCHES`] are found.
    stop: AtomicBool,
    /// Files in scope the walk has met ([`Search::scope`]).
    in_scope: AtomicUsize,
    hits: Mutex<Vec<Hit>>,
}

impl Search {
    /// The walk of `base`, applying ignore rules or not.
    fn walker(&self, base: &Path, apply_rules: bool) -> WalkBuilder {
        let access = self.access.clone();
        let mut builder = WalkBuilder::new(base);
        builder
            .require_git(false)
            .follow_links(true)
            .threads(walk_threads())
            // Protected directories are not entered (checked by device and inode).
            .filter_entry(move |e| {
                !(e.file_type().is_some_and(|t| t.is_dir())
                    && std::fs::metadata(e.path())
                        .is_ok_and(|m| access.skips_dir(e.path(), &m, e.path_is_symlink())))
            });
        ignored::rules(&mut builder, apply_rules);
        builder
    }

    fn run(&self, base: &Path) {
        self.walker(base, self.count_scope)
            .build_parallel()
            .run(|| {
                let mut searcher = SearcherBuilder::new()
                    .binary_detection(BinaryDetection::quit(b'\0'))
                    .line_number(true)
                    .build();
                Box::new(move |entry| match entry {
                    Ok(entry) => self.visit(&entry, &mut searcher),
                    Err(_) => self.state(),
                })
            });
    }

    /// After [`Search::run`]: how many files in scope ignore rules kept out of it
    /// (none without rules). Counted by a second walk without the rules, by path and
    /// type only, minus the files in scope the search met. Not counted when the search
    /// stopped early: its result is cut short anyway, and the count would cost a walk
    /// of the whole tree where the search took a few files.
    fn ignored(&self, base: &Path) -> Count {
        if !self.count_scope || self.cancel.is_cancelled() {
            return Count::default();
        }
        if self.stop.load(Ordering::Relaxed) {
            return Count::not_counted();
        }
        let mut walker = self.walker(base, false);
        let all = ignored::count_without_rules(&mut walker, &self.cancel, |e| self.scope(e));
        Count {
            n: all.n.saturating_sub(self.in_scope.load(Ordering::Relaxed)),
            cut: all.cut,
            skipped: false,
        }
    }

    /// Whether the walk goes on: not once the call is cancelled or enough matches are
    /// found.
    fn state(&self) -> WalkState {
        if self.cancel.is_cancelled() || self.stop.load(Ordering::Relaxed) {
            return WalkState::Quit;
        }
        WalkState::Continue
    }

    /// What `entry` is to this search, by path and type only: a file it searches
    /// (`Candidate`), something else, or a symlink leading out of the workspace of a
    /// confined node (`Prune`: not descended into). Also the predicate of the count
    /// without ignore rules, so both walks judge alike.
    fn scope(&self, entry: &DirEntry) -> Seen {
        let Some(file_type) = entry.file_type() else {
            return Seen::Other;
        };
        if entry.path_is_symlink() && self.guard.as_ref().is_some_and(|g| !g.allows(entry.path())) {
            return Seen::Prune;
        }
        if !file_type.is_file() {
            return Seen::Other;
        }
        match &self.include {
            Some(include) if !include.is_match(Path::new(entry.file_name())) => Seen::Other,
            _ => Seen::Candidate,
        }
    }

    fn visit(&self, entry: &DirEntry, searcher: &mut Searcher) -> WalkState {
        if let WalkState::Quit = self.state() {
            return WalkState::Quit;
        }
        match self.scope(entry) {
            Seen::Candidate => {}
            Seen::Other => return WalkState::Continue,
            Seen::Prune => return WalkState::Skip,
        }
        self.in_scope.fetch_add(1, Ordering::Relaxed);
        let mut sink = FileSink {
            search: self,
            lines: Vec::new(),
            binary: false,
        };
        // Opened once, beneath the workspace when confined and never a protected file;
        // unreadable files are skipped, as rg does (it only warns).
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let Some(fd) = self
            .access
            .open(entry.path(), flags, entry.path_is_symlink())
        else {
            return self.state();
        };
        let file = std::fs::File::from(fd);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return self.state();
        }
        if searcher
            .search_file(&self.matcher, &file, &mut sink)
            .is_err()
            || sink.binary
            || sink.lines.is_empty()
        {
            return self.state();
        }
        let n = sink.lines.len();
        let path = entry.path();
        if let Ok(mut hits) = self.hits.lock() {
            hits.extend(sink.lines.into_iter().map(|(line, content)| Hit {
                path: path.to_path_buf(),
                line,
                content,
            }));
        }
        if self.found.fetch_add(n, Ordering::Relaxed) + n > MAX_MATCHES {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.state()
    }
}

/// Collects one file's matching lines.
struct FileSink<'a> {
    search: &'a Search,
    lines: Vec<(u64, String)>,
    binary: bool,
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.lines
            .push((mat.line_number().unwrap_or(0), cut_line(mat.bytes())));
        // Stop this file once the search as a whole has more than enough.
        let total = self.search.found.load(Ordering::Relaxed) + self.lines.len();
        Ok(total <= MAX_MATCHES
            && !self.search.stop.load(Ordering::Relaxed)
            && !self.search.cancel.is_cancelled())
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A matched line without its terminator, decoded lossily and cut to
/// [`MAX_LINE_CHARS`] characters.
pub(crate) fn cut_line(bytes: &[u8]) -> String {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // Only the head can be returned: decode a bounded prefix (4 bytes per char at most).
    let head = &line[..line.len().min(MAX_LINE_CHARS * 4)];
    String::from_utf8_lossy(head)
        .chars()
        .take(MAX_LINE_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::paths::PathPolicy;

    fn search(ws: &Path) -> Search {
        let policy = PathPolicy::new(ws, false);
        Search {
            matcher: RegexMatcherBuilder::new().build("match").unwrap(),
            include: None,
            guard: None,
            access: policy.walk_access().unwrap(),
            cancel: CancellationToken::new(),
            count_scope: true,
            found: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            in_scope: AtomicUsize::new(0),
            hits: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn a_search_cut_short_does_not_count() {
        let ws = tempfile::tempdir().unwrap();
        for i in 0..40 {
            let dir = ws.path().join(format!("d{i}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("a.txt"), "match\n".repeat(5)).unwrap();
            std::fs::write(dir.join("b.txt"), "none\n").unwrap();
        }
        std::fs::write(ws.path().join("d0/.ignore"), "b.txt\n").unwrap();
        let s = search(ws.path());
        s.run(ws.path());
        assert!(s.stop.load(Ordering::Relaxed));
        assert_eq!(s.ignored(ws.path()), Count::not_counted());
        // A search that ends by itself counts.
        std::fs::write(ws.path().join("d0/.ignore"), "b.txt\n").unwrap();
        for i in 1..40 {
            std::fs::remove_dir_all(ws.path().join(format!("d{i}"))).unwrap();
        }
        let s = search(ws.path());
        s.run(ws.path());
        assert!(!s.stop.load(Ordering::Relaxed));
        assert_eq!(
            s.ignored(ws.path()),
            Count {
                n: 1,
                ..Count::default()
            }
        );
    }

    #[test]
    fn structured_output() {
        let hits = vec![
            Hit {
                path: PathBuf::from("/ws/a.rs"),
                line: 3,
                content: "let needle = 1;".to_owned(),
            },
            Hit {
                path: PathBuf::from("/ws/b.rs"),
                line: 10,
                content: "needle()".to_owned(),
            },
        ];
        let r = render("needle", Path::new("/ws"), hits, false, Count::default());
        assert!(!r.is_error);
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({
                "pattern": "needle",
                "basePath": "/ws",
                "matches": [
                    {"path": "/ws/a.rs", "line": 3, "content": "let needle = 1;"},
                    {"path": "/ws/b.rs", "line": 10, "content": "needle()"},
                ],
                "count": 2,
                "ignoredSkipped": 0,
            }))
        );
        assert_eq!(
            r.joined_text(),
            "/ws/a.rs:3: let needle = 1;\n/ws/b.rs:10: needle()"
        );
        // Cut short: `truncated` instead of `count`.
        let hits = vec![Hit {
            path: PathBuf::from("/ws/a.rs"),
            line: 1,
            content: "x".to_owned(),
        }];
        let r = render("x", Path::new("/ws"), hits, true, Count::not_counted());
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({
                "pattern": "x",
                "basePath": "/ws",
                "matches": [{"path": "/ws/a.rs", "line": 1, "content": "x"}],
                "truncated": true,
                "ignoredSkipped": 0,
                "ignoredSkippedAtLeast": true,
            }))
        );
        let r = render(
            "none",
            Path::new("/ws"),
            Vec::new(),
            false,
            Count {
                n: 1,
                cut: false,
                skipped: false,
            },
        );
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({
                "pattern": "none",
                "basePath": "/ws",
                "matches": [],
                "count": 0,
                "ignoredSkipped": 1,
            }))
        );
    }

    #[test]
    fn lines_are_cut_on_characters() {
        assert_eq!(cut_line(b"abc\r\n"), "abc");
        assert_eq!(cut_line(b"abc"), "abc");
        let long = "é".repeat(300);
        let cut = cut_line(long.as_bytes());
        assert_eq!(cut.chars().count(), MAX_LINE_CHARS);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(cut_line(b"\xffok\n"), "\u{fffd}ok");
    }

    #[test]
    fn include_globs() {
        let m = include_matcher("*.{rs,ts}").unwrap();
        assert!(m.is_match("a.rs") && m.is_match("b.ts") && !m.is_match("c.js"));
        assert!(include_matcher("src/*.rs")
            .unwrap_err()
            .contains("file names only"));
        assert!(include_matcher("*.{rs")
            .unwrap_err()
            .starts_with("Invalid include glob"));
    }
}
