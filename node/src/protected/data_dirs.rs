//! Every gsv data directory on the host, not only this node's: a directory holding
//! gsv's marker file ([`gsv_protocol::gsv_files::DATA_DIR_MARKER`]), and any file
//! named as gsv names its secrets (`admin.token`, `node-<ID>.credential`, ...),
//! wherever it is. Another node's `--data` or a gateway's non-default `--data` on the
//! same host are found this way with no `--protect` flag.

use gsv_protocol::gsv_files::{is_secret_file_name, DATA_DIR_MARKER};
use std::path::Path;

/// Whether `real` (a canonical path) is a gsv secret file or lies in a gsv data
/// directory: its own name, then every directory from it up to `/`.
pub fn is_gsv_path(real: &Path) -> bool {
    if real
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_secret_file_name)
    {
        return true;
    }
    real.ancestors().any(holds_marker)
}

/// Whether the directory `dir` is a gsv data directory (holds the marker).
pub fn holds_marker(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(DATA_DIR_MARKER)).is_ok()
}

/// Whether a file met by a walk is named as a gsv secret.
pub fn has_secret_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_secret_file_name)
}

/// Whether a file tool or a copy may not *create* an entry named `name`: gsv's secret
/// names, the marker among them. An agent that could make a `.gsv-data` would hide the
/// directory around it from every other agent's file tools; one that could make an
/// `admin.token` would make a file nobody's file tools can read again.
pub fn refuses_new_name(name: &std::ffi::OsStr) -> bool {
    name.to_str().is_some_and(is_secret_file_name)
}

/// Leaves the marker in `dir` (a data directory this process uses), so every other
/// gsv node on the host leaves it alone. Failing to write it is logged, not fatal.
pub fn mark(dir: &Path) {
    let marker = dir.join(DATA_DIR_MARKER);
    if std::fs::symlink_metadata(&marker).is_ok() {
        return;
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker);
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot mark the data directory as gsv's");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_directories_and_secret_names() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("other-node");
        std::fs::create_dir_all(data.join("journal/x")).unwrap();
        std::fs::write(data.join("journal/x/out"), "o").unwrap();
        assert!(!is_gsv_path(&data.join("journal/x/out")));
        mark(&data);
        mark(&data);
        assert!(is_gsv_path(&data.join("journal/x/out")));
        assert!(is_gsv_path(&data));
        assert!(!is_gsv_path(tmp.path()));
        assert!(is_gsv_path(&tmp.path().join("node-lab.credential")));
        assert!(has_secret_name(Path::new("/a/admin.token")));
    }
}
