//! Log setup: `tracing` to stderr, filtered by `RUST_LOG` (default given per command).

use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber. `default` applies when `RUST_LOG` is unset.
pub fn init(default: &str) {
    // The MCP SDK logs every session and request at `info`: keep it to warnings unless
    // asked (`RUST_LOG=rmcp=info`).
    let default = if default.contains("rmcp") {
        default.to_owned()
    } else {
        format!("{default},rmcp=warn")
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
