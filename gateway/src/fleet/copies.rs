//! A file copied from one node to another through the gateway (MCP's `fleet_copy`),
//! for a door that relays its progress.

use crate::transfer::{Requester, TransferError};
use gsv_protocol::transfer::{Copied, CopyParams};

impl super::Fleet {
    /// Copies `params.from` to `params.to` for `asker` ([`crate::transfer::copy`]),
    /// telling `progress` the bytes copied and the size as it goes.
    pub async fn copy(
        &self,
        asker: &Requester,
        params: CopyParams,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<Copied, TransferError> {
        crate::transfer::copy(&self.shared, asker, params, progress).await
    }
}
