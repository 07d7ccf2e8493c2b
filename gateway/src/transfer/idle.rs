//! Transfers nobody moves: an agent that opens a transfer and then sends nothing,
//! credits nothing and never cancels would hold its places (of the token's, of the
//! node's) for as long as its connection lives. A sweep ends every transfer that saw
//! no chunk, credit or event for [`crate::config::DEFAULT_TRANSFER_IDLE`], unless the gateway itself waits on its node
//! (placing a received file, an approval).

use super::relay::fail;
use crate::state::Shared;
use gsv_protocol::{ErrorCode, ErrorShape};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often the sweep looks.
const EVERY: Duration = Duration::from_secs(5);

/// Ends transfers idle for the gateway's `transfer_idle` ([`crate::config::DEFAULT_TRANSFER_IDLE`] unless set), for
/// as long as the gateway runs.
pub async fn sweep(shared: Arc<Shared>) {
    let idle = shared.config.transfer_idle;
    let every = EVERY.min(idle / 2).max(Duration::from_millis(50));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let stale: Vec<_> = shared
            .transfers
            .routes
            .iter()
            .filter(|r| !r.waiting.load(Ordering::Relaxed) && r.idle_for() >= idle)
            .map(|r| r.clone())
            .collect();
        for route in stale {
            tracing::warn!(transfer = %route.id, node = %route.node.id, idle_s = route.idle_for().as_secs(), "idle transfer ended");
            fail(
                &shared,
                &route,
                ErrorShape::new(
                    ErrorCode::Timeout,
                    format!(
                        "nothing of this transfer moved for {} s; it was ended (copy again to resume)",
                        idle.as_secs()
                    ),
                ),
            );
        }
    }
}
