//! Accepting what a node offers (`gsv nodes accept-tools`, `POST
//! /v1/nodes/{id}/accept-tools`, `nodes.accept_tools`): one operation for every door.

use crate::audit::AuditEvent;
use crate::offers::{digest, offer_of, OfferDiff, OfferError};
use gsv_protocol::offer::{AcceptToolsResult, UnacceptedOffer};
use gsv_protocol::NodeId;

/// Accepts what node `id` offers now (online, or offline since the gateway started):
/// its unaccepted tools become visible and callable, the acceptance is audited, and
/// agents hear that the node's tools changed. `by` is `operator` or `admin-api`.
impl super::Fleet {
    pub async fn accept_tools(&self, id: &str, by: &str) -> Result<AcceptToolsResult, OfferError> {
        let shared = &self.shared;
        let unknown = || OfferError::UnknownNode {
            node: id.to_owned(),
        };
        let node = NodeId::parse(id).map_err(|_| unknown())?;
        let set = shared.registry.tool_set(id).ok_or_else(unknown)?;
        let offer = offer_of(&set);
        let digest = digest(&offer);
        let (name, stored, who) = (id.to_owned(), offer.clone(), by.to_owned());
        let previous = shared
            .store
            .blocking(move |s| {
                let previous = s.accepted_offer(&name)?;
                s.accept_offer(&name, &stored, &who, gsv_protocol::now_ms())?;
                Ok::<_, crate::store::StoreError>(previous)
            })
            .await??;
        shared.offers.accepted(node, digest);
        let cleared = shared.registry.unaccepted.clear_if(id, &digest);
        let diff = OfferDiff::between(&previous.map(|p| p.offer).unwrap_or_default(), &offer);
        let accepted = UnacceptedOffer {
            tools: diff.added_tools,
            capabilities: diff.added_capabilities,
            hidden: cleared.as_ref().is_some_and(|p| p.offer.hidden),
        };
        tracing::info!(
            node_id = id,
            by,
            // Debug-formatted: names from the node, escaped.
            tools = ?accepted.tools,
            capabilities = ?accepted.capabilities,
            "node's offer accepted"
        );
        shared.audit.record(AuditEvent::NodeToolsAccepted {
            by,
            node: id,
            tools: &accepted.tools,
            capabilities: &accepted.capabilities,
            first_use: false,
        });
        if cleared.is_some() {
            shared.tools_changed(id, &set, "accepted");
        }
        Ok(AcceptToolsResult {
            node: id.to_owned(),
            accepted,
            tools: offer.tools.into_keys().collect(),
            capabilities: offer.capabilities.into_iter().collect(),
        })
    }
}
