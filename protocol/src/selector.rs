//! Node selectors: one syntax to pick nodes by id, label or fact, everywhere (CLI,
//! WebSocket, MCP, HTTP).
//!
//! A selector is terms joined by commas, all of which must hold (AND):
//!
//! | term | holds when |
//! |---|---|
//! | `key=value` | the node has label `key` with exactly `value` |
//! | `key!=value` | the node has no label `key`, or one with another value |
//! | `key` | the node has label `key` (any value) |
//! | `id~GLOB` | the node id matches the glob (`*`, `?`, `[a-c]`) |
//! | `fact.KEY=VALUE` | the node reported fact `KEY` with exactly `VALUE` |
//! | `fact.KEY!=VALUE` | the node did not report fact `KEY`, or another value |
//!
//! Whitespace around a term is ignored. Labels come from operators; facts from the
//! node itself (see [`crate::inventory`]): a selector on facts picks hosts, it must
//! never decide what a token may do.

use crate::inventory::{check_label_key, check_label_value, Facts, LabelError, Labels, FACT_KEYS};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// Longest selector, in bytes.
pub const MAX_SELECTOR_LEN: usize = 1024;
/// Most terms in one selector.
pub const MAX_SELECTOR_TERMS: usize = 32;

/// Why a selector was refused. Terms are numbered from 1, as a person counts them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectorError {
    #[error("the selector is empty: give terms such as `env=prod,fact.os=linux`")]
    Empty,
    #[error("the selector is {len} bytes long, over the {MAX_SELECTOR_LEN}-byte limit")]
    TooLong { len: usize },
    #[error("the selector has {count} terms, over the limit of {MAX_SELECTOR_TERMS}")]
    TooManyTerms { count: usize },
    #[error("term {index} is empty (two commas in a row, or one at an end)")]
    EmptyTerm { index: usize },
    #[error("term {index} `{term}`: {source}")]
    Label {
        index: usize,
        term: String,
        source: LabelError,
    },
    #[error("term {index} `{term}`: unknown fact `{key}` (known: {})", FACT_KEYS.join(", "))]
    UnknownFact {
        index: usize,
        term: String,
        key: String,
    },
    #[error(
        "term {index} `{term}`: a fact term needs a value (`fact.KEY=VALUE` or `fact.KEY!=VALUE`)"
    )]
    FactWithoutValue { index: usize, term: String },
    #[error("term {index} `{term}`: `~` matches node ids only (write `id~GLOB`)")]
    TildeNotId { index: usize, term: String },
    #[error("term {index} `{term}`: `id` takes a glob: write `id~GLOB` (e.g. `id~web*`)")]
    IdWithoutGlob { index: usize, term: String },
    #[error("term {index} `{term}`: bad glob: {reason}")]
    Glob {
        index: usize,
        term: String,
        reason: String,
    },
}

/// One term of a selector.
#[derive(Debug, Clone)]
pub enum Term {
    /// `key=value`
    LabelEq(String, String),
    /// `key!=value`
    LabelNe(String, String),
    /// `key`
    HasLabel(String),
    /// `id~GLOB`
    IdGlob {
        glob: String,
        matcher: globset::GlobMatcher,
    },
    /// `fact.KEY=VALUE`
    FactEq(String, String),
    /// `fact.KEY!=VALUE`
    FactNe(String, String),
}

impl Term {
    fn holds(&self, id: &str, labels: &Labels, facts: &Facts) -> bool {
        match self {
            Term::LabelEq(k, v) => labels.get(k) == Some(v),
            Term::LabelNe(k, v) => labels.get(k) != Some(v),
            Term::HasLabel(k) => labels.contains_key(k),
            Term::IdGlob { matcher, .. } => matcher.is_match(id),
            Term::FactEq(k, v) => facts.get(k).as_deref() == Some(v.as_str()),
            Term::FactNe(k, v) => facts.get(k).as_deref() != Some(v.as_str()),
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::LabelEq(k, v) => write!(f, "{k}={v}"),
            Term::LabelNe(k, v) => write!(f, "{k}!={v}"),
            Term::HasLabel(k) => f.write_str(k),
            Term::IdGlob { glob, .. } => write!(f, "id~{glob}"),
            Term::FactEq(k, v) => write!(f, "fact.{k}={v}"),
            Term::FactNe(k, v) => write!(f, "fact.{k}!={v}"),
        }
    }
}

/// A parsed selector: every term must hold.
#[derive(Debug, Clone)]
pub struct Selector {
    terms: Vec<Term>,
}

impl Selector {
    /// Parses `text` (see the module doc for the syntax).
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        if text.len() > MAX_SELECTOR_LEN {
            return Err(SelectorError::TooLong { len: text.len() });
        }
        if text.trim().is_empty() {
            return Err(SelectorError::Empty);
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > MAX_SELECTOR_TERMS {
            return Err(SelectorError::TooManyTerms { count: parts.len() });
        }
        let terms = parts
            .iter()
            .enumerate()
            .map(|(i, part)| parse_term(i + 1, part.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Selector { terms })
    }

    /// Whether the node `id` with these labels and facts is selected.
    pub fn matches(&self, id: &str, labels: &Labels, facts: &Facts) -> bool {
        self.terms.iter().all(|t| t.holds(id, labels, facts))
    }

    /// The terms, in the order written.
    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// Whether any term reads a fact (which the node reports about itself).
    pub fn uses_facts(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t, Term::FactEq(..) | Term::FactNe(..)))
    }
}

fn parse_term(index: usize, term: &str) -> Result<Term, SelectorError> {
    if term.is_empty() {
        return Err(SelectorError::EmptyTerm { index });
    }
    let label = |source: LabelError| SelectorError::Label {
        index,
        term: term.to_owned(),
        source,
    };
    // `!=` before `=`: `env!=prod` is one operator, not a key `env!`.
    let (key, op, value) = if let Some((k, v)) = term.split_once("!=") {
        (k.trim(), "!=", Some(v.trim()))
    } else if let Some((k, v)) = term.split_once('=') {
        (k.trim(), "=", Some(v.trim()))
    } else if let Some((k, v)) = term.split_once('~') {
        (k.trim(), "~", Some(v.trim()))
    } else {
        (term, "", None)
    };

    if op == "~" {
        if key != "id" {
            return Err(SelectorError::TildeNotId {
                index,
                term: term.to_owned(),
            });
        }
        let glob = value.unwrap_or_default();
        let bad = |reason: String| SelectorError::Glob {
            index,
            term: term.to_owned(),
            reason,
        };
        if glob.is_empty() {
            return Err(bad("the glob is empty".into()));
        }
        let matcher = globset::Glob::new(glob)
            .map_err(|e| bad(e.kind().to_string()))?
            .compile_matcher();
        return Ok(Term::IdGlob {
            glob: glob.to_owned(),
            matcher,
        });
    }

    if let Some(fact) = key.strip_prefix("fact.") {
        if !FACT_KEYS.contains(&fact) {
            return Err(SelectorError::UnknownFact {
                index,
                term: term.to_owned(),
                key: fact.to_owned(),
            });
        }
        return match (op, value) {
            ("=", Some(v)) => Ok(Term::FactEq(fact.to_owned(), v.to_owned())),
            ("!=", Some(v)) => Ok(Term::FactNe(fact.to_owned(), v.to_owned())),
            _ => Err(SelectorError::FactWithoutValue {
                index,
                term: term.to_owned(),
            }),
        };
    }

    if key == "id" {
        return Err(SelectorError::IdWithoutGlob {
            index,
            term: term.to_owned(),
        });
    }
    check_label_key(key).map_err(label)?;
    match (op, value) {
        ("=", Some(v)) => {
            check_label_value(v).map_err(label)?;
            Ok(Term::LabelEq(key.to_owned(), v.to_owned()))
        }
        ("!=", Some(v)) => {
            check_label_value(v).map_err(label)?;
            Ok(Term::LabelNe(key.to_owned(), v.to_owned()))
        }
        _ => Ok(Term::HasLabel(key.to_owned())),
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

impl FromStr for Selector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Selector::parse(s)
    }
}

impl PartialEq for Selector {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Serialize for Selector {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Selector {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Selector::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn linux() -> Facts {
        Facts {
            os: "linux".into(),
            arch: "x86_64".into(),
            os_release: "Debian GNU/Linux 12 (bookworm)".into(),
            cpus: Some(4),
            ..Facts::default()
        }
    }

    fn sel(text: &str) -> Selector {
        Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn every_term_form_matches_as_documented() {
        let web = labels(&[("env", "prod"), ("role", "web"), ("gpu", "")]);
        let f = linux();
        let yes = [
            "env=prod",
            "env!=staging",
            "team!=core",
            "role",
            "gpu",
            "gpu=",
            "id~web*",
            "id~web?",
            "id~[uvw]eb1",
            "fact.os=linux",
            "fact.cpus=4",
            "fact.os!=macos",
            "fact.kernel!=6.1",
            "fact.osRelease=Debian GNU/Linux 12 (bookworm)",
            "env=prod, role=web ,fact.arch=x86_64",
        ];
        for s in yes {
            assert!(sel(s).matches("web1", &web, &f), "{s} should match");
        }
        let no = [
            "env=staging",
            "env!=prod",
            "team",
            "id~db*",
            "fact.os=macos",
            "fact.kernel=6.1",
            "env=prod,role=db",
        ];
        for s in no {
            assert!(!sel(s).matches("web1", &web, &f), "{s} should not match");
        }
    }

    #[test]
    fn selectors_print_back_in_canonical_form() {
        let s = sel(" env = prod ,id~web*, gpu,fact.os!=macos ");
        assert_eq!(s.to_string(), "env=prod,id~web*,gpu,fact.os!=macos");
        assert_eq!(sel(&s.to_string()), s);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#""env=prod,id~web*,gpu,fact.os!=macos""#);
        assert_eq!(serde_json::from_str::<Selector>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Selector>(r#""env=,,x""#).is_err());
        assert!(sel("fact.os=linux").uses_facts());
        assert!(!sel("env=prod,id~a*").uses_facts());
    }

    #[test]
    fn bad_selectors_say_which_term_and_why() {
        let err = |s: &str| Selector::parse(s).expect_err(s);
        assert_eq!(err(""), SelectorError::Empty);
        assert_eq!(err("   "), SelectorError::Empty);
        assert_eq!(err("env=prod,,role"), SelectorError::EmptyTerm { index: 2 });
        assert_eq!(err("env=prod,"), SelectorError::EmptyTerm { index: 2 });
        assert!(matches!(
            err("Env=prod"),
            SelectorError::Label {
                index: 1,
                source: LabelError::Key(_),
                ..
            }
        ));
        assert!(matches!(
            err("env=a b"),
            SelectorError::Label {
                index: 1,
                source: LabelError::Value(_),
                ..
            }
        ));
        assert!(matches!(
            err("role,=prod"),
            SelectorError::Label {
                index: 2,
                source: LabelError::Key(_),
                ..
            }
        ));
        assert!(matches!(
            err("fact.colour=red"),
            SelectorError::UnknownFact { index: 1, .. }
        ));
        assert!(matches!(
            err("fact.os"),
            SelectorError::FactWithoutValue { index: 1, .. }
        ));
        assert!(matches!(err("env~prod"), SelectorError::TildeNotId { .. }));
        assert!(matches!(
            err("id=web1"),
            SelectorError::IdWithoutGlob { .. }
        ));
        assert!(matches!(err("id"), SelectorError::IdWithoutGlob { .. }));
        assert!(matches!(err("id~"), SelectorError::Glob { .. }));
        assert!(matches!(err("id~[a"), SelectorError::Glob { .. }));
        let long = "a".repeat(MAX_SELECTOR_LEN + 1);
        assert!(matches!(err(&long), SelectorError::TooLong { .. }));
        let many = vec!["a"; MAX_SELECTOR_TERMS + 1].join(",");
        assert!(matches!(err(&many), SelectorError::TooManyTerms { .. }));
        // Messages name the term and the rule, for a person to fix.
        let msg = err("env=prod,fact.colour=red").to_string();
        assert!(
            msg.contains("term 2") && msg.contains("colour") && msg.contains("osRelease"),
            "{msg}"
        );
    }

    #[test]
    fn parsing_never_panics_on_odd_input() {
        for s in [
            "=",
            "!=",
            "~",
            "!",
            "=!=",
            "fact.",
            "fact.=x",
            "id~~",
            "a=b=c",
            "a!=b!=c",
            "\u{0}",
            "é=é",
            "id~{a,b}",
            "id~**",
            "\\",
            "fact.os=,",
        ] {
            let _ = Selector::parse(s);
        }
    }
}
