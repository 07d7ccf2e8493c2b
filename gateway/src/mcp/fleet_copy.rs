//! `fleet_copy {from, to}`: a file copied from one node to another (or within one)
//! from MCP, through the gateway, so an agent moves a file between machines without
//! its bytes passing through the model's context.
//!
//! It is the gateway's node → node copy ([`crate::transfer::copy`]) with the token's
//! policy (`{from}__Read`, `{to}__Write`; `confirm` waits for an operator), checked
//! by SHA-256 at the destination before the file is renamed into place, resumed from
//! what the destination holds of an interrupted copy of the same file. Progress goes
//! out as `notifications/progress` when the request asks for them; cancelling the
//! request cancels the copy (the destination keeps its verified partial file).

use super::auth::McpPrincipal;
use super::result;
use crate::error::WireError;
use crate::fleet::Fleet;
use crate::transfer::{Requester, TransferError};
use gsv_protocol::transfer::{CopyParams, Place};
use gsv_protocol::{ErrorCode, ErrorShape};
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// `fleet_copy`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    from: String,
    to: String,
}

/// `NODE:PATH` → the place it names.
fn place(arg: &str, which: &str) -> Result<Place, ErrorShape> {
    match arg.split_once(':') {
        Some((node, path)) if !node.is_empty() && !path.is_empty() => Ok(Place {
            node: node.to_owned(),
            path: path.to_owned(),
        }),
        _ => Err(ErrorShape::new(
            ErrorCode::InvalidArgs,
            format!("{which}: write NODE:PATH (e.g. web-1:/var/log/app.log), got {arg:?}"),
        )),
    }
}

/// Validates `fleet_copy`'s arguments.
pub fn parse(args: Option<Map<String, Value>>) -> Result<CopyParams, ErrorShape> {
    let a: Args = serde_json::from_value(Value::Object(args.unwrap_or_default()))
        .map_err(|e| ErrorShape::new(ErrorCode::InvalidArgs, e.to_string()))?;
    Ok(CopyParams {
        from: place(&a.from, "from")?,
        to: place(&a.to, "to")?,
    })
}

/// Runs the copy for `who`; the tool's answer.
pub async fn run(
    fleet: &Fleet,
    who: &McpPrincipal,
    params: CopyParams,
    cancel: CancellationToken,
    peer: &Peer<RoleServer>,
    token: Option<ProgressToken>,
) -> CallToolResult {
    let asker = Requester::new(&who.name, &who.token_id, who.policy.clone(), None, cancel);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let progress = move |bytes: u64, size: u64| {
        let _ = tx.send((bytes, size));
    };
    let outcome = {
        let copy = fleet.copy(&asker, params, &progress);
        tokio::pin!(copy);
        loop {
            tokio::select! {
                biased;
                Some((bytes, size)) = rx.recv() => notify(peer, token.as_ref(), bytes, size).await,
                outcome = &mut copy => break outcome,
            }
        }
    };
    match outcome {
        Ok(c) => {
            let text = format!(
                "copied {}:{} → {}:{}: {} bytes, sha256 {}{}",
                c.from.node,
                c.from.path,
                c.to.node,
                c.to.path,
                c.bytes,
                c.sha256,
                if c.resumed_from > 0 {
                    format!(" (resumed: {} bytes were already there)", c.resumed_from)
                } else {
                    String::new()
                }
            );
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = serde_json::to_value(&c).ok();
            r
        }
        Err(e) => {
            tracing::info!(error = ?e.to_string(), "fleet_copy failed");
            result::error_result(&shape(&e))
        }
    }
}

fn shape(e: &TransferError) -> ErrorShape {
    e.to_shape()
}

/// How far the copy came: `notifications/progress` (only with a token).
async fn notify(peer: &Peer<RoleServer>, token: Option<&ProgressToken>, bytes: u64, size: u64) {
    let Some(token) = token else { return };
    let mut n = ProgressNotificationParam::new(token.clone(), bytes as f64);
    n.total = Some(size.max(bytes) as f64);
    if let Err(e) = peer.notify_progress(n).await {
        tracing::debug!(error = %e, "progress notification not delivered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Option<Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    #[test]
    fn from_and_to_are_node_colon_path() {
        let p = parse(args(json!({"from": "a:/x", "to": "b:y/z"}))).expect("parses");
        assert_eq!((p.from.node.as_str(), p.from.path.as_str()), ("a", "/x"));
        assert_eq!((p.to.node.as_str(), p.to.path.as_str()), ("b", "y/z"));
        for bad in [
            json!({"from": "a", "to": "b:y"}),
            json!({"from": "a:", "to": "b:y"}),
            json!({"from": ":x", "to": "b:y"}),
            json!({"from": "a:x"}),
            json!({"from": "a:x", "to": "b:y", "extra": 1}),
            json!({"from": 1, "to": "b:y"}),
        ] {
            let e = parse(args(bad.clone())).expect_err("refused");
            assert_eq!(e.code, ErrorCode::InvalidArgs, "{bad}");
        }
    }
}
