//! Where `gsv call` takes its JSON arguments from: the command line, stdin (`-`) or a
//! file (`@FILE`).
//!
//! A command-line argument is capped by the OS (128 KiB on Linux), so a 100 KB Write
//! through the CLI failed with "Argument list too long"; stdin and files have no such
//! cap. What is read is bounded by the largest frame the gateway accepts, so a wrong
//! file (a disk image, `/dev/zero`) is an error, not an unbounded read.

use std::io::Read;

/// Most bytes read from stdin or a file: one maximum frame.
pub const MAX_ARGS_BYTES: usize = gsv_protocol::limits::MAX_FRAME_BYTES;

/// Why the arguments could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("could not read the arguments from {from}: {source}")]
    Read {
        from: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the arguments from {from} are larger than {MAX_ARGS_BYTES} bytes")]
    TooLarge { from: String },
    #[error("the arguments from {from} are not UTF-8")]
    NotUtf8 { from: String },
}

/// The arguments' JSON text: `spec` itself, or what `-` (stdin) or `@FILE` holds.
pub fn read(spec: &str) -> Result<String, ArgsError> {
    if spec == "-" {
        return read_bounded(std::io::stdin().lock(), "stdin");
    }
    if let Some(path) = spec.strip_prefix('@') {
        let from = format!("file {path:?}");
        let file = std::fs::File::open(path).map_err(|source| ArgsError::Read {
            from: from.clone(),
            source,
        })?;
        return read_bounded(file, &from);
    }
    Ok(spec.to_owned())
}

fn read_bounded(r: impl Read, from: &str) -> Result<String, ArgsError> {
    let mut buf = Vec::new();
    r.take(MAX_ARGS_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|source| ArgsError::Read {
            from: from.to_owned(),
            source,
        })?;
    if buf.len() > MAX_ARGS_BYTES {
        return Err(ArgsError::TooLarge {
            from: from.to_owned(),
        });
    }
    String::from_utf8(buf).map_err(|_| ArgsError::NotUtf8 {
        from: from.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_arguments_are_kept() {
        assert_eq!(read(r#"{"a":1}"#).expect("literal"), r#"{"a":1}"#);
    }

    #[test]
    fn files_are_read_and_bounded() {
        let dir = std::env::temp_dir().join(format!("gsv-call-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("args.json");
        std::fs::write(&f, br#"{"path":"x"}"#).expect("write");
        assert_eq!(
            read(&format!("@{}", f.display())).expect("file"),
            r#"{"path":"x"}"#
        );
        let missing = read(&format!("@{}", dir.join("nope").display())).expect_err("missing");
        assert!(missing.to_string().contains("nope"), "{missing}");
        let big = read_bounded(std::io::repeat(b'x'), "zeros").expect_err("bounded");
        assert!(matches!(big, ArgsError::TooLarge { .. }), "{big}");
        let bad = read_bounded(&[0xff, 0xfe][..], "bytes").expect_err("not utf-8");
        assert!(matches!(bad, ArgsError::NotUtf8 { .. }), "{bad}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
