//! Text from agents and nodes made safe to print on an operator's terminal.
//!
//! Node ids, tool descriptions, approval summaries, audit actors and error messages
//! reach `gsv`'s output from agents and nodes that may be hostile. Printed raw, a
//! cursor-movement escape can make `gsv approvals list` show `echo tidy-up` for an
//! `rm -rf` (the terminal redraws the line), and a bidi override can reverse what a
//! person reads. Every human-readable line `gsv` prints with such text goes through
//! [`safe`]: C0 and C1 control characters, DEL, bidi controls, zero-width and line
//! separator characters are shown as visible escapes (`\x1b`, `\u{202e}`), everything
//! else is left alone. `--json` output is escaped by JSON itself.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` could change what a terminal shows without being shown itself.
fn is_hidden(c: char) -> bool {
    c.is_control() // C0, DEL, C1 (newline and tab included: one field, one line)
        || matches!(c,
            '\u{061C}'              // Arabic letter mark
            | '\u{200B}'..='\u{200F}' // zero-width space/joiners, LRM, RLM
            | '\u{2028}'..='\u{202E}' // line/paragraph separators, bidi embeddings/overrides
            | '\u{2060}'..='\u{2069}' // word joiner, invisible operators, bidi isolates
            | '\u{FEFF}'            // zero-width no-break space
        )
}

/// `text` with every character that could hide or rewrite what a terminal shows
/// replaced by a visible escape. Borrows when there is nothing to escape.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_hidden(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let s = "laptop__Bash: ls -la /tmp — café ✓";
        assert!(matches!(safe(s), Cow::Borrowed(_)));
        assert_eq!(safe(s), s);
    }

    #[test]
    fn escapes_that_rewrite_a_line_become_visible() {
        // Carriage return, erase line, cursor up, OSC title, C1 CSI.
        let s = "rm -rf ~\r\x1b[2K\x1b[1Aecho tidy-up\x1b]0;x\x07\u{9b}31m";
        let out = safe(s);
        assert!(!out.chars().any(is_hidden), "{out}");
        assert_eq!(
            out,
            "rm -rf ~\\r\\x1b[2K\\x1b[1Aecho tidy-up\\x1b]0;x\\x07\\x9b31m"
        );
    }

    #[test]
    fn bidi_and_invisible_characters_are_shown() {
        for c in [
            '\u{202E}', '\u{2066}', '\u{2069}', '\u{200F}', '\u{200B}', '\u{FEFF}', '\u{2028}',
            '\u{061C}',
        ] {
            let input = format!("a{c}b");
            let out = safe(&input);
            assert_eq!(out, format!("a\\u{{{:04x}}}b", c as u32));
        }
        assert_eq!(safe("two\nlines\tx"), "two\\nlines\\tx");
    }
}
