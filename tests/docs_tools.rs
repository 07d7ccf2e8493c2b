//! The tool table of docs/operations.md ("## Tools") against the tools a standard
//! node declares: every tool has a row, every row is a tool, and each row's capability
//! and posture are the declaration's (`requiresApproval` → "needs approval", else
//! `readOnlyHint` → "read-only", else "runs at once"). So the posture an operator reads
//! in the docs is the one the node enforces.

use gsv_node::{NodeConfig, Registry};
use gsv_protocol::NodeId;
use std::collections::BTreeMap;

fn rows() -> BTreeMap<String, (String, String)> {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("docs/operations.md");
    let header = "| Tool | Capability | Default call deadline | Posture | Does |";
    let start = docs.find(header).expect("the tool table's header");
    let mut rows = BTreeMap::new();
    for line in docs[start..].lines().skip(2) {
        if !line.starts_with("| ") {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        let name = cells[0]
            .trim_start_matches("| ")
            .trim_matches('`')
            .to_owned();
        let capability = cells[1].trim_matches('`').to_owned();
        let posture = cells[3].to_owned();
        assert!(
            rows.insert(name.clone(), (capability, posture)).is_none(),
            "{name} has two rows"
        );
    }
    rows
}

#[test]
fn the_tool_table_states_each_tools_capability_and_posture() {
    let mut config = NodeConfig::new(
        "ws://127.0.0.1:1".to_owned(),
        NodeId::parse("docs").unwrap(),
        "unused".to_owned(),
        std::env::temp_dir(),
    );
    config.echo_tool = true;
    let registry = Registry::standard(&config).expect("the standard tools");
    let mut rows = rows();
    for def in registry.defs() {
        let (capability, posture) = rows
            .remove(&def.name)
            .unwrap_or_else(|| panic!("{} has no row in the tool table", def.name));
        let declared = if def.requires_approval {
            "needs approval"
        } else if def.annotations.read_only_hint == Some(true) {
            "read-only"
        } else {
            "runs at once"
        };
        assert_eq!(posture, declared, "{}'s posture", def.name);
        assert_eq!(capability, def.capability, "{}'s capability", def.name);
    }
    assert!(
        rows.is_empty(),
        "rows for tools a node does not declare: {rows:?}"
    );
}
