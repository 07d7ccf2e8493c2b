//! One module per CLI command family.

pub mod agent;
pub mod approvals;
pub mod audit;
pub mod call_args;
pub mod client;
pub mod cp;
pub mod fanout;
pub mod gateway;
pub mod install_line;
pub mod jobs;
pub mod mcp;
pub mod node;
pub mod node_service;
pub mod nodes;
pub mod token;
pub mod ui;
pub mod up;

/// A request `id` the user interrupted (Ctrl-C, SIGTERM): cancels it on the gateway, so
/// the call ends (closing the connection alone would leave it running as a job), waits
/// a moment for the gateway to confirm, and says so. The exit code.
pub async fn interrupted<F: std::future::Future>(
    client: &gsv_client::AgentClient,
    id: &str,
    request: std::pin::Pin<&mut F>,
) -> u8 {
    let _ = client.cancel(id).await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), request).await;
    eprintln!("error: cancelled: interrupted; the call was cancelled");
    crate::exit::INTERRUPTED
}

/// Waits for Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
