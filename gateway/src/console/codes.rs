//! One-time login codes: how an operator gets into the console without a long-lived
//! token in a URL (browser history, logs, screenshots).
//!
//! A code is 256 random bits, valid [`CODE_TTL`], usable once. Only its SHA-256 is
//! kept, in memory, at most [`MAX_CODES`] at once (expired ones are swept first; a
//! full map refuses new codes rather than grow).

use super::role::Role;
use base64::Engine;
use rand::RngExt;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a login code may be used unless configured.
use crate::config::DEFAULT_CONSOLE_CODE_TTL as CODE_TTL;
/// Login codes outstanding at most.
pub const MAX_CODES: usize = 64;
/// Login codes one token may have outstanding: minting another retires its oldest, so
/// no token can use up [`MAX_CODES`] and lock the others out.
pub const MAX_CODES_PER_TOKEN: usize = 4;

/// 32 random bytes, URL-safe base64 (no padding).
pub(super) fn random_secret() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// SHA-256 of a secret: what the maps are keyed by.
pub(super) fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// What a code grants once redeemed.
#[derive(Debug, Clone)]
pub struct Grant {
    pub role: Role,
    /// The token whose holder minted the code: the session dies with it.
    pub token_id: String,
    /// That token's subject (`admin`, or the operator's name): decisions made in the
    /// session are recorded as `console:NAME`.
    pub name: String,
}

struct Pending {
    grant: Grant,
    expires: Instant,
}

/// Why a code was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Never minted, or already used.
    Unknown,
    /// Minted, but older than [`CODE_TTL`].
    Expired,
}

/// The outstanding codes.
pub struct Codes {
    map: Mutex<HashMap<[u8; 32], Pending>>,
    /// How long a code may be used ([`CODE_TTL`] unless configured).
    pub ttl: Duration,
}

impl Default for Codes {
    fn default() -> Self {
        Codes::new(CODE_TTL)
    }
}

impl Codes {
    pub fn new(ttl: Duration) -> Codes {
        Codes {
            map: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// Mints a code for `grant`; `None` when [`MAX_CODES`] are outstanding.
    pub fn mint(&self, grant: Grant) -> Option<String> {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, p| p.expires > now);
        let mine = |p: &Pending| p.grant.token_id == grant.token_id;
        while map.values().filter(|p| mine(p)).count() >= MAX_CODES_PER_TOKEN {
            let oldest = map
                .iter()
                .filter(|(_, p)| mine(p))
                .min_by_key(|(_, p)| p.expires)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => map.remove(&k),
                None => break,
            };
        }
        if map.len() >= MAX_CODES {
            return None;
        }
        let code = random_secret();
        map.insert(
            digest(&code),
            Pending {
                grant,
                expires: now + self.ttl,
            },
        );
        Some(code)
    }

    /// Redeems `code` once.
    pub fn redeem(&self, code: &str) -> Result<Grant, Refused> {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let found = map.remove(&digest(code));
        map.retain(|_, p| p.expires > now);
        match found {
            None => Err(Refused::Unknown),
            Some(p) if p.expires <= now => Err(Refused::Expired),
            Some(p) => Ok(p.grant),
        }
    }

    /// What `code` would grant, without using it: for the login page, which names the
    /// session the button would open (a GET changes nothing).
    pub fn peek(&self, code: &str) -> Result<Grant, Refused> {
        let now = Instant::now();
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&digest(code)) {
            None => Err(Refused::Unknown),
            Some(p) if p.expires <= now => Err(Refused::Expired),
            Some(p) => Ok(p.grant.clone()),
        }
    }

    /// Makes every outstanding code expire now (tests).
    #[cfg(test)]
    fn age_all(&self) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        for p in map.values_mut() {
            p.expires = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant {
        grant_of("t1")
    }

    fn grant_of(token_id: &str) -> Grant {
        Grant {
            role: Role::Admin,
            token_id: token_id.into(),
            name: "admin".into(),
        }
    }

    #[test]
    fn one_token_cannot_take_every_code() {
        let codes = Codes::default();
        let first = codes.mint(grant_of("greedy")).expect("minted");
        for _ in 0..MAX_CODES * 2 {
            assert!(
                codes.mint(grant_of("greedy")).is_some(),
                "its oldest retire"
            );
        }
        assert_eq!(codes.redeem(&first).err(), Some(Refused::Unknown));
        let other = codes
            .mint(grant_of("admin"))
            .expect("another token still mints");
        assert!(codes.redeem(&other).is_ok());
    }

    #[test]
    fn a_code_is_used_once_and_bounded() {
        let codes = Codes::default();
        let c = codes.mint(grant()).expect("minted");
        assert!(c.len() >= 43, "256 bits: {c}");
        assert_eq!(codes.peek(&c).expect("a look").token_id, "t1");
        assert_eq!(codes.peek(&c).expect("looking uses nothing").token_id, "t1");
        assert_eq!(codes.redeem(&c).expect("first use").token_id, "t1");
        assert_eq!(codes.peek(&c).err(), Some(Refused::Unknown));
        assert_eq!(codes.redeem(&c).err(), Some(Refused::Unknown));
        assert_eq!(codes.redeem("nope").err(), Some(Refused::Unknown));
        for i in 0..MAX_CODES {
            assert!(codes.mint(grant_of(&format!("t{i}"))).is_some());
        }
        assert!(codes.mint(grant_of("one-more")).is_none(), "bounded");
    }

    #[test]
    fn an_expired_code_is_refused() {
        let codes = Codes::default();
        let c = codes.mint(grant()).expect("minted");
        codes.age_all();
        // Swept on the next mint or redeem; this one is found expired first.
        let map_has = codes.map.lock().map(|m| m.len()).unwrap_or(0);
        assert_eq!(map_has, 1);
        assert_eq!(codes.peek(&c).err(), Some(Refused::Expired));
        assert_eq!(codes.redeem(&c).err(), Some(Refused::Expired));
    }
}
