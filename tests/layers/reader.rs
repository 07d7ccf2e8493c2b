//! Reading a crate's sources as imports: its code with comments, strings and unit
//! tests left out, and the top-level modules it names.

use std::collections::BTreeSet;

/// The source's code: comments, string and char literals blanked out, and
/// `#[cfg(test)]` modules left out.
pub fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some((open, hashes)) = raw_string_start(rest, out.chars().next_back()) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + open;
            i = src[body..]
                .find(&close)
                .map_or(b.len(), |e| body + e + close.len());
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{1b}') or a lifetime ('a).
            let mut chars = rest[1..].chars();
            let first = chars.next();
            let literal_end = if first == Some('\\') {
                rest[2..].find('\'').map(|k| k + 3)
            } else if chars.next() == Some('\'') {
                first.map(|c| 2 + c.len_utf8())
            } else {
                None
            };
            match literal_end {
                Some(end) => {
                    i += end;
                    out.push_str("' '");
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    without_test_modules(&out)
}

/// `r"`, `r#"`, `br##"`… (not inside an identifier, `before` being the character
/// before it): the opening's length and how many `#` the raw string uses.
fn raw_string_start(s: &str, before: Option<char>) -> Option<(usize, usize)> {
    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let (b, s) = match s.strip_prefix('b') {
        Some(rest) => (1, rest),
        None => (0, s),
    };
    let s = s.strip_prefix('r')?;
    let hashes = s.bytes().take_while(|&c| c == b'#').count();
    s[hashes..]
        .starts_with('"')
        .then_some((b + 1 + hashes + 1, hashes))
}

/// `code` without the items under `#[cfg(test)]` (unit tests are no floor's).
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The gated item runs to its first `;` or to the brace closing its first `{`.
        let open = after.find('{');
        let semi = after.find(';');
        let end = match (open, semi) {
            (Some(o), Some(s)) if s < o => s + 1,
            (Some(o), _) => {
                let mut depth = 0;
                let mut end = after.len();
                for (k, c) in after[o..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = o + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The top-level modules a file's code names through `crate::`.
pub fn named_modules(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e, f}}`: the first name of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        found.insert(ident_at(&group[k..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(rest);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

fn ident_at(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}
