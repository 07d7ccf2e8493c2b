//! A minimal agent: connects to a gateway over the WebSocket agent protocol, lists the
//! tools its token may call, and calls one.
//!
//! ```sh
//! cargo run --example agent_client -- http://127.0.0.1:8787 "$(cat ~/.local/share/gsv/agent.token)" \
//!     laptop__Read '{"path":"README.md"}'
//! ```

use gsv_client::AgentClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(gateway), Some(token)) = (args.next(), args.next()) else {
        eprintln!("usage: agent_client GATEWAY-URL TOKEN [TOOL ARGS-JSON]");
        std::process::exit(2);
    };
    let client = AgentClient::connect(&gateway, &token).await?;
    println!("connected (protocol {})", client.hello.protocol);
    for tool in client.list_tools().await? {
        let state = if tool.online { "" } else { " (offline)" };
        println!("  {}{}", tool.name, state);
    }
    if let Some(name) = args.next() {
        let call_args = match args.next() {
            Some(json) => serde_json::from_str(&json)?,
            None => serde_json::json!({}),
        };
        let result = client.call(&name, call_args, None).await?;
        println!(
            "{}{}",
            if result.is_error { "tool error: " } else { "" },
            result.joined_text()
        );
    }
    Ok(())
}
