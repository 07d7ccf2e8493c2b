//! A node that offers one custom tool next to the standard set.
//!
//! A tool is a type implementing `gsv_node::Tool`: a declaration (name, JSON Schema,
//! capability id, hints) and an async `execute`. Register it on a `Registry` and run the
//! node with `run_with_registry`.
//!
//! A tool that does something no built-in capability id describes declares its own,
//! under the prefix reserved for third parties: `x.<vendor>.<name>` (lower case, each
//! part at most 32 characters). The gateway checks the form and otherwise treats the
//! id as opaque.
//!
//! ```sh
//! gsv token create node demo
//! cargo run --example custom_tool_node -- http://127.0.0.1:8787 demo gsv_node_...
//! gsv call demo__Uppercase '{"text":"hello"}'
//! ```

use gsv_node::{async_trait, NodeConfig, Registry, Tool, ToolContext};
use gsv_protocol::{NodeId, ToolAnnotations, ToolDef, ToolResult};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Upper-cases a string. Touches nothing on the host.
struct Uppercase;

#[async_trait]
impl Tool for Uppercase {
    fn def(&self) -> ToolDef {
        ToolDef {
            name: "Uppercase".into(),
            description: "Return `text` in upper case.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": false
            }),
            capability: "x.example.uppercase".into(),
            annotations: ToolAnnotations {
                read_only_hint: Some(true),
                idempotent_hint: Some(true),
                ..ToolAnnotations::default()
            },
            default_timeout_ms: Some(5_000),
            requires_bins: vec![],
            requires_approval: false,
        }
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        match args.get("text").and_then(Value::as_str) {
            Some(text) => ToolResult::text(text.to_uppercase()),
            None => ToolResult::error("`text` must be a string"),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(gateway), Some(id), Some(token)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: custom_tool_node GATEWAY-URL NODE-ID NODE-TOKEN");
        std::process::exit(2);
    };
    let config = NodeConfig::new(
        gateway,
        NodeId::parse(&id)?,
        token,
        std::env::current_dir()?,
    );
    let mut registry = Registry::standard(&config)?;
    registry.register(Uppercase)?;
    let stop = CancellationToken::new();
    let trigger = stop.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        trigger.cancel();
    });
    gsv_node::run_with_registry(config, registry, stop).await?;
    Ok(())
}
