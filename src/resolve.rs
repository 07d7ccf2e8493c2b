//! Finding the gateway and a token without flags.
//!
//! On the machine that runs `gsv up` or `gsv gateway`, the data directory holds the
//! address the gateway listens on and the tokens, so `gsv call/nodes/tools` work with
//! no flags. Flags and environment variables override each piece.

use gsv_gateway::datadir;
use std::path::{Path, PathBuf};

/// The data directory: `--data`, else `$GSV_DATA`, else the XDG default.
pub fn data_dir(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .unwrap_or_else(datadir::default_data_dir)
}

/// The gateway URL: `--gateway`, else `$GSV_GATEWAY`, else the address file in the data
/// directory, else the default `127.0.0.1:8787`.
pub fn gateway(flag: Option<&str>, data: &Path) -> String {
    if let Some(g) = flag.filter(|g| !g.is_empty()) {
        return g.to_owned();
    }
    if let Some(g) = std::env::var("GSV_GATEWAY").ok().filter(|g| !g.is_empty()) {
        return g;
    }
    match datadir::read_line(&data.join(datadir::ADDR_FILE)) {
        Some(addr) => format!("http://{addr}"),
        None => "http://127.0.0.1:8787".to_owned(),
    }
}

/// The agent token: `--token`, else `$GSV_AGENT_TOKEN`, else `agent.token`, else
/// `admin.token` in the data directory.
pub fn agent_token(flag: Option<&str>, data: &Path) -> Option<String> {
    if let Some(t) = flag.filter(|t| !t.is_empty()) {
        return Some(t.to_owned());
    }
    if let Some(t) = std::env::var("GSV_AGENT_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        return Some(t);
    }
    datadir::read_line(&data.join(datadir::AGENT_TOKEN_FILE))
        .or_else(|| datadir::read_line(&data.join(datadir::ADMIN_TOKEN_FILE)))
}
