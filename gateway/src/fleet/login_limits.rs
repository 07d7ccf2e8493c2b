//! The per-address limit on failed authentications, for a door that checks a
//! secret of its own (the console's one-time login codes) and counts a refused one
//! like a bad token, against the same limiter the core's token check uses.

use std::net::IpAddr;

impl super::Fleet {
    /// Counts one refused login from `ip` as a failed authentication; whether `ip`
    /// was over its limit already before this one was counted.
    pub fn count_refused_login(&self, ip: IpAddr) -> bool {
        let limited = self.shared.auth_limiter.is_limited(ip);
        self.shared.auth_limiter.failed(ip);
        limited
    }
}
