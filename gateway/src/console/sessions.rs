//! Console sessions: what a redeemed login code becomes, carried by the
//! `gsv_console` cookie.
//!
//! In memory only (a restarted gateway signs everyone out), at most [`MAX_SESSIONS`]
//! (the least recently used goes first), each ending after [`IDLE`] without a request
//! or when the token that minted its code is revoked ([`Sessions::drop_token`] from
//! the revocation path, and a liveness check of the token on each request). Each has
//! its own random CSRF token, which the page sends back on every state change.

use super::codes::{digest, random_secret, Grant};
use super::role::Role;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sessions kept at most.
pub const MAX_SESSIONS: usize = 256;
/// Sessions one token may have open: opening another ends its least recently used,
/// so no token can push every other operator's session out of [`MAX_SESSIONS`].
pub const MAX_SESSIONS_PER_TOKEN: usize = 16;
/// A session unused this long ends.
pub const IDLE: Duration = Duration::from_secs(12 * 60 * 60);

/// A live session, as a request sees it.
#[derive(Debug, Clone)]
pub struct Session {
    pub role: Role,
    pub csrf: String,
    pub token_id: String,
    /// Who opened it (`console:NAME`): the decider recorded for its decisions and
    /// the caller named on its `Process` calls.
    pub actor: String,
}

struct Entry {
    session: Session,
    last_seen: Instant,
}

/// The live sessions, keyed by the SHA-256 of their cookie value.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<[u8; 32], Entry>>,
}

impl Sessions {
    /// Opens a session for `grant`; returns the cookie value.
    pub fn open(&self, grant: Grant) -> String {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, e| now.duration_since(e.last_seen) < IDLE);
        let mine = |e: &Entry| e.session.token_id == grant.token_id;
        while map.values().filter(|e| mine(e)).count() >= MAX_SESSIONS_PER_TOKEN {
            let oldest = map
                .iter()
                .filter(|(_, e)| mine(e))
                .min_by_key(|(_, e)| e.last_seen)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => map.remove(&k),
                None => break,
            };
        }
        while map.len() >= MAX_SESSIONS {
            let oldest = map.iter().min_by_key(|(_, e)| e.last_seen).map(|(k, _)| *k);
            match oldest {
                Some(k) => {
                    map.remove(&k);
                }
                None => break,
            }
        }
        let cookie = random_secret();
        map.insert(
            digest(&cookie),
            Entry {
                session: Session {
                    role: grant.role,
                    csrf: random_secret(),
                    token_id: grant.token_id,
                    actor: format!("console:{}", grant.name),
                },
                last_seen: now,
            },
        );
        cookie
    }

    /// The session of `cookie`, if it is live (and marks it used).
    pub fn touch(&self, cookie: &str) -> Option<Session> {
        let now = Instant::now();
        let key = digest(cookie);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let idle = map
            .get(&key)
            .map(|e| now.duration_since(e.last_seen) >= IDLE)?;
        if idle {
            map.remove(&key);
            return None;
        }
        let entry = map.get_mut(&key)?;
        entry.last_seen = now;
        Some(entry.session.clone())
    }

    /// Whether the session of `cookie` is live, without counting this as its use.
    pub fn is_live(&self, cookie: &str) -> bool {
        let now = Instant::now();
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&digest(cookie))
            .is_some_and(|e| now.duration_since(e.last_seen) < IDLE)
    }

    /// Ends the session of `cookie`.
    pub fn close(&self, cookie: &str) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&digest(cookie));
    }

    /// Ends every session minted by `token_id` (the token was revoked); how many.
    pub fn drop_token(&self, token_id: &str) -> usize {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let before = map.len();
        map.retain(|_, e| e.session.token_id != token_id);
        before - map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(t: &str) -> Grant {
        Grant {
            role: Role::Admin,
            token_id: t.into(),
            name: "admin".into(),
        }
    }

    #[test]
    fn sessions_are_bounded_and_die_with_their_token() {
        let s = Sessions::default();
        let a = s.open(grant("t1"));
        let b = s.open(grant("t2"));
        let sa = s.touch(&a).expect("live");
        assert_eq!(sa.token_id, "t1");
        assert!(sa.csrf.len() >= 43);
        assert_ne!(sa.csrf, s.touch(&b).expect("live").csrf);
        assert_eq!(s.drop_token("t1"), 1);
        assert!(s.touch(&a).is_none());
        assert!(s.touch("forged").is_none());
        assert_eq!(s.touch(&b).expect("live").actor, "console:admin");
        for _ in 0..MAX_SESSIONS {
            s.open(grant("t3"));
        }
        let len = s.map.lock().map(|m| m.len()).unwrap_or(0);
        assert_eq!(len, MAX_SESSIONS_PER_TOKEN + 1, "one token keeps its share");
        assert!(
            s.touch(&b).is_some(),
            "another token's session survives a flood"
        );
        for i in 0..MAX_SESSIONS {
            s.open(grant(&format!("u{i}")));
        }
        let len = s.map.lock().map(|m| m.len()).unwrap_or(0);
        assert_eq!(len, MAX_SESSIONS);
        s.close(&b);
        assert!(s.touch(&b).is_none());
    }
}
