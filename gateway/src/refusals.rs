//! Refused authentications, recorded in the audit log at a bounded rate.
//!
//! Every refused WebSocket `connect` and every HTTP request with a missing or bad token
//! used to become one audit row; a client sending bad tokens as fast as it could grew
//! `gsv.db` by thousands of rows a second. Now refusals are gathered per *key* —
//! source IP address, role (`node`, `agent`, `http`) and error code — in fixed
//! windows of `interval` (one minute by default):
//!
//! - the first refusal of a key in a window is written at once, as before (actor: the
//!   peer's `IP:port`, detail: role and message);
//! - later ones in the same window are only counted, and when the window ends one row
//!   per key carries how many there were (`detail.count`), the first and last time,
//!   and the last message (actor: the IP address).
//!
//! So a key costs at most two rows per window. At most [`MAX_KEYS`] keys are tracked
//! per window; refusals from further sources are gathered under the source `*`, so a
//! flood from many addresses costs at most about `2 × (MAX_KEYS + roles × codes)` rows
//! per window. The same keying decides which refusals are logged at `warn` (the first
//! of a key per window) and which at `debug`.

use crate::audit::{AuditEvent, AuditLog};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Default of the gathering window.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Most distinct keys tracked in one window before sources are lumped as `*`.
pub const MAX_KEYS: usize = 1024;
/// The source of refusals past [`MAX_KEYS`].
pub const OTHER_SOURCES: &str = "*";

#[derive(Debug, Clone, Hash, PartialEq, Eq)]
struct Key {
    source: String,
    role: &'static str,
    code: String,
}

#[derive(Debug)]
struct Slot {
    /// Refusals after the one written at once.
    more: u64,
    first_ms: u64,
    last_ms: u64,
    last_message: String,
}

/// The current window's refusals.
pub struct Refusals {
    audit: AuditLog,
    interval: Duration,
    window: Mutex<HashMap<Key, Slot>>,
}

impl Refusals {
    pub fn new(audit: AuditLog, interval: Duration) -> Self {
        Refusals {
            audit,
            interval,
            window: Mutex::new(HashMap::new()),
        }
    }

    /// The gathering window.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Records one refusal of `peer` (`role`: `node`, `agent` or `http`; `code`: the
    /// error code). Returns `true` when it was the first of its key in this window
    /// (written to the audit log now, and worth a `warn` line).
    pub fn record(&self, peer: SocketAddr, role: &'static str, code: &str, message: &str) -> bool {
        let now = gsv_protocol::now_ms();
        let mut key = Key {
            source: peer.ip().to_string(),
            role,
            code: code.to_owned(),
        };
        {
            let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
            if !window.contains_key(&key) && window.len() >= MAX_KEYS {
                key.source = OTHER_SOURCES.to_owned();
            }
            if let Some(slot) = window.get_mut(&key) {
                slot.more += 1;
                slot.last_ms = now;
                if slot.last_message != message {
                    slot.last_message = message.to_owned();
                }
                return false;
            }
            window.insert(
                key,
                Slot {
                    more: 0,
                    first_ms: now,
                    last_ms: now,
                    last_message: message.to_owned(),
                },
            );
        }
        self.audit.record(AuditEvent::Refused {
            peer,
            role,
            code,
            message,
        });
        true
    }

    /// Ends the window: writes one row per key that was refused again after its first
    /// row, and starts a new window.
    pub fn flush(&self) {
        let window = std::mem::take(&mut *self.window.lock().unwrap_or_else(|p| p.into_inner()));
        let mut rows: Vec<(Key, Slot)> = window.into_iter().filter(|(_, s)| s.more > 0).collect();
        rows.sort_by_key(|(_, s)| s.first_ms);
        for (key, slot) in rows {
            self.audit.record(AuditEvent::RefusedRepeatedly {
                source: &key.source,
                role: key.role,
                code: &key.code,
                last_message: &slot.last_message,
                count: slot.more,
                first_ms: slot.first_ms,
                last_ms: slot.last_ms,
                interval_ms: self.interval.as_millis() as u64,
            });
        }
    }
}

/// Ends a window every `interval` until `shutdown` is cancelled (`stop` flushes the
/// last one). Takes the counters, not the gateway's state, so this module does not
/// depend on `state` (which holds it).
pub async fn run(refusals: &Refusals, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(refusals.interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => refusals.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_flood_costs_two_rows_per_key_and_carries_its_count() {
        let dir = std::env::temp_dir().join(format!("gsv-refusals-{}", uuid::Uuid::new_v4()));
        let audit = AuditLog::start(&dir, false).expect("audit log");
        let r = Refusals::new(audit.clone(), DEFAULT_INTERVAL);
        let a: SocketAddr = "127.0.0.1:5000".parse().expect("addr");
        let b: SocketAddr = "127.0.0.2:5000".parse().expect("addr");
        assert!(r.record(a, "http", "unauthorized", "bad"));
        for _ in 0..500 {
            assert!(!r.record(a, "http", "unauthorized", "bad"));
        }
        assert!(r.record(a, "agent", "unauthorized", "bad"));
        assert!(r.record(b, "http", "unauthorized", "bad"));
        r.flush();
        // A new window writes the first one again.
        assert!(r.record(a, "http", "unauthorized", "bad"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(audit.flush());
        let store = Store::open(&dir).expect("store");
        let rows = store
            .with_conn(|c| crate::audit::rows_after(c, 0, 100))
            .expect("rows");
        assert_eq!(rows.len(), 5, "{rows:#?}");
        let summary = &rows[3];
        assert_eq!(summary.entry.actor, "127.0.0.1");
        let detail: serde_json::Value =
            serde_json::from_str(summary.entry.detail.as_deref().unwrap_or("null"))
                .expect("detail");
        assert_eq!(detail["count"], 500);
        assert_eq!(detail["role"], "http");
        assert!(
            store
                .with_conn(|c| crate::audit::verify(c))
                .expect("verify")
                .ok
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn sources_past_the_key_limit_are_lumped_together() {
        let dir = std::env::temp_dir().join(format!("gsv-refusals-{}", uuid::Uuid::new_v4()));
        let audit = AuditLog::start(&dir, false).expect("audit log");
        let r = Refusals::new(audit, DEFAULT_INTERVAL);
        let mut first = 0;
        for i in 0..(MAX_KEYS as u32 + 500) {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            if r.record(SocketAddr::from((ip, 1)), "agent", "unauthorized", "bad") {
                first += 1;
            }
        }
        assert_eq!(first, MAX_KEYS + 1);
        let _ = std::fs::remove_dir_all(dir);
    }
}
