//! The installer script: `script.sh` with this gateway's values written in.
//!
//! Every value is written as a single-quoted shell word, and every value is also
//! checked to be made of characters that need no quoting at all (a URL built from a
//! validated `Host`, a node id, hex, base64, build names), so nothing a client sends
//! can become shell code.

/// The script's template; `@NAME@` marks a value.
const TEMPLATE: &str = include_str!("script.sh");

/// What the script is made for.
pub struct ScriptValues<'a> {
    /// The gateway's URL as the new machine reaches it (`https://host:port`).
    pub url: &'a str,
    pub node_id: &'a str,
    /// curl's `--pinnedpubkey` value, when the gateway serves TLS.
    pub curl_pin: Option<&'a str>,
    /// Whether the certificate is the gateway's self-signed one (curl then skips the
    /// chain check, `-k`, and relies on the pin alone).
    pub self_signed: bool,
    /// The certificate fingerprint the node pins (`gsv node --pin`).
    pub node_pin: Option<&'a str>,
    /// `(target, sha256)` of every build.
    pub builds: &'a [(String, String)],
}

/// The script for `values`.
pub fn render(values: &ScriptValues<'_>) -> String {
    let builds: String = values
        .builds
        .iter()
        .map(|(target, sha)| format!("{target} {sha}\n"))
        .collect();
    TEMPLATE
        .replace("@URL@", &quote(values.url))
        .replace("@NODE_ID@", &quote(values.node_id))
        .replace("@CURL_PIN@", &quote(values.curl_pin.unwrap_or("")))
        .replace("@SELF_SIGNED@", if values.self_signed { "1" } else { "0" })
        .replace("@NODE_PIN@", &quote(values.node_pin.unwrap_or("")))
        .replace("@BUILDS@", &quote(&builds))
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
}

/// `s` as one single-quoted shell word.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(builds: &[(String, String)]) -> ScriptValues<'_> {
        ScriptValues {
            url: "https://127.0.0.1:8787",
            node_id: "web1",
            curl_pin: Some("sha256//AAAA+/=="),
            self_signed: true,
            node_pin: Some("ab12"),
            builds,
        }
    }

    #[test]
    fn every_value_is_filled_in_and_the_script_parses() {
        let builds = vec![
            ("linux-x86_64".to_owned(), "aa".repeat(32)),
            ("linux-aarch64".to_owned(), "bb".repeat(32)),
        ];
        let script = render(&values(&builds));
        for marker in [
            "@URL@",
            "@NODE_ID@",
            "@CURL_PIN@",
            "@SELF_SIGNED@",
            "@NODE_PIN@",
            "@BUILDS@",
            "@VERSION@",
        ] {
            assert!(!script.contains(marker), "{marker} left in the script");
        }
        assert!(script.contains("url='https://127.0.0.1:8787'"));
        assert!(script.contains(&format!("linux-aarch64 {}\n", "bb".repeat(32))));
        assert!(script.ends_with("gsv_install \"$@\"\n"));
        let check = std::process::Command::new("sh")
            .arg("-n")
            .arg("-c")
            .arg(&script)
            .output()
            .expect("run sh -n");
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }

    #[test]
    fn quotes_cannot_be_escaped() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote("x'; echo pwned; '$(id)`")))
            .output()
            .expect("run sh");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "x'; echo pwned; '$(id)`"
        );
    }
}
