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

/// `bytes` as `printf` format arguments that write them exactly (octal escapes for
/// everything but plain characters), in pieces of at most 4 KiB of input each.
pub fn printf_lines(bytes: &[u8], into: &str) -> String {
    let mut out = String::with_capacity(bytes.len() * 2 + 64);
    out.push_str("{\n");
    for piece in bytes.chunks(4096) {
        out.push_str("printf '");
        for &b in piece {
            if b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b' ' | b',' | b'.' | b'_' | b'-' | b'/' | b':' | b'=' | b'+'
                )
            {
                out.push(b as char);
            } else {
                out.push_str(&format!("\\{b:03o}"));
            }
        }
        out.push_str("'\n");
    }
    out.push_str(&format!("}} >{into}"));
    out
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

    #[test]
    fn printf_lines_write_every_byte_back() {
        let bytes: Vec<u8> = (0..=255u8).chain(b"%s '\\ \n".iter().copied()).collect();
        let dir =
            std::env::temp_dir().join(format!("gsv-printf-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out");
        let script = printf_lines(&bytes, &format!("'{}'", out.display()));
        let st = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(std::fs::read(&out).unwrap(), bytes);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
