//! One gateway → node request and its answer, for the requests that are not tool
//! calls (`sessions.end`, `paths.resolve`, the transfer steps).
//!
//! Each of them registers a pending call on the node's connection, sends the request,
//! and waits a bounded time for the answer; a timed-out or unsent one is forgotten so
//! the connection's pending table does not grow. Written once here so every such
//! request frees its place the same way.

use super::NodeHandle;
use gsv_protocol::frame::encode_req;
use gsv_protocol::resolve::{ResolveParams, ResolveResult, Resolved};
use gsv_protocol::{ErrorShape, Method};
use serde::Serialize;
use serde_json::value::RawValue;
use std::time::Duration;

/// Why a request to a node got no answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("node {node} has too many requests pending")]
    Busy { node: String },
    #[error("node {node} disconnected")]
    Gone { node: String },
    #[error("node {node} did not answer in time")]
    Timeout { node: String },
    #[error("node {}: {}", node, shape.message)]
    Refused { node: String, shape: ErrorShape },
}

impl NodeHandle {
    /// Asks this node what each of `paths` names (`paths.resolve`): one answer per
    /// path, in order, or why there is none (for an approval question to say).
    pub async fn resolve_paths(
        &self,
        paths: Vec<String>,
        limit: Duration,
    ) -> Result<Vec<Resolved>, String> {
        let asked = paths.len();
        let raw = self
            .ask(Method::PathsResolve, &ResolveParams { paths }, limit)
            .await
            .map_err(|e| e.to_string())?;
        let found = serde_json::from_str::<ResolveResult>(raw.get())
            .map_err(|e| e.to_string())?
            .paths;
        (found.len() == asked)
            .then_some(found)
            .ok_or_else(|| "the node answered for other paths".to_owned())
    }

    /// Sends `method` with `params` to this node and waits at most `limit` for its
    /// answer.
    pub async fn ask<P: Serialize>(
        &self,
        method: Method,
        params: &P,
        limit: Duration,
    ) -> Result<Box<RawValue>, AskError> {
        let node = || self.id.to_string();
        let (call_id, rx) = self
            .begin_call()
            .map_err(|_| AskError::Busy { node: node() })?;
        if self
            .out
            .send(encode_req(&call_id.to_string(), method, params))
            .is_err()
        {
            self.abandon_call(call_id);
            return Err(AskError::Gone { node: node() });
        }
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(Ok(raw))) => Ok(raw),
            Ok(Ok(Err(shape))) => Err(AskError::Refused {
                node: node(),
                shape,
            }),
            Ok(Err(_)) => Err(AskError::Gone { node: node() }),
            Err(_) => {
                self.abandon_call(call_id);
                Err(AskError::Timeout { node: node() })
            }
        }
    }
}
