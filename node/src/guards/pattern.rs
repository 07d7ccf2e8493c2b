//! Brace expansion and glob matching, so the blocklist sees the paths the shell would
//! hand a program: `rm -rf /{etc,usr}` removes `/etc` and `/usr`, `rm -rf /[e]tc` and
//! `rm -rf /e*` remove `/etc`.
//!
//! The lexer leaves words as written; the shell expands braces and then globs before
//! the program runs. Expanding globs needs the file system (and would race with it),
//! so instead a glob *word* is matched against the few *paths* the blocklist protects:
//! "could `/e*` name `/etc`?" That over-approximates (the pattern is taken to match
//! whether or not the file exists, and quoted `*` is taken as a glob too), which is
//! the safe direction for a blocklist. Brace expansion is done for real, bounded by
//! [`MAX_EXPANSIONS`]; a word that expands to more is reported as unknown and the
//! caller decides (the blocklist then treats a path-like word as protected).

/// Most words one brace expression may expand to before it is called unknowable.
pub const MAX_EXPANSIONS: usize = 1024;
/// Longest word brace-expanded (longer ones with braces are unknowable).
const MAX_WORD_CHARS: usize = 1024;
/// Most `{` in a word brace-expanded (more are unknowable): bounds the work.
const MAX_BRACES: usize = 64;
/// Widest `{a..b}` range expanded term by term; wider ones become `*`.
const MAX_SEQUENCE: i64 = 64;

/// The words `word` brace-expands to (itself if it has no brace expression), or
/// `None` if there would be more than [`MAX_EXPANSIONS`] or the word is too long.
pub fn expand_braces(word: &str) -> Option<Vec<String>> {
    if !word.contains('{') {
        return Some(vec![word.to_owned()]);
    }
    if word.chars().count() > MAX_WORD_CHARS || word.matches('{').count() > MAX_BRACES {
        return None;
    }
    let mut out = Vec::new();
    expand_into(word, &mut out)?;
    Some(out)
}

fn expand_into(word: &str, out: &mut Vec<String>) -> Option<()> {
    let chars: Vec<char> = word.chars().collect();
    let mut search = 0;
    while let Some(open) = chars
        .iter()
        .skip(search)
        .position(|&c| c == '{')
        .map(|p| p + search)
    {
        search = open + 1;
        // `${…}` is a parameter, not a brace expression.
        if open > 0 && chars[open - 1] == '$' {
            continue;
        }
        let Some(close) = matching_brace(&chars, open) else {
            break;
        };
        let inner: String = chars[open + 1..close].iter().collect();
        let items = match split_top_level_commas(&inner) {
            alternatives if alternatives.len() > 1 => alternatives,
            _ => match sequence(&inner) {
                Some(items) => items,
                // `{x}`, `{}`: literal braces; look further on.
                None => continue,
            },
        };
        let prefix: String = chars[..open].iter().collect();
        let suffix: String = chars[close + 1..].iter().collect();
        for item in items {
            expand_into(&format!("{prefix}{item}{suffix}"), out)?;
        }
        return Some(());
    }
    out.push(word.to_owned());
    (out.len() <= MAX_EXPANSIONS).then_some(())
}

/// The index of the `}` closing the `{` at `open`, if any.
fn matching_brace(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `a,{b,c},d` → `a`, `{b,c}`, `d`.
fn split_top_level_commas(inner: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut depth = 0usize;
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
}

/// `{1..5}`, `{a..e}`, `{1..9..2}`: every term (the step is ignored: a superset);
/// numeric ranges wider than [`MAX_SEQUENCE`], or zero-padded, become `*`.
fn sequence(inner: &str) -> Option<Vec<String>> {
    let mut ends = inner.splitn(3, "..");
    let (Some(a), Some(b)) = (ends.next(), ends.next()) else {
        return None;
    };
    if let Some(step) = ends.next() {
        step.parse::<i64>().ok()?;
    }
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let padded = |s: &str| {
            s.trim_start_matches('-').len() > 1 && s.trim_start_matches('-').starts_with('0')
        };
        if padded(a) || padded(b) || (x - y).abs() > MAX_SEQUENCE {
            return Some(vec!["*".to_owned()]);
        }
        let (lo, hi) = (x.min(y), x.max(y));
        return Some((lo..=hi).map(|n| n.to_string()).collect());
    }
    let (mut ca, mut cb) = (a.chars(), b.chars());
    match (ca.next(), ca.next(), cb.next(), cb.next()) {
        (Some(x), None, Some(y), None) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
            let (lo, hi) = (x.min(y), x.max(y));
            Some((lo..=hi).map(String::from).collect())
        }
        _ => None,
    }
}

/// Whether the glob `pattern` (`*`, `?`, `[…]` with `!`/`^` and ranges) could match
/// `name`, one path component. `[[:class:]]` is taken to match any character.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = name.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, text index).
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi + 1, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(1),
            Some('[') => match class(&p, pi) {
                Some((end, set)) => set.matches(t[ti]).then_some(end - pi),
                None => (t[ti] == '[').then_some(1),
            },
            Some(&c) => (c == t[ti]).then_some(1),
            None => None,
        };
        match step {
            Some(n) => {
                pi += n;
                ti += 1;
            }
            None => match star {
                Some((sp, st)) => {
                    pi = sp;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A bracket expression.
struct Class {
    negated: bool,
    any_named: bool,
    ranges: Vec<(char, char)>,
}

impl Class {
    fn matches(&self, c: char) -> bool {
        let hit = self.any_named || self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        hit != self.negated
    }
}

/// The bracket expression starting at `p[start] == '['`: the index after its `]` and
/// the class, or `None` if it is not closed (then `[` is literal).
fn class(p: &[char], start: usize) -> Option<(usize, Class)> {
    let mut i = start + 1;
    let negated = matches!(p.get(i), Some('!') | Some('^'));
    if negated {
        i += 1;
    }
    let mut class = Class {
        negated,
        any_named: false,
        ranges: Vec::new(),
    };
    let first = i;
    while let Some(&c) = p.get(i) {
        if c == ']' && i > first {
            return Some((i + 1, class));
        }
        if c == '[' && p.get(i + 1) == Some(&':') {
            // `[:alpha:]` and friends: any character (a superset).
            let end =
                (i + 2..p.len().saturating_sub(1)).find(|&j| p[j] == ':' && p[j + 1] == ']')?;
            class.any_named = true;
            i = end + 2;
            continue;
        }
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            class.ranges.push((c, p[i + 2]));
            i += 3;
        } else {
            class.ranges.push((c, c));
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_expand_like_bash() {
        assert_eq!(expand_braces("/{etc,usr}").unwrap(), ["/etc", "/usr"]);
        assert_eq!(expand_braces("/{e,}tc").unwrap(), ["/etc", "/tc"]);
        assert_eq!(expand_braces("{/etc,/tmp}/").unwrap(), ["/etc/", "/tmp/"]);
        assert_eq!(expand_braces("/{a,{b,c}d}").unwrap(), ["/a", "/bd", "/cd"]);
        assert_eq!(
            expand_braces("/{a,b}{1,2}").unwrap(),
            ["/a1", "/a2", "/b1", "/b2"]
        );
        assert_eq!(
            expand_braces("/lib{30..33}").unwrap(),
            ["/lib30", "/lib31", "/lib32", "/lib33"]
        );
        assert_eq!(
            expand_braces("/{d..f}tc").unwrap(),
            ["/dtc", "/etc", "/ftc"]
        );
        assert_eq!(expand_braces("/x{1..100000}").unwrap(), ["/x*"]);
        assert_eq!(expand_braces("/x{01..3}").unwrap(), ["/x*"]);
        // Not brace expressions.
        assert_eq!(expand_braces("${HOME}").unwrap(), ["${HOME}"]);
        assert_eq!(expand_braces("/{etc}").unwrap(), ["/{etc}"]);
        assert_eq!(expand_braces("{}").unwrap(), ["{}"]);
        assert_eq!(expand_braces("/{a,b").unwrap(), ["/{a,b"]);
        // Too many: unknowable.
        assert_eq!(expand_braces(&"{a,b}".repeat(11)), None);
        assert_eq!(expand_braces(&format!("/{}", "{1..1}".repeat(65))), None);
        assert_eq!(
            expand_braces(&format!("/{}", "{1..1}".repeat(64))).unwrap(),
            [format!("/{}", "1".repeat(64))]
        );
        assert_eq!(expand_braces(&format!("/{{{}}}", "a,".repeat(2000))), None);
    }

    #[test]
    fn globs_match_names() {
        for (pattern, name) in [
            ("e*", "etc"),
            ("*", "etc"),
            ("[e]tc", "etc"),
            ("[a-f]t?", "etc"),
            ("[!x]tc", "etc"),
            ("[^x]tc", "etc"),
            ("?t*", "etc"),
            ("*c", "etc"),
            ("e**c", "etc"),
            ("[[:alpha:]]tc", "etc"),
            ("etc", "etc"),
            ("[]]", "]"),
        ] {
            assert!(glob_matches(pattern, name), "{pattern} ~ {name}");
        }
        for (pattern, name) in [
            ("t*", "etc"),
            ("[!e]tc", "etc"),
            ("??", "etc"),
            ("etc?", "etc"),
            ("e[", "etc"),
            ("[e", "etc"),
            ("x*y", "xay/"),
        ] {
            assert!(!glob_matches(pattern, name), "{pattern} !~ {name}");
        }
    }
}
