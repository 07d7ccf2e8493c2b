//! Approval posture: tools whose calls need an operator by default.
//!
//! A tool that changes state outside the files it was asked to write (installing a
//! package, killing a process, pushing a branch...) declares `requiresApproval: true`
//! in its definition. The node enforces it like its other guards: a call that carries
//! no operator's approval (`tool.invoke.approval`) is answered `approval_required`
//! before the tool runs, the gateway opens an approval request for the operator, and
//! sends the call again with the request's id once it is approved. So a call without
//! an operator's approval never runs the tool, whatever the agent's token allows (its
//! policy still applies first, at the gateway; an approval obtained there for the
//! token's `confirm` travels with the call and counts here too).
//!
//! The node's owner waives the posture for a tool with `gsv node --no-approval TOOL`
//! (repeatable): the node then declares that tool with `requiresApproval` cleared and
//! its calls run at once. The description of a tool that needs approval starts with
//! [`MARKER`], and that of a read-only tool with [`READ_ONLY_MARKER`], so an agent
//! reading any listing (MCP, `gsv tools`) sees each tool's posture.
//!
//! Like `--approve-shell`, this trusts the gateway's word that an operator approved
//! (see [`super::approve`]).

use super::ask_operator;
use crate::tool::{Tool, ToolContext};
use gsv_protocol::{ErrorShape, ToolDef};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// What the description of a tool that needs approval starts with.
pub const MARKER: &str = "[needs approval] ";
/// What the description of a read-only tool (`readOnlyHint: true`, runs at once)
/// starts with. A tool with neither marker runs at once and may change things (Bash,
/// exec, Write...).
pub const READ_ONLY_MARKER: &str = "[read-only] ";

/// The longest dry-run plan sent with an approval request, in bytes (a longer one is
/// cut at a character boundary and says so).
pub use gsv_protocol::limits::MAX_APPROVAL_PLAN_BYTES as MAX_PLAN_BYTES;

/// The tools whose posture the node's owner waived (`--no-approval`).
#[derive(Debug, Clone, Default)]
pub struct Posture {
    waived: BTreeSet<String>,
}

impl Posture {
    pub fn new(waived: &[String]) -> Self {
        Posture {
            waived: waived.iter().cloned().collect(),
        }
    }

    /// The declaration the node sends for `def`: `requiresApproval` cleared when the
    /// owner waived it, and the description marked with the posture — [`MARKER`] when
    /// calls need approval, else [`READ_ONLY_MARKER`] for a read-only tool. Applying
    /// it twice changes nothing.
    pub fn declare(&self, mut def: ToolDef) -> ToolDef {
        if def.requires_approval && self.waived.contains(&def.name) {
            def.requires_approval = false;
        }
        let marker = if def.requires_approval {
            Some(MARKER)
        } else if def.annotations.read_only_hint == Some(true) {
            Some(READ_ONLY_MARKER)
        } else {
            None
        };
        if let Some(marker) = marker {
            if !def.description.starts_with(marker) {
                def.description = format!("{marker}{}", def.description);
            }
        }
        def
    }

    /// The waived names that are not a tool needing approval among `defs` (the owner
    /// may have a typo; the node says so in its log).
    pub fn unused<'a>(&'a self, defs: &[&ToolDef]) -> Vec<&'a str> {
        self.waived
            .iter()
            .filter(|w| !defs.iter().any(|d| &d.name == *w && d.requires_approval))
            .map(String::as_str)
            .collect()
    }
}

/// Whether a call of the tool `name` may run: always when the tool does not need
/// approval (`requires_approval` as declared, after waivers), else only with an
/// operator's `approval`.
pub fn check(
    name: &str,
    requires_approval: bool,
    approval: Option<&str>,
) -> Result<(), ErrorShape> {
    if !requires_approval {
        return Ok(());
    }
    if let Some(id) = approval {
        tracing::info!(
            approval = id,
            tool = name,
            "running a call an operator approved"
        );
        return Ok(());
    }
    let reason = format!(
        "calls of {name} need an operator's approval by default (its approval posture; the \
         node's owner can waive it with `gsv node --no-approval {name}`)"
    );
    Err(ask_operator("call", &reason, name))
}

/// The longest a tool's [`Tool::plan`] may take: the operator's request opens
/// without a plan after it (the call's own deadline still bounds it first).
pub const PLAN_TIMEOUT: Duration = Duration::from_secs(20);

/// `asking` (this module's `approval_required`) with the tool's dry-run plan for the
/// call added to its details, when the tool gives one in time.
pub async fn with_plan(
    mut asking: ErrorShape,
    tool: &dyn Tool,
    args: &Value,
    ctx: &ToolContext,
) -> ErrorShape {
    let limit = PLAN_TIMEOUT.min(ctx.remaining());
    let plan = match tokio::time::timeout(limit, tool.plan(args, ctx)).await {
        Ok(plan) => plan,
        Err(_) => {
            tracing::warn!(
                limit_ms = limit.as_millis() as u64,
                "the tool's dry-run plan took too long; asking without it"
            );
            None
        }
    };
    if let (Some(plan), Some(Value::Object(details))) = (plan, asking.details.as_mut()) {
        let plan = gsv_protocol::limits::cut_plan(&plan);
        details.insert("plan".into(), Value::String(plan));
    }
    asking
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::{ErrorCode, ToolAnnotations};
    use serde_json::json;

    fn def(name: &str, requires_approval: bool) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: "Does things.".into(),
            input_schema: json!({"type": "object"}),
            capability: "package.install".into(),
            annotations: ToolAnnotations::default(),
            default_timeout_ms: None,
            requires_bins: vec![],
            requires_approval,
        }
    }

    #[test]
    fn a_tool_that_needs_approval_is_marked_and_asks() {
        let p = Posture::default();
        let d = p.declare(def("pkg_install", true));
        assert!(d.requires_approval);
        assert_eq!(d.description, "[needs approval] Does things.");
        assert_eq!(p.declare(d.clone()), d, "idempotent");
        let e = check(&d.name, d.requires_approval, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::ApprovalRequired);
        let details = e.details.unwrap();
        assert!(
            details["reason"]
                .as_str()
                .unwrap()
                .contains("--no-approval pkg_install"),
            "{details}"
        );
        assert_eq!(check(&d.name, d.requires_approval, Some("req-1")), Ok(()));
    }

    #[test]
    fn other_tools_and_waived_ones_run_at_once() {
        let p = Posture::new(&["pkg_install".into(), "typo".into()]);
        let d = p.declare(def("pkg_install", true));
        assert!(!d.requires_approval);
        assert_eq!(d.description, "Does things.");
        assert_eq!(check(&d.name, d.requires_approval, None), Ok(()));
        let other = p.declare(def("Bash", false));
        assert_eq!(other.description, "Does things.");
        let mut read = def("Read", false);
        read.annotations.read_only_hint = Some(true);
        let read = p.declare(read);
        assert_eq!(read.description, "[read-only] Does things.");
        assert_eq!(p.declare(read.clone()), read, "idempotent");
        assert_eq!(check(&other.name, other.requires_approval, None), Ok(()));
        let declared = [def("pkg_install", true), def("Read", false)];
        assert_eq!(p.unused(&declared.iter().collect::<Vec<_>>()), ["typo"]);
    }
}
