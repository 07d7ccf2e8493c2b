//! `node.probe`: asking a node to look for binaries on its PATH again.
//!
//! Used by the admin API (`POST /v1/nodes/{id}/probe`). The node answers with its
//! current `hostBinStatus`, which replaces what the registry shows for it, and
//! compares its login profile with its baseline again (`loginProfile`, absent when
//! they match), and reads its host facts again (`facts`, which replace the ones the
//! registry shows).

mod error;

pub use error::ProbeError;

use crate::registry::Disconnected;
use crate::state::Shared;
use gsv_protocol::frame::encode_req;
use gsv_protocol::method::{ProbeParams, ProbeResult};
use gsv_protocol::Method;
use std::time::Duration;

const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Asks `node_id` to probe `bins` (all tracked binaries when empty).
pub async fn probe(
    shared: &Shared,
    node_id: &str,
    bins: Vec<String>,
) -> Result<ProbeResult, ProbeError> {
    let node = shared
        .registry
        .get(node_id)
        .ok_or_else(|| ProbeError::NoNode {
            node: node_id.to_owned(),
        })?;
    let (call_id, rx) = node.begin_call().map_err(|_| ProbeError::Busy)?;
    let gone = || {
        ProbeError::Disconnected(Disconnected {
            node: node.id.clone(),
        })
    };
    let frame = encode_req(
        &call_id.to_string(),
        Method::NodeProbe,
        &ProbeParams { bins },
    );
    if node.out.send(frame).is_err() {
        node.abandon_call(call_id);
        return Err(gone());
    }
    let raw = match tokio::time::timeout(PROBE_TIMEOUT, rx).await {
        Ok(Ok(outcome)) => outcome.map_err(ProbeError::Node)?,
        Ok(Err(_)) => return Err(gone()),
        Err(_) => {
            node.abandon_call(call_id);
            return Err(ProbeError::Timeout);
        }
    };
    let result: ProbeResult = serde_json::from_str(raw.get()).map_err(ProbeError::Malformed)?;
    let result = ProbeResult {
        login_profile: result.login_profile.map(|lp| Box::new(lp.bounded())),
        facts: result.facts.map(|f| Box::new(f.bounded())),
        ..result
    };
    if let Ok(mut rt) = node.runtime.lock() {
        rt.host_bin_status.extend(result.host_bin_status.clone());
        rt.host_bin_status_updated_at = result.host_bin_status_updated_at;
        // The node compared its login profile again: its answer replaces the last one.
        rt.login_profile = result.login_profile.clone();
        // Facts read again replace the ones from connect; an older node sends none.
        if result.facts.is_some() {
            rt.facts = result.facts.clone();
        }
    }
    Ok(result)
}
