//! The node's memory of the calls the gateway sent it, kept across connections.
//!
//! A call outlives the connection it arrived on: when the link drops mid-call the tool
//! keeps running, and its result waits here (the outbox) until the gateway asks for it
//! again on the next connection (`tool.invoke` with `resume`). A result is sent on the
//! connection the call last arrived on, only: if that one is gone, the gateway asks
//! again, so a result is never pushed to a connection that did not ask for it. The same memory makes
//! call ids idempotent: an id seen before is never run a second time; the node answers
//! with the kept result, or says the result is no longer kept.
//!
//! Everything is bounded: at most [`MAX_KEPT_RESULTS`] results and [`MAX_KEPT_BYTES`]
//! bytes, each kept [`RESULT_TTL`]; past that the oldest results are dropped and only
//! their ids remembered ([`MAX_REMEMBERED_IDS`] ids for [`ID_TTL`]), still enough to
//! refuse running them again.
//!
//! With a journal ([`crate::journal`], a node with a data directory) the ledger also
//! writes each call id as it begins and each result as it ends, and a restarted node
//! process loads them back ([`Ledger::restore_done`], [`Ledger::adopt`]): a `resume`
//! then finds the result the previous process kept, or the call it left running.
//! Result ages are wall-clock across restarts. Ids of dropped results are remembered
//! in memory only: after a restart an id whose result was dropped is unknown.

use crate::journal::CallJournal;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Most finished results kept for redelivery.
pub const MAX_KEPT_RESULTS: usize = 256;
/// Most bytes of finished results kept for redelivery (32 MiB).
pub const MAX_KEPT_BYTES: usize = 32 * 1024 * 1024;
/// How long a finished result is kept for redelivery. Far longer than the gateway's
/// grace period, so a result is only dropped for a caller that is long gone.
pub const RESULT_TTL: Duration = Duration::from_secs(5 * 60);
/// Most ids of dropped results remembered, so they are never run again.
pub const MAX_REMEMBERED_IDS: usize = 65_536;
/// How long the id of a dropped result is remembered.
pub const ID_TTL: Duration = Duration::from_secs(60 * 60);

/// What the ledger knows about a call id that arrives.
#[derive(Debug)]
pub enum Seen {
    /// Never seen: run it, with this token (cancelled by `cancel` or shutdown).
    New(CancellationToken),
    /// Running now; its result goes to the connection that asked last, when it ends.
    Running,
    /// Finished; here is the result frame to send again.
    Done(String),
    /// Finished long ago; its result is no longer kept.
    Forgotten,
}

/// The calls of one node process.
#[derive(Default)]
pub struct Ledger {
    inner: Mutex<Inner>,
    /// Woken when the last running call finishes ([`Ledger::until_idle`]).
    idle: tokio::sync::Notify,
    /// Where begun calls and results are written, if the node keeps a journal.
    journal: Option<CallJournal>,
}

#[derive(Default)]
struct Inner {
    calls: HashMap<String, Entry>,
    /// Finished calls with a kept result, oldest first.
    done: VecDeque<(String, Instant)>,
    /// Finished calls whose result was dropped, oldest first.
    forgotten: VecDeque<(String, Instant)>,
    kept_bytes: usize,
    running: usize,
    /// Results [`Ledger::finish`] handed out for sending whose send has not been
    /// reported done yet ([`Ledger::sent`]).
    unsent: usize,
    /// The calls that have files in the journal (those journaled as they began, and
    /// those a previous process left): only theirs are written and removed, so a call
    /// not journaled (a read-only tool's) costs no file at all.
    on_disk: HashSet<String>,
}

enum Entry {
    /// The call's token and the connection its result goes to.
    Running(CancellationToken, mpsc::Sender<String>),
    /// A call of a previous node process whose command this process re-adopted: like
    /// `Running`, but not counted as running (a shutdown does not wait for it).
    Adopted(CancellationToken, mpsc::Sender<String>),
    Done(String),
    Forgotten,
}

impl Ledger {
    /// A ledger that journals begun calls and results in `journal`.
    pub fn with_journal(journal: Option<CallJournal>) -> Ledger {
        Ledger {
            journal,
            ..Ledger::default()
        }
    }

    /// Whether calls are journaled.
    pub fn journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Journals that call `id` of `tool` (by `caller`) begins: called before its tool
    /// runs, so a restarted node knows it may have run.
    pub fn record_begun(&self, id: &str, tool: &str, caller: Option<&str>) {
        if let Some(journal) = &self.journal {
            journal.begun(id, tool, caller);
            self.lock().on_disk.insert(id.to_owned());
        }
    }

    /// Notes that call `id` of a previous node process has files in the journal (it
    /// was running when that process died).
    pub fn restore_pending(&self, id: &str) {
        if self.journal.is_some() {
            self.lock().on_disk.insert(id.to_owned());
        }
    }

    /// Loads the result `frame` of call `id`, which a previous node process finished at
    /// `done_at` (ms since the Unix epoch). Call in order, oldest first.
    pub fn restore_done(&self, id: &str, frame: String, done_at: u64) {
        let age = Duration::from_millis(gsv_protocol::now_ms().saturating_sub(done_at));
        let now = Instant::now();
        let at = now.checked_sub(age).unwrap_or(now);
        let mut inner = self.lock();
        if inner.calls.contains_key(id) {
            return;
        }
        inner.kept_bytes += frame.len();
        inner.calls.insert(id.to_owned(), Entry::Done(frame));
        inner.done.push_back((id.to_owned(), at));
        inner.on_disk.insert(id.to_owned());
        inner.expire(now, self.journal.as_ref());
    }

    /// Remembers call `id` of a previous node process whose result was dropped: a
    /// `resume` for it is answered "no longer kept", never run again.
    pub fn restore_forgotten(&self, id: &str) {
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.calls.contains_key(id) {
            return;
        }
        inner.calls.insert(id.to_owned(), Entry::Forgotten);
        inner.forgotten.push_back((id.to_owned(), now));
        inner.on_disk.insert(id.to_owned());
        inner.expire(now, self.journal.as_ref());
    }

    /// Registers call `id` of a previous node process as going on (its command was
    /// re-adopted); returns its token, cancelled if the gateway cancels it. Its
    /// result, given to [`Ledger::finish`], goes to the connection that resumes it.
    pub fn adopt(&self, id: &str) -> CancellationToken {
        let token = CancellationToken::new();
        // Nobody has asked yet: a closed channel keeps the result until someone does.
        let (nowhere, _) = mpsc::channel(1);
        let mut inner = self.lock();
        inner
            .calls
            .insert(id.to_owned(), Entry::Adopted(token.clone(), nowhere));
        inner.on_disk.insert(id.to_owned());
        token
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Plain data changed in single steps; a panic elsewhere cannot leave it torn.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks `id`, which arrived on connection `from`, up, and registers it as running
    /// (with a child of `parent`) if new. A running call's result now goes to `from`.
    pub fn begin(&self, id: &str, parent: &CancellationToken, from: &mpsc::Sender<String>) -> Seen {
        let mut inner = self.lock();
        inner.expire(Instant::now(), self.journal.as_ref());
        match inner.calls.get_mut(id) {
            Some(Entry::Running(_, to)) | Some(Entry::Adopted(_, to)) => {
                *to = from.clone();
                Seen::Running
            }
            Some(Entry::Done(frame)) => Seen::Done(frame.clone()),
            Some(Entry::Forgotten) => Seen::Forgotten,
            None => {
                let token = parent.child_token();
                inner
                    .calls
                    .insert(id.to_owned(), Entry::Running(token.clone(), from.clone()));
                inner.running += 1;
                Seen::New(token)
            }
        }
    }

    /// Cancels the call `id` if it is running; returns whether it was.
    pub fn cancel(&self, id: &str) -> bool {
        match self.lock().calls.get(id) {
            Some(Entry::Running(token, _)) | Some(Entry::Adopted(token, _)) => {
                token.cancel();
                true
            }
            _ => false,
        }
    }

    /// Records the result frame of a call that ended and returns the connection to
    /// send it on, if that one is still open. The result stays kept either way.
    pub fn finish(&self, id: &str, frame: &str) -> Option<mpsc::Sender<String>> {
        if let Some(journal) = &self.journal {
            if self.lock().on_disk.contains(id) {
                journal.finished(id, frame);
            }
        }
        let mut inner = self.lock();
        let (to, counted) = match inner.calls.get(id) {
            Some(Entry::Running(_, to)) => (Some(to.clone()), true),
            Some(Entry::Adopted(_, to)) => (Some(to.clone()), false),
            _ => (None, false),
        };
        if counted {
            inner.running -= 1;
        }
        let now = Instant::now();
        inner.kept_bytes += frame.len();
        inner
            .calls
            .insert(id.to_owned(), Entry::Done(frame.to_owned()));
        inner.done.push_back((id.to_owned(), now));
        inner.expire(now, self.journal.as_ref());
        let to = to.filter(|tx| !tx.is_closed());
        if to.is_some() {
            inner.unsent += 1;
        } else if inner.idle() {
            self.idle.notify_waiters();
        }
        to
    }

    /// The send of a result [`Ledger::finish`] handed out is over (queued on its
    /// connection, or failed).
    pub fn sent(&self) {
        let mut inner = self.lock();
        inner.unsent = inner.unsent.saturating_sub(1);
        if inner.idle() {
            self.idle.notify_waiters();
        }
    }

    /// Calls running now.
    pub fn running(&self) -> usize {
        self.lock().running
    }

    /// Returns once no call is running and every result is queued on its connection.
    pub async fn until_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the check, so a finish in between is not missed.
            notified.as_mut().enable();
            if self.lock().idle() {
                return;
            }
            notified.await;
        }
    }

    /// Results kept for redelivery now (count, bytes).
    pub fn kept(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.done.len(), inner.kept_bytes)
    }
}

impl Inner {
    /// No call running and no result on its way to a connection.
    fn idle(&self) -> bool {
        self.running == 0 && self.unsent == 0
    }

    /// Drops results past their bounds or TTL (keeping their ids), and ids past theirs.
    fn expire(&mut self, now: Instant, journal: Option<&CallJournal>) {
        while let Some((id, at)) = self.done.front() {
            let over = self.done.len() > MAX_KEPT_RESULTS || self.kept_bytes > MAX_KEPT_BYTES;
            if !over && now.duration_since(*at) < RESULT_TTL {
                break;
            }
            let id = id.clone();
            self.done.pop_front();
            if let Some(Entry::Done(frame)) = self.calls.get(&id) {
                self.kept_bytes -= frame.len();
                self.calls.insert(id.clone(), Entry::Forgotten);
                if let Some(journal) = journal.filter(|_| self.on_disk.contains(&id)) {
                    journal.forget(&id);
                }
                self.forgotten.push_back((id, now));
            }
        }
        while let Some((id, at)) = self.forgotten.front() {
            if self.forgotten.len() <= MAX_REMEMBERED_IDS && now.duration_since(*at) < ID_TTL {
                break;
            }
            if let Some(Entry::Forgotten) = self.calls.get(id) {
                self.calls.remove(id);
                if let Some(journal) = journal.filter(|_| self.on_disk.remove(id)) {
                    journal.drop_id(id);
                }
            }
            self.forgotten.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> (mpsc::Sender<String>, mpsc::Receiver<String>) {
        mpsc::channel(1)
    }

    #[tokio::test]
    async fn until_idle_returns_when_the_last_call_finishes() {
        let ledger = std::sync::Arc::new(Ledger::default());
        let (tx, _rx) = conn();
        let parent = CancellationToken::new();
        ledger.until_idle().await; // nothing running
        assert!(matches!(ledger.begin("a", &parent, &tx), Seen::New(_)));
        assert!(matches!(ledger.begin("b", &parent, &tx), Seen::New(_)));
        let waiter = tokio::spawn({
            let ledger = std::sync::Arc::clone(&ledger);
            async move { ledger.until_idle().await }
        });
        assert!(ledger.finish("a", "{}").is_some());
        ledger.sent();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one call still runs");
        assert!(ledger.finish("b", "{}").is_some());
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "its result is not queued yet");
        ledger.sent();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("joined");
    }

    #[test]
    fn an_id_runs_once_and_then_answers_with_its_result() {
        let ledger = Ledger::default();
        let root = CancellationToken::new();
        let (tx, _rx) = conn();
        let Seen::New(token) = ledger.begin("7", &root, &tx) else {
            panic!("a new id runs");
        };
        assert!(matches!(ledger.begin("7", &root, &tx), Seen::Running));
        assert_eq!(ledger.running(), 1);
        assert!(ledger.cancel("7"));
        assert!(token.is_cancelled());
        assert!(ledger.finish("7", "frame-7").is_some());
        assert_eq!(ledger.running(), 0);
        match ledger.begin("7", &root, &tx) {
            Seen::Done(frame) => assert_eq!(frame, "frame-7"),
            other => panic!("{other:?}"),
        }
        assert!(!ledger.cancel("7"));
        assert_eq!(ledger.kept(), (1, "frame-7".len()));
    }

    #[test]
    fn a_result_goes_to_the_connection_that_asked_last_if_open() {
        let ledger = Ledger::default();
        let root = CancellationToken::new();
        let (tx1, rx1) = conn();
        let (tx2, _rx2) = conn();
        let _ = ledger.begin("1", &root, &tx1);
        assert!(ledger.finish("1", "x").unwrap().same_channel(&tx1));
        // Asked again on a second connection while running: the answer goes there.
        let _ = ledger.begin("2", &root, &tx1);
        let _ = ledger.begin("2", &root, &tx2);
        assert!(ledger.finish("2", "y").unwrap().same_channel(&tx2));
        // Its connection closed: kept, sent nowhere.
        let _ = ledger.begin("3", &root, &tx1);
        drop(rx1);
        assert!(ledger.finish("3", "z").is_none());
        assert!(matches!(ledger.begin("3", &root, &tx2), Seen::Done(_)));
    }

    #[test]
    fn kept_results_are_bounded_and_their_ids_remembered() {
        let ledger = Ledger::default();
        let root = CancellationToken::new();
        let (tx, _rx) = conn();
        for i in 0..MAX_KEPT_RESULTS + 10 {
            let id = i.to_string();
            let _ = ledger.begin(&id, &root, &tx);
            ledger.finish(&id, "r");
        }
        assert_eq!(ledger.kept().0, MAX_KEPT_RESULTS);
        assert!(matches!(ledger.begin("0", &root, &tx), Seen::Forgotten));
        assert!(matches!(ledger.begin("9", &root, &tx), Seen::Forgotten));
        assert!(matches!(ledger.begin("10", &root, &tx), Seen::Done(_)));

        // By bytes as well: one huge result pushes out the older ones.
        let big = "b".repeat(MAX_KEPT_BYTES - 10);
        let _ = ledger.begin("big", &root, &tx);
        ledger.finish("big", &big);
        let (count, bytes) = ledger.kept();
        assert!(bytes <= MAX_KEPT_BYTES, "{bytes}");
        assert!(count < MAX_KEPT_RESULTS);
        assert!(matches!(ledger.begin("big", &root, &tx), Seen::Done(_)));
    }
}
