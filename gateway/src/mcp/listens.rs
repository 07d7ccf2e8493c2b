//! The cap on 2026-07-28 `subscriptions/listen` streams.
//!
//! A 2025-revision session is counted by the auth middleware
//! (`--mcp-sessions-per-token`, `--mcp-sessions-max`); a listen stream of the
//! session-less revision holds as much (a task, a watch on the fleet and, in cluster
//! mode, a gather from every other replica each time the node directory changes), so
//! it is counted against the same two limits here. Without the cap one token could open
//! streams until the gateway's memory or the replicas' listing capacity ran out.
//!
//! The counting is [`crate::budget::Places`]: one unit per open stream, a token's
//! share and a total, given back when the stream ends.

use crate::budget::{Places, Reservation};

/// Open listen streams, by token and in all.
pub struct Listens(Places);

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
pub type ListenSlot<'a> = Reservation<'a>;

impl Listens {
    /// At most `per_token` streams for one token and `max` in all.
    pub fn new(per_token: usize, max: usize) -> Listens {
        Listens(Places::new(
            per_token,
            max,
            ("mcp_sessions_per_token", "mcp_sessions_max"),
        ))
    }

    /// A place for one more stream of `token_id`, unless the token holds its share
    /// already or the gateway its total.
    pub fn open(&self, token_id: &str) -> Result<ListenSlot<'_>, TooManyListens> {
        self.0.open(token_id).map_err(|e| TooManyListens {
            limit: e.limit,
            max: e.max,
        })
    }

    /// Streams `token_id` holds open.
    pub fn of(&self, token_id: &str) -> usize {
        self.0.of(token_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_its_share_and_a_closed_stream_frees_its_place() {
        let listens = Listens::new(2, 10);
        let a1 = listens.open("a").expect("first");
        let _a2 = listens.open("a").expect("second");
        assert_eq!(
            listens.open("a").err(),
            Some(TooManyListens {
                limit: "mcp_sessions_per_token",
                max: 2
            })
        );
        // Another token is not held back by a's streams.
        let _b = listens.open("b").expect("b's own");
        drop(a1);
        assert_eq!(listens.of("a"), 1);
        let _a3 = listens.open("a").expect("a place was freed");
    }

    #[test]
    fn the_gateway_wide_limit_holds_across_tokens() {
        let listens = Listens::new(2, 3);
        let slots: Vec<_> = (0..3)
            .map(|i| listens.open(&format!("t{i}")).expect("under the max"))
            .collect();
        let refused = listens.open("t9").expect_err("over the max");
        assert_eq!(refused.limit, "mcp_sessions_max");
        let rpc = refused.to_rpc();
        assert_eq!(rpc.code.0, -32000);
        assert_eq!(
            rpc.data.as_ref().map(|d| d["code"].clone()),
            Some("overloaded".into())
        );
        drop(slots);
        assert_eq!(listens.of("t0"), 0);
        let _ok = listens.open("t9").expect("places freed");
    }
}
