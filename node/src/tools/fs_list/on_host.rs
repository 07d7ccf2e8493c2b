//! fs_list on the far host of an SSH- or container-backed node, in the local tool's
//! shape; also the entry record fs_stat there shares ([`crate::tools::fs_stat::on_host`]).
//!
//! Both tools read the host's entries with GNU `find -printf` (one record format for a
//! single entry and for a walk: kind, size, modification time with nanoseconds,
//! permission bits, owner ids and names, relative path, link target); a host whose
//! `find` has no `-printf` (busybox) gets a clear error naming the package to add.
//! Paths go through the remote path check (`gsv_check`): fs_stat checks the entry's
//! directory and describes the entry itself, so a link pointing out of a confined
//! workspace is shown as a link and never followed, as on a local node; the node's
//! own directory on the host is never described or listed.
//!
//! fs_list's walk does not follow links, prunes hidden entries unless asked, and
//! never enters the node's directory. The ignore rules are applied on the node
//! (`Rules`), from the host's `.ignore` and `.gitignore` files (in the listed tree
//! and its parents; `.gitignore` only up to the repository's top), the repository's
//! `.git/info/exclude` and the host user's `~/.config/git/ignore`, with the local
//! walker's precedence: `.ignore` over `.gitignore` over the exclude file over the
//! global file, a deeper directory's file over a parent's.

use crate::remote::channel::Reply;
use crate::remote::quote::quote;
use crate::remote::{Lane, RemoteHost};
use crate::tool::ToolContext;
use crate::tools::file_info::{kind_of_letter, rfc3339, FileInfo, Kind};
use crate::tools::fs_list::{render, ListRequest, ListedEntry, MAX_ENTRIES};
use crate::tools::fs_stat::Owner;
use crate::tools::ignored::Count;
use crate::tools::paths::on_host::check_line;
use crate::tools::paths::AccessError;
use gsv_protocol::ToolResult;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The record `find -printf` writes for each entry: a header, the path relative to
/// the start, the link target, each ended by NUL.
pub(crate) const RECORD: &str = r"'%y %s %T@ %m %U %G %u %g\0%P\0%l\0'";
/// Most bytes of records read back from one walk (far more than [`MAX_ENTRIES`]
/// need; a longer walk is cut and said so).
const MAX_LISTING: usize = 16 * 1024 * 1024;
/// Most ignore files read for one listing, and most bytes of each.
const MAX_RULE_FILES: usize = 512;
const MAX_RULE_BYTES: usize = 256 * 1024;

/// The script lines that stop with `nofind` when the host's find has no `-printf`.
pub(crate) const NEED_GNU_FIND: &str =
    "  find / -maxdepth 0 -printf '' >/dev/null 2>&1 || { gsv_text error nofind; return 0; }\n";

/// The far-host body of [`super::FsList`] (made with `FsList::on`): fs_list on the host of an
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
        let request = match ListRequest::parse(&args) {
            Ok(r) => r,
            Err(message) => return ToolResult::error(format!("fs_list: {message}")),
        };
        let path = ctx.resolve_path(&request.path);
        let shown = path.display().to_string();
        let Some(check) = check_line(&ctx, &path) else {
            return ToolResult::error(format!("fs_list: {shown} cannot be passed to the host"));
        };
        let depth = request.depth;
        let hidden = if request.hidden {
            ""
        } else {
            r"\( -name '.*' -prune \) -o"
        };
        let rules = if request.ignored {
            String::new()
        } else {
            format!(
                r#"  find "$gsv_root" -maxdepth {depth} \( -path "$gsv_dr" -prune \) -o -type f \( -name .gitignore -o -name .ignore \) -printf '%P\0' >"$gsv_o" 2>/dev/null
  gsv_head rules "$gsv_o" 1048576
"#
            )
        };
        let script = format!(
            r#"gsv_main() {{
  {check}
  if [ ! -e "$gsv_p" ]; then gsv_text error notfound; return 0; fi
  if [ ! -d "$gsv_p" ]; then gsv_text error notdir; return 0; fi
{NEED_GNU_FIND}  gsv_real "$gsv_p" || {{ gsv_text error unresolvable; return 0; }}
  gsv_root=$gsv_r
  [ -n "$gsv_dr" ] || {{ gsv_real "$GSV_D" && gsv_dr=$gsv_r; }}
  gsv_text path "$gsv_p"; gsv_text real "$gsv_root"
  gsv_o="$GSV_D/l.$$"
  find "$gsv_root" -mindepth 1 -maxdepth {depth} \( -path "$gsv_dr" -prune \) -o {hidden} -printf {RECORD} >"$gsv_o" 2>/dev/null
  gsv_size "$gsv_o"; gsv_text total "$gsv_n"
  gsv_head list "$gsv_o" {MAX_LISTING}
{rules}  rm -f "$gsv_o"
}}
gsv_main"#
        );
        let limit = MAX_LISTING + 2 * 1024 * 1024;
        let reply = match self.host.run(Lane::Work, ctx.owner(), &script, limit).await {
            Ok(r) => r,
            Err(e) => return ToolResult::error(format!("fs_list: {e}")),
        };
        if let Some(refused) = refusal(&reply, &shown, "fs_list") {
            return refused;
        }
        let root = reply.text("path").unwrap_or(shown);
        let real = PathBuf::from(reply.text("real").unwrap_or_else(|| root.clone()));
        let listing = reply.get("list").unwrap_or_default();
        let cut_short = reply
            .text("total")
            .and_then(|t| t.parse::<u64>().ok())
            .is_some_and(|t| t > listing.len() as u64);
        let mut records = Record::parse_all(listing);
        records.sort_by(|a, b| a.path.cmp(&b.path));
        let rules = if request.ignored {
            None
        } else {
            let in_tree = reply.get("rules").unwrap_or_default();
            match Rules::fetch(&self.host, &ctx, &real, in_tree).await {
                Ok(rules) => Some(rules),
                Err(e) => return ToolResult::error(format!("fs_list: {e}")),
            }
        };
        let mut found = Vec::new();
        let mut skipped = 0usize;
        let mut ignored_dirs: HashSet<&str> = HashSet::new();
        for r in &records {
            let inside_ignored = Path::new(&r.path)
                .ancestors()
                .skip(1)
                .any(|a| ignored_dirs.contains(a.to_str().unwrap_or_default()));
            let is_dir = r.info.kind == Kind::Dir;
            let ignored = inside_ignored
                || rules
                    .as_ref()
                    .is_some_and(|rules| rules.ignores(&real.join(&r.path), is_dir));
            if ignored && is_dir {
                ignored_dirs.insert(&r.path);
            }
            if !request.wants(Path::new(&r.path)) {
                continue;
            }
            if ignored {
                skipped += 1;
            } else {
                found.push(ListedEntry {
                    path: r.path.clone(),
                    info: r.info.clone(),
                });
            }
        }
        let truncated = cut_short || found.len() > MAX_ENTRIES;
        found.truncate(MAX_ENTRIES);
        let count = match (rules.is_some(), truncated) {
            (false, _) => Count::default(),
            (true, true) => Count::not_counted(),
            (true, false) => Count {
                n: skipped,
                ..Count::default()
            },
        };
        render(Path::new(&root), found, truncated, count)
    }
}

/// One entry as `find -printf` [`RECORD`] described it.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) path: String,
    pub(crate) info: FileInfo,
    pub(crate) owner: Owner,
}

impl Record {
    /// Every whole record in `bytes` (a cut last one is dropped).
    pub(crate) fn parse_all(bytes: &[u8]) -> Vec<Record> {
        let fields: Vec<&[u8]> = bytes.split(|b| *b == 0).collect();
        fields
            .chunks_exact(3)
            .filter_map(|f| Record::parse(f[0], f[1], f[2]))
            .collect()
    }

    fn parse(header: &[u8], path: &[u8], link: &[u8]) -> Option<Record> {
        let header = std::str::from_utf8(header).ok()?;
        let mut h = header.split(' ');
        let kind = kind_of_letter(h.next()?);
        let size = h.next()?.parse().ok()?;
        let (secs, nanos) = seconds(h.next()?)?;
        let mode = u32::from_str_radix(h.next()?, 8).ok()?;
        let uid: u32 = h.next()?.parse().ok()?;
        let gid: u32 = h.next()?.parse().ok()?;
        // find prints the number when the host has no name for the id.
        let name = |n: Option<&str>, id: u32| n.filter(|n| *n != id.to_string()).map(str::to_owned);
        let (user, group) = (name(h.next(), uid), name(h.next(), gid));
        Some(Record {
            path: String::from_utf8_lossy(path).into_owned(),
            info: FileInfo {
                kind,
                size,
                mtime: rfc3339(secs, nanos),
                mode: format!("{:04o}", mode & 0o7777),
                link_target: (kind == Kind::Symlink)
                    .then(|| String::from_utf8_lossy(link).into_owned()),
            },
            owner: Owner {
                uid,
                gid,
                user,
                group,
            },
        })
    }
}

/// `1700000000.1234567890` as seconds and nanoseconds.
pub(crate) fn seconds(text: &str) -> Option<(i64, u32)> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let secs = whole.parse().ok()?;
    let digits: String = frac.chars().take(9).collect();
    let nanos = if digits.is_empty() {
        0
    } else {
        format!("{digits:0<9}").parse().ok()?
    };
    Some((secs, nanos))
}

/// The refusal or failure the script reported, as the tool's result.
pub(crate) fn refusal(reply: &Reply, shown: &str, tool: &str) -> Option<ToolResult> {
    let kind = reply.text("error")?;
    let msg = reply.text("msg").unwrap_or_default();
    Some(match kind.as_str() {
        "outside" => AccessError::Outside(msg).into_result(),
        "protected" => AccessError::Protected {
            path: if msg.is_empty() { shown.to_owned() } else { msg },
        }
        .into_result(),
        "notfound" if tool == "fs_list" => ToolResult::error(format!("Directory not found: {shown}")),
        "notfound" => ToolResult::error(format!("Not found: {shown}")),
        "notdir" => ToolResult::error(format!(
            "Not a directory: {shown} (fs_list lists directories; fs_stat describes a file)"
        )),
        "nofind" => ToolResult::error(format!(
            "{tool}: the host's find has no -printf (busybox?); {tool} on a remote host needs GNU find (Debian/Ubuntu: findutils; Alpine: apk add findutils)"
        )),
        _ => ToolResult::error(if msg.is_empty() {
            format!("{tool}: cannot check {shown} on the host")
        } else {
            msg
        }),
    })
}

/// The ignore rules that apply to one listing, read from the host.
#[derive(Default)]
struct Rules {
    /// `.ignore` files by directory.
    ignore: HashMap<PathBuf, Gitignore>,
    /// `.gitignore` files by directory.
    gitignore: HashMap<PathBuf, Gitignore>,
    /// The repository's `.git/info/exclude`, then the user's global file.
    last: Vec<Gitignore>,
}

impl Rules {
    /// Reads the rule files: `in_tree` (NUL-separated paths relative to `root` from the
    /// walk) and those of `root`'s parents, the repository's exclude file and the
    /// user's global file.
    async fn fetch(
        host: &RemoteHost,
        ctx: &ToolContext,
        root: &Path,
        in_tree: &[u8],
    ) -> Result<Rules, crate::remote::RemoteError> {
        let mut wanted: Vec<(PathBuf, &'static str)> = Vec::new();
        for rel in in_tree.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let rel = PathBuf::from(String::from_utf8_lossy(rel).into_owned());
            let (Some(dir), Some(name)) = (rel.parent(), rel.file_name()) else {
                continue;
            };
            let kind = if name == ".ignore" { "i" } else { "g" };
            wanted.push((root.join(dir), kind));
        }
        wanted.truncate(MAX_RULE_FILES);
        let parents: Vec<&Path> = root.ancestors().skip(1).collect();
        // The parents' files, the `.git` marks that say where the repository's top is,
        // and the user's global file.
        let mut script = String::from("gsv_main() {\n");
        let add = |script: &mut String, file: &Path, tag: String| {
            if let Some(q) = file.to_str().and_then(quote) {
                script.push_str(&format!(
                    "  [ -f {q} ] && [ -r {q} ] && gsv_head {tag} {q} {MAX_RULE_BYTES}\n"
                ));
            }
        };
        for (n, (dir, kind)) in wanted.iter().enumerate() {
            let name = if *kind == "i" {
                ".ignore"
            } else {
                ".gitignore"
            };
            add(&mut script, &dir.join(name), format!("f{n}"));
        }
        for (i, dir) in std::iter::once(root)
            .chain(parents.iter().copied())
            .enumerate()
        {
            if let Some(q) = dir.join(".git").to_str().and_then(quote) {
                script.push_str(&format!("  [ -e {q} ] && gsv_text git{i} 1\n"));
            }
            if i > 0 {
                add(&mut script, &dir.join(".ignore"), format!("pi{i}"));
                add(&mut script, &dir.join(".gitignore"), format!("pg{i}"));
            }
            add(&mut script, &dir.join(".git/info/exclude"), format!("x{i}"));
        }
        script.push_str(
            "  gsv_x=\"${XDG_CONFIG_HOME:-$HOME/.config}/git/ignore\"\n  [ -f \"$gsv_x\" ] && gsv_head global \"$gsv_x\" 262144\n  :\n}\ngsv_main",
        );
        let limit = (wanted.len() + 3 * (parents.len() + 1) + 1) * (MAX_RULE_BYTES + 64) + 4096;
        let reply = host.run(Lane::Work, ctx.owner(), &script, limit).await?;
        let mut rules = Rules::default();
        for (i, (dir, kind)) in wanted.iter().enumerate() {
            if let Some(text) = reply.get(&format!("f{i}")) {
                let set = if *kind == "i" {
                    &mut rules.ignore
                } else {
                    &mut rules.gitignore
                };
                set.insert(dir.clone(), matcher(dir, text));
            }
        }
        // The repository's top: the nearest of root and its parents holding `.git`.
        let levels: Vec<&Path> = std::iter::once(root).chain(parents).collect();
        let top = (0..levels.len()).find(|i| reply.get(&format!("git{i}")).is_some());
        for (i, dir) in levels.iter().enumerate().skip(1) {
            if let Some(text) = reply.get(&format!("pi{i}")) {
                rules.ignore.insert(dir.to_path_buf(), matcher(dir, text));
            }
            // `.gitignore` files above the repository's top do not apply to it.
            if top.is_none_or(|t| i <= t) {
                if let Some(text) = reply.get(&format!("pg{i}")) {
                    rules
                        .gitignore
                        .insert(dir.to_path_buf(), matcher(dir, text));
                }
            }
        }
        if let Some(t) = top {
            if let Some(text) = reply.get(&format!("x{t}")) {
                rules.last.push(matcher(levels[t], text));
            }
        }
        if let Some(text) = reply.get("global") {
            rules.last.push(matcher(Path::new("/"), text));
        }
        Ok(rules)
    }

    /// Whether the rules leave out the entry at `path` (absolute).
    fn ignores(&self, path: &Path, is_dir: bool) -> bool {
        for set in [&self.ignore, &self.gitignore] {
            for dir in path.ancestors().skip(1) {
                if let Some(g) = set.get(dir) {
                    match g.matched(path, is_dir) {
                        Match::Ignore(_) => return true,
                        Match::Whitelist(_) => return false,
                        Match::None => {}
                    }
                }
            }
        }
        for g in &self.last {
            match g.matched_path_or_any_parents(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }
}

/// The rules of one ignore file in `dir` (lines that do not parse are skipped, as git
/// does).
fn matcher(dir: &Path, text: &[u8]) -> Gitignore {
    let mut builder = GitignoreBuilder::new(dir);
    for line in String::from_utf8_lossy(text).lines() {
        let _ = builder.add_line(None, line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_records_are_read() {
        let bytes = b"f 12 1700000000.5000000000 644 1000 1000 ann 1000\0src/a.rs\0\0\
l 5 1700000000 777 0 0 root root\0link\0/etc\0\
d 4096 17000";
        let r = Record::parse_all(bytes);
        assert_eq!(r.len(), 2, "a cut record is dropped");
        assert_eq!(r[0].path, "src/a.rs");
        assert_eq!((r[0].info.kind, r[0].info.size), (Kind::File, 12));
        assert_eq!(r[0].info.mtime, "2023-11-14T22:13:20.500Z");
        assert_eq!(r[0].info.mode, "0644");
        assert_eq!(r[0].owner.user.as_deref(), Some("ann"));
        assert_eq!(r[0].owner.group, None, "a number is no name");
        assert_eq!(r[0].info.link_target, None);
        assert_eq!(r[1].info.link_target.as_deref(), Some("/etc"));
        assert_eq!(r[1].info.mtime, "2023-11-14T22:13:20Z");
        assert!(Record::parse_all(b"x y\0a\0\0").is_empty());
    }

    #[test]
    fn rules_keep_the_walkers_precedence() {
        let mut rules = Rules::default();
        let root = Path::new("/w");
        rules
            .gitignore
            .insert(root.to_path_buf(), matcher(root, b"*.log\nbuild/\n"));
        rules
            .gitignore
            .insert(root.join("sub"), matcher(&root.join("sub"), b"!keep.log\n"));
        rules
            .ignore
            .insert(root.to_path_buf(), matcher(root, b"keep.log\n"));
        assert!(rules.ignores(Path::new("/w/a.log"), false));
        assert!(rules.ignores(Path::new("/w/build"), true));
        assert!(!rules.ignores(Path::new("/w/build"), false));
        assert!(rules.ignores(Path::new("/w/sub/b.log"), false));
        // .ignore wins over a deeper .gitignore's negation.
        assert!(rules.ignores(Path::new("/w/sub/keep.log"), false));
        assert!(!rules.ignores(Path::new("/w/src/main.rs"), false));
    }
}
