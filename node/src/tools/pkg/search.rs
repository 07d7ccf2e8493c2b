//! `pkg_search`: packages whose name matches a query, with their summary (and version
//! where the manager says it), from the node's package manager.
//!
//! apt: `apt-cache search --names-only -- QUERY` (names only: the query is a word,
//! not a description search; lines `name - summary`). dnf: `dnf search -q -- QUERY`
//! (`name.arch : summary`). apk: `apk search -v -- QUERY` (`name-version -
//! description`). brew: `brew search --formula -- QUERY` (names only). The query is
//! one word of package-name characters and never an option. A package named exactly
//! like the query is listed first; the rest keep the manager's order.

use super::manager::{self, Kind, PkgError};
use super::run;
use crate::tool::{Tool, ToolContext};
use crate::tools::args::Args;
use crate::tools::output;
use gsv_protocol::{Capability, ToolAnnotations, ToolDef, ToolResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::time::Duration;

/// Results returned when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 50;
/// Most results `limit` may ask for.
pub const MAX_LIMIT: u64 = 500;
/// Most bytes of the manager's output read.
pub const MAX_SEARCH_BYTES: usize = 4 * 1024 * 1024;
/// Longest query.
pub const MAX_QUERY_LEN: usize = 64;
/// How long a search may take.
const SEARCH_TIMEOUT: Duration = Duration::from_secs(60);

/// One package found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub summary: String,
}

/// `pkg_search`'s structured content.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchOutput {
    pub manager: &'static str,
    pub query: String,
    pub packages: Vec<Found>,
    /// How many matched in all (more than listed when `truncated`).
    pub total: usize,
    #[serde(skip_serializing_if = "crate::tools::output::is_false")]
    pub truncated: bool,
}

/// Reads a manager's search output.
pub fn parse(kind: Kind, text: &str) -> Vec<Found> {
    let lines = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty());
    match kind {
        Kind::Apt => lines
            .filter_map(|l| l.split_once(" - "))
            .map(|(name, summary)| Found {
                name: name.trim().to_owned(),
                version: None,
                summary: summary.trim().to_owned(),
            })
            .collect(),
        Kind::Dnf => lines
            .filter(|l| !l.starts_with('=') && !l.starts_with("Last metadata"))
            .filter_map(|l| l.split_once(" : "))
            .map(|(name, summary)| {
                let name = name.trim();
                let base = name.rsplit_once('.').map_or(name, |(b, _)| b);
                Found {
                    name: base.to_owned(),
                    version: None,
                    summary: summary.trim().to_owned(),
                }
            })
            .collect(),
        Kind::Apk => lines
            .map(|l| {
                let (full, summary) = l.split_once(" - ").unwrap_or((l, ""));
                let (name, version) = split_apk(full.trim());
                Found {
                    name,
                    version,
                    summary: summary.trim().to_owned(),
                }
            })
            .collect(),
        Kind::Brew => lines
            .filter(|l| !l.starts_with("==>") && !l.contains(' '))
            .map(|l| Found {
                name: l.trim().to_owned(),
                version: None,
                summary: String::new(),
            })
            .collect(),
    }
}

/// `name-1.2.3-r0` → (`name`, `1.2.3-r0`): apk versions are the last two dash
/// fields, the second starting with `r`.
pub fn split_apk(full: &str) -> (String, Option<String>) {
    let mut parts = full.rsplitn(3, '-');
    let (rel, ver, name) = (parts.next(), parts.next(), parts.next());
    match (name, ver, rel) {
        (Some(n), Some(v), Some(r))
            if r.starts_with('r') && v.starts_with(|c: char| c.is_ascii_digit()) =>
        {
            (n.to_owned(), Some(format!("{v}-{r}")))
        }
        _ => (full.to_owned(), None),
    }
}

/// The `pkg_search` tool.
pub struct PkgSearch;

#[async_trait::async_trait]
impl Tool for PkgSearch {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "pkg_search".to_owned(),
            description: "Search the node's package manager for packages by name: name, \
                          version, summary."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_LEN, "description": "Part of a name, e.g. \"python3-\"."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Default 50."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            capability: Capability::PackageRead.as_str().to_owned(),
            annotations: ToolAnnotations::hints("Search packages", true, false, true, false),
            default_timeout_ms: Some(90_000),
            requires_bins: ["apt-cache", "dnf", "apk", "brew"]
                .iter()
                .map(|b| (*b).to_owned())
                .collect(),
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> ToolResult {
        match search(&args, &ctx).await {
            Ok(r) => r,
            Err(e) => ToolResult::error(format!("pkg_search: {e}")),
        }
    }
}

/// Checks the query: one word of package-name characters, not an option.
fn query(q: &str) -> Result<String, PkgError> {
    if q.starts_with('-') {
        return Err(PkgError::Shape(format!(
            "\"query\" must not start with '-' (it would be read as an option), got {q:?}"
        )));
    }
    let ok = q.len() <= MAX_QUERY_LEN
        && q.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && q.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
    if !ok {
        return Err(PkgError::Shape(format!(
            "\"query\" must be 1 to {MAX_QUERY_LEN} characters from A-Z a-z 0-9 . _ + -, starting with a letter or digit, got {q:?}"
        )));
    }
    Ok(q.to_owned())
}

async fn search(args: &Value, ctx: &ToolContext) -> Result<ToolResult, PkgError> {
    let a = Args::new(args, &["query", "limit"])?;
    let q = query(a.required_str("query")?)?;
    let limit = a.u64_in("limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT) as usize;
    let m = manager::detect(&ctx.workspace)?;
    let argv: Vec<&str> = match m.kind {
        Kind::Apt => vec!["search", "--names-only", "--"],
        Kind::Dnf => vec!["search", "-q", "--"],
        Kind::Apk => vec!["search", "-v", "--"],
        Kind::Brew => vec!["search", "--formula", "--"],
    };
    let mut argv: Vec<String> = argv.into_iter().map(str::to_owned).collect();
    argv.push(q.clone());
    let env: &[(&str, &str)] = match m.kind {
        Kind::Brew => &[
            ("HOMEBREW_NO_AUTO_UPDATE", "1"),
            ("HOMEBREW_NO_ANALYTICS", "1"),
        ],
        _ => &[],
    };
    let out = match run(&m.search, argv, env, SEARCH_TIMEOUT, MAX_SEARCH_BYTES, ctx).await {
        Ok(out) => out,
        Err(e) => return Ok(ToolResult::error(format!("pkg_search: {e}"))),
    };
    // dnf answers 1 when nothing matched; that is an empty result, not a failure.
    let nothing = m.kind == Kind::Dnf && out.status == Some(1) && out.stdout.is_empty();
    if !out.success() && !nothing {
        return Ok(ToolResult::error(format!(
            "pkg_search: {} search failed: {}",
            m.kind.name(),
            out.failure()
        )));
    }
    let mut packages = parse(m.kind, &out.stdout_text());
    // The package named exactly like the query first; the manager's order otherwise.
    packages.sort_by_key(|p| p.name != q);
    let total = packages.len();
    let truncated = total > limit || out.stdout_truncated;
    packages.truncate(limit);
    Ok(output::structured(&SearchOutput {
        manager: m.kind.name(),
        query: q,
        packages,
        total,
        truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_managers_output_is_read() {
        let apt = parse(
            Kind::Apt,
            "jq - lightweight and flexible command-line JSON processor\njqp - TUI playground - with dashes\n",
        );
        assert_eq!(apt.len(), 2);
        assert_eq!(apt[1].name, "jqp");
        assert_eq!(apt[1].summary, "TUI playground - with dashes");
        let dnf = parse(
            Kind::Dnf,
            "Last metadata expiration check: 0:01:00 ago.\n===== Name Exactly Matched: jq =====\njq.x86_64 : Command-line JSON processor\n",
        );
        assert_eq!(
            dnf,
            vec![Found {
                name: "jq".into(),
                version: None,
                summary: "Command-line JSON processor".into()
            }]
        );
        let apk = parse(
            Kind::Apk,
            "jq-1.7.1-r0 - A lightweight and flexible command-line JSON processor\n",
        );
        assert_eq!(apk[0].name, "jq");
        assert_eq!(apk[0].version.as_deref(), Some("1.7.1-r0"));
        let brew = parse(Kind::Brew, "==> Formulae\njq\njql\n");
        assert_eq!(brew.len(), 2);
        assert_eq!(
            split_apk("py3-pip-23.1-r0"),
            ("py3-pip".into(), Some("23.1-r0".into()))
        );
        assert_eq!(split_apk("odd"), ("odd".into(), None));
    }

    #[test]
    fn queries_are_words() {
        assert_eq!(query("python3-").unwrap(), "python3-");
        assert!(query("-o")
            .unwrap_err()
            .to_string()
            .contains("must not start with '-'"));
        for bad in ["", "a b", "a*", "a|b", ".x"] {
            assert!(query(bad).is_err(), "{bad}");
        }
    }
}
