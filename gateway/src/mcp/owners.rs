//! Which token opened each MCP session, so no other token can use it.
//!
//! A 2025-revision MCP session is named by its `Mcp-Session-Id`; rmcp routes any
//! request carrying that id into the session, whoever sends it. Each request is
//! authenticated on its own, but a session id is not a credential: without this map a
//! second token that learned the id could close the session (`DELETE /mcp`), read its
//! stream (`GET /mcp`: the other agent's results and notifications) or answer its
//! elicitation questions. The `/mcp` middleware records the token that created a
//! session (the response to `initialize` carries the new id) and refuses a request
//! with that id from any other token as `404 not_found`, exactly as for an unknown
//! session, so the refusal tells the caller nothing about other tokens' sessions.

use dashmap::DashMap;
use std::time::{Duration, Instant};

/// Sessions' owners, by session id.
#[derive(Default)]
pub struct SessionOwners {
    owners: DashMap<String, Owner>,
}

struct Owner {
    token_id: String,
    last_seen: Instant,
}

/// Entries are swept once the map holds this many and an insert comes.
const SWEEP_AT: usize = 1_024;

impl SessionOwners {
    /// Records that `token_id` opened `session`. Entries idle longer than `idle` (rmcp
    /// has closed those sessions) are swept when the map is large.
    pub fn opened(&self, session: &str, token_id: &str, idle: Duration) {
        if self.owners.len() >= SWEEP_AT {
            let now = Instant::now();
            self.owners
                .retain(|_, o| now.saturating_duration_since(o.last_seen) < idle);
        }
        self.owners.insert(
            session.to_owned(),
            Owner {
                token_id: token_id.to_owned(),
                last_seen: Instant::now(),
            },
        );
    }

    /// Whether `token_id` may use `session`: it opened it, or the gateway does not know
    /// the id (rmcp then answers for an unknown session itself).
    pub fn may_use(&self, session: &str, token_id: &str) -> bool {
        match self.owners.get_mut(session) {
            Some(mut o) if o.token_id == token_id => {
                o.last_seen = Instant::now();
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// How many sessions `token_id` holds, and how many there are in all, once
    /// entries idle longer than `idle` (closed by rmcp) are forgotten.
    pub fn counts(&self, token_id: &str, idle: Duration) -> (usize, usize) {
        let now = Instant::now();
        self.owners
            .retain(|_, o| now.saturating_duration_since(o.last_seen) < idle);
        let mine = self
            .owners
            .iter()
            .filter(|o| o.token_id == token_id)
            .count();
        (mine, self.owners.len())
    }

    /// Forgets a session its owner closed.
    pub fn closed(&self, session: &str) {
        self.owners.remove(session);
    }

    /// How many sessions are known.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether no session is known.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_opener_may_use_a_session() {
        let o = SessionOwners::default();
        o.opened("s1", "tokA", Duration::from_secs(60));
        assert!(o.may_use("s1", "tokA"));
        assert!(!o.may_use("s1", "tokB"));
        assert!(o.may_use("unknown", "tokB"));
        o.closed("s1");
        assert!(o.is_empty());
    }

    #[test]
    fn idle_entries_are_swept_when_large() {
        let o = SessionOwners::default();
        for i in 0..SWEEP_AT {
            o.opened(&format!("s{i}"), "t", Duration::ZERO);
        }
        o.opened("last", "t", Duration::ZERO);
        assert_eq!(o.len(), 1);
    }
}
