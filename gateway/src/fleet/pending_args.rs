//! The whole arguments of a call waiting for approval on this gateway: approval
//! lists carry them cut short, and a door that shows one request in full (the
//! console's page) reads them here from the approvals the core holds.

use std::sync::Arc;

impl super::Fleet {
    /// Every argument of approval request `id`, as the canonical JSON its hash is
    /// taken of, while its call still waits on this gateway.
    pub fn pending_approval_args(&self, id: &str) -> Option<Arc<str>> {
        self.shared.approvals.args_of(id)
    }
}
