//! `gsv gateway`: the gateway alone, until Ctrl-C or SIGTERM.

use crate::exit;
use gsv_gateway::GatewayConfig;

/// Runs a gateway with `config` until a shutdown signal.
pub async fn run(config: GatewayConfig) -> u8 {
    let gw = match gsv_gateway::start(config).await {
        Ok(gw) => gw,
        Err(e) => {
            eprintln!("error: gateway: {e}");
            return exit::UNREACHABLE;
        }
    };
    eprintln!("gsv gateway listening on http://{}", gw.addr);
    if let Some(m) = gw.metrics_addr {
        eprintln!("metrics on http://{m}/metrics");
    }
    gw.wait(super::shutdown_signal()).await;
    exit::OK
}
