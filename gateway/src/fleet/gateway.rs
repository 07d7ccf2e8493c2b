//! What every door reads of the gateway it stands in: its settings, its metrics,
//! its audit log, whether it is stopping, and who a request's token is.

use crate::audit::AuditEntry;
use crate::auth::{AuthError, Principal};
use crate::changes::Topic;
use crate::config::GatewayConfig;
use crate::metrics::Metrics;
use axum::http::HeaderMap;
use std::net::SocketAddr;
use std::sync::Arc;
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

    /// Registered sessions, and connections delivering what is left in their queue
    /// after they ended: a stopping gateway waits for them.
    pub fn closing(&self) -> &tokio_util::task::TaskTracker {
        &self.shared.closing
    }

    /// Runs a WebSocket's handshake up to authentication as `role`; `None` when it
    /// failed (the peer was told why and the connection is closed).
    pub(crate) async fn handshake(
        &self,
        ws: crate::conn::Ws,
        role: gsv_protocol::Role,
        peer: SocketAddr,
    ) -> Option<crate::handshake::Handshake> {
        crate::handshake::accept(ws, &self.shared, role, peer).await
    }

    /// Refuses a connection whose handshake authenticated but whose request cannot be
    /// served: the peer is told why, the refusal counted and audited.
    pub(crate) async fn refuse(
        &self,
        hs: crate::handshake::Handshake,
        err: crate::handshake::HandshakeError,
    ) {
        hs.refuse(&self.shared, err).await
    }

    /// The gateway's metrics in the OpenMetrics text format, brought up to date first
    /// (unauthenticated connections, the link to the other replicas).
    pub fn metrics_text(&self) -> String {
        self.shared
            .metrics
            .unauthenticated_connections
            .set(self.shared.admission.unauthenticated() as i64);
        self.measure_peers();
        self.shared.metrics.encode()
    }

    /// The place of connection `peer` under the caps on unauthenticated connections
    /// (the accept loop took it); held until its session ends.
    pub fn admission_ticket(&self, peer: SocketAddr) -> Option<Arc<crate::admission::Ticket>> {
        self.shared.admission.ticket(peer)
    }
}
