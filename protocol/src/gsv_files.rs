//! The files gsv keeps its secrets in, by name: shared by the gateway and the node
//! that write them and by the node's file guard, which refuses them to every file
//! tool wherever they are on the host.
//!
//! A node knows its own data directory and, under `gsv up`, the gateway's. Other
//! gsv data directories on the same host (a second node's `--data`, a gateway run
//! with a non-default `--data`) are recognised by the marker file every gsv process
//! leaves in its data directory ([`DATA_DIR_MARKER`]) and by the names gsv gives its
//! secret files ([`is_secret_file_name`]), so no configuration is needed for them.

/// The empty file a gateway or a node writes into its data directory at start: a
/// directory that holds it, and everything below it, is gsv's.
pub const DATA_DIR_MARKER: &str = ".gsv-data";

/// Names of files that hold gsv secrets or state, wherever they are.
const SECRET_NAMES: &[&str] = &[
    "admin.token",
    "agent.token",
    "node.token",
    "gsv.db",
    "gsv.db-wal",
    "gsv.db-shm",
    "gsv.db-journal",
    "tls-key.pem",
    DATA_DIR_MARKER,
];

/// Whether a file named `name` is one gsv keeps a secret in: the gateway's token
/// files and store, its TLS key, a node's `node-<ID>.credential`, or the marker.
pub fn is_secret_file_name(name: &str) -> bool {
    SECRET_NAMES.contains(&name)
        || name
            .strip_prefix("node-")
            .and_then(|rest| rest.strip_suffix(".credential"))
            .is_some_and(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for n in [
            "admin.token",
            "gsv.db-wal",
            "node-lab.credential",
            ".gsv-data",
        ] {
            assert!(is_secret_file_name(n), "{n}");
        }
        for n in [
            "admin.tokens",
            "node-.credential",
            "notes.txt",
            "gsv.db.bak",
        ] {
            assert!(!is_secret_file_name(n), "{n}");
        }
    }
}
