//! Agent WebSocket connections, counted per token and in all.
//!
//! An authenticated connection holds a file descriptor, a send queue and an entry in
//! the agents map for as long as it lives. Admission caps only the connections that
//! have not authenticated yet ([`crate::admission`]); without this, one valid token —
//! even one whose policy allows nothing — could open connections until the process ran
//! out of descriptors and `/healthz` stopped answering. Each agent connection takes a
//! place here after its token is verified and before `hello-ok`; past the token's share
//! (`--agent-conns-per-token`) or the total (`--agent-conns-max`) the handshake is
//! refused with `overloaded` and the connection closed, and a closed connection frees
//! its place. Other tokens keep their shares.

use crate::budget::Places;

/// The places: one per open agent connection.
pub fn places(per_token: usize, max: usize) -> Places {
    Places::new(per_token, max, ("agent_conns_per_token", "agent_conns_max"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_its_share_and_no_more() {
        let conns = places(2, 3);
        let a1 = conns.open("a").expect("first");
        let _a2 = conns.open("a").expect("second");
        assert_eq!(
            conns.open("a").err().map(|e| e.limit),
            Some("agent_conns_per_token")
        );
        let _b = conns.open("b").expect("b's own");
        assert_eq!(
            conns.open("c").err().map(|e| e.limit),
            Some("agent_conns_max")
        );
        drop(a1);
        assert_eq!(conns.of("a"), 1);
        let _c = conns.open("c").expect("a place was freed");
    }
}
