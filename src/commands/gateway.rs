//! `gsv gateway`: the gateway alone, until Ctrl-C or SIGTERM.

use crate::exit;
use gsv_gateway::cluster::ClusterError;
use gsv_gateway::GatewayConfig;

/// Runs a gateway with `config` until a shutdown signal.
pub async fn run(config: GatewayConfig) -> u8 {
    let gw = match gsv_gateway::start(config).await {
        Ok(gw) => gw,
        Err(
            e @ (gsv_gateway::GatewayError::Tls(_)
            | gsv_gateway::GatewayError::Cluster(
                ClusterError::Config(_)
                | ClusterError::Key(_)
                | ClusterError::Creds { .. }
                | ClusterError::Nkey { .. },
            )),
        ) => {
            eprintln!("error: gateway: {e}");
            return exit::USAGE;
        }
        Err(e @ gsv_gateway::GatewayError::Cluster(ClusterError::Refused(_))) => {
            eprintln!("error: gateway: {e}");
            return exit::AUTH;
        }
        Err(e) => {
            eprintln!("error: gateway: {e}");
            return exit::UNREACHABLE;
        }
    };
    eprintln!("gsv gateway listening on {}", gw.url());
    if let Some(fp) = &gw.tls_fingerprint {
        eprintln!("TLS certificate SHA-256 fingerprint: {fp}");
        eprintln!(
            "  nodes: gsv node --gateway {} --pin {fp} --id <id> --token-file <id>.token",
            gw.url()
        );
        eprintln!("  or, on a new machine, the line `gsv token create node <id> --install` prints");
    }
    if let Some(m) = gw.metrics_addr {
        eprintln!("metrics on http://{m}/metrics");
    }
    gw.wait(super::shutdown_signal()).await;
    exit::OK
}
