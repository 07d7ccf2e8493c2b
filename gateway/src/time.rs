//! Human-readable timestamps for messages ("offline since 2026-11-22T01:24:47Z").

use std::time::{Duration, UNIX_EPOCH};

/// Formats milliseconds since the Unix epoch as RFC 3339 UTC, second precision.
pub fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
    }
}
