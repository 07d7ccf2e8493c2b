//! The fleet's change counter (nodes and their tools), for a door that builds what it
//! shows again when the counter moves (MCP's `list_changed` notifications).

use tokio::sync::watch;

impl super::Fleet {
    /// The change counter now: it moves whenever a node or its tools change.
    pub fn tools_epoch(&self) -> u64 {
        *self.shared.tools_epoch.borrow()
    }

    /// The change counter, woken on every change.
    pub fn watch_tools(&self) -> watch::Receiver<u64> {
        self.shared.tools_epoch.subscribe()
    }
}
