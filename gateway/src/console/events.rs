//! Live updates for open console pages: `GET /ui/api/events?csrf=TOKEN`, a Server-Sent
//! Events stream of small "this list changed" notices; the page refetches what it
//! shows. `EventSource` cannot send headers, so the session's CSRF token comes in the
//! query string, checked like the header ([`guard::proven`], constant time).
//!
//! The notices are the gateway's change channel ([`crate::changes`]): a slow page
//! misses notices rather than hold memory, and is told to refetch everything
//! (`all`). Sessions live on the nodes and change without the gateway seeing it, so
//! a `sessions` notice also goes out every [`TICK`]. At most [`MAX_STREAMS`]
//! streams are open at once, [`MAX_STREAMS_PER_TOKEN`] of them for the sessions of one
//! token (so no operator can take every place); a stream ends when its session does
//! (checked every tick: sign-out, revocation, idle expiry) and when the gateway shuts
//! down.

use super::{guard, ConsoleError, Ui};
use crate::auth::ApiError;
use crate::changes::Topic;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// How often a `sessions` notice goes out besides the one for each session that ends
/// (each notice makes an open Sessions page list every node again: audited calls).
pub const TICK: Duration = Duration::from_secs(10);
/// Event streams open at most.
pub const MAX_STREAMS: usize = 64;
/// Event streams the sessions of one token may have open.
pub const MAX_STREAMS_PER_TOKEN: usize = 8;

/// How many streams read the change notices (in all, and per token).
pub struct Events {
    streams: Arc<Mutex<Places>>,
}

/// The places taken: in all, and by each token's sessions.
#[derive(Default)]
struct Places {
    total: usize,
    by_token: HashMap<String, usize>,
}

impl Places {
    /// Takes a place for `token_id`; `false` when it or the whole is at its limit.
    fn take(&mut self, token_id: &str) -> bool {
        let mine = self.by_token.get(token_id).copied().unwrap_or(0);
        if self.total >= MAX_STREAMS || mine >= MAX_STREAMS_PER_TOKEN {
            return false;
        }
        self.total += 1;
        self.by_token.insert(token_id.to_owned(), mine + 1);
        true
    }

    fn give_back(&mut self, token_id: &str) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.by_token.get_mut(token_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_token.remove(token_id);
            }
        }
    }
}

impl Events {
    pub fn new() -> Events {
        Events {
            streams: Arc::new(Mutex::new(Places::default())),
        }
    }
}

/// Holds one of the places while its stream lives.
struct Place {
    places: Arc<Mutex<Places>>,
    token_id: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Ok(mut p) = self.places.lock() {
            p.give_back(&self.token_id);
        }
    }
}

/// A stream's state between notices.
struct Reader {
    rx: broadcast::Receiver<Topic>,
    tick: tokio::time::Interval,
    console: Arc<super::Console>,
    /// The session's cookie: the stream ends with the session.
    cookie: String,
    _place: Place,
}

impl Reader {
    /// The next notice; `None` once the session has ended.
    async fn next(&mut self) -> Option<Topic> {
        tokio::select! {
            r = self.rx.recv() => Some(match r {
                Ok(t) => t,
                Err(broadcast::error::RecvError::Lagged(_)) => Topic::All,
                // The sender lives as long as the gateway.
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }),
            _ = self.tick.tick() => self
                .console
                .sessions
                .is_live(&self.cookie)
                .then_some(Topic::Sessions),
        }
    }
}

#[derive(serde::Deserialize, Default)]
pub struct StreamQuery {
    /// The session's CSRF token (`EventSource` cannot send headers).
    #[serde(default)]
    csrf: String,
}

/// `GET /ui/api/events?csrf=TOKEN`.
pub async fn stream(
    State(Ui { fleet, console }): State<Ui>,
    headers: HeaderMap,
    query: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let sent = query.map(|Query(q)| q.csrf).unwrap_or_default();
    let session = guard::proven(&fleet, &console, &headers, &sent).await?;
    let cookie = guard::cookie(&headers, console.cookie_name())
        .ok()
        .flatten()
        .unwrap_or_default()
        .to_owned();
    let events = &console.events;
    let taken = events
        .streams
        .lock()
        .map(|mut p| p.take(&session.token_id))
        .unwrap_or(false);
    if !taken {
        return Err(ConsoleError::TooManyStreams.into());
    }
    let place = Place {
        places: events.streams.clone(),
        token_id: session.token_id.clone(),
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let reader = Reader {
        rx: fleet.changes(),
        tick,
        console: console.clone(),
        cookie,
        _place: place,
    };
    let notices = futures_util::stream::unfold(reader, |mut r| async move {
        let topic = r.next().await?;
        let event = Event::default()
            .event("changed")
            .json_data(topic)
            .unwrap_or_else(|_| Event::default().event("changed").data("\"all\""));
        Some((Ok::<_, Infallible>(event), r))
    })
    .take_until(fleet.shutdown().clone().cancelled_owned());
    Ok(Sse::new(notices)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_token_cannot_take_every_stream() {
        let mut p = Places::default();
        for _ in 0..MAX_STREAMS_PER_TOKEN {
            assert!(p.take("greedy"));
        }
        assert!(!p.take("greedy"), "its share is used up");
        assert!(p.take("admin"), "another token still gets a place");
        p.give_back("greedy");
        assert!(p.take("greedy"), "a closed stream gives its place back");
        for i in 0..MAX_STREAMS {
            let _ = p.take(&format!("t{i}"));
        }
        assert_eq!(p.total, MAX_STREAMS);
        assert!(!p.take("late"), "bounded in all");
    }
}
