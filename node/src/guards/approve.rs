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
//! `rm -rf build # ls`. Even so a pattern is only as tight as it is written: `.*` also
//! matches redirections (`echo .*` approves `echo x > ~/.bashrc`), and wrappers are not
//! skipped (`sudo ls` needs a pattern that allows `sudo`). Prefer patterns such as
//! `git (status|log|diff)( [^>]*)?`.
//!
//! Commands that match no pattern are not refused: the node answers
//! `approval_required`, the gateway opens an approval request, and once an operator
//! approves it the gateway sends the call again with the request's id. The node does
//! not check that id against anything: **this guard trusts the gateway's word that an
//! operator approved** (unlike the blocklist, which trusts nobody). It protects against
//! a gateway whose policy is too permissive, not against a compromised gateway.

use super::shell::{lex, SimpleCommand};
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

    /// The first simple command in `command` that no pattern approves (its normalised
    /// text), or `None` if every one is approved.
    pub fn unapproved(&self, command: &str) -> Option<String> {
        self.first_unapproved(command, 0)
    }

    fn first_unapproved(&self, text: &str, depth: usize) -> Option<String> {
        if depth > MAX_NESTING {
            return Some(text.to_owned());
        }
        let script = lex(text);
        if let Some(c) = script
            .commands
            .iter()
            .map(SimpleCommand::text)
            .find(|t| !self.set.is_match(t))
        {
            return Some(c);
        }
        script
            .nested
            .iter()
            .find_map(|n| self.first_unapproved(n, depth + 1))
    }
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
            "echo hi > out.txt",
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
            assert_eq!(m.unapproved(command).as_deref(), Some(first), "{command:?}");
        }
        // Substitutions inside an unquoted here-document run too.
        let m = matcher(&["cat << EOF"]);
        assert_eq!(
            m.unapproved("cat <<EOF\n$(touch x)\nEOF").as_deref(),
            Some("touch x")
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
        assert_eq!(matcher(&[]).unapproved("ls").as_deref(), Some("ls"));
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
