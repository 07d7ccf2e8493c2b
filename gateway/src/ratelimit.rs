//! Rate limiting of failed authentication, per source address.
//!
//! Tokens are 256-bit random, so guessing is hopeless anyway; the limit keeps a
//! brute-force attempt from costing the gateway database lookups and log volume. After
//! too many failures in a one-minute window, an address gets `rate_limited` without its
//! credential being looked at, until the window rolls over.

use dashmap::DashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

/// Failure counters by address.
pub struct AuthLimiter {
    max: u32,
    failures: DashMap<IpAddr, (Instant, u32)>,
}

impl AuthLimiter {
    pub fn new(max_per_minute: u32) -> Self {
        AuthLimiter {
            max: max_per_minute,
            failures: DashMap::new(),
        }
    }

    /// Whether `ip` is over its limit now.
    pub fn is_limited(&self, ip: IpAddr) -> bool {
        match self.failures.get(&ip) {
            Some(e) => e.0.elapsed() < WINDOW && e.1 >= self.max,
            None => false,
        }
    }

    /// Counts one failed authentication from `ip`.
    pub fn failed(&self, ip: IpAddr) {
        let mut e = self.failures.entry(ip).or_insert((Instant::now(), 0));
        if e.0.elapsed() >= WINDOW {
            *e = (Instant::now(), 0);
        }
        e.1 = e.1.saturating_add(1);
        drop(e);
        // Keep the map small: forget windows that ended.
        if self.failures.len() > 10_000 {
            self.failures.retain(|_, v| v.0.elapsed() < WINDOW);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_after_max_failures() {
        let l = AuthLimiter::new(3);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert!(!l.is_limited(ip));
            l.failed(ip);
        }
        assert!(l.is_limited(ip));
        assert!(!l.is_limited(other));
    }
}
