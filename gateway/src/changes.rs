//! What changed in the fleet, told to whoever shows it live (the console's open pages):
//! small "this list changed" notices on one broadcast channel. The core sends them
//! where the change happens (an approval decided, a job settled, a node labelled), so
//! it names no reader; a reader subscribes and refetches what it shows.
//!
//! The channel holds [`CHANNEL`] notices: a slow reader misses notices rather than
//! hold memory, and should then refetch everything ([`Topic::All`]).

use serde::Serialize;
use tokio::sync::broadcast;

/// Notices the channel holds for a slow reader.
pub const CHANNEL: usize = 64;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Topic {
    Approvals,
    Nodes,
    Sessions,
    Jobs,
    Tokens,
    /// Notices were missed: refetch everything.
    All,
}

/// The gateway's one channel of change notices.
pub struct Changes {
    tx: broadcast::Sender<Topic>,
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            tx: broadcast::Sender::new(CHANNEL),
        }
    }
}

impl Changes {
    /// Tells every reader that `topic` changed (never waits; nobody listening is fine).
    pub fn send(&self, topic: Topic) {
        let _ = self.tx.send(topic);
    }

    /// A reader of the notices sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Topic> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readers_hear_what_is_sent_after_they_subscribe_and_slow_ones_lag() {
        let changes = Changes::default();
        changes.send(Topic::Jobs); // nobody listening: fine
        let mut rx = changes.subscribe();
        changes.send(Topic::Nodes);
        assert_eq!(rx.recv().await.ok(), Some(Topic::Nodes));
        for _ in 0..CHANNEL + 1 {
            changes.send(Topic::Jobs);
        }
        assert!(matches!(
            rx.recv().await,
            Err(broadcast::error::RecvError::Lagged(_))
        ));
    }
}
