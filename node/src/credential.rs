//! The node's credential: what it authenticates with.
//!
//! A node is usually started with a one-time join token. At its first connect the
//! gateway exchanges it for a long-lived node credential (in `hello-ok`), which the node
//! keeps in memory and, when it has a data directory, in `node-<id>.credential` (0600),
//! and uses from then on — the join token is spent and cannot be replayed. On later
//! starts the stored credential is used and the join token on the command line is
//! ignored, unless the gateway refuses the stored credential (its database was reset,
//! the credential was revoked): then a fresh join token given on the command line is
//! tried instead.

use crate::config::NodeConfig;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tracing::{info, warn};

/// Prefix of one-time join tokens.
const JOIN_PREFIX: &str = "gsv_join_";

/// The credential's file name in the node's data directory: `node-<id>.credential`.
pub(crate) fn file_name(id: &gsv_protocol::NodeId) -> String {
    format!("node-{id}.credential")
}

pub(crate) struct Credentials {
    given: String,
    file: Option<PathBuf>,
    stored: Mutex<Option<String>>,
}

impl Credentials {
    /// Loads a stored credential for this node id, if there is one.
    pub fn load(config: &NodeConfig) -> Self {
        let file = config
            .data_dir
            .as_ref()
            .map(|d| d.join(file_name(&config.id)));
        let stored = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        if let (Some(_), Some(f)) = (&stored, &file) {
            info!(file = %f.display(), "using the node credential enrolled earlier");
        }
        Credentials {
            given: config.token.clone(),
            file,
            stored: Mutex::new(stored),
        }
    }

    fn stored(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.stored.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token to present now.
    pub fn current(&self) -> String {
        self.stored().clone().unwrap_or_else(|| self.given.clone())
    }

    /// Keeps the credential the gateway issued in exchange for the join token.
    pub fn adopt(&self, credential: String) {
        if let Some(file) = &self.file {
            match write_secret(file, &credential) {
                Ok(()) => info!(file = %file.display(), "enrolled: node credential stored"),
                Err(e) => warn!(
                    file = %file.display(),
                    error = %e,
                    "enrolled, but the credential could not be stored: it lives in memory until the node stops"
                ),
            }
        } else {
            info!("enrolled: node credential kept in memory");
        }
        *self.stored() = Some(credential);
    }

    /// After the gateway refused the stored credential: falls back to the join token
    /// from the command line, if there is one. Returns whether it did.
    pub fn fall_back_to_join(&self) -> bool {
        let mut stored = self.stored();
        if stored.is_some() && self.given.starts_with(JOIN_PREFIX) {
            warn!("the gateway refused the stored credential; trying the join token given on the command line");
            *stored = None;
            true
        } else {
            false
        }
    }
}

fn write_secret(path: &Path, content: &str) -> std::io::Result<()> {
    crate::private_file::write_private(path, format!("{content}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::NodeId;

    fn config(dir: Option<PathBuf>, token: &str) -> NodeConfig {
        let mut c = NodeConfig::new(
            "http://127.0.0.1:1".into(),
            NodeId::parse("n1").unwrap(),
            token.into(),
            std::env::temp_dir(),
        );
        c.data_dir = dir;
        c
    }

    #[test]
    fn adopt_persists_and_is_used_next_time() {
        let dir = std::env::temp_dir().join(format!("gsv-cred-{}", uuid::Uuid::new_v4()));
        let c = Credentials::load(&config(Some(dir.clone()), "gsv_join_x_y"));
        assert_eq!(c.current(), "gsv_join_x_y");
        c.adopt("gsv_node_cred".into());
        assert_eq!(c.current(), "gsv_node_cred");
        let again = Credentials::load(&config(Some(dir.clone()), "gsv_join_x_y"));
        assert_eq!(again.current(), "gsv_node_cred");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("node-n1.credential"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Refused stored credential → the join token from the command line.
        assert!(again.fall_back_to_join());
        assert_eq!(again.current(), "gsv_join_x_y");
        assert!(!again.fall_back_to_join());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn no_fallback_without_a_join_token() {
        let c = Credentials::load(&config(None, "gsv_node_a_b"));
        c.adopt("gsv_node_new".into());
        assert!(!c.fall_back_to_join());
        assert_eq!(c.current(), "gsv_node_new");
    }
}
