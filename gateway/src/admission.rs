//! Admission of new TCP connections: caps on the ones that have not authenticated.
//!
//! Anyone who can reach the port can open connections, and each holds a file
//! descriptor until it is closed. Without a cap, a client that opens thousands of
//! connections and never finishes a request fills the process's descriptor limit and
//! locks out every node and agent. So every accepted connection takes a [`Ticket`],
//! and a connection counts as *unauthenticated* from accept until it has presented a
//! valid token (its WebSocket `connect` was verified, or one of its HTTP requests
//! carried a valid `Authorization: Bearer`). At most `max_unauth` such connections may
//! be open at once, and at most `max_unauth_per_source` from one IP address; a new
//! connection over either cap is closed at once, before TLS or HTTP, and counted in
//! `gsv_connections_shed_total{reason}`. Authenticated connections do not count, so
//! the rest of the descriptor limit stays for enrolled nodes and valid tokens.
//!
//! The gateway's handlers know a connection only by its peer address; tickets are
//! found by it ([`Admission::authenticated`]) while the connection lives.

use dashmap::DashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Default of [`Caps::max_unauth`].
pub const DEFAULT_MAX_UNAUTH: usize = 1024;
/// Default of [`Caps::max_unauth_per_source`].
pub const DEFAULT_MAX_UNAUTH_PER_SOURCE: usize = 64;
/// The caps of the separate metrics port (`--metrics-listen`), where nothing ever
/// authenticates: enough for a few scrapers, separate from the main port's.
pub const METRICS_PORT_CAPS: Caps = Caps {
    max_unauth: 64,
    max_unauth_per_source: 16,
};
/// At most one "shedding connections" warning per this interval.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The two caps on unauthenticated connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Open unauthenticated connections, all sources together.
    pub max_unauth: usize,
    /// Open unauthenticated connections from one IP address.
    pub max_unauth_per_source: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_unauth: DEFAULT_MAX_UNAUTH,
            max_unauth_per_source: DEFAULT_MAX_UNAUTH_PER_SOURCE,
        }
    }
}

/// Why a connection was closed at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shed {
    /// [`Caps::max_unauth`] was reached.
    Global,
    /// [`Caps::max_unauth_per_source`] was reached for the peer's address.
    PerSource,
}

impl Shed {
    /// The `reason` label of `gsv_connections_shed_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Shed::Global => "global",
            Shed::PerSource => "per_source",
        }
    }
}

struct Inner {
    caps: Caps,
    unauth: AtomicUsize,
    by_source: DashMap<IpAddr, usize>,
    /// Tickets of the main port's live connections, by peer address.
    conns: DashMap<SocketAddr, Weak<Ticket>>,
    shed_since_log: AtomicU64,
    last_log: Mutex<Option<Instant>>,
}

impl Inner {
    fn release(&self, ip: IpAddr) {
        self.unauth.fetch_sub(1, Ordering::AcqRel);
        if let dashmap::Entry::Occupied(mut e) = self.by_source.entry(ip) {
            let n = e.get_mut();
            *n = n.saturating_sub(1);
            if *n == 0 {
                e.remove();
            }
        }
    }
}

/// The caps and the counts of one gateway.
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

/// One accepted connection's place under the caps. Dropping it (when the connection
/// and every session using it ended) gives the place back if it still held one.
pub struct Ticket {
    admission: Arc<Inner>,
    peer: SocketAddr,
    registered: bool,
    authenticated: AtomicBool,
}

impl Ticket {
    /// Takes the connection out of the unauthenticated count (once; later calls do
    /// nothing).
    pub fn authenticated(&self) {
        if !self.authenticated.swap(true, Ordering::AcqRel) {
            self.admission.release(self.peer.ip());
            // Nothing needs to find it any more (a long-lived node session would
            // otherwise keep its entry for as long as it is connected).
            self.unregister();
        }
    }

    fn unregister(&self) {
        if self.registered {
            let me: *const Ticket = self;
            self.admission
                .conns
                .remove_if(&self.peer, |_, w| std::ptr::eq(w.as_ptr(), me));
        }
    }

    /// Whether a valid token was presented on this connection.
    pub fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.authenticated.load(Ordering::Acquire) {
            self.admission.release(self.peer.ip());
            self.unregister();
        }
    }
}

impl Admission {
    pub fn new(caps: Caps) -> Self {
        Admission {
            inner: Arc::new(Inner {
                caps,
                unauth: AtomicUsize::new(0),
                by_source: DashMap::new(),
                conns: DashMap::new(),
                shed_since_log: AtomicU64::new(0),
                last_log: Mutex::new(None),
            }),
        }
    }

    /// The caps in force.
    pub fn caps(&self) -> Caps {
        self.inner.caps
    }

    /// Unauthenticated connections open now.
    pub fn unauthenticated(&self) -> usize {
        self.inner.unauth.load(Ordering::Acquire)
    }

    /// Admits a new connection from `peer` as unauthenticated, or says which cap it
    /// is over. `register` makes the ticket findable by `peer` (the main port's
    /// connections, whose requests may authenticate).
    pub fn admit(&self, peer: SocketAddr, register: bool) -> Result<Arc<Ticket>, Shed> {
        let inner = &self.inner;
        let before = inner.unauth.fetch_add(1, Ordering::AcqRel);
        if before >= inner.caps.max_unauth {
            inner.unauth.fetch_sub(1, Ordering::AcqRel);
            return Err(Shed::Global);
        }
        {
            let mut n = inner.by_source.entry(peer.ip()).or_insert(0);
            if *n >= inner.caps.max_unauth_per_source {
                drop(n);
                inner.unauth.fetch_sub(1, Ordering::AcqRel);
                return Err(Shed::PerSource);
            }
            *n += 1;
        }
        let ticket = Arc::new(Ticket {
            admission: inner.clone(),
            peer,
            registered: register,
            authenticated: AtomicBool::new(false),
        });
        if register {
            inner.conns.insert(peer, Arc::downgrade(&ticket));
        }
        Ok(ticket)
    }

    /// The ticket of the main port's live connection from `peer`, if any.
    pub fn ticket(&self, peer: SocketAddr) -> Option<Arc<Ticket>> {
        self.inner.conns.get(&peer).and_then(|w| w.upgrade())
    }

    /// Marks the connection from `peer` as authenticated (a valid token was presented
    /// on it).
    pub fn authenticated(&self, peer: SocketAddr) {
        if let Some(t) = self.ticket(peer) {
            t.authenticated();
        }
    }

    /// Logs a shed connection, at most once per [`LOG_EVERY`] (with how many were
    /// shed since the last line).
    pub fn log_shed(&self, peer: SocketAddr, why: Shed) {
        let inner = &self.inner;
        inner.shed_since_log.fetch_add(1, Ordering::Relaxed);
        let Ok(mut last) = inner.last_log.try_lock() else {
            return;
        };
        if last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        let shed = inner.shed_since_log.swap(0, Ordering::Relaxed);
        tracing::warn!(
            %peer,
            reason = why.as_str(),
            shed,
            unauthenticated = self.unauthenticated(),
            max_unauth = inner.caps.max_unauth,
            max_unauth_per_source = inner.caps.max_unauth_per_source,
            "closing new connections at once: too many unauthenticated connections (this line is logged at most every 10 s)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn caps_count_unauthenticated_connections_only() {
        let a = Admission::new(Caps {
            max_unauth: 3,
            max_unauth_per_source: 2,
        });
        let t1 = a.admit(addr("127.0.0.1:1"), true).expect("first");
        let t2 = a.admit(addr("127.0.0.1:2"), true).expect("second");
        assert_eq!(
            a.admit(addr("127.0.0.1:3"), true).err(),
            Some(Shed::PerSource)
        );
        let t3 = a.admit(addr("127.0.0.2:1"), false).expect("other source");
        assert_eq!(
            a.admit(addr("127.0.0.3:1"), false).err(),
            Some(Shed::Global)
        );
        assert_eq!(a.unauthenticated(), 3);
        // Authenticating frees the place, once.
        a.authenticated(addr("127.0.0.1:1"));
        a.authenticated(addr("127.0.0.1:1"));
        assert!(t1.is_authenticated());
        assert!(a.ticket(addr("127.0.0.1:1")).is_none());
        assert_eq!(a.unauthenticated(), 2);
        let t4 = a.admit(addr("127.0.0.1:4"), true).expect("freed by auth");
        drop(t1);
        assert_eq!(a.unauthenticated(), 3);
        drop((t2, t3, t4));
        assert_eq!(a.unauthenticated(), 0);
        assert!(a.inner.by_source.is_empty());
        assert!(a.inner.conns.is_empty());
        assert!(a.ticket(addr("127.0.0.1:2")).is_none());
    }
}
