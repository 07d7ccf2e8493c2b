//! `--approve-exec`: argv allowlists for the exec tool, instead of shell regexes.
//!
//! The exec tool runs a program with an argv and no shell, so what it will do can be
//! judged word by word rather than by a regex over a command line. An entry is
//! `PROGRAM ARGGLOB...`, split on whitespace:
//!
//! - `PROGRAM` names the program by absolute path. A bare name (no `/`) is resolved
//!   once, at node start, against the node's own `PATH`, and the node logs what it
//!   became; a relative path with a `/` is refused. The path is then made canonical
//!   (symlinks and `..` resolved), so `/usr/bin/../bin/systemctl` and
//!   `/usr/bin/systemctl` are the same entry. A program that does not exist at start
//!   is a startup error.
//! - Each `ARGGLOB` word matches the call's `argv[1..]` one to one: the word `*`
//!   matches any one argument (the empty one included), the word `**`, only as the
//!   last word, matches any number (zero or more) of remaining arguments, and any
//!   other word matches only the identical argument (no partial globbing: `--user=*`
//!   is the literal text `--user=*`). Without a trailing `**` the argument count must
//!   be exactly the number of words.
//!
//! A call matches an entry when its program, resolved at call time and made canonical
//! the same way ([`super::program`]), is the entry's path and its
//! arguments match the entry's words. The resolution never uses the caller's `env`
//! (a `PATH` given there changes what the child sees, not which program runs), and a
//! `./systemctl` resolves against the call's cwd, so a binary planted in the
//! workspace or earlier on some `PATH` never matches an entry naming
//! `/usr/bin/systemctl`.
//!
//! Like `--approve-shell`, an entry approves only what it says: `*` matches options
//! too (`systemctl status *` approves `systemctl status --help`), and nothing here
//! sees the program's own configuration. See docs/operations.md.

use std::path::{Path, PathBuf};
use thiserror::Error;

/// Most `--approve-exec` entries a node takes.
pub const MAX_ENTRIES: usize = 1024;

/// Why an `--approve-exec` entry was refused (a startup error).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApproveExecError {
    #[error("--approve-exec entry {entry:?} is empty")]
    Empty { entry: String },
    #[error("--approve-exec entry {entry:?}: the program must be an absolute path or a bare name, not a relative path")]
    Relative { entry: String },
    #[error("--approve-exec entry {entry:?}: {program:?} was not found on the node's PATH")]
    NotFound { entry: String, program: String },
    #[error("--approve-exec entry {entry:?}: {program:?} cannot be used: {message}")]
    Unusable {
        entry: String,
        program: String,
        message: String,
    },
    #[error("--approve-exec entry {entry:?}: `**` may only be the last word")]
    InnerRest { entry: String },
    #[error("at most {MAX_ENTRIES} --approve-exec entries")]
    TooMany,
}

/// One word of an entry after the program.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    /// `*`: any one argument.
    Any,
    /// Exactly this argument.
    Literal(String),
}

/// One parsed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The program's canonical absolute path.
    pub program: PathBuf,
    words: Vec<Word>,
    /// Ends with `**`.
    rest: bool,
}

impl Entry {
    /// Parses `entry`, resolving a bare program name against `path` (a `PATH` value).
    pub fn parse(entry: &str, path: Option<&std::ffi::OsStr>) -> Result<Entry, ApproveExecError> {
        let mut words = entry.split_whitespace();
        let Some(program) = words.next() else {
            return Err(ApproveExecError::Empty {
                entry: entry.to_owned(),
            });
        };
        let found = if program.starts_with('/') {
            PathBuf::from(program)
        } else if program.contains('/') {
            return Err(ApproveExecError::Relative {
                entry: entry.to_owned(),
            });
        } else {
            super::program::search_path(program, path).ok_or_else(|| {
                ApproveExecError::NotFound {
                    entry: entry.to_owned(),
                    program: program.to_owned(),
                }
            })?
        };
        let program_path =
            std::fs::canonicalize(&found).map_err(|e| ApproveExecError::Unusable {
                entry: entry.to_owned(),
                program: program.to_owned(),
                message: e.to_string(),
            })?;
        let rest_words: Vec<&str> = words.collect();
        let mut parsed = Vec::with_capacity(rest_words.len());
        let mut rest = false;
        for (i, w) in rest_words.iter().enumerate() {
            match *w {
                "**" if i + 1 == rest_words.len() => rest = true,
                "**" => {
                    return Err(ApproveExecError::InnerRest {
                        entry: entry.to_owned(),
                    })
                }
                "*" => parsed.push(Word::Any),
                other => parsed.push(Word::Literal(other.to_owned())),
            }
        }
        Ok(Entry {
            program: program_path,
            words: parsed,
            rest,
        })
    }

    /// Whether the canonical `program` with arguments `args` (`argv[1..]`) matches.
    pub fn matches(&self, program: &Path, args: &[String]) -> bool {
        if program != self.program {
            return false;
        }
        if args.len() < self.words.len() || (!self.rest && args.len() != self.words.len()) {
            return false;
        }
        self.words.iter().zip(args).all(|(w, a)| match w {
            Word::Any => true,
            Word::Literal(l) => l == a,
        })
    }
}

/// The node's `--approve-exec` entries.
#[derive(Debug, Clone, Default)]
pub struct ApproveExec {
    entries: Vec<Entry>,
}

impl ApproveExec {
    /// Parses `entries`, resolving bare names against the node's own `PATH` now.
    pub fn new(entries: &[String]) -> Result<Self, ApproveExecError> {
        ApproveExec::with_path(entries, std::env::var_os("PATH").as_deref())
    }

    /// [`ApproveExec::new`] with an explicit `PATH`.
    pub fn with_path(
        entries: &[String],
        path: Option<&std::ffi::OsStr>,
    ) -> Result<Self, ApproveExecError> {
        if entries.len() > MAX_ENTRIES {
            return Err(ApproveExecError::TooMany);
        }
        let entries = entries
            .iter()
            .map(|e| Entry::parse(e, path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ApproveExec { entries })
    }

    /// Whether there are entries (the node runs in approve-exec mode).
    pub fn is_on(&self) -> bool {
        !self.entries.is_empty()
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether some entry matches the canonical `program` and `args`.
    pub fn allows(&self, program: &Path, args: &[String]) -> bool {
        self.entries.iter().any(|e| e.matches(program, args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn matching_rules() {
        let true_path = std::fs::canonicalize("/bin/true").unwrap();
        let other = std::fs::canonicalize("/bin/sh").unwrap();
        // (entry, program, argv[1..], matches)
        let table: &[(&str, &Path, &[&str], bool)] = &[
            ("/bin/true", &true_path, &[], true),
            ("/bin/true", &true_path, &["x"], false),
            ("/bin/true status *", &true_path, &["status", "nginx"], true),
            ("/bin/true status *", &true_path, &["status", ""], true),
            ("/bin/true status *", &true_path, &["status"], false),
            (
                "/bin/true status *",
                &true_path,
                &["status", "a", "b"],
                false,
            ),
            ("/bin/true status *", &true_path, &["stop", "nginx"], false),
            ("/bin/true status *", &other, &["status", "nginx"], false),
            ("/bin/true status **", &true_path, &["status"], true),
            (
                "/bin/true status **",
                &true_path,
                &["status", "a", "b"],
                true,
            ),
            ("/bin/true status **", &true_path, &["stop", "a"], false),
            ("/bin/true **", &true_path, &[], true),
            ("/bin/true --user=*", &true_path, &["--user=x"], false),
            ("/bin/true --user=*", &true_path, &["--user=*"], true),
            ("/bin/true * *", &true_path, &["a", "b"], true),
            ("/usr/bin/../bin/true", &true_path, &[], true),
            ("true", &true_path, &[], true),
        ];
        let path = Some(std::ffi::OsStr::new("/usr/bin:/bin"));
        for (entry, program, argv, expected) in table {
            let e = Entry::parse(entry, path).unwrap();
            assert_eq!(
                e.matches(program, &args(argv)),
                *expected,
                "{entry:?} {program:?} {argv:?}"
            );
        }
    }

    #[test]
    fn bad_entries() {
        let path = Some(std::ffi::OsStr::new("/usr/bin:/bin"));
        for (entry, want) in [
            ("", "is empty"),
            ("   ", "is empty"),
            ("./systemctl status *", "not a relative path"),
            ("bin/true", "not a relative path"),
            ("no-such-program-gsv", "not found"),
            ("/no/such/program", "cannot be used"),
            ("/bin/true ** x", "last word"),
        ] {
            let e = Entry::parse(entry, path).unwrap_err();
            assert!(e.to_string().contains(want), "{entry:?}: {e}");
        }
        let many = vec!["/bin/true".to_owned(); MAX_ENTRIES + 1];
        assert_eq!(
            ApproveExec::with_path(&many, path).unwrap_err(),
            ApproveExecError::TooMany
        );
    }

    #[test]
    fn empty_list_is_off() {
        let a = ApproveExec::new(&[]).unwrap();
        assert!(!a.is_on());
        assert!(!a.allows(Path::new("/bin/true"), &[]));
    }
}
