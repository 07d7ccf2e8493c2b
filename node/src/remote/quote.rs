//! Quoting for the POSIX shell on the far side: every value a tool passes to the
//! remote host (paths, commands, patterns) goes in as one single-quoted word, so
//! nothing in it is ever read as shell syntax.

/// `s` as one single-quoted shell word (`'` becomes `'\''`). `None` when `s` holds a
/// NUL byte, which no shell word can carry.
pub fn quote(s: &str) -> Option<String> {
    if s.contains('\0') {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn words_come_back_unchanged_through_sh() {
        for s in [
            "plain",
            "",
            "it's",
            "'''",
            "$(touch /tmp/x) `id` $HOME \\ \" ; | & > < * ? [a] ~ \n\t!",
            "ünïcödé ✓",
        ] {
            let q = quote(s).expect("no NUL");
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("printf '%s' {q}"))
                .output()
                .expect("sh runs");
            assert_eq!(String::from_utf8_lossy(&out.stdout), s, "{q}");
        }
        assert_eq!(quote("a\0b"), None);
    }
}
