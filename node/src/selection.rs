//! Which tools a node offers: the node owner's choice, enforced on the node.
//!
//! `gsv node --tools GLOB... --without GLOB...` picks the set (`--tools
//! 'Read,Grep,Glob,fs_*,time'`): with `--tools`, only tools whose name matches one of
//! its globs are offered; then every tool matching a `--without` glob is left out.
//! `--read-only` keeps only the tools that declare `readOnlyHint: true`. A tool left
//! out is never registered, so the node answers `not_found` for it whatever an agent's
//! token allows: no gateway can call what the node does not have.
//!
//! Globs are `globset` globs over the plain tool name (`*`, `?`, `[...]`, `{a,b}`),
//! case-sensitive. A glob that matches none of the tools the node could offer is a
//! startup error, so a typo (`--without Bahs`) cannot leave a tool on silently.

use globset::{Glob, GlobMatcher};
use gsv_protocol::ToolDef;
use thiserror::Error;

/// Why the owner's choice of tools cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectionError {
    #[error("--{flag} pattern {pattern:?} is not a valid glob: {message}")]
    Pattern {
        flag: &'static str,
        pattern: String,
        message: String,
    },
    #[error("--{flag} pattern {pattern:?} matches none of this node's tools ({known})")]
    Unmatched {
        flag: &'static str,
        pattern: String,
        known: String,
    },
}

/// One compiled glob and whether it matched any tool the node could offer.
#[derive(Debug, Clone)]
struct Pattern {
    text: String,
    matcher: GlobMatcher,
    matched: bool,
}

impl Pattern {
    fn compile(flag: &'static str, text: &str) -> Result<Pattern, SelectionError> {
        let glob = Glob::new(text).map_err(|e| SelectionError::Pattern {
            flag,
            pattern: text.to_owned(),
            message: e.kind().to_string(),
        })?;
        Ok(Pattern {
            text: text.to_owned(),
            matcher: glob.compile_matcher(),
            matched: false,
        })
    }

    fn hit(&mut self, name: &str) -> bool {
        let hit = self.matcher.is_match(name);
        self.matched |= hit;
        hit
    }
}

/// The owner's choice: `--tools`, `--without`, `--read-only`.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    tools: Vec<Pattern>,
    without: Vec<Pattern>,
    read_only: bool,
}

impl Selection {
    /// Compiles the globs (each entry one glob; the CLI splits commas).
    pub fn new(
        tools: &[String],
        without: &[String],
        read_only: bool,
    ) -> Result<Self, SelectionError> {
        Ok(Selection {
            tools: tools
                .iter()
                .map(|t| Pattern::compile("tools", t))
                .collect::<Result<_, _>>()?,
            without: without
                .iter()
                .map(|t| Pattern::compile("without", t))
                .collect::<Result<_, _>>()?,
            read_only,
        })
    }

    /// Whether the node offers the tool `def` declares. Every glob is tried, so each
    /// one learns whether it matched something.
    pub fn offers(&mut self, def: &ToolDef) -> bool {
        let name = def.name.as_str();
        let mut chosen = self.tools.is_empty();
        for p in &mut self.tools {
            chosen |= p.hit(name);
        }
        let mut dropped = false;
        for p in &mut self.without {
            dropped |= p.hit(name);
        }
        let read_only_ok = !self.read_only || def.annotations.read_only_hint == Some(true);
        chosen && !dropped && read_only_ok
    }

    /// After every candidate went through [`Selection::offers`]: the first glob that
    /// matched none of them (`known`: the candidates' names, for the message).
    pub fn unmatched(&self, known: &[&str]) -> Result<(), SelectionError> {
        let first = self
            .tools
            .iter()
            .map(|p| ("tools", p))
            .chain(self.without.iter().map(|p| ("without", p)))
            .find(|(_, p)| !p.matched);
        match first {
            None => Ok(()),
            Some((flag, p)) => Err(SelectionError::Unmatched {
                flag,
                pattern: p.text.clone(),
                known: known.join(", "),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::ToolAnnotations;
    use serde_json::json;

    fn def(name: &str, read_only: bool) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            capability: "filesystem.read".into(),
            annotations: ToolAnnotations::hints(name, read_only, false, true, false),
            default_timeout_ms: None,
            requires_bins: vec![],
            requires_approval: false,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tools_pick_and_without_removes() {
        let all = [
            def("Read", true),
            def("Bash", false),
            def("fs_list", true),
            def("fs_stat", true),
            def("time", true),
        ];
        let mut s = Selection::new(
            &strings(&["Read", "fs_*", "time"]),
            &strings(&["fs_stat"]),
            false,
        )
        .unwrap();
        let offered: Vec<&str> = all
            .iter()
            .filter(|d| s.offers(d))
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(offered, ["Read", "fs_list", "time"]);
        assert_eq!(s.unmatched(&[]), Ok(()));
        // Nothing chosen: everything but what `--without` removes.
        let mut s = Selection::new(&[], &strings(&["B*"]), false).unwrap();
        assert!(s.offers(&all[0]) && !s.offers(&all[1]));
        // Case matters: `bash` is not `Bash`.
        let mut s = Selection::new(&strings(&["bash"]), &[], false).unwrap();
        assert!(!s.offers(&all[1]));
    }

    #[test]
    fn read_only_still_applies() {
        let mut s = Selection::new(&strings(&["*"]), &[], true).unwrap();
        assert!(s.offers(&def("Read", true)));
        assert!(!s.offers(&def("Bash", false)));
    }

    #[test]
    fn unmatched_and_bad_globs_are_errors() {
        let mut s = Selection::new(&strings(&["Read"]), &strings(&["Bahs"]), false).unwrap();
        assert!(s.offers(&def("Read", true)));
        assert!(!s.offers(&def("Bash", false)));
        let e = s.unmatched(&["Read", "Bash"]).unwrap_err();
        assert!(
            matches!(&e, SelectionError::Unmatched { flag: "without", pattern, .. } if pattern == "Bahs"),
            "{e}"
        );
        assert!(e.to_string().contains("Read, Bash"), "{e}");
        assert!(matches!(
            Selection::new(&strings(&["[Read"]), &[], false),
            Err(SelectionError::Pattern { flag: "tools", .. })
        ));
    }
}
