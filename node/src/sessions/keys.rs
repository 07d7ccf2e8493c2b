//! Named keys for `Process send-keys`: what a terminal sends when the key is pressed.
//!
//! Interactive programs (editors, REPLs, pagers, `top`) read keys, not lines; a model
//! cannot type an escape sequence reliably, so it names the key (`C-c`, `Enter`, `Up`)
//! and this table gives the bytes an xterm-compatible terminal would send. Only for
//! pty sessions: through a pipe these bytes mean nothing special.

/// Every key name accepted besides `C-a` … `C-z`, with its bytes.
const NAMED: &[(&str, &[u8])] = &[
    ("Enter", b"\r"),
    ("Tab", b"\t"),
    ("Escape", b"\x1b"),
    ("Esc", b"\x1b"),
    ("Up", b"\x1b[A"),
    ("Down", b"\x1b[B"),
    ("Right", b"\x1b[C"),
    ("Left", b"\x1b[D"),
    ("Home", b"\x1b[H"),
    ("End", b"\x1b[F"),
    ("PageUp", b"\x1b[5~"),
    ("PageDown", b"\x1b[6~"),
    ("Backspace", b"\x7f"),
    ("Delete", b"\x1b[3~"),
    ("Space", b" "),
];

/// The bytes a terminal sends for the key called `name`, or `None` if it is not a
/// known key. `C-x` (a control key) takes a letter, upper or lower case.
pub fn key_bytes(name: &str) -> Option<Vec<u8>> {
    if let Some(letter) = name.strip_prefix("C-") {
        let mut chars = letter.chars();
        return match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => {
                Some(vec![c.to_ascii_lowercase() as u8 - b'a' + 1])
            }
            _ => None,
        };
    }
    NAMED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| bytes.to_vec())
}

/// Every key name as one pattern, for the tool's schema: shorter in a listing than
/// the names one by one (`C-a` … `C-Z`, then the named keys).
pub fn key_pattern() -> String {
    let named: Vec<&str> = NAMED.iter().map(|(n, _)| *n).collect();
    format!("^(C-[a-zA-Z]|{})$", named.join("|"))
}

/// Every key name, for the tool's schema (`C-a` … `C-z`, then the named keys).
pub fn key_names() -> Vec<String> {
    let mut names: Vec<String> = (b'a'..=b'z').map(|c| format!("C-{}", c as char)).collect();
    names.extend(NAMED.iter().map(|(n, _)| (*n).to_owned()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(key_bytes("C-c"), Some(vec![3]));
        assert_eq!(key_bytes("C-a"), Some(vec![1]));
        assert_eq!(key_bytes("C-Z"), Some(vec![26]));
        assert_eq!(key_bytes("Enter"), Some(b"\r".to_vec()));
        assert_eq!(key_bytes("Up"), Some(b"\x1b[A".to_vec()));
        assert_eq!(key_bytes("Esc"), key_bytes("Escape"));
        for bad in ["C-", "C-cc", "C-1", "enter", "F13", "", "C-é"] {
            assert_eq!(key_bytes(bad), None, "{bad}");
        }
        let names = key_names();
        assert_eq!(names.len(), 26 + NAMED.len());
        assert!(names.iter().all(|n| key_bytes(n).is_some()));
        let pattern = regex::Regex::new(&key_pattern()).expect("pattern");
        assert!(names.iter().all(|n| pattern.is_match(n)));
        for bad in ["C-", "C-cc", "C-1", "enter", "F13", "", "xEnter", "Enterx"] {
            assert!(!pattern.is_match(bad), "{bad}");
        }
    }
}
