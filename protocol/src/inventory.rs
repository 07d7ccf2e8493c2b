//! What a fleet knows about each node besides its tools: labels and facts.
//!
//! The two differ in who says them, and so in what they may be used for:
//!
//! - **Labels** (`env=prod`, `role=web`) are set by an operator, at enrollment or
//!   later, and stored by the gateway. A node cannot set or change its own labels.
//! - **Facts** (`os`, `arch`, `kernel`, …) are what the node reports about its host.
//!   They are *self-reported*: a compromised node can claim anything, so policy must
//!   never rest on a fact. They help an agent pick a host; they guard nothing.
//!
//! Both are matched by [`crate::selector`]; the key and value rules here are the ones
//! a selector term's label key and value must follow.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// A node's labels, sorted by key.
pub type Labels = BTreeMap<String, String>;

/// Longest label key, in bytes.
pub const MAX_LABEL_KEY: usize = 63;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE: usize = 63;
/// Most labels one node carries.
pub const MAX_LABELS: usize = 32;

/// Label keys that selectors give another meaning: `id~GLOB` and `fact.KEY`.
const RESERVED_KEYS: &[&str] = &["id", "fact"];

/// Why a label was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LabelError {
    #[error("label key {0:?} is invalid: use 1-63 characters of a-z, 0-9, '.', '_', '-' and '/', starting with a letter or digit")]
    Key(String),
    #[error("label key {0:?} is reserved (selectors use `id~GLOB` and `fact.KEY`)")]
    Reserved(String),
    #[error("label value {0:?} is invalid: use 0-63 characters of A-Z, a-z, 0-9, '.', '_', '-', ':' and '/'")]
    Value(String),
    #[error("{0:?} is not a label: expected KEY=VALUE")]
    NotKeyValue(String),
    #[error("a node carries at most {MAX_LABELS} labels")]
    TooMany,
}

/// Checks a label key: 1-63 characters of `a-z 0-9 . _ - /`, starting with a letter or
/// digit, and neither `id` nor `fact` nor anything under `fact.`.
pub fn check_label_key(key: &str) -> Result<(), LabelError> {
    let well_formed = !key.is_empty()
        && key.len() <= MAX_LABEL_KEY
        && key.bytes().enumerate().all(|(i, b)| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || (i > 0 && matches!(b, b'.' | b'_' | b'-' | b'/'))
        });
    if !well_formed {
        return Err(LabelError::Key(key.to_owned()));
    }
    if RESERVED_KEYS.contains(&key) || key.starts_with("fact.") {
        return Err(LabelError::Reserved(key.to_owned()));
    }
    Ok(())
}

/// Checks a label value: 0-63 characters of `A-Z a-z 0-9 . _ - : /`.
pub fn check_label_value(value: &str) -> Result<(), LabelError> {
    let ok = value.len() <= MAX_LABEL_VALUE
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':' | b'/'));
    if ok {
        Ok(())
    } else {
        Err(LabelError::Value(value.to_owned()))
    }
}

/// Parses `KEY=VALUE` as an operator types it (`--label env=prod`).
pub fn parse_label(text: &str) -> Result<(String, String), LabelError> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| LabelError::NotKeyValue(text.to_owned()))?;
    check_label_key(key)?;
    check_label_value(value)?;
    Ok((key.to_owned(), value.to_owned()))
}

/// Checks a whole label set (keys, values, count).
pub fn check_labels(labels: &Labels) -> Result<(), LabelError> {
    if labels.len() > MAX_LABELS {
        return Err(LabelError::TooMany);
    }
    for (k, v) in labels {
        check_label_key(k)?;
        check_label_value(v)?;
    }
    Ok(())
}

/// Longest text fact a gateway keeps, in bytes (longer ones are cut on a character
/// boundary).
pub const MAX_FACT_TEXT: usize = 128;

/// What a node reports about its host, refreshed on every `node.probe`. Self-reported:
/// an agent may use facts to pick a host, policy never trusts them. Every field is
/// optional on the wire (older nodes send none; a node that cannot tell leaves it out).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    /// `linux`, `macos`, `windows`, … (Rust's `std::env::consts::OS`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub os: String,
    /// `x86_64`, `aarch64`, …
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arch: String,
    /// The kernel release (`uname -r`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel: String,
    /// The distribution or OS release (`PRETTY_NAME` of os-release, `macOS 15.1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub os_release: String,
    /// The host name as the host knows it (not the node id).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// Logical CPUs available to the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Physical memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// The node's gsv version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Seconds since the host booted, when the node last looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_secs: Option<u64>,
    /// Where the node's tools work when not on the node's own machine: `ssh` or
    /// `container` (absent for a local node).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub backend: String,
    /// Whether that host can be reached now: `reachable` / `unreachable` (SSH),
    /// `running` / `not running` (container).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub backend_state: String,
}

/// The fact keys a selector may name (`fact.KEY`), in the order listings show them.
pub const FACT_KEYS: &[&str] = &[
    "os",
    "arch",
    "kernel",
    "osRelease",
    "hostname",
    "cpus",
    "memoryBytes",
    "version",
    "uptimeSecs",
    "backend",
    "backendState",
];

impl Facts {
    /// The fact named `key` (one of [`FACT_KEYS`]) as text, as a selector compares it;
    /// `None` when the node did not report it or the key is unknown.
    pub fn get(&self, key: &str) -> Option<String> {
        let text = |s: &String| (!s.is_empty()).then(|| s.clone());
        match key {
            "os" => text(&self.os),
            "arch" => text(&self.arch),
            "kernel" => text(&self.kernel),
            "osRelease" => text(&self.os_release),
            "hostname" => text(&self.hostname),
            "cpus" => self.cpus.map(|v| v.to_string()),
            "memoryBytes" => self.memory_bytes.map(|v| v.to_string()),
            "version" => text(&self.version),
            "uptimeSecs" => self.uptime_secs.map(|v| v.to_string()),
            "backend" => text(&self.backend),
            "backendState" => text(&self.backend_state),
            _ => None,
        }
    }

    /// These facts with every text cut to [`MAX_FACT_TEXT`] bytes: what a gateway
    /// keeps of a node's report.
    pub fn bounded(mut self) -> Facts {
        for s in [
            &mut self.os,
            &mut self.arch,
            &mut self.kernel,
            &mut self.os_release,
            &mut self.hostname,
            &mut self.version,
            &mut self.backend,
            &mut self.backend_state,
        ] {
            crate::handshake::truncate_on_char(s, MAX_FACT_TEXT);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_and_values_follow_the_rules() {
        for ok in ["env", "role", "team.io/owner", "a", "x-1_2"] {
            assert_eq!(check_label_key(ok), Ok(()), "{ok}");
        }
        for bad in ["", "Env", "-x", "a b", "a=b", "é", &"k".repeat(64)] {
            assert!(
                matches!(check_label_key(bad), Err(LabelError::Key(_))),
                "{bad}"
            );
        }
        for reserved in ["id", "fact", "fact.os"] {
            assert!(matches!(
                check_label_key(reserved),
                Err(LabelError::Reserved(_))
            ));
        }
        for ok in ["", "prod", "Prod-1", "10.2:x/y"] {
            assert_eq!(check_label_value(ok), Ok(()), "{ok}");
        }
        for bad in ["a b", "a,b", "a=b", "\u{1b}[31m", &"v".repeat(64)] {
            assert!(check_label_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn labels_parse_from_key_value() {
        assert_eq!(
            parse_label("env=prod"),
            Ok(("env".to_owned(), "prod".to_owned()))
        );
        assert_eq!(parse_label("gpu="), Ok(("gpu".to_owned(), String::new())));
        assert!(matches!(
            parse_label("env"),
            Err(LabelError::NotKeyValue(_))
        ));
        assert!(matches!(parse_label("Env=x"), Err(LabelError::Key(_))));
        let many: Labels = (0..=MAX_LABELS)
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        assert_eq!(check_labels(&many), Err(LabelError::TooMany));
    }

    #[test]
    fn facts_read_by_key_and_stay_absent_when_unreported() {
        let f = Facts {
            os: "linux".into(),
            cpus: Some(8),
            memory_bytes: Some(1 << 30),
            ..Facts::default()
        };
        assert_eq!(f.get("os").as_deref(), Some("linux"));
        assert_eq!(f.get("cpus").as_deref(), Some("8"));
        assert_eq!(f.get("memoryBytes").as_deref(), Some("1073741824"));
        assert_eq!(f.get("kernel"), None);
        assert_eq!(f.get("nope"), None);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"os":"linux","cpus":8,"memoryBytes":1073741824}"#
        );
        assert_eq!(
            serde_json::from_str::<Facts>("{}").unwrap(),
            Facts::default()
        );
        for key in FACT_KEYS {
            let full = Facts {
                os: "a".into(),
                arch: "a".into(),
                kernel: "a".into(),
                os_release: "a".into(),
                hostname: "a".into(),
                cpus: Some(1),
                memory_bytes: Some(1),
                version: "a".into(),
                uptime_secs: Some(1),
                backend: "a".into(),
                backend_state: "a".into(),
            };
            assert!(full.get(key).is_some(), "{key} has no reader");
        }
    }

    #[test]
    fn long_fact_texts_are_cut() {
        let f = Facts {
            kernel: "é".repeat(100),
            ..Facts::default()
        }
        .bounded();
        assert!(f.kernel.len() <= MAX_FACT_TEXT);
        assert!(f.kernel.chars().all(|c| c == 'é'));
    }
}
