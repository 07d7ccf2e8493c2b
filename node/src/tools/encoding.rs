//! `encoding: "base64"` for Read and Write: any file, byte for byte.
//!
//! Read and Write carry text by default (`"utf8"`). A binary file (or text in another
//! encoding, or with NUL bytes) round-trips exactly with `encoding: "base64"`: Read
//! returns the bytes as standard base64 (RFC 4648, with padding) and Write decodes its
//! `content` the same way (ASCII whitespace, e.g. line breaks every 76 characters,
//! is ignored). One call moves at most [`MAX_BASE64_BYTES`] (4 MiB) of file bytes —
//! about 5.3 MiB of base64, which stays well inside a result frame even with the
//! structured copy; Read takes `offset` and `limit` in bytes to fetch a larger file in
//! pieces.

use base64::Engine;

/// Most file bytes one base64 Read returns or one base64 Write writes (4 MiB).
pub const MAX_BASE64_BYTES: usize = 4 * 1024 * 1024;

/// How a tool's file content travels in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// UTF-8 text (the default).
    #[default]
    Utf8,
    /// Standard base64 of the bytes.
    Base64,
}

impl Encoding {
    /// The JSON Schema of an `encoding` argument.
    pub fn schema(what: &str) -> serde_json::Value {
        serde_json::json!({
            "type": "string",
            "enum": ["utf8", "base64"],
            "description": format!(
                "\"base64\": {what} base64 (at most {} MiB).",
                MAX_BASE64_BYTES / (1024 * 1024)
            )
        })
    }

    /// Parses an `encoding` argument (absent: UTF-8).
    pub fn parse(value: Option<&str>) -> Result<Encoding, String> {
        match value {
            None | Some("utf8") => Ok(Encoding::Utf8),
            Some("base64") => Ok(Encoding::Base64),
            Some(other) => Err(format!(
                "\"encoding\" must be \"utf8\" or \"base64\", got {other:?}"
            )),
        }
    }
}

/// Standard base64 of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The bytes `text` encodes (standard base64, whitespace ignored), refused past
/// [`MAX_BASE64_BYTES`] before anything large is allocated.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    // Four characters per three bytes, plus line breaks: anything longer than this
    // cannot be within the cap, whatever its whitespace.
    let longest = MAX_BASE64_BYTES / 3 * 4 * 2 + 8;
    if text.len() > longest {
        return Err(too_large(text.len() / 4 * 3));
    }
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if compact.len() / 4 * 3 > MAX_BASE64_BYTES + 2 {
        return Err(too_large(compact.len() / 4 * 3));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| format!("\"content\" is not valid base64: {e}"))?;
    if bytes.len() > MAX_BASE64_BYTES {
        return Err(too_large(bytes.len()));
    }
    Ok(bytes)
}

fn too_large(bytes: usize) -> String {
    format!(
        "\"content\" decodes to about {bytes} bytes, over the base64 limit of {MAX_BASE64_BYTES} bytes (4 MiB) per call"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_any_bytes() {
        let bytes: Vec<u8> = (0..=255u8).chain([0, 0xff, 0xc3]).collect();
        assert_eq!(decode(&encode(&bytes)).unwrap(), bytes);
        // Line breaks are fine.
        let wrapped = encode(&bytes)
            .as_bytes()
            .chunks(76)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(decode(&wrapped).unwrap(), bytes);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn bad_and_oversized_content_is_refused() {
        assert!(decode("not base64!")
            .unwrap_err()
            .contains("not valid base64"));
        let exact = encode(&vec![7u8; MAX_BASE64_BYTES]);
        assert_eq!(decode(&exact).unwrap().len(), MAX_BASE64_BYTES);
        let over = encode(&vec![7u8; MAX_BASE64_BYTES + 1]);
        assert!(decode(&over).unwrap_err().contains("over the base64 limit"));
        assert!(decode(&"A".repeat(MAX_BASE64_BYTES * 3)).is_err());
    }

    #[test]
    fn encodings_parse() {
        assert_eq!(Encoding::parse(None), Ok(Encoding::Utf8));
        assert_eq!(Encoding::parse(Some("base64")), Ok(Encoding::Base64));
        assert!(Encoding::parse(Some("hex")).is_err());
    }
}
