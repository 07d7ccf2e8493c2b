//! The gateway's data directory: where it is and what it keeps there.
//!
//! One directory holds everything the gateway must not forget (the SQLite store, the
//! admin token, the address it listens on), so `gsv call`, `gsv token` and friends find
//! a running gateway on the same machine through `--data` alone.

use std::io::Write;
use std::path::{Path, PathBuf};

/// SQLite store: tokens (hashed), later approvals and the audit log.
pub const DB_FILE: &str = "gsv.db";
/// The admin API token (0600), made on first start.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// A full-access agent token for the local user, written by `gsv up` (0600).
pub const AGENT_TOKEN_FILE: &str = "agent.token";
/// The local node's token, written by `gsv up` (0600).
pub const NODE_TOKEN_FILE: &str = "node.token";
/// The address the gateway listens on, e.g. `127.0.0.1:8787`.
pub const ADDR_FILE: &str = "gateway.addr";

/// `$GSV_DATA`, else `$XDG_DATA_HOME/gsv`, else `~/.local/share/gsv`.
pub fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GSV_DATA").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(d).join("gsv");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local").join("share").join("gsv")
}

/// Creates the directory (mode 0700 on Unix) if needed. An existing directory keeps
/// its permissions (it may be one the user pointed `--data` at); the files in it are
/// 0600 anyway.
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.is_dir() {
        make_dir(dir)?;
    }
    mark(dir);
    Ok(())
}

/// Leaves gsv's marker in the data directory, so nodes on this host keep their file
/// tools out of it (`gsv_protocol::gsv_files`); a failure is logged, not fatal.
fn mark(dir: &Path) {
    let marker = dir.join(gsv_protocol::gsv_files::DATA_DIR_MARKER);
    if marker.exists() {
        return;
    }
    if let Err(e) = std::fs::File::create(&marker) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot mark the data directory as gsv's");
    }
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

/// Writes a secret file atomically with mode 0600 (temp file + rename).
pub fn write_secret(path: &Path, content: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("secret"),
        std::process::id()
    ));
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Reads a one-line file (a token or an address), trimmed. `None` if missing or empty.
pub fn read_line(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}
