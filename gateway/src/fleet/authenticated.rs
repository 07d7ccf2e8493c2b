//! A door telling the gateway that a connection presented a valid token, so it no
//! longer counts among the unauthenticated ones (admission control).

use std::net::SocketAddr;

impl super::Fleet {
    /// Marks the connection from `peer` as authenticated.
    pub fn authenticated(&self, peer: SocketAddr) {
        self.shared.admission.authenticated(peer);
    }
}
