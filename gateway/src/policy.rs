//! Agent policy: which namespaced tools a token may see and call.
//!
//! Globs over `{node}__{tool}` names, compiled once per authentication with `globset`.
//! Default deny: nothing is allowed unless an `allow` glob matches; `deny` beats
//! `allow`; `confirm` turns an allowed call into one that needs an operator's approval.
//! `self_confirm` (off unless the token was made with `--self-confirm`) lets the caller's
//! own user answer a `confirm` (MCP elicitation) instead of the operator queue.
//!
//! An entry `class:NAME` (`class:run`, `class:write`, ... see
//! [`gsv_protocol::tool_class`]) matches every tool of that class instead of a name:
//! `--deny 'class:run'` denies Bash, exec, Process and every other tool that runs
//! code, whatever it is called. A tool is allowed when a name glob or a class in
//! `allow` matches it, denied when one in `deny` does, and so on; so deciding needs
//! the tool's classes ([`Policy::decide`]). Where only a name is known (before the
//! tool is looked up), [`Policy::precheck`] says whether some tool of that name could
//! be allowed at all.

pub use crate::mcp_view::McpView;
use globset::{Candidate, Glob, GlobSet, GlobSetBuilder};
use gsv_protocol::capability::{Capability, CapabilityId};
use gsv_protocol::tool_class::{ToolClass, ToolClasses};
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
    /// The node tools a flat MCP listing of this token names unless its URL asks
    /// (`--mcp-tools`: `all`, `reference` or tool-name globs; absent: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_tools: Option<String>,
}

/// A glob that does not compile, or a class that does not exist.
#[derive(Debug, Error)]
#[error("invalid glob {glob:?}: {reason}")]
pub struct PolicyError {
    pub glob: String,
    pub reason: String,
}

/// The prefix of a policy entry that names a class instead of a tool name glob.
pub const CLASS_PREFIX: &str = "class:";

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
    /// The classes named by `class:` entries of each list.
    allow_classes: ToolClasses,
    deny_classes: ToolClasses,
    confirm_classes: ToolClasses,
    self_confirm: bool,
    mcp_view: McpView,
    mcp_tools: Option<String>,
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

/// Compiles one list: its name globs into a set, its `class:` entries into classes.
fn compile(entries: &[String]) -> Result<(GlobSet, ToolClasses), PolicyError> {
    let mut b = GlobSetBuilder::new();
    let mut classes = ToolClasses::NONE;
    let mut globs = Vec::new();
    for g in entries {
        if let Some(class) = g.strip_prefix(CLASS_PREFIX) {
            classes = classes.with(parse_class(class).map_err(|reason| PolicyError {
                glob: g.clone(),
                reason,
            })?);
            continue;
        }
        let glob = Glob::new(g).map_err(|e| PolicyError {
            glob: g.clone(),
            reason: e.kind().to_string(),
        })?;
        b.add(glob);
        globs.push(g.as_str());
    }
    let set = b.build().map_err(|e| PolicyError {
        glob: globs.join(","),
        reason: e.to_string(),
    })?;
    Ok((set, classes))
}

/// A class named in a policy, or why it is not one.
fn parse_class(name: &str) -> Result<ToolClass, String> {
    ToolClass::parse(name).ok_or_else(|| {
        let known: Vec<&str> = ToolClass::ALL.iter().map(|c| c.as_str()).collect();
        format!("unknown class {name:?} (classes: {})", known.join(", "))
    })
}

impl Policy {
    pub fn compile(spec: &PolicySpec) -> Result<Policy, PolicyError> {
        let (allow, allow_classes) = compile(&spec.allow)?;
        let (deny, deny_classes) = compile(&spec.deny)?;
        let (confirm, confirm_classes) = compile(&spec.confirm)?;
        Ok(Policy {
            allow,
            deny,
            confirm,
            allow_classes,
            deny_classes,
            confirm_classes,
            self_confirm: spec.self_confirm,
            mcp_view: spec.mcp_view,
            mcp_tools: spec.mcp_tools.clone(),
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
            allow_classes: ToolClasses::NONE,
            deny_classes: ToolClasses::NONE,
            confirm_classes: ToolClasses::NONE,
            self_confirm: false,
            mcp_view: McpView::Auto,
            mcp_tools: None,
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
            allow_classes: ToolClasses::NONE,
            deny_classes: ToolClasses::NONE,
            confirm_classes: ToolClasses::NONE,
            self_confirm: false,
            mcp_view: McpView::Auto,
            mcp_tools: None,
            full: true,
            view_only: false,
            allow_all: true,
        }
    }

    /// What the policy says about the tool `namespaced`, whose classes are
    /// `classes` (`ToolClasses::of` its capability).
    pub fn decide(&self, namespaced: &str, classes: ToolClasses) -> Decision {
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
        let allowed =
            self.allow_all || self.allow_classes.intersects(classes) || matches(&self.allow);
        if !allowed || self.deny_classes.intersects(classes) || matches(&self.deny) {
            Decision::Deny
        } else if self.confirm_classes.intersects(classes) || matches(&self.confirm) {
            Decision::Confirm
        } else {
            Decision::Allow
        }
    }

    /// [`Policy::decide`] for a tool known only by the built-in capability it has
    /// (a copy's side is a `Read` or a `Write`, a session's input a command).
    pub fn decide_as(&self, namespaced: &str, capability: Capability) -> Decision {
        self.decide(
            namespaced,
            ToolClasses::of(&CapabilityId::Builtin(capability)),
        )
    }

    /// What can be said from the name alone, before the tool is looked up:
    /// `Deny` when no tool of that name could be allowed (a `deny` glob matches it, or
    /// nothing in `allow` could: no glob matches and no class is allowed), else the
    /// decision for a tool of no class, which [`Policy::decide`] may still tighten.
    pub fn precheck(&self, namespaced: &str) -> Decision {
        let named = self.decide(namespaced, ToolClasses::NONE);
        if named == Decision::Deny && !self.allow_classes.is_empty() && !self.view_only {
            let name = Candidate::new(namespaced);
            if self.deny.is_empty() || !self.deny.is_match_candidate(&name) {
                return Decision::Allow;
            }
        }
        named
    }

    /// Whether the only thing that could allow `namespaced` is a class (no name glob
    /// in `allow` matches it): a tool of that name that is not found is then answered
    /// like a denied one, so a token allowed by class cannot probe for names.
    pub fn allowed_by_class_only(&self, namespaced: &str) -> bool {
        !self.full
            && !self.allow_all
            && !self.allow_classes.is_empty()
            && !self.allow.is_match(namespaced)
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

    /// The token's default set of listed node tools (`--mcp-tools`), as written.
    pub fn mcp_tools(&self) -> Option<&str> {
        self.mcp_tools.as_deref()
    }

    /// Whether this is the admin's everything-allowed policy.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Whether this is an operator's policy: every tool listed, none callable.
    pub fn is_view_only(&self) -> bool {
        self.view_only
    }

    /// Whether this policy sees the whole fleet: the admin's, or an operator's.
    pub fn sees_all(&self) -> bool {
        self.full || self.view_only
    }

    /// Whether the tool is listed for this caller (allowed, possibly with
    /// confirmation; every tool for an operator, who can call none).
    pub fn visible(&self, namespaced: &str, classes: ToolClasses) -> bool {
        self.view_only || self.decide(namespaced, classes) != Decision::Deny
    }

    /// Whether some tool of this name could be listed (for a notice that names tools
    /// without their classes, like another replica's `tools.changed`).
    pub fn maybe_visible(&self, namespaced: &str) -> bool {
        self.view_only || self.precheck(namespaced) != Decision::Deny
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
            if g.starts_with(CLASS_PREFIX) {
                continue;
            }
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

/// Warnings about tools that run code left open beside ones that are closed: a
/// token whose policy denies (or confirms) one `run` tool of `known` (the standard
/// tools and their capabilities) and allows another without approval on the same
/// node most likely meant to keep the agent from running programs at all, and did
/// not: `--deny '*__Bash'` leaves `exec`. Checked for every node a glob names
/// literally and for any other node.
pub fn lint_classes(spec: &PolicySpec, known: &[(&str, Capability)]) -> Vec<String> {
    let Ok(policy) = Policy::compile(spec) else {
        return Vec::new();
    };
    let mut nodes: Vec<String> = vec!["any-node".to_owned()];
    for g in spec.allow.iter().chain(&spec.deny).chain(&spec.confirm) {
        if let Some((node, _)) = g.split_once("__") {
            let literal = !node.is_empty() && !node.contains(['*', '?', '[', '{']);
            if literal && !nodes.iter().any(|n| n == node) {
                nodes.push(node.to_owned());
            }
        }
    }
    let runners: Vec<(&str, ToolClasses)> = known
        .iter()
        .map(|(name, c)| (*name, ToolClasses::of(&CapabilityId::Builtin(*c))))
        .filter(|(_, classes)| classes.contains(ToolClass::Run))
        .collect();
    let mut warnings = Vec::new();
    for node in &nodes {
        let decided: Vec<(&str, Decision)> = runners
            .iter()
            .map(|(tool, classes)| (*tool, policy.decide(&format!("{node}__{tool}"), *classes)))
            .collect();
        let closed: Vec<&str> = decided
            .iter()
            .filter(|(_, d)| *d != Decision::Allow)
            .map(|(t, _)| *t)
            .collect();
        let open: Vec<&str> = decided
            .iter()
            .filter(|(_, d)| *d == Decision::Allow)
            .map(|(t, _)| *t)
            .collect();
        if !closed.is_empty() && !open.is_empty() {
            let on = if node == "any-node" {
                "on every node".to_owned()
            } else {
                format!("on {node}")
            };
            warnings.push(format!(
                "{on} this policy denies or confirms {} but allows {} without approval, which run programs too; to keep an agent from running code use --deny 'class:run' (or --confirm 'class:run')",
                closed.join(", "),
                open.join(", ")
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::tool_class::ToolClasses;

    #[test]
    fn an_operators_policy_lists_every_tool_and_allows_none() {
        let p = Policy::view_only();
        for name in ["box__Bash", "lab__Read", "x__net_scan"] {
            assert!(
                p.visible(name, ToolClasses::NONE),
                "{name} hidden from an operator"
            );
            assert_eq!(
                p.decide(name, ToolClasses::NONE),
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
            mcp_tools: None,
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
            mcp_tools: None,
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
        assert_eq!(p.decide("laptop__Read", ToolClasses::NONE), Decision::Deny);
    }

    #[test]
    fn deny_beats_allow_and_confirm_applies_to_allowed() {
        let p = Policy::compile(&spec(
            &["laptop__*", "*__Read"],
            &["laptop__Bash"],
            &["*__Write", "server__*"],
        ))
        .unwrap();
        assert_eq!(p.decide("laptop__Read", ToolClasses::NONE), Decision::Allow);
        assert_eq!(
            p.decide("server__Read", ToolClasses::NONE),
            Decision::Confirm
        );
        assert_eq!(p.decide("laptop__Bash", ToolClasses::NONE), Decision::Deny);
        assert_eq!(
            p.decide("laptop__Write", ToolClasses::NONE),
            Decision::Confirm
        );
        assert_eq!(p.decide("server__Bash", ToolClasses::NONE), Decision::Deny);
        assert!(!p.visible("server__Bash", ToolClasses::NONE));
    }

    #[test]
    fn a_star_allows_every_name_and_deny_and_confirm_still_apply() {
        let p = Policy::compile(&spec(&["*"], &[], &[])).unwrap();
        for name in ["laptop__Read", "a__B", "", "x/y__z", "__"] {
            assert_eq!(p.decide(name, ToolClasses::NONE), Decision::Allow, "{name}");
        }
        let p = Policy::compile(&spec(&["lab__*", "*"], &["*__Bash"], &["db__*"])).unwrap();
        assert_eq!(p.decide("laptop__Read", ToolClasses::NONE), Decision::Allow);
        assert_eq!(p.decide("laptop__Bash", ToolClasses::NONE), Decision::Deny);
        assert_eq!(p.decide("db__Read", ToolClasses::NONE), Decision::Confirm);
        // A glob that only looks wide is matched as a glob.
        let p = Policy::compile(&spec(&["*__*"], &[], &[])).unwrap();
        assert_eq!(p.decide("laptop__Read", ToolClasses::NONE), Decision::Allow);
        assert_eq!(p.decide("laptop", ToolClasses::NONE), Decision::Deny);
    }

    #[test]
    fn net_prefix_glob() {
        let p = Policy::compile(&spec(&["server__net_*"], &[], &[])).unwrap();
        assert_eq!(
            p.decide("server__net_diagnose", ToolClasses::NONE),
            Decision::Allow
        );
        assert_eq!(
            p.decide("server__network_status", ToolClasses::NONE),
            Decision::Deny
        );
    }

    #[test]
    fn bad_glob_is_an_error() {
        assert!(Policy::compile(&spec(&["a[b"], &[], &[])).is_err());
    }

    #[test]
    fn full_access_allows_everything() {
        assert_eq!(
            Policy::full_access().decide("x__Y", ToolClasses::NONE),
            Decision::Allow
        );
    }

    fn classes_of(c: Capability) -> ToolClasses {
        ToolClasses::of(&CapabilityId::Builtin(c))
    }

    #[test]
    fn classes_deny_allow_and_confirm_whatever_the_name() {
        let run = classes_of(Capability::ShellExec);
        let exec = classes_of(Capability::ProcessExec);
        let read = classes_of(Capability::FilesystemRead);
        let write = classes_of(Capability::FilesystemWrite);
        // The reported case: Bash denied by name, exec slipped through. By class,
        // both are denied, and so is any run tool of any name.
        let p = Policy::compile(&spec(&["*"], &["class:run"], &[])).unwrap();
        assert_eq!(p.decide("lab__Bash", run), Decision::Deny);
        assert_eq!(p.decide("lab__exec", exec), Decision::Deny);
        assert_eq!(p.decide("lab__anything_new", run), Decision::Deny);
        assert_eq!(p.decide("lab__Read", read), Decision::Allow);
        // `run` is in every class: denying writes denies Bash too.
        let p = Policy::compile(&spec(&["*"], &["class:write"], &[])).unwrap();
        assert_eq!(p.decide("lab__Bash", run), Decision::Deny);
        assert_eq!(p.decide("lab__Write", write), Decision::Deny);
        assert_eq!(p.decide("lab__Read", read), Decision::Allow);
        // Allowed by class: read-only tools only, on every node.
        let p = Policy::compile(&spec(&["class:readonly"], &[], &["class:read"])).unwrap();
        assert_eq!(p.decide("lab__Read", read), Decision::Confirm);
        assert_eq!(p.decide("lab__Bash", run), Decision::Deny);
        assert_eq!(p.decide("lab__Write", write), Decision::Deny);
        assert_eq!(
            p.precheck("lab__Bash"),
            Decision::Allow,
            "classes decide later"
        );
        assert!(p.allowed_by_class_only("lab__Nope"));
        // A name deny stays final before the tool is known.
        let p = Policy::compile(&spec(&["class:read"], &["db__*"], &[])).unwrap();
        assert_eq!(p.precheck("db__Read"), Decision::Deny);
        assert_eq!(p.precheck("lab__Read"), Decision::Allow);
        // Confirm by class.
        let p = Policy::compile(&spec(&["*"], &[], &["class:run"])).unwrap();
        assert_eq!(p.decide("lab__exec", exec), Decision::Confirm);
        assert_eq!(p.decide("lab__Read", read), Decision::Allow);
        assert!(!p.allowed_by_class_only("lab__Nope"));
    }

    #[test]
    fn an_unknown_class_is_an_error() {
        let e = Policy::compile(&spec(&["class:exec"], &[], &[])).unwrap_err();
        assert!(e.to_string().contains("unknown class"), "{e}");
        assert!(e.to_string().contains("run"), "{e}");
    }

    #[test]
    fn lint_classes_flags_a_half_closed_door() {
        let known = [
            ("Bash", Capability::ShellExec),
            ("exec", Capability::ProcessExec),
            ("Read", Capability::FilesystemRead),
        ];
        let w = lint_classes(&spec(&["*"], &["*__Bash"], &[]), &known);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("Bash") && w[0].contains("exec") && w[0].contains("class:run"));
        let w = lint_classes(&spec(&["lab__*"], &["lab__Bash"], &[]), &known);
        assert!(w.iter().any(|w| w.contains("on lab")), "{w:?}");
        assert!(lint_classes(&spec(&["*"], &["class:run"], &[]), &known).is_empty());
        assert!(lint_classes(&spec(&["*__Read"], &[], &[]), &known).is_empty());
        assert!(lint_classes(&spec(&["*"], &[], &[]), &known).is_empty());
    }
}
