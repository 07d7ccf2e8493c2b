//! The sender's credit window: at most [`WINDOW_BYTES`] sent and not yet credited back
//! by the receiver (`docs/protocol.md` section 5.11, "Flow").

use gsv_protocol::transfer::WINDOW_BYTES;

/// Bytes sent and bytes credited back, from where the copy started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    limit: u64,
    sent: u64,
    credited: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window::new(WINDOW_BYTES)
    }
}

impl Window {
    /// A window of `limit` bytes.
    pub fn new(limit: u64) -> Window {
        Window {
            limit,
            sent: 0,
            credited: 0,
        }
    }

    /// Bytes that may be sent now.
    pub fn room(&self) -> u64 {
        self.limit.saturating_sub(self.in_flight())
    }

    /// Bytes sent and not yet credited.
    pub fn in_flight(&self) -> u64 {
        self.sent - self.credited
    }

    /// `n` bytes were sent.
    pub fn sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// The receiver credited `n` bytes back. Credit for bytes never sent is the
    /// receiver's mistake: it is capped at what was sent (and reported, false).
    pub fn credit(&mut self, n: u64) -> bool {
        let after = self.credited.saturating_add(n);
        self.credited = after.min(self.sent);
        after <= self.sent
    }

    /// Whether every byte sent has been credited.
    pub fn settled(&self) -> bool {
        self.credited == self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sending_stops_at_the_window_and_credit_reopens_it() {
        let chunk = 1024 * 1024;
        let mut w = Window::default();
        assert_eq!(w.room(), WINDOW_BYTES);
        for _ in 0..WINDOW_BYTES / chunk {
            w.sent(chunk);
        }
        assert_eq!(w.room(), 0);
        assert!(!w.settled());
        assert!(w.credit(3 * chunk));
        assert_eq!(w.room(), 3 * chunk);
        assert_eq!(w.in_flight(), WINDOW_BYTES - 3 * chunk);
        assert!(w.credit(WINDOW_BYTES - 3 * chunk));
        assert!(w.settled());
        assert_eq!(w.room(), WINDOW_BYTES);
    }

    #[test]
    fn credit_beyond_what_was_sent_is_capped_and_reported() {
        let mut w = Window::new(10);
        w.sent(4);
        assert!(!w.credit(6));
        assert!(w.settled());
        assert_eq!(w.room(), 10);
        // A partial last chunk: room is what is left, never negative.
        w.sent(7);
        assert_eq!(w.room(), 3);
        w.sent(3);
        assert_eq!(w.room(), 0);
    }
}
