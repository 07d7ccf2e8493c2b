//! How many files ignore rules kept out of a Glob or Grep, and the switch to turn the
//! rules off (`noIgnore`).
//!
//! Glob and Grep walk like fd and rg: `.gitignore`, `.ignore`, `.git/info/exclude` and
//! the global gitignore leave files out. Whoever can write a file can also write such a
//! rule next to it, so a walk that applied the rules silently would let one agent hide
//! a planted file from every other agent's searches. Both tools therefore say how many
//! files the rules left out (`ignoredSkipped` in `structuredContent`, always present,
//! `0` when none, and a line of text when there are some), and take `noIgnore: true`
//! to walk without the rules (hidden files are handled as before).
//!
//! The `ignore` crate does not report what it skips, so the count comes from a second
//! walk of the same root with the rules off and everything else the same (hidden
//! files, depth, protected directories, symlink handling, the tool's own filters). That
//! walk never reads a file — it looks at names and file types (Glob also gives the
//! matches it did not list its usual second look) — and stops after [`COUNT_CAP`]
//! entries or when the call is cancelled. A count cut short is a lower
//! bound, and the result says so with `"ignoredSkippedAtLeast": true`. A result the
//! tool cut short (too many matches) is not counted at all ([`Count::not_counted`],
//! the same flag): the agent must narrow the search anyway, and a second walk of the
//! whole tree would cost more than the search itself. Files created or removed between
//! the two walks can make the count off by that many.

use crate::tools::output::is_false;
use ignore::{DirEntry, WalkBuilder, WalkState};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio_util::sync::CancellationToken;

/// Most entries one counting walk looks at.
pub const COUNT_CAP: usize = 100_000;

/// Makes `builder` apply ignore rules (`.gitignore`, `.ignore`, `.git/info/exclude`,
/// the global gitignore, and those of the root's parents) or not. Hidden-file handling
/// is a separate switch and is left alone.
pub fn rules(builder: &mut WalkBuilder, apply: bool) -> &mut WalkBuilder {
    builder
        .ignore(apply)
        .git_ignore(apply)
        .git_global(apply)
        .git_exclude(apply)
        .parents(apply)
}

/// What one entry met by a counting walk is to the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A file the tool would have listed or searched: counted.
    Candidate,
    /// Anything else: not counted, the walk goes on.
    Other,
    /// Not counted, and a directory not entered (as the tool's own walk would).
    Prune,
}

/// Files counted, and whether the count stopped early.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    pub n: usize,
    /// The count stopped at [`COUNT_CAP`] entries: `n` is a lower bound.
    pub cut: bool,
    /// Not counted at all: the tool's result was cut short (too many matches), and the
    /// agent has to narrow the search anyway (`n` is 0 and `cut` true).
    pub skipped: bool,
}

impl Count {
    /// No count: the result was cut short.
    pub fn not_counted() -> Count {
        Count {
            n: 0,
            cut: true,
            skipped: true,
        }
    }

    /// What the tool's structured content says about the count ([`IgnoredSkipped`],
    /// flattened into it), after adding a line to `text` when there is something to
    /// say (`verb`: what the tool did not do to those files, e.g. "listed").
    pub fn report(self, text: &mut String, verb: &str) -> IgnoredSkipped {
        let fields = IgnoredSkipped {
            ignored_skipped: self.n,
            ignored_skipped_at_least: self.cut,
        };
        let line = match (self.n, self.cut) {
            _ if self.skipped => {
                "[The result was cut short, so files hidden by .gitignore/.ignore rules were \
                 not counted; narrow the search, or pass noIgnore: true to include them.]"
                    .to_owned()
            }
            (0, false) => return fields,
            (0, true) => format!(
                "[Ignore rules were applied; the files they hide were not counted past \
                 {COUNT_CAP} entries. Pass noIgnore: true to include any.]"
            ),
            (n, cut) => format!(
                "[{}{n} {} hidden by .gitignore/.ignore rules {} not {verb}; pass noIgnore: \
                 true to include them.]",
                if cut { "At least " } else { "" },
                if n == 1 { "file" } else { "files" },
                if n == 1 { "was" } else { "were" },
            ),
        };
        text.push_str("\n\n");
        text.push_str(&line);
        fields
    }
}

/// The count in Glob's and Grep's structured content (flattened into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnoredSkipped {
    /// Files the ignore rules left out; always present, `0` when none.
    pub ignored_skipped: usize,
    /// Present (`true`) only when the count is a lower bound: it stopped at
    /// [`COUNT_CAP`] entries, or the result was cut short and nothing was counted.
    #[serde(skip_serializing_if = "is_false")]
    pub ignored_skipped_at_least: bool,
}

/// Walks with `builder` — set up like the tool's own walk — with ignore rules off and
/// counts the entries `seen` calls candidates, stopping after [`COUNT_CAP`] entries
/// (the count is then `cut`) or when `cancel` fires.
pub fn count_without_rules<F>(
    builder: &mut WalkBuilder,
    cancel: &CancellationToken,
    seen: F,
) -> Count
where
    F: Fn(&DirEntry) -> Seen + Sync,
{
    count(builder, cancel, COUNT_CAP, seen)
}

/// [`count_without_rules`] with the cap as a parameter.
fn count<F>(builder: &mut WalkBuilder, cancel: &CancellationToken, cap: usize, seen: F) -> Count
where
    F: Fn(&DirEntry) -> Seen + Sync,
{
    rules(builder, false);
    let walked = AtomicUsize::new(0);
    let found = AtomicUsize::new(0);
    let cut = AtomicBool::new(false);
    builder.build_parallel().run(|| {
        let (walked, found, cut, seen) = (&walked, &found, &cut, &seen);
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            if walked.fetch_add(1, Ordering::Relaxed) >= cap {
                cut.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            match seen(&entry) {
                Seen::Candidate => {
                    found.fetch_add(1, Ordering::Relaxed);
                    WalkState::Continue
                }
                Seen::Other => WalkState::Continue,
                Seen::Prune => WalkState::Skip,
            }
        })
    });
    Count {
        n: found.into_inner(),
        cut: cut.into_inner(),
        skipped: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &std::path::Path, rel: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, rel).unwrap();
    }

    fn files(e: &DirEntry) -> Seen {
        match e.file_type().is_some_and(|t| t.is_file()) {
            true => Seen::Candidate,
            false => Seen::Other,
        }
    }

    #[test]
    fn counts_what_the_rules_would_hide() {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "a.txt");
        put(dir.path(), "secret/planted.txt");
        std::fs::write(dir.path().join("secret/.ignore"), "*\n").unwrap();
        let cancel = CancellationToken::new();
        // Hidden files stay out (`.ignore` itself is hidden): a.txt and planted.txt.
        let all = count_without_rules(&mut WalkBuilder::new(dir.path()), &cancel, files);
        assert_eq!(
            all,
            Count {
                n: 2,
                cut: false,
                skipped: false
            }
        );
        // The same builder with the rules on finds one.
        let mut with = WalkBuilder::new(dir.path());
        rules(&mut with, true).require_git(false);
        let on = with
            .build()
            .filter_map(Result::ok)
            .filter(|e| files(e) == Seen::Candidate)
            .count();
        assert_eq!(on, 1);
        // Pruned directories are not entered.
        let pruned = count_without_rules(&mut WalkBuilder::new(dir.path()), &cancel, |e| {
            match e.file_name() == "secret" {
                true => Seen::Prune,
                false => files(e),
            }
        });
        assert_eq!(pruned.n, 1);
        // A cancelled call counts nothing.
        cancel.cancel();
        let none = count_without_rules(&mut WalkBuilder::new(dir.path()), &cancel, files);
        assert_eq!(none.n, 0);
    }

    #[test]
    fn counts_stop_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..20 {
            put(dir.path(), &format!("d{}/{i}", i % 3));
        }
        let cancel = CancellationToken::new();
        // 24 entries: the root, 3 directories, 20 files.
        let c = count(&mut WalkBuilder::new(dir.path()), &cancel, 10, files);
        assert!(c.cut && c.n < 10, "{c:?}");
        let c = count(&mut WalkBuilder::new(dir.path()), &cancel, 24, files);
        assert_eq!(
            c,
            Count {
                n: 20,
                cut: false,
                skipped: false
            }
        );
    }

    #[test]
    fn reports() {
        let cases = [
            (Count { n: 0, cut: false, skipped: false }, None),
            (
                Count { n: 1, cut: false, skipped: false },
                Some("[1 file hidden by .gitignore/.ignore rules was not listed; pass noIgnore: true to include them.]"),
            ),
            (
                Count { n: 3, cut: true, skipped: false },
                Some("[At least 3 files hidden by .gitignore/.ignore rules were not listed; pass noIgnore: true to include them.]"),
            ),
            (Count { n: 0, cut: true, skipped: false }, Some("were not counted past 100000 entries")),
            (Count::not_counted(), Some("The result was cut short")),
        ];
        for (count, line) in cases {
            let mut text = "body".to_owned();
            let structured = serde_json::to_value(count.report(&mut text, "listed")).unwrap();
            let want = match count.cut {
                true => {
                    serde_json::json!({"ignoredSkipped": count.n, "ignoredSkippedAtLeast": true})
                }
                false => serde_json::json!({"ignoredSkipped": count.n}),
            };
            assert_eq!(structured, want);
            match line {
                None => assert_eq!(text, "body"),
                Some(line) => assert!(
                    text.starts_with("body\n\n") && text.contains(line),
                    "{text}"
                ),
            }
        }
    }
}
