//! `copy`: a file copied from one node to another (or within one) by the gateway
//! (`transfer.copy`); its bytes never pass through this machine.

use crate::{AgentClient, ClientError};
use gsv_protocol::transfer::{Copied, CopyParams, Place, Progress};
use gsv_protocol::{EventName, Method};
use std::time::Duration;

impl AgentClient {
    /// Copies `from` (a file on a node) to `to` (ending in `/`: into that directory,
    /// under the source's name), node to node through the gateway, checked by SHA-256
    /// on the destination before it is renamed into place; resumed from what the
    /// destination holds of an interrupted copy of the same file.
    /// `progress(done, total)` is called as the gateway reports it. Dropping the
    /// future does not stop the copy: closing the connection does.
    pub async fn copy_file(
        &self,
        from: Place,
        to: Place,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<Copied, ClientError> {
        let id = self.next_id();
        let params = CopyParams { from, to };
        let answer = self.request_with_id(&id, Method::TransferCopy, &params);
        tokio::pin!(answer);
        loop {
            tokio::select! {
                biased;
                raw = &mut answer => {
                    let raw = raw?;
                    return serde_json::from_str(raw.get()).map_err(|e| {
                        ClientError::Protocol(format!("bad transfer.copy result: {e}"))
                    });
                }
                event = self.next_event(Duration::from_secs(1)) => match event {
                    Some(e) if e.event == EventName::TransferProgress => {
                        if let Ok(p) = serde_json::from_value::<Progress>(e.payload) {
                            if p.request == id {
                                progress(p.bytes, p.size);
                            }
                        }
                    }
                    Some(_) => {}
                    // No event (or none will come): wait for the answer a little.
                    None => tokio::time::sleep(Duration::from_millis(20)).await,
                },
            }
        }
    }
}
