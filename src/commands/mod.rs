//! One module per CLI command family.

pub mod agent;
pub mod approvals;
pub mod audit;
pub mod call_args;
pub mod fanout;
pub mod gateway;
pub mod install_line;
pub mod jobs;
pub mod mcp;
pub mod node;
pub mod node_service;
pub mod nodes;
pub mod token;
pub mod up;

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
