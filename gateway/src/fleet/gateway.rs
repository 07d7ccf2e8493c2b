//! What every door reads of the gateway it stands in: its settings, its metrics,
//! its audit log, whether it is stopping, and who a request's token is.

use crate::audit::AuditEntry;
use crate::auth::{AuthError, Principal};
use crate::changes::Topic;
use crate::config::GatewayConfig;
use crate::metrics::Metrics;
use axum::http::HeaderMap;
use std::net::SocketAddr;
use tokio_util::sync::CancellationToken;

impl super::Fleet {
    /// The gateway's settings.
    pub fn config(&self) -> &GatewayConfig {
        &self.shared.config
    }

    /// The gateway's counters (`/metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// Records one row in the audit log.
    pub fn audit(&self, event: impl Into<AuditEntry>) {
        self.shared.audit.record(event);
    }

    /// Tells whoever shows the fleet live that `topic` changed.
    pub fn changed(&self, topic: Topic) {
        self.shared.changes.send(topic);
    }

    /// What changes, as it changes ([`crate::changes`]).
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<Topic> {
        self.shared.changes.subscribe()
    }

    /// Cancelled when the gateway stops.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shared.shutdown
    }

    /// Cancelled when a graceful stop begins: new agent connections and calls are
    /// refused.
    pub fn draining(&self) -> &CancellationToken {
        &self.shared.draining
    }

    /// Who the request's `Authorization: Bearer` token is (rate-limited per address;
    /// a missing or bad token counts as a failed authentication).
    pub(crate) async fn authorize(
        &self,
        headers: &HeaderMap,
        peer: SocketAddr,
    ) -> Result<Principal, AuthError> {
        crate::auth::authorize(&self.shared, headers, peer).await
    }
}
