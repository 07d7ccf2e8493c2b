//! `fleet_use` and `fleet_release`: a session brings machines into its own listing and
//! takes them out again ([`super::used`] holds the set).
//!
//! `fleet_use {nodes: [...]}` or `{select: "role=web"}` adds every tool the token may
//! call on those nodes to the session's `tools/list`, by namespace; `fleet_release
//! {nodes: [...]}` or `{all: true}` removes them. Both answer what is in use now, and
//! the session's `list_changed` watcher tells the client to list again. A node the
//! session does not see (unknown, outside its token's policy, outside its `?select=`)
//! answers exactly like one that does not exist, and nothing is added; a set that would
//! pass [`super::used::MAX_USED`] is refused whole.
//!
//! Shared gates: the node set comes from [`super::nodes`] (the token's policy and the
//! session's selection), what gets listed from it is judged again on every listing by
//! the same code as every other listing, and a call of a listed tool is the routed call
//! of any `{node}__{tool}` (policy, confirm globs, node guards, audit).

use super::fleet_answer::{self, FleetError};
use super::nodes::{self, NodeCard};
use super::used::MAX_USED;
use super::view::Lens;
use crate::fleet::Fleet;
use gsv_protocol::names::NodeId;
use gsv_protocol::selector::Selector;
use gsv_protocol::{ErrorCode, ErrorShape};
use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const USE_DESCRIPTION: &str = "Bring machines into your tool list: every tool you may \
call on them is listed by name (`web1__Bash`, `web1__git_log`, ...) until fleet_release. \
Give `nodes` (ids, as fleet_nodes lists them) or `select` (a fleet_nodes selector); at most \
16 in use at once. Your client is told the tool list changed; any `{node}__{tool}` can be \
called by name whether listed or not.";

pub const RELEASE_DESCRIPTION: &str = "Take machines out of your tool list again \
(the ones fleet_use brought in): `nodes` (ids), or `all: true`.";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UseArgs {
    nodes: Option<Vec<String>>,
    select: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseArgs {
    nodes: Option<Vec<String>>,
    #[serde(default)]
    all: bool,
}

/// What both tools answer: the set now, what changed, and the tools it lists.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UseAnswer {
    /// The nodes in use now, sorted.
    in_use: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    added: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    released: Option<Vec<String>>,
    /// The namespaced tools the nodes in use add to the listing.
    tools: Vec<String>,
    note: &'static str,
}

/// Most ids one `nodes` may list (each is looked up before the cap is weighed).
const MAX_NAMED: usize = 256;

const NOTE_CHANGED: &str = "your tool list changed: list tools again to see them";
const NOTE_SAME: &str = "nothing changed";

fn args_error(message: String) -> CallToolResult {
    super::result::error_result(&ErrorShape::new(ErrorCode::InvalidArgs, message))
}

/// The ids `nodes` names, each checked by gsv's name rules and seen by the session.
fn named(fleet: &Fleet, lens: &Lens, ids: Vec<String>) -> Result<Vec<String>, FleetError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let parsed = NodeId::parse(&id).map_err(|reason| FleetError::Name {
            what: "node",
            value: id.clone(),
            reason,
        })?;
        if !nodes::lens_has_node(fleet, lens, parsed.as_str()) {
            return Err(FleetError::NoNode(id));
        }
        out.push(id);
    }
    Ok(out)
}

/// `fleet_use`: the nodes named or selected, added to the lens's set all or none.
/// `lens` holds the other replicas' nodes already (cluster mode).
pub fn use_answer(
    fleet: &Fleet,
    lens: &Lens,
    args: Option<Map<String, Value>>,
) -> Result<CallToolResult, FleetError> {
    let a: UseArgs = fleet_answer::parse(args)?;
    let ids = match (a.nodes, a.select) {
        (Some(ids), None) if ids.len() <= MAX_NAMED => named(fleet, lens, ids)?,
        (Some(_), None) => {
            return Ok(args_error(format!(
                "nodes: at most {MAX_USED} may be in use"
            )))
        }
        (None, Some(select)) => {
            let select = Selector::parse(&select)?;
            let cards: Vec<NodeCard> = nodes::lens_nodes(fleet, lens, Some(&select));
            cards.into_iter().map(|c| c.id).collect()
        }
        _ => return Ok(args_error("give `nodes` or `select`, one of them".into())),
    };
    let added = match lens.used.add(&ids) {
        Ok(added) => added,
        Err(too_many) => {
            tracing::info!(agent = %lens.who.name, in_use = too_many.in_use, asked = too_many.asked, "fleet_use refused: over the cap");
            let message = too_many.to_string();
            let message = message.trim_start_matches("too_large: ").to_owned();
            return Ok(super::result::error_result(&ErrorShape::new(
                ErrorCode::TooLarge,
                message,
            )));
        }
    };
    tracing::info!(agent = %lens.who.name, added = ?added, "fleet_use");
    Ok(answer(fleet, lens, Some(added), None))
}

/// `fleet_release`: the nodes named (or all) taken out of the lens's set.
pub fn release_answer(
    fleet: &Fleet,
    lens: &Lens,
    args: Option<Map<String, Value>>,
) -> Result<CallToolResult, FleetError> {
    let a: ReleaseArgs = fleet_answer::parse(args)?;
    let released = match (a.nodes, a.all) {
        (Some(ids), false) => lens.used.release(Some(&ids)),
        (None, true) => lens.used.release(None),
        _ => {
            return Ok(args_error(
                "give `nodes` or `all: true`, one of them".into(),
            ))
        }
    };
    tracing::info!(agent = %lens.who.name, released = ?released, "fleet_release");
    Ok(answer(fleet, lens, None, Some(released)))
}

fn answer(
    fleet: &Fleet,
    lens: &Lens,
    added: Option<Vec<String>>,
    released: Option<Vec<String>>,
) -> CallToolResult {
    let changed = added.iter().chain(&released).any(|ids| !ids.is_empty());
    let note = if changed { NOTE_CHANGED } else { NOTE_SAME };
    let (_, entries) = nodes::used_listing(fleet, lens);
    fleet_answer::structured(&UseAnswer {
        in_use: lens.used.nodes(),
        added,
        released,
        tools: entries.into_iter().map(|e| e.name).collect(),
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_names_the_cap() {
        assert!(USE_DESCRIPTION.contains(&format!("at most {MAX_USED} in use")));
    }
}
