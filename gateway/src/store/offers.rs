//! Queries on the `node_offers` table: what each node id was accepted offering.
//!
//! One row per node id: its tools (each with its capability) and its capabilities,
//! as JSON text, with when and by whom they were accepted (`first-use` for the node
//! id's first registration, else the operator's channel). The gateway compares every
//! registration with this row (`crate::offers`).

use super::{Store, StoreError};
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a node offers: its tools, each with the capability it declares, and the
/// capabilities it declares. Sorted, so equal offers have equal JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub tools: BTreeMap<String, String>,
    pub capabilities: BTreeSet<String>,
    /// Each tool's definition (description, schema, annotations, approval posture) as
    /// the hex SHA-256 of its JSON; empty in rows accepted before gsv kept it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub definitions: BTreeMap<String, String>,
}

/// A node's accepted offer, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedOffer {
    pub offer: Offer,
    /// ms since the epoch.
    pub accepted_at: u64,
    /// `first-use`, `operator` (the agent protocol) or `admin-api` (HTTP).
    pub accepted_by: String,
}

/// One row of `node_offers` as [`Store::accepted_offers`] reads it: the node id, and
/// its offer or why it does not decode.
pub type StoredOffer = (String, Result<Offer, StoreError>);

impl Store {
    /// The offer accepted for `node`, if any was.
    pub fn accepted_offer(&self, node: &str) -> Result<Option<AcceptedOffer>, StoreError> {
        let row = self
            .conn()
            .query_row(
                "SELECT tools, capabilities, accepted_at, accepted_by, definitions FROM node_offers WHERE node = ?1",
                params![node],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((tools, capabilities, at, by, definitions)) = row else {
            return Ok(None);
        };
        let corrupt = |e: serde_json::Error| StoreError::Offer {
            node: node.to_owned(),
            reason: e.to_string(),
        };
        Ok(Some(AcceptedOffer {
            offer: Offer {
                tools: serde_json::from_str(&tools).map_err(corrupt)?,
                capabilities: serde_json::from_str(&capabilities).map_err(corrupt)?,
                definitions: serde_json::from_str(&definitions).map_err(corrupt)?,
            },
            accepted_at: u64::try_from(at).unwrap_or(0),
            accepted_by: by,
        }))
    }

    /// Every node id's accepted offer, each read on its own: a row that does not
    /// decode is returned as its error (the node's next connect reads it again).
    pub fn accepted_offers(&self) -> Result<Vec<StoredOffer>, StoreError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT node, tools, capabilities, definitions FROM node_offers")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (node, tools, capabilities, definitions) = row?;
            let corrupt = |e: serde_json::Error| StoreError::Offer {
                node: node.clone(),
                reason: e.to_string(),
            };
            let offer = serde_json::from_str(&tools)
                .map_err(corrupt)
                .and_then(|tools| {
                    Ok(Offer {
                        tools,
                        capabilities: serde_json::from_str(&capabilities).map_err(corrupt)?,
                        definitions: serde_json::from_str(&definitions).map_err(corrupt)?,
                    })
                });
            out.push((node, offer));
        }
        Ok(out)
    }

    /// Records `offer` as what `node` is accepted offering (replacing any earlier row).
    pub fn accept_offer(
        &self,
        node: &str,
        offer: &Offer,
        by: &str,
        at: u64,
    ) -> Result<(), StoreError> {
        let corrupt = |e: serde_json::Error| StoreError::Offer {
            node: node.to_owned(),
            reason: e.to_string(),
        };
        let tools = serde_json::to_string(&offer.tools).map_err(corrupt)?;
        let capabilities = serde_json::to_string(&offer.capabilities).map_err(corrupt)?;
        let definitions = serde_json::to_string(&offer.definitions).map_err(corrupt)?;
        self.conn().execute(
            "INSERT INTO node_offers (node, tools, capabilities, accepted_at, accepted_by, definitions)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(node) DO UPDATE SET tools = ?2, capabilities = ?3, accepted_at = ?4, accepted_by = ?5, definitions = ?6",
            params![
                node,
                tools,
                capabilities,
                i64::try_from(at).unwrap_or(i64::MAX),
                by,
                definitions
            ],
        )?;
        Ok(())
    }
}
