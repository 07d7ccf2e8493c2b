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
/// Past this many addresses, windows that ended are swept out (at most once a second).
const SWEEP_ABOVE: usize = 10_000;
/// Most addresses tracked at once: failures from further addresses are not counted
/// until windows end (an attacker with that many addresses is not slowed by a
/// per-address limit anyway), so the map cannot grow without bound.
pub const MAX_TRACKED: usize = 100_000;

/// Failure counters by address.
pub struct AuthLimiter {
    max: u32,
    failures: DashMap<IpAddr, (Instant, u32)>,
    last_sweep: std::sync::Mutex<Option<Instant>>,
}

impl AuthLimiter {
    pub fn new(max_per_minute: u32) -> Self {
        AuthLimiter {
            max: max_per_minute,
            failures: DashMap::new(),
            last_sweep: std::sync::Mutex::new(None),
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
        if self.failures.len() > SWEEP_ABOVE {
            self.sweep();
        }
        if self.failures.len() >= MAX_TRACKED && !self.failures.contains_key(&ip) {
            return;
        }
        let mut e = self.failures.entry(ip).or_insert((Instant::now(), 0));
        if e.0.elapsed() >= WINDOW {
            *e = (Instant::now(), 0);
        }
        e.1 = e.1.saturating_add(1);
    }

    /// Forgets windows that ended; at most once a second, so a flood from many
    /// addresses does not rescan the map on every failure.
    fn sweep(&self) {
        let Ok(mut last) = self.last_sweep.try_lock() else {
            return;
        };
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        *last = Some(Instant::now());
        self.failures.retain(|_, v| v.0.elapsed() < WINDOW);
    }

    /// Addresses tracked now.
    pub fn tracked(&self) -> usize {
        self.failures.len()
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

    #[test]
    fn many_addresses_are_tracked_up_to_a_bound() {
        let l = AuthLimiter::new(3);
        for i in 0..(MAX_TRACKED as u32 + 5_000) {
            l.failed(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)));
        }
        assert_eq!(l.tracked(), MAX_TRACKED);
        // An address already tracked still counts.
        let first = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000));
        l.failed(first);
        l.failed(first);
        assert!(l.is_limited(first));
    }
}
