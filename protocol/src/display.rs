//! The one set of rules for showing agent- or node-given text to a person.
//!
//! Every surface a person reads — `gsv`'s terminal output, the console, the approval
//! webhook's `text`, MCP elicitation questions, `gsv approvals` and `gsv activity` —
//! shows text that a hostile agent or node may have chosen. Shown raw, a cursor escape
//! can redraw `rm -rf ~` as `echo tidy-up`, a bidi override can reverse what follows it
//! (the gateway's own text included), and a zero-width character can make two different
//! paths look the same. So every such surface goes through [`safe`] (and, for long
//! values, [`cut`]): the characters in [`HIDDEN`] are shown as visible escapes (`\x1b`,
//! `\u{202e}`), each escape a visible mark; everything else is left alone. The console
//! renders with the same table: the gateway serves [`HIDDEN`] to the page, so there is
//! one list, here.

use std::borrow::Cow;
use std::fmt::Write;

/// Ranges (inclusive, as code points) of the characters that could change what a person
/// sees without being seen themselves, beside every Unicode control character
/// (C0, DEL, C1: [`char::is_control`]).
pub const HIDDEN: &[(u32, u32)] = &[
    (0x0000, 0x001F),   // C0 controls, newline and tab included: one field, one line
    (0x007F, 0x009F),   // DEL and C1 controls (CSI 0x9b among them)
    (0x00AD, 0x00AD),   // soft hyphen
    (0x034F, 0x034F),   // combining grapheme joiner
    (0x061C, 0x061C),   // Arabic letter mark
    (0x115F, 0x1160),   // Hangul fillers
    (0x17B4, 0x17B5),   // Khmer invisible vowels
    (0x180B, 0x180F),   // Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),   // zero-width space, non-joiner, joiner, LRM, RLM
    (0x2028, 0x202E),   // line/paragraph separators, bidi embeddings and overrides
    (0x2060, 0x206F),   // word joiner, invisible operators, bidi isolates, deprecated formats
    (0x3164, 0x3164),   // Hangul filler
    (0xFE00, 0xFE0F),   // variation selectors
    (0xFEFF, 0xFEFF),   // zero-width no-break space (BOM)
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler
    (0xFFF9, 0xFFFB),   // interlinear annotation controls
    (0x1D173, 0x1D17A), // musical symbol format controls
    (0xE0000, 0xE007F), // tag characters
    (0xE0100, 0xE01EF), // variation selectors supplement
];

/// Whether `c` could hide or rewrite what a person reads.
pub fn is_hidden(c: char) -> bool {
    let n = c as u32;
    c.is_control() || HIDDEN.iter().any(|&(lo, hi)| (lo..=hi).contains(&n))
}

/// `text` with every hidden character replaced by a visible escape: `\n`, `\r`, `\t`,
/// `\xNN` below U+0100, `\u{NNNN}` above. Borrows when there is nothing to escape.
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

/// The marker put after a value cut by [`cut`]: `…(+N more characters)`.
pub fn more_marker(left_out: usize) -> String {
    format!("…(+{left_out} more characters)")
}

/// `text`, or its first `max` characters followed by [`more_marker`] with how many were
/// left out: never a silent cut. Not escaped: call [`shown`] for text a person reads.
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((at, _)) => {
            let left_out = text[at..].chars().count();
            Cow::Owned(format!("{}{}", &text[..at], more_marker(left_out)))
        }
    }
}

/// `text` as a person should read it: cut to `max` characters (with the marker), then
/// every hidden character escaped. The marker is added after the cut, so an agent
/// cannot forge a shorter-looking value by writing its own marker: a real cut always
/// ends the shown text, and the count it gives is of the original characters.
pub fn shown(text: &str, max: usize) -> Cow<'_, str> {
    match cut(text, max) {
        Cow::Borrowed(t) => safe(t),
        Cow::Owned(t) => Cow::Owned(safe(&t).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let s = "laptop__Bash: ls -la /tmp — café ✓ 日本語";
        assert!(matches!(safe(s), Cow::Borrowed(_)));
        assert_eq!(safe(s), s);
        assert!(matches!(shown(s, 100), Cow::Borrowed(_)));
    }

    #[test]
    fn escapes_that_rewrite_a_line_become_visible() {
        let s = "rm -rf ~\r\x1b[2K\x1b[1Aecho tidy-up\x1b]0;x\x07\u{9b}31m";
        let out = safe(s);
        assert!(!out.chars().any(is_hidden), "{out}");
        assert_eq!(
            out,
            "rm -rf ~\\r\\x1b[2K\\x1b[1Aecho tidy-up\\x1b]0;x\\x07\\x9b31m"
        );
    }

    #[test]
    fn bidi_zero_width_and_tag_characters_are_shown() {
        for c in [
            '\u{202E}',
            '\u{2066}',
            '\u{2069}',
            '\u{200F}',
            '\u{200B}',
            '\u{FEFF}',
            '\u{2028}',
            '\u{061C}',
            '\u{00AD}',
            '\u{FE0F}',
            '\u{E0041}',
            '\u{3164}',
        ] {
            let input = format!("a{c}b");
            let out = safe(&input);
            assert_eq!(
                out,
                format!("a\\u{{{:04x}}}b", c as u32).replace("\\u{00ad}", "\\xad")
            );
        }
        assert_eq!(safe("two\nlines\tx"), "two\\nlines\\tx");
    }

    #[test]
    fn every_listed_range_is_hidden_and_ordinary_letters_are_not() {
        for &(lo, hi) in HIDDEN {
            assert!(lo <= hi);
            for n in [lo, hi] {
                if let Some(c) = char::from_u32(n) {
                    assert!(is_hidden(c), "{n:#x}");
                }
            }
        }
        for c in ['a', 'é', '—', '✓', '日', '🙂', ' '] {
            assert!(!is_hidden(c), "{c}");
        }
    }

    #[test]
    fn a_cut_says_how_much_was_left_out_and_cannot_be_forged_shorter() {
        assert_eq!(cut("abcdef", 10), "abcdef");
        assert_eq!(cut("abcdef", 3), "abc…(+3 more characters)");
        assert_eq!(cut("ééééé", 2), "éé…(+3 more characters)");
        // An agent's own marker inside the shown part is followed by the real one.
        let forged = format!("docs/a{}{}", more_marker(1), "/../../etc/x");
        let out = shown(&forged, 10);
        assert!(out.ends_with("more characters)"), "{out}");
        assert!(out.starts_with("docs/a…(+1"), "{out}");
        assert_eq!(out.matches("more characters)").count(), 1, "{out}");
        // Hidden characters in the kept head are escaped after the cut.
        assert_eq!(shown("\u{202E}abc", 2), "\\u{202e}a…(+2 more characters)");
    }
}
