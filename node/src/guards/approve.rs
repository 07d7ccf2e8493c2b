//! Auto-approve patterns for Bash (`gsv node --approve-shell REGEX`): the devicemesh
//! posture, where inspection commands run at once and anything else waits for an
//! operator.
//!
//! A command line is auto-approved only if **every** simple command in it — each part
//! of a `;` / `&&` / `||` / `|` / newline chain, and each command nested in `$(…)`,
//! backticks or a process substitution — fully matches at least one pattern. Each
//! pattern is anchored (`^(?:PATTERN)$`) and matched against the simple command's
//! normalised text (words separated by single spaces, quotes and escapes removed,
//! redirections written `> FILE`, `2>&1`).
//!
//! Why per simple command and anchored: matched against the whole line, a pattern like
//! `^ls .*` would also approve `ls; rm -rf build`, and an unanchored `ls` would approve
//! `rm -rf build # ls`. Even so a pattern is only as tight as it is written, and a
//! regex cannot tell which options write files or run programs: `git diff .*` also
//! matches `git diff --output=~/.bashrc`. So a simple command that matches still goes
//! to an operator when it carries such an option or writes through a redirection
//! ([`super::risky`] holds the table). Wrappers are not skipped when matching (`sudo
//! ls` needs a pattern that allows `sudo`). Nothing here sees what the program itself
//! reads — its configuration files, the environment, aliases, a git repository's own
//! `.git/config` and hooks — so a pattern is only as safe as those are; see
//! docs/security.md.
//!
//! Commands that match no pattern are not refused: the node answers
//! `approval_required`, the gateway opens an approval request, and once an operator
//! approves it the gateway sends the call again with the request's id. The node does
//! not check that id against anything: **this guard trusts the gateway's word that an
//! operator approved** (unlike the blocklist, which trusts nobody). It protects against
//! a gateway whose policy is too permissive, not against a compromised gateway.

use super::risky::risk;
use super::shell::lex;
use super::GuardError;
use regex::{RegexSet, RegexSetBuilder};

/// How deep nested command lines are followed; deeper ones are never auto-approved.
const MAX_NESTING: usize = super::blocklist::MAX_NESTING;

/// The compiled `--approve-shell` patterns.
#[derive(Debug, Clone)]
pub struct ApproveShell {
    set: RegexSet,
}

impl ApproveShell {
    /// Compiles `patterns` (each anchored as a full match). An empty list gives a
    /// matcher that approves nothing; [`super::ShellGuard`] treats an empty list as
    /// "approve-shell mode off" instead.
    pub fn new(patterns: &[String]) -> Result<Self, GuardError> {
        for pattern in patterns {
            // Compile each alone, unanchored, first: the error then names the bad one,
            // and a pattern that is valid alone has balanced groups, so it cannot
            // close the anchoring group early (`)|(.*` would match everything).
            regex::Regex::new(pattern).map_err(|e| GuardError::Pattern {
                pattern: pattern.clone(),
                message: e.to_string(),
            })?;
        }
        let set = RegexSetBuilder::new(patterns.iter().map(|p| anchored(p)))
            .build()
            .map_err(|e| GuardError::Pattern {
                pattern: patterns.join(" "),
                message: e.to_string(),
            })?;
        Ok(ApproveShell { set })
    }

    /// The first simple command in `command` that is not auto-approved — no pattern
    /// matches it, or it matches but carries an option that writes files or runs
    /// programs ([`super::risky`]) — or `None` if every one is approved.
    pub fn unapproved(&self, command: &str) -> Option<Unapproved> {
        self.first_unapproved(command, 0)
    }

    fn first_unapproved(&self, text: &str, depth: usize) -> Option<Unapproved> {
        if depth > MAX_NESTING {
            return Some(Unapproved {
                command: text.to_owned(),
                risk: Some("it nests command lines too deeply to check".to_owned()),
            });
        }
        let script = lex(text);
        for command in &script.commands {
            let normalised = command.text();
            if !self.set.is_match(&normalised) {
                return Some(Unapproved {
                    command: normalised,
                    risk: None,
                });
            }
            if let Some(why) = risk(command) {
                return Some(Unapproved {
                    command: normalised,
                    risk: Some(why),
                });
            }
        }
        script
            .nested
            .iter()
            .find_map(|n| self.first_unapproved(n, depth + 1))
    }
}

/// A simple command that is not auto-approved, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unapproved {
    /// Its normalised text.
    pub command: String,
    /// `None`: no pattern matches it; `Some`: a pattern matches but this makes it
    /// write files or run programs.
    pub risk: Option<String>,
}

fn anchored(pattern: &str) -> String {
    format!("^(?:{pattern})$")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(patterns: &[&str]) -> ApproveShell {
        ApproveShell::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn every_simple_command_must_match_in_full() {
        let m = matcher(&["echo .*", "ls( .*)?", "git (status|log)( .*)?", "wc -l"]);
        for approved in [
            "echo hi",
            "ls",
            "ls -la /tmp",
            "  ls   -la  ",
            "git status --short",
            "ls | wc -l",
            "echo a && echo b; ls\nls -l",
            r#"echo "a; rm -rf x""#,
            "'ls' -l",
            "echo $(ls)",
            "echo `echo hi`",
            "echo hi > /dev/null",
        ] {
            assert_eq!(m.unapproved(approved), None, "{approved:?}");
        }
        for (command, first) in [
            ("touch x", "touch x"),
            ("echo hi; touch x", "touch x"),
            ("ls && rm -rf build", "rm -rf build"),
            ("ls | sh", "sh"),
            ("echo $(touch x)", "touch x"),
            ("echo `touch x`", "touch x"),
            ("cat <(touch x)", "cat <(touch x)"),
            ("echo <(touch x)", "touch x"),
            ("git push", "git push"),
            ("sudo ls", "sudo ls"),
            ("ls; wc", "wc"),
            ("xls", "xls"),
            ("lsblk", "lsblk"),
            ("cat <<EOF\n$(touch x)\nEOF", "cat << EOF"),
        ] {
            let u = m.unapproved(command).expect(command);
            assert_eq!(u.command, first, "{command:?}");
            assert_eq!(u.risk, None, "{command:?}");
        }
        // Substitutions inside an unquoted here-document run too.
        let m = matcher(&["cat << EOF"]);
        assert_eq!(
            m.unapproved("cat <<EOF\n$(touch x)\nEOF")
                .map(|u| u.command),
            Some("touch x".to_owned())
        );
        assert_eq!(m.unapproved("cat <<'EOF'\n$(touch x)\nEOF"), None);
    }

    #[test]
    fn patterns_are_anchored() {
        let m = matcher(&["ls"]);
        assert_eq!(m.unapproved("ls"), None);
        assert!(m.unapproved("ls -l").is_some());
        assert!(m.unapproved("rm -rf x # ls").is_some());
        assert!(m.unapproved("cals").is_some());
        // An alternation cannot escape the anchors.
        let m = matcher(&["ls|cat"]);
        assert_eq!(m.unapproved("cat"), None);
        assert!(m.unapproved("cat x").is_some());
        assert!(m.unapproved("rm x; ls").is_some());
    }

    #[test]
    fn an_empty_list_approves_nothing() {
        assert_eq!(
            matcher(&[]).unapproved("ls").map(|u| u.command),
            Some("ls".to_owned())
        );
    }

    #[test]
    fn a_match_that_writes_or_runs_still_needs_an_operator() {
        // The pattern the docs used to recommend, and wider ones.
        let m = matcher(&[
            "git (status|log|diff)( [^>]*)?",
            "echo .*",
            "find .*",
            "sed .*",
        ]);
        for approved in [
            "git status",
            "git diff --stat",
            "git log --oneline | echo x",
            "echo hi",
            "find . -name x",
            "sed -n 1p f",
        ] {
            assert_eq!(m.unapproved(approved), None, "{approved:?}");
        }
        for (command, first) in [
            ("git diff --output=/tmp/x", "git diff --output=/tmp/x"),
            (
                "git status; git diff --output /tmp/x",
                "git diff --output /tmp/x",
            ),
            ("echo $(git diff --ext-diff)", "git diff --ext-diff"),
            ("echo x > ~/.bashrc", "echo x > ~/.bashrc"),
            ("find . -exec sh {} ;", "find . -exec sh {}"),
            ("sed -i s/a/b/ f", "sed -i s/a/b/ f"),
            ("sed 'w /tmp/o' f", "sed w /tmp/o f"),
        ] {
            let u = m.unapproved(command).expect(command);
            assert_eq!(u.command, first, "{command:?}");
            assert!(u.risk.is_some(), "{command:?}");
        }
    }

    #[test]
    fn bad_patterns_are_named() {
        let e = ApproveShell::new(&["ls".into(), "(".into()]).unwrap_err();
        let GuardError::Pattern { pattern, .. } = &e;
        assert_eq!(pattern, "(");
        assert!(e.to_string().contains("--approve-shell"), "{e}");
        // A pattern that would close the anchoring group early is refused too.
        assert!(ApproveShell::new(&[")|(.*".into()]).is_err());
    }
}
