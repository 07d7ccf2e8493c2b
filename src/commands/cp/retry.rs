//! `gsv cp` carries on by itself across a dropped link or a restarting gateway: a copy
//! that fails for a reason a retry can fix is tried again on a fresh connection, and
//! resumes from what was verified (the node's partial file for a put, the local one
//! for a get), until it has gone `--retry-for` without moving a byte.
//!
//! The loop knows nothing of what is copied: it runs one "copy once" function, given a
//! connected client, as often as needed, so every kind of copy gets the same retries.

use super::super::client::Dialer;
use gsv_client::{AgentClient, ClientError};
use gsv_protocol::ErrorCode;
use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

/// The wait before the first retry; it doubles up to [`MAX_DELAY`].
pub const FIRST_DELAY: Duration = Duration::from_millis(200);
/// The longest wait between two tries.
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// `--retry-for`'s default, in seconds: how long a copy goes on trying without
/// moving a byte before it gives up.
pub const DEFAULT_RETRY_FOR_SECS: u64 = 120;
/// How long an interrupted copy waits for its cancel to go out.
const CANCEL_FLUSH: Duration = Duration::from_secs(3);

/// Whether a copy that failed with `e` may succeed if tried again: the connection to
/// the gateway closed or could not be made, the node went away or is not back yet, a
/// stall, a busy gateway or node. Never a refusal, a missing file, bad arguments or
/// bytes that did not check out: those do not change by trying again.
///
/// On the first try a gateway that cannot be reached and a node that is offline are
/// final (most likely a wrong address or node name); once the copy has begun they are
/// what a restarting gateway or a reconnecting node looks like for a while. (The loop
/// also gives up at once when the very first connection cannot be made at all.)
pub fn retryable(e: &ClientError, first_try: bool) -> bool {
    match e {
        ClientError::Closed => true,
        ClientError::Unreachable { .. } => !first_try,
        ClientError::Remote(shape) => match shape.code {
            ErrorCode::NodeOffline => !first_try,
            ErrorCode::NodeDisconnected
            | ErrorCode::Timeout
            | ErrorCode::Overloaded
            | ErrorCode::RateLimited => true,
            _ => false,
        },
        ClientError::Url(_)
        | ClientError::Tls(_)
        | ClientError::Certificate { .. }
        | ClientError::Protocol(_)
        | ClientError::Io { .. }
        | ClientError::Integrity(_) => false,
    }
}

/// The wire-style code of a failure, as `gsv` prints it (`error: CODE: ...`).
pub fn code_of(e: &ClientError) -> &'static str {
    match e {
        ClientError::Remote(shape) => shape.code.as_str(),
        ClientError::Url(_) | ClientError::Tls(_) => "invalid_args",
        ClientError::Certificate { .. } => "certificate",
        ClientError::Unreachable { .. } | ClientError::Closed => "unreachable",
        ClientError::Protocol(_) => "protocol",
        ClientError::Io { .. } => "io",
        ClientError::Integrity(_) => "integrity",
    }
}

/// What a failure says, without its code (a remote error's message alone).
pub fn message_of(e: &ClientError) -> String {
    match e {
        ClientError::Remote(shape) => shape.message.clone(),
        other => other.to_string(),
    }
}

/// The waits between tries: [`FIRST_DELAY`] doubling up to [`MAX_DELAY`], back to the
/// first after a try that made progress.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { next: FIRST_DELAY }
    }
}

impl Backoff {
    /// The wait before the next try.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(MAX_DELAY);
        d
    }

    pub fn reset(&mut self) {
        self.next = FIRST_DELAY;
    }
}

/// One try of a copy: told how far the copy stands, it knows whether bytes moved.
#[derive(Debug, Default)]
pub struct Attempt {
    first: Cell<Option<u64>>,
    moved: Cell<bool>,
}

impl Attempt {
    /// The copy stands at `done` bytes (its first report is where it resumed).
    pub fn at(&self, done: u64) {
        match self.first.get() {
            None => self.first.set(Some(done)),
            Some(first) if done > first => self.moved.set(true),
            Some(_) => {}
        }
    }

    /// Whether bytes moved during this try.
    pub fn moved(&self) -> bool {
        self.moved.get()
    }
}

/// What a failed try was, for the one-line notice before the next.
pub struct Notice<'a> {
    /// 1 for the first retry.
    pub retry: u32,
    pub error: &'a ClientError,
    pub delay: Duration,
}

/// How a copy with retries ended.
pub enum Outcome<T> {
    Done {
        value: T,
        retries: u32,
    },
    /// A failure not worth retrying, or retries that went `retry_for` without
    /// progress (`gave_up`).
    Failed {
        error: ClientError,
        retries: u32,
        gave_up: bool,
    },
    /// Ctrl-C or SIGTERM: the copy was cancelled.
    Cancelled,
}

/// Runs `copy_once` on a connected client until it succeeds, fails for a reason a
/// retry cannot fix, or tries for `retry_for` without moving a byte. `notice` is told
/// of each retry before its wait. `interrupted` cancels at once: the running copy is
/// dropped (it queues its cancel, which is given a moment to go out).
pub async fn run<T, F>(
    dialer: &Dialer,
    retry_for: Duration,
    interrupted: impl Future<Output = ()>,
    mut copy_once: F,
    mut notice: impl FnMut(&Notice<'_>),
) -> Outcome<T>
where
    F: AsyncFnMut(&AgentClient, &Attempt) -> Result<T, ClientError>,
{
    let mut interrupted = std::pin::pin!(interrupted);
    let mut backoff = Backoff::default();
    let mut last_progress = Instant::now();
    let mut client: Option<AgentClient> = None;
    let mut retries = 0u32;
    let mut ever_connected = false;
    loop {
        let first_try = retries == 0;
        let attempt = Attempt::default();
        let tried = async {
            let c = match client.take() {
                Some(c) if !c.is_closed() => c,
                _ => {
                    tokio::select! {
                        biased;
                        _ = &mut interrupted => return None,
                        c = dialer.connect_bulk() => match c {
                            Ok(c) => c,
                            Err(e) => return Some(Err((e, true))),
                        },
                    }
                }
            };
            ever_connected = true;
            let outcome = tokio::select! {
                biased;
                _ = &mut interrupted => None,
                r = copy_once(&c, &attempt) => Some(r.map_err(|e| (e, false))),
            };
            if outcome.is_none() {
                // The copy's future is dropped: it queued its cancel. Let it go out.
                c.flush(CANCEL_FLUSH).await;
            }
            client = Some(c);
            outcome
        };
        let error = match tried.await {
            None => return Outcome::Cancelled,
            Some(Ok(value)) => return Outcome::Done { value, retries },
            Some(Err((e, from_connect))) => {
                if from_connect && !ever_connected {
                    // Never reached the gateway at all: a wrong address, not a restart.
                    return Outcome::Failed {
                        error: e,
                        retries,
                        gave_up: false,
                    };
                }
                e
            }
        };
        if attempt.moved() {
            last_progress = Instant::now();
            backoff.reset();
        }
        if !retryable(&error, first_try) {
            return Outcome::Failed {
                error,
                retries,
                gave_up: false,
            };
        }
        let left = retry_for.saturating_sub(last_progress.elapsed());
        if left.is_zero() {
            return Outcome::Failed {
                error,
                retries,
                gave_up: true,
            };
        }
        retries += 1;
        let delay = backoff.next_delay().min(left);
        notice(&Notice {
            retry: retries,
            error: &error,
            delay,
        });
        tracing::debug!(retries, ?delay, error = %error, "copy failed; trying again");
        tokio::select! {
            biased;
            _ = &mut interrupted => return Outcome::Cancelled,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gsv_protocol::ErrorShape;

    fn remote(code: ErrorCode) -> ClientError {
        ClientError::Remote(ErrorShape::new(code, "x"))
    }

    #[test]
    fn what_a_retry_can_fix_is_retried_and_nothing_else() {
        for code in [
            ErrorCode::NodeDisconnected,
            ErrorCode::Timeout,
            ErrorCode::Overloaded,
            ErrorCode::RateLimited,
        ] {
            assert!(retryable(&remote(code), true), "{code:?}");
            assert!(retryable(&remote(code), false), "{code:?}");
        }
        assert!(retryable(&ClientError::Closed, true));
        // Offline or unreachable at the start: a wrong name or address, said at once.
        let unreachable = ClientError::Unreachable {
            url: "ws://x".into(),
            reason: "refused".into(),
        };
        assert!(!retryable(&unreachable, true));
        assert!(retryable(&unreachable, false));
        assert!(!retryable(&remote(ErrorCode::NodeOffline), true));
        assert!(retryable(&remote(ErrorCode::NodeOffline), false));
        for code in [
            ErrorCode::Forbidden,
            ErrorCode::NotFound,
            ErrorCode::InvalidArgs,
            ErrorCode::InvalidFrame,
            ErrorCode::Unauthorized,
            ErrorCode::Internal,
            ErrorCode::Cancelled,
        ] {
            assert!(!retryable(&remote(code), false), "{code:?}");
        }
        // A corrupt copy must not loop.
        assert!(!retryable(
            &ClientError::Integrity("mismatch".into()),
            false
        ));
        assert!(!retryable(&ClientError::Protocol("bad".into()), false));
        let io = ClientError::Io {
            path: "/x".into(),
            source: std::io::Error::other("disk full"),
        };
        assert!(!retryable(&io, false));
    }

    #[test]
    fn waits_double_to_a_cap_and_start_over_after_progress() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        b.reset();
        assert_eq!(b.next_delay(), FIRST_DELAY);
    }

    #[test]
    fn a_try_made_progress_only_when_bytes_moved_past_where_it_resumed() {
        let a = Attempt::default();
        assert!(!a.moved());
        a.at(500);
        a.at(500);
        assert!(!a.moved(), "where it resumed is not progress");
        a.at(501);
        assert!(a.moved());
    }
}
