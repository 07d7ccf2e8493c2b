//! The cap on 2026-07-28 `subscriptions/listen` streams.
//!
//! A 2025-revision session is counted by the auth middleware
//! (`--mcp-sessions-per-token`, `--mcp-sessions-max`); a listen stream of the
//! session-less revision holds as much (a task, a watch on the fleet and, in cluster
//! mode, a gather from every other replica each time the node directory changes), so
//! it is counted against the same two limits here. Without the cap one token could open
//! streams until the gateway's memory or the replicas' listing capacity ran out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open listen streams, by token and in all.
#[derive(Default)]
pub struct Listens {
    open: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    by_token: HashMap<String, usize>,
    all: usize,
}

/// A refused listen stream: which limit it would have passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("overloaded: too many MCP listen streams open ({limit} = {max}); close one, then retry")]
pub struct TooManyListens {
    pub limit: &'static str,
    pub max: usize,
}

impl TooManyListens {
    /// The JSON-RPC error the client gets on the stream it opened: a server error
    /// (-32000) with gsv's stable code in `data`.
    pub fn to_rpc(self) -> rmcp::ErrorData {
        rmcp::ErrorData::new(
            rmcp::model::ErrorCode(-32000),
            self.to_string(),
            Some(serde_json::json!({
                "code": "overloaded",
                "limit": self.limit,
                "max": self.max,
            })),
        )
    }
}

/// One open listen stream; dropping it (the stream ended) frees its place.
pub struct ListenSlot {
    listens: Arc<Listens>,
    token_id: String,
}

impl Listens {
    /// A place for one more stream of `token_id`, unless the token holds `per_token`
    /// already or the gateway `max` in all.
    pub fn open(
        self: &Arc<Self>,
        token_id: &str,
        per_token: usize,
        max: usize,
    ) -> Result<ListenSlot, TooManyListens> {
        let mut counts = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mine = counts.by_token.get(token_id).copied().unwrap_or(0);
        if mine >= per_token {
            return Err(TooManyListens {
                limit: "mcp_sessions_per_token",
                max: per_token,
            });
        }
        if counts.all >= max {
            return Err(TooManyListens {
                limit: "mcp_sessions_max",
                max,
            });
        }
        counts.by_token.insert(token_id.to_owned(), mine + 1);
        counts.all += 1;
        Ok(ListenSlot {
            listens: Arc::clone(self),
            token_id: token_id.to_owned(),
        })
    }

    /// Streams `token_id` holds open.
    pub fn of(&self, token_id: &str) -> usize {
        let counts = self.open.lock().unwrap_or_else(|p| p.into_inner());
        counts.by_token.get(token_id).copied().unwrap_or(0)
    }
}

impl Drop for ListenSlot {
    fn drop(&mut self) {
        let mut counts = self.listens.open.lock().unwrap_or_else(|p| p.into_inner());
        counts.all = counts.all.saturating_sub(1);
        if let Some(n) = counts.by_token.get_mut(&self.token_id) {
            *n -= 1;
            if *n == 0 {
                counts.by_token.remove(&self.token_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_its_share_and_a_closed_stream_frees_its_place() {
        let listens = Arc::new(Listens::default());
        let a1 = listens.open("a", 2, 10).expect("first");
        let _a2 = listens.open("a", 2, 10).expect("second");
        assert_eq!(
            listens.open("a", 2, 10).err(),
            Some(TooManyListens {
                limit: "mcp_sessions_per_token",
                max: 2
            })
        );
        // Another token is not held back by a's streams.
        let _b = listens.open("b", 2, 10).expect("b's own");
        drop(a1);
        assert_eq!(listens.of("a"), 1);
        let _a3 = listens.open("a", 2, 10).expect("a place was freed");
    }

    #[test]
    fn the_gateway_wide_limit_holds_across_tokens() {
        let listens = Arc::new(Listens::default());
        let slots: Vec<_> = (0..3)
            .map(|i| listens.open(&format!("t{i}"), 2, 3).expect("under the max"))
            .collect();
        let refused = listens.open("t9", 2, 3).err().expect("over the max");
        assert_eq!(refused.limit, "mcp_sessions_max");
        let rpc = refused.to_rpc();
        assert_eq!(rpc.code.0, -32000);
        assert_eq!(
            rpc.data.as_ref().map(|d| d["code"].clone()),
            Some("overloaded".into())
        );
        drop(slots);
        assert_eq!(listens.of("t0"), 0);
        let _ok = listens.open("t9", 2, 3).expect("places freed");
    }
}
