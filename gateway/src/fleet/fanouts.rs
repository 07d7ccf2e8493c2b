//! How many nodes a fan-out would pick, counted before it runs (MCP's `fleet_run`);
//! the fan-out itself is [`super::Fleet::fanout`].

use crate::policy::Policy;

impl super::Fleet {
    /// How many nodes a fan-out with selector `select` picks for `policy` and
    /// `token_id` (0 for a bad selector).
    pub async fn count_picked(&self, policy: &Policy, token_id: &str, select: &str) -> usize {
        crate::fanout::count_picked(&self.shared, policy, token_id, select).await
    }
}
