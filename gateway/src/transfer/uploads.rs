//! Reading ahead on an agent's connection only while that agent uploads.
//!
//! Read ahead, the gateway takes a 1 MiB chunk from the socket in 16 reads instead of
//! 512 (its read buffer is 2 KiB), the cost that made an upload through it slower
//! than `scp` and the calls beside it slow. A node's connection reads ahead from its
//! handshake on; an agent's does not, since a flood of requests read ahead is parsed
//! faster than the gateway sheds it
//! (`e2e_bounds::an_agent_that_never_reads_is_cut_off_as_a_slow_consumer`). So an
//! agent's connection reads ahead only while a put of it is open (each agent put's
//! [`Route`](super::Route) counts itself in from when it is made until it is dropped)
//! *and* its last frame was one of that put's chunks, of at least [`READ_AHEAD_BYTES`]
//! (so what is read ahead is never more than the upload's own data). The first text
//! frame turns reading ahead off again, so requests are always read at the pace of a
//! connection that does not stream, and an agent that opens an upload and then floods
//! requests gains nothing (`e2e_bounds::an_agent_that_never_reads_while_an_upload_is_open_is_cut_off_too`).

use gsv_transport::read_ahead::READ_AHEAD_BYTES;
use gsv_transport::ReadAheadSwitch;
use std::sync::Mutex;

/// An agent connection's open puts, and its read-ahead switch.
#[derive(Debug, Default)]
pub struct Uploads {
    /// Puts open on this connection; the switch is on while it is above zero. Under
    /// a lock so a put that ends and one that begins cannot leave the switch wrong.
    open: Mutex<usize>,
    switch: ReadAheadSwitch,
}

impl Uploads {
    /// The uploads of a connection whose reader `switch` controls (off to begin with).
    pub fn new(switch: ReadAheadSwitch) -> Uploads {
        switch.set(false);
        Uploads {
            open: Mutex::new(0),
            switch,
        }
    }

    /// A put of this connection opened (reading ahead waits for its first chunk).
    pub(super) fn begin(&self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        *open += 1;
    }

    /// A chunk of one of this connection's puts arrived (`len` bytes with its header):
    /// read ahead for the next ones, unless it was a small one.
    pub(super) fn chunk(&self, len: usize) {
        if len < READ_AHEAD_BYTES {
            return;
        }
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if *open > 0 && !self.switch.is_on() {
            self.switch.set(true);
        }
    }

    /// A text frame arrived: requests are read straight, not ahead.
    pub fn text(&self) {
        if self.switch.is_on() {
            self.switch.set(false);
        }
    }

    /// A put of this connection ended.
    pub(super) fn end(&self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        *open = open.saturating_sub(1);
        if *open == 0 {
            self.switch.set(false);
        }
    }

    /// Whether the connection reads ahead now.
    pub fn reading_ahead(&self) -> bool {
        self.switch.is_on()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_is_on_from_a_chunk_to_the_next_request_while_a_put_is_open() {
        let switch = ReadAheadSwitch::default();
        switch.set(true);
        let uploads = Uploads::new(switch.clone());
        assert!(!switch.is_on(), "off until a put opens");
        uploads.chunk(READ_AHEAD_BYTES);
        assert!(!switch.is_on(), "a chunk with no put open turns nothing on");
        uploads.begin();
        uploads.begin();
        assert!(!switch.is_on(), "on with the first chunk, not before");
        uploads.chunk(READ_AHEAD_BYTES - 1);
        assert!(!switch.is_on(), "a small chunk turns nothing on");
        uploads.chunk(READ_AHEAD_BYTES);
        assert!(switch.is_on());
        uploads.text();
        assert!(!switch.is_on(), "a request turns it off");
        uploads.chunk(READ_AHEAD_BYTES);
        uploads.end();
        assert!(switch.is_on(), "one put still open");
        uploads.end();
        assert!(!switch.is_on());
        uploads.end();
        uploads.chunk(READ_AHEAD_BYTES);
        assert!(!uploads.reading_ahead(), "an extra end never turns it on");
    }
}
