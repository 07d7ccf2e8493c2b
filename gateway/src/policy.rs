//! Agent policy: which namespaced tools a token may see and call.
//!
//! Globs over `{node}__{tool}` names, compiled once per authentication with `globset`.
//! Default deny: nothing is allowed unless an `allow` glob matches; `deny` beats
//! `allow`; `confirm` turns an allowed call into one that needs an operator's approval.
//! `self_confirm` (off unless the token was made with `--self-confirm`) lets the caller's
//! own user answer a `confirm` (MCP elicitation) instead of the operator queue.

pub use crate::mcp::view::McpView;
use globset::{Candidate, Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The globs as stored with an agent token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySpec {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub confirm: Vec<String>,
    /// The caller may confirm its own `confirm` calls (MCP elicitation). Never covers a
    /// node guard's approval, which always goes to an operator.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub self_confirm: bool,
    /// The MCP view a session of this token gets unless its URL asks for another
    /// (`--mcp-view`; stored only when not `auto`, so older rows read as `auto`).
    #[serde(default, skip_serializing_if = "McpView::is_auto")]
    pub mcp_view: McpView,
}

/// A glob that does not compile.
#[derive(Debug, Error)]
#[error("invalid glob {glob:?}: {reason}")]
pub struct PolicyError {
    pub glob: String,
    pub reason: String,
}

/// What the policy says about one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Confirm,
    Deny,
}

/// A compiled policy.
#[derive(Debug, Clone)]
pub struct Policy {
    allow: GlobSet,
    deny: GlobSet,
    confirm: GlobSet,
    self_confirm: bool,
    mcp_view: McpView,
    full: bool,
    /// An operator's (viewer or approver): every tool listed, none callable.
    view_only: bool,
    /// An `allow` glob is `*`, which matches every name: `allow` needs no matching.
    allow_all: bool,
}

/// Whether a glob matches every name: `*` (with globset's defaults `*` crosses `/`,
/// so it matches any string, the empty one included).
fn matches_everything(glob: &str) -> bool {
    glob == "*"
}

fn compile(globs: &[String]) -> Result<GlobSet, PolicyError> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        let glob = Glob::new(g).map_err(|e| PolicyError {
            glob: g.clone(),
            reason: e.kind().to_string(),
        })?;
        b.add(glob);
    }
    b.build().map_err(|e| PolicyError {
        glob: globs.join(","),
        reason: e.to_string(),
    })
}

impl Policy {
    pub fn compile(spec: &PolicySpec) -> Result<Policy, PolicyError> {
        Ok(Policy {
            allow: compile(&spec.allow)?,
            deny: compile(&spec.deny)?,
            confirm: compile(&spec.confirm)?,
            self_confirm: spec.self_confirm,
            mcp_view: spec.mcp_view,
            full: false,
            view_only: false,
            allow_all: spec.allow.iter().any(|g| matches_everything(g)),
        })
    }

    /// Every tool listed, none callable (an operator token: operators read the fleet
    /// and decide approvals; they never run tools).
    pub fn view_only() -> Policy {
        Policy {
            allow: GlobSet::empty(),
            deny: GlobSet::empty(),
            confirm: GlobSet::empty(),
            self_confirm: false,
            mcp_view: McpView::Auto,
            full: false,
            view_only: true,
            allow_all: false,
        }
    }

    /// Everything allowed, nothing to confirm (the admin token).
    pub fn full_access() -> Policy {
        Policy {
            allow: GlobSet::empty(),
            deny: GlobSet::empty(),
            confirm: GlobSet::empty(),
            self_confirm: false,
            mcp_view: McpView::Auto,
            full: true,
            view_only: false,
            allow_all: true,
        }
    }

    pub fn decide(&self, namespaced: &str) -> Decision {
        if self.full {
            return Decision::Allow;
        }
        if self.view_only {
            return Decision::Deny;
        }
        // Called for every tool of every node a listing or a fan-out looks at: the
        // name is prepared for matching once, and a set with nothing to match (no
        // `deny`, no `confirm`, an `allow` of `*`) is not consulted.
        let name = Candidate::new(namespaced);
        let matches = |set: &GlobSet| !set.is_empty() && set.is_match_candidate(&name);
        if matches(&self.deny) || !(self.allow_all || matches(&self.allow)) {
            Decision::Deny
        } else if matches(&self.confirm) {
            Decision::Confirm
        } else {
            Decision::Allow
        }
    }

    /// Whether the caller's own user may answer this token's `confirm` (the token was
    /// made with `--self-confirm`).
    pub fn self_confirm(&self) -> bool {
        self.self_confirm
    }

    /// The token's default MCP view (`--mcp-view`).
    pub fn mcp_view(&self) -> McpView {
        self.mcp_view
    }

    /// Whether this is the admin's everything-allowed policy.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Whether this policy sees the whole fleet: the admin's, or an operator's.
    pub fn sees_all(&self) -> bool {
        self.full || self.view_only
    }

    /// Whether the tool is listed for this caller (allowed, possibly with
    /// confirmation; every tool for an operator, who can call none).
    pub fn visible(&self, namespaced: &str) -> bool {
        self.view_only || self.decide(namespaced) != Decision::Deny
    }
}

/// Warnings about globs that probably do not say what was meant: a glob whose tool
/// part matches none of `known` bare tool names — and especially one that matches
/// only in another case (globs are case-sensitive: `--deny '*__bash'` denies
/// nothing). Globs without a `__` (like `*`) are not checked.
pub fn lint(spec: &PolicySpec, known: &[&str]) -> Vec<String> {
    let mut warnings = Vec::new();
    let lists = [
        ("--allow", &spec.allow),
        ("--deny", &spec.deny),
        ("--confirm", &spec.confirm),
    ];
    for (flag, globs) in lists {
        for g in globs.iter() {
            let Some((_, tool)) = g.rsplit_once("__") else {
                continue;
            };
            let build = |insensitive: bool| {
                globset::GlobBuilder::new(tool)
                    .case_insensitive(insensitive)
                    .build()
                    .ok()
                    .map(|g| g.compile_matcher())
            };
            let (Some(exact), Some(loose)) = (build(false), build(true)) else {
                continue;
            };
            if known.iter().any(|k| exact.is_match(k)) {
                continue;
            }
            let other_case: Vec<&str> = known
                .iter()
                .copied()
                .filter(|k| loose.is_match(k))
                .collect();
            if other_case.is_empty() {
                warnings.push(format!(
                    "{flag} {g:?} matches no tool of a standard gsv node (fine if it names a custom tool; globs are case-sensitive)"
                ));
            } else {
                warnings.push(format!(
                    "{flag} {g:?} matches no tool: globs are case-sensitive, and it matches only {} in another case",
                    other_case.join(", ")
                ));
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operators_policy_lists_every_tool_and_allows_none() {
        let p = Policy::view_only();
        for name in ["box__Bash", "lab__Read", "x__net_scan"] {
            assert!(p.visible(name), "{name} hidden from an operator");
            assert_eq!(
                p.decide(name),
                Decision::Deny,
                "{name} callable by an operator"
            );
        }
        assert!(p.sees_all());
        assert!(!p.is_full());
    }

    #[test]
    fn lint_flags_case_mistakes_and_unknown_names() {
        let known = ["Read", "Bash", "net_diagnose"];
        let spec = PolicySpec {
            allow: vec!["*".into(), "lab__*".into(), "*__Read".into()],
            deny: vec!["*__bash".into(), "*__Nope".into()],
            confirm: vec!["*__net_*".into()],
            self_confirm: false,
            mcp_view: McpView::Auto,
        };
        let w = lint(&spec, &known);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("*__bash") && w[0].contains("only Bash in another case"),
            "{w:?}"
        );
        assert!(
            w[1].contains("*__Nope") && w[1].contains("matches no tool"),
            "{w:?}"
        );
    }

    fn spec(allow: &[&str], deny: &[&str], confirm: &[&str]) -> PolicySpec {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        PolicySpec {
            allow: v(allow),
            deny: v(deny),
            confirm: v(confirm),
            self_confirm: false,
            mcp_view: McpView::Auto,
        }
    }

    #[test]
    fn the_mcp_view_is_stored_only_when_not_auto() {
        let mut s = spec(&["*"], &[], &[]);
        assert!(!serde_json::to_string(&s).unwrap().contains("mcp_view"));
        s.mcp_view = McpView::Fleet;
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""mcp_view":"fleet""#), "{json}");
        let back: PolicySpec = serde_json::from_str(&json).unwrap();
        assert_eq!(Policy::compile(&back).unwrap().mcp_view(), McpView::Fleet);
        let old: PolicySpec = serde_json::from_str(r#"{"allow":["*"]}"#).unwrap();
        assert_eq!(old.mcp_view, McpView::Auto);
    }

    #[test]
    fn default_deny() {
        let p = Policy::compile(&PolicySpec::default()).unwrap();
        assert_eq!(p.decide("laptop__Read"), Decision::Deny);
    }

    #[test]
    fn deny_beats_allow_and_confirm_applies_to_allowed() {
        let p = Policy::compile(&spec(
            &["laptop__*", "*__Read"],
            &["laptop__Bash"],
            &["*__Write", "server__*"],
        ))
        .unwrap();
        assert_eq!(p.decide("laptop__Read"), Decision::Allow);
        assert_eq!(p.decide("server__Read"), Decision::Confirm);
        assert_eq!(p.decide("laptop__Bash"), Decision::Deny);
        assert_eq!(p.decide("laptop__Write"), Decision::Confirm);
        assert_eq!(p.decide("server__Bash"), Decision::Deny);
        assert!(!p.visible("server__Bash"));
    }

    #[test]
    fn a_star_allows_every_name_and_deny_and_confirm_still_apply() {
        let p = Policy::compile(&spec(&["*"], &[], &[])).unwrap();
        for name in ["laptop__Read", "a__B", "", "x/y__z", "__"] {
            assert_eq!(p.decide(name), Decision::Allow, "{name}");
        }
        let p = Policy::compile(&spec(&["lab__*", "*"], &["*__Bash"], &["db__*"])).unwrap();
        assert_eq!(p.decide("laptop__Read"), Decision::Allow);
        assert_eq!(p.decide("laptop__Bash"), Decision::Deny);
        assert_eq!(p.decide("db__Read"), Decision::Confirm);
        // A glob that only looks wide is matched as a glob.
        let p = Policy::compile(&spec(&["*__*"], &[], &[])).unwrap();
        assert_eq!(p.decide("laptop__Read"), Decision::Allow);
        assert_eq!(p.decide("laptop"), Decision::Deny);
    }

    #[test]
    fn net_prefix_glob() {
        let p = Policy::compile(&spec(&["server__net_*"], &[], &[])).unwrap();
        assert_eq!(p.decide("server__net_diagnose"), Decision::Allow);
        assert_eq!(p.decide("server__network_status"), Decision::Deny);
    }

    #[test]
    fn bad_glob_is_an_error() {
        assert!(Policy::compile(&spec(&["a[b"], &[], &[])).is_err());
    }

    #[test]
    fn full_access_allows_everything() {
        assert_eq!(Policy::full_access().decide("x__Y"), Decision::Allow);
    }
}
