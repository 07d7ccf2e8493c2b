//! Live updates for open console pages: `GET /ui/api/events`, a Server-Sent Events
//! stream of small "this list changed" notices; the page refetches what it shows.
//!
//! One broadcast channel for the whole gateway ([`CHANNEL`] notices deep): a slow
//! page misses notices rather than hold memory, and is told to refetch everything
//! (`all`). Sessions live on the nodes and change without the gateway seeing it, so
//! a `sessions` notice also goes out every [`TICK`]. At most [`MAX_STREAMS`]
//! streams are open at once; every stream ends when the gateway shuts down.

use super::{guard, ConsoleError};
use crate::auth::ApiError;
use crate::state::Shared;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Serialize;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// Notices the channel holds for a slow page.
const CHANNEL: usize = 64;
/// How often a `sessions` notice goes out besides the one for each session that ends
/// (each notice makes an open Sessions page list every node again: audited calls).
pub const TICK: Duration = Duration::from_secs(10);
/// Event streams open at most.
pub const MAX_STREAMS: usize = 64;

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

/// The channel, and how many streams read it.
pub struct Events {
    tx: broadcast::Sender<Topic>,
    streams: Arc<AtomicUsize>,
}

impl Events {
    pub fn new() -> Events {
        Events {
            tx: broadcast::Sender::new(CHANNEL),
            streams: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn send(&self, topic: Topic) {
        let _ = self.tx.send(topic);
    }
}

/// Holds one of the [`MAX_STREAMS`] places while its stream lives.
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream's state between notices.
struct Reader {
    rx: broadcast::Receiver<Topic>,
    tick: tokio::time::Interval,
    _place: Place,
}

impl Reader {
    async fn next(&mut self) -> Topic {
        tokio::select! {
            r = self.rx.recv() => match r {
                Ok(t) => t,
                Err(broadcast::error::RecvError::Lagged(_)) => Topic::All,
                // The sender lives as long as the gateway.
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            },
            _ = self.tick.tick() => Topic::Sessions,
        }
    }
}

/// `GET /ui/api/events`.
pub async fn stream(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    guard::session(&shared, &headers).await?;
    let events = &shared.console.events;
    if events.streams.fetch_add(1, Ordering::Relaxed) >= MAX_STREAMS {
        events.streams.fetch_sub(1, Ordering::Relaxed);
        return Err(ConsoleError::TooManyStreams.into());
    }
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let reader = Reader {
        rx: events.tx.subscribe(),
        tick,
        _place: Place(events.streams.clone()),
    };
    let notices = futures_util::stream::unfold(reader, |mut r| async move {
        let topic = r.next().await;
        let event = Event::default()
            .event("changed")
            .json_data(topic)
            .unwrap_or_else(|_| Event::default().event("changed").data("\"all\""));
        Some((Ok::<_, Infallible>(event), r))
    })
    .take_until(shared.shutdown.clone().cancelled_owned());
    Ok(Sse::new(notices)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}
