//! Import circles inside one crate, file by file: no circle may hold more than
//! [`MAX_CIRCLE`] files. A circle is a set of files each of which reaches every other
//! by following imports; a large one means the files cannot be read, moved or tested
//! apart.
//!
//! A file's imports are the paths its code names (comments, strings and unit tests
//! left out, as for the floors): `crate::…`, `super::…` and `self::…`, grouped `use`
//! lists read item by item; each is taken to the file that holds the longest part of
//! it. A module naming a module inside it (`cluster/mod.rs` naming
//! `crate::cluster::calls`) is not counted: a parent holds its children by Rust's own
//! design (it declares them and decides what of them is seen), so a parent and a child
//! that name each other are one module's make-up, not a circle; children naming each
//! other, or a parent, are.

use super::reader::code_of;
use std::collections::{BTreeMap, BTreeSet};

/// The most files one import circle may hold.
pub const MAX_CIRCLE: usize = 3;

/// The module path of a file under a crate's source folder: `a/b.rs` → `[a, b]`,
/// `a/mod.rs` → `[a]`, `lib.rs` (or `main.rs`) → `[]`.
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    } else if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The file that holds the longest prefix of `parts` that is a module of `files`.
fn file_of(files: &BTreeSet<String>, parts: &[String]) -> Option<String> {
    (1..=parts.len()).rev().find_map(|n| {
        let stem = parts[..n].join("/");
        [format!("{stem}.rs"), format!("{stem}/mod.rs")]
            .into_iter()
            .find(|f| files.contains(f))
    })
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that start at `at` in `s` (just past a leading `crate`, `super` or
/// `self` and its `::`): one per item of a grouped list.
fn paths_at(s: &str, mut at: usize) -> Vec<Vec<String>> {
    let b = s.as_bytes();
    let mut parts = Vec::new();
    loop {
        if s[at..].starts_with('{') {
            // A group: each item, to its first name (deeper names do not change which
            // file it is in once the first is known).
            let end = s[at..].find('}').map_or(s.len(), |e| at + e);
            return s[at + 1..end]
                .split(',')
                .map(|item| {
                    let first: String = item
                        .trim()
                        .trim_start_matches('{')
                        .chars()
                        .take_while(|c| is_ident(*c))
                        .collect();
                    let mut p = parts.clone();
                    if !first.is_empty() && first != "self" {
                        p.push(first);
                    }
                    p
                })
                .collect();
        }
        let start = at;
        while at < b.len() && is_ident(b[at] as char) {
            at += 1;
        }
        if at > start {
            parts.push(s[start..at].to_owned());
        }
        if at > start && s[at..].starts_with("::") {
            at += 2;
            continue;
        }
        return vec![parts];
    }
}

/// The files of `files` that `rel`'s source `src` names (itself and the crate root
/// left out).
pub fn imports(files: &BTreeSet<String>, rel: &str, src: &str) -> BTreeSet<String> {
    let code = code_of(src);
    let me = module_path(rel);
    let mut out = BTreeSet::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        let starts = is_ident(c) && (i == 0 || !(is_ident(b[i - 1] as char) || b[i - 1] == b':'));
        if !starts {
            i += 1;
            continue;
        }
        let end = i + code[i..]
            .find(|c: char| !is_ident(c))
            .unwrap_or(code.len() - i);
        let word = &code[i..end];
        if !code[end..].starts_with("::") {
            i = end;
            continue;
        }
        let base: Option<Vec<String>> = match word {
            "crate" => Some(Vec::new()),
            "super" => Some(me[..me.len().saturating_sub(1)].to_vec()),
            "self" => Some(me.clone()),
            _ => None,
        };
        if let Some(base) = base {
            for rest in paths_at(&code, end + 2) {
                let mut full = base.clone();
                for part in rest {
                    if part == "super" {
                        full.pop();
                    } else {
                        full.push(part);
                    }
                }
                // A module naming one inside itself (its child, or deeper) holds it:
                // that is the module's own make-up, not an import.
                let inside = full.len() > me.len() && full[..me.len()] == me[..];
                match file_of(files, &full) {
                    Some(f) if !inside && f != rel && f != "lib.rs" && f != "main.rs" => {
                        out.insert(f);
                    }
                    _ => {}
                }
            }
        }
        i = end;
    }
    out
}

/// The circles of the import graph `edges` with more than one file, largest first.
pub fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.edges.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut circle = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    circle.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if circle.len() > 1 {
                    circle.sort();
                    self.found.push(circle);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found.sort_by_key(|c| std::cmp::Reverse(c.len()));
    walk.found
}

/// The import graph of the sources `files` (path under the source folder → source).
pub fn graph(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let names: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(rel, src)| (rel.clone(), imports(&names, rel, src)))
        .collect()
}

/// The circles larger than [`MAX_CIRCLE`] in `files`, each with its arrows, as text.
pub fn too_large(files: &BTreeMap<String, String>) -> Vec<String> {
    let edges = graph(files);
    circles(&edges)
        .into_iter()
        .filter(|c| c.len() > MAX_CIRCLE)
        .map(|c| {
            let inside: BTreeSet<&String> = c.iter().collect();
            let arrows: Vec<String> = c
                .iter()
                .map(|f| {
                    let to: Vec<&str> = edges[f]
                        .iter()
                        .filter(|t| inside.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("  {f} -> {}", to.join(", "))
                })
                .collect();
            format!("{} files:\n{}", c.len(), arrows.join("\n"))
        })
        .collect()
}
