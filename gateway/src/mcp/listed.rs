//! Which of a node's tools a flat listing names.
//!
//! A node offers 34 tools; listed for every node, two machines are already past what
//! an agent's context should spend on definitions. So the default listing (`auto`)
//! names, per node, the reference set an agent works with — Bash, Process, Read,
//! Write, Edit, Glob, Grep — beside the gateway's fleet tools, and leaves the rest to
//! `fleet_tools` (their definitions) and to a call by namespace (`web1__git_log`
//! works whether it is listed or not). `?tools=` on the MCP URL asks for another set:
//! `all`, `reference`, or a comma-separated list of globs over the bare tool name
//! (`Bash,git_*`). `?view=flat` without `?tools=` lists every tool, as it always did.
//! Listing is not permission: the token's policy still decides what is listed at all
//! and what may be called.

use globset::{Glob, GlobSet, GlobSetBuilder};
use std::sync::Arc;
use thiserror::Error;

/// The tools listed per node by default: what an agent works with on any machine.
pub const REFERENCE: [&str; 7] = ["Bash", "Process", "Read", "Write", "Edit", "Glob", "Grep"];

/// Most globs one `?tools=` may give.
pub const MAX_GLOBS: usize = 32;

/// The tools a flat listing names on each node.
#[derive(Clone, Debug, Default)]
pub enum Listed {
    /// Every tool the token may call.
    All,
    /// [`REFERENCE`].
    #[default]
    Reference,
    /// Tools whose bare name matches one of these globs.
    Only(Arc<Globs>),
}

/// A `?tools=` glob list, with its text for logs.
#[derive(Debug)]
pub struct Globs {
    pub text: String,
    set: GlobSet,
}

/// Why a `?tools=` was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BadTools {
    #[error("give `all`, `reference` or a comma-separated list of tool-name globs")]
    Empty,
    #[error("at most {MAX_GLOBS} globs")]
    TooMany,
    #[error("{glob:?} is not a glob: {reason}")]
    Glob { glob: String, reason: String },
}

impl Listed {
    /// `all`, `reference`, or globs such as `Bash,git_*`.
    pub fn parse(text: &str) -> Result<Listed, BadTools> {
        match text.trim() {
            "all" => return Ok(Listed::All),
            "reference" => return Ok(Listed::Reference),
            _ => {}
        }
        let globs: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .collect();
        if globs.is_empty() {
            return Err(BadTools::Empty);
        }
        if globs.len() > MAX_GLOBS {
            return Err(BadTools::TooMany);
        }
        let mut set = GlobSetBuilder::new();
        for g in &globs {
            let glob = Glob::new(g).map_err(|e| BadTools::Glob {
                glob: (*g).to_owned(),
                reason: e.kind().to_string(),
            })?;
            set.add(glob);
        }
        let set = set.build().map_err(|e| BadTools::Glob {
            glob: text.to_owned(),
            reason: e.kind().to_string(),
        })?;
        Ok(Listed::Only(Arc::new(Globs {
            text: globs.join(","),
            set,
        })))
    }

    /// Whether the listing names the node tool `tool` (bare name).
    pub fn lists(&self, tool: &str) -> bool {
        match self {
            Listed::All => true,
            Listed::Reference => REFERENCE.contains(&tool),
            Listed::Only(g) => g.set.is_match(tool),
        }
    }

    /// Whether every tool is listed (the flat view as it always was). Otherwise the
    /// listing leads with every fleet tool, so that what is not listed can be found
    /// (`fleet_tools`) and called (`fleet_call`, or by namespace).
    pub fn is_all(&self) -> bool {
        matches!(self, Listed::All)
    }

    /// For a digest of what a session lists.
    pub fn key(&self) -> &str {
        match self {
            Listed::All => "all",
            Listed::Reference => "reference",
            Listed::Only(g) => &g.text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_sets_parse_or_say_what_is_wrong() {
        assert!(Listed::parse("all").unwrap().is_all());
        let r = Listed::parse("reference").unwrap();
        assert!(r.lists("Bash") && r.lists("Grep") && !r.lists("git_log"));
        let g = Listed::parse("Bash, git_*").unwrap();
        assert!(g.lists("Bash") && g.lists("git_log") && !g.lists("Read"));
        assert_eq!(g.key(), "Bash,git_*");
        assert_eq!(Listed::parse(" , ").unwrap_err(), BadTools::Empty);
        let many = vec!["a"; MAX_GLOBS + 1].join(",");
        assert_eq!(Listed::parse(&many).unwrap_err(), BadTools::TooMany);
        assert!(matches!(
            Listed::parse("Bash,[x").unwrap_err(),
            BadTools::Glob { .. }
        ));
    }
}
