//! `gsv node`: one node, dialling the gateway, until Ctrl-C or SIGTERM.

use crate::exit;
use gsv_node::NodeConfig;
use tokio_util::sync::CancellationToken;

/// Runs a node until a shutdown signal or a fatal refusal.
pub async fn run(config: NodeConfig) -> u8 {
    let stop = CancellationToken::new();
    let trigger = stop.clone();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        trigger.cancel();
    });
    match gsv_node::run(config, stop).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: node: {e}");
            e.exit_code()
        }
    }
}
