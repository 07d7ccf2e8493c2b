//! Asking every other replica at once and gathering their answers: the node and tool
//! lists ([`super::listing`]) and the approval lists ([`super::approvals`]).
//!
//! The question goes out once on a subject every replica listens to, with a reply
//! inbox; answers are collected until every replica heard from lately
//! ([`super::presence`]) has answered, or [`WAIT`] has passed: a replica that is slow
//! or gone leaves the list short rather than holding the caller.
//!
//! One question costs every other replica a list it builds and sends, so asking is
//! bounded ([`Asks`]): the same question asked again while it is out is not sent again
//! (the asker waits for the answers already coming), and one asker (a token) has at
//! most [`ASKS_PER_ASKER`] different questions out at once from a replica; the next
//! waits its turn. A token flooding list requests then costs the other replicas what
//! a few requests cost, and other tokens' lists are not held behind its own.

use super::Cluster;
use bytes::Bytes;
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use futures_util::future::{BoxFuture, FutureExt, Shared, WeakShared};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Longest wait for the other replicas' answers.
pub const WAIT: Duration = Duration::from_millis(500);
/// Different questions one asker may have out at once from one replica.
pub const ASKS_PER_ASKER: usize = 4;
/// Questions remembered as out before the forgotten ones are swept.
const SWEEP_AT: usize = 1024;

/// The answers to one question, as they came (each decoded by whoever waits).
type Raw = Arc<Vec<Bytes>>;
type Asking = BoxFuture<'static, Raw>;

/// The questions out from this replica, and each asker's turns.
#[derive(Default)]
pub struct Asks {
    /// By subject and question: an id and the answers on their way.
    out: DashMap<Vec<u8>, (u64, WeakShared<Asking>)>,
    askers: DashMap<String, Arc<Semaphore>>,
    next: AtomicU64,
}

impl Asks {
    /// The answers to `key`, asked by `asker`: joins the same question when it is out
    /// already, else asks it (`ask`) once the asker has a turn.
    async fn once(&self, key: Vec<u8>, asker: &str, ask: impl FnOnce() -> Asking) -> Raw {
        // Held weakly: when every asker went away the question is dropped (and the
        // asker's turn with it).
        let (id, answers) = match self.out.entry(key.clone()) {
            Entry::Occupied(mut out) => match out.get().1.upgrade() {
                Some(answers) => (out.get().0, answers),
                None => {
                    let (id, answers) = self.start(asker, ask);
                    if let Some(weak) = answers.downgrade() {
                        out.insert((id, weak));
                    }
                    (id, answers)
                }
            },
            Entry::Vacant(slot) => {
                let (id, answers) = self.start(asker, ask);
                if let Some(weak) = answers.downgrade() {
                    slot.insert((id, weak));
                }
                (id, answers)
            }
        };
        let got = answers.await;
        self.out.remove_if(&key, |_, e| e.0 == id);
        if self.out.len() >= SWEEP_AT {
            // Questions whose every asker went away before the answers came.
            self.out.retain(|_, e| e.1.upgrade().is_some());
        }
        self.askers
            .remove_if(asker, |_, turns| Arc::strong_count(turns) == 1);
        got
    }

    /// The question, to be sent once `asker` has a turn, and its id.
    fn start(&self, asker: &str, ask: impl FnOnce() -> Asking) -> (u64, Shared<Asking>) {
        let turns = Arc::clone(
            self.askers
                .entry(asker.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(ASKS_PER_ASKER)))
                .value(),
        );
        let asking = ask();
        let answers = async move {
            // The semaphore is never closed; were it, the question goes out anyway.
            let _turn = turns.acquire_owned().await;
            asking.await
        }
        .boxed()
        .shared();
        (self.next.fetch_add(1, Ordering::Relaxed), answers)
    }

    /// Askers with a question out or waiting for their turn.
    #[cfg(test)]
    fn askers(&self) -> usize {
        self.askers.len()
    }
}

/// Sends `question` on `subject` for `asker` (a token id, or `operator`) and returns
/// the answers that decode and pass `valid`.
pub async fn gather<T: DeserializeOwned>(
    cluster: &Cluster,
    subject: &'static str,
    asker: &str,
    question: &impl Serialize,
    valid: impl Fn(&T) -> bool,
) -> Vec<T> {
    if !cluster.connected() {
        return Vec::new();
    }
    let Ok(payload) = serde_json::to_vec(question) else {
        return Vec::new();
    };
    let mut key = subject.as_bytes().to_vec();
    key.push(b'\n');
    key.extend_from_slice(&payload);
    // Every replica heard from lately is waited for; none heard yet (this replica
    // just started) still gets a short wait.
    let peers = cluster.live_peers();
    let client = cluster.client();
    let raw = cluster
        .asks
        .once(key, asker, move || {
            ask(client, subject, payload, peers).boxed()
        })
        .await;
    raw.iter()
        .filter_map(|m| serde_json::from_slice::<T>(m).ok())
        .filter(|a| valid(a))
        .collect()
}

/// Publishes one question and collects the answers' payloads.
async fn ask(
    client: super::bus::Bus,
    subject: &'static str,
    payload: Vec<u8>,
    peers: usize,
) -> Raw {
    let wait = if peers == 0 { WAIT / 2 } else { WAIT };
    let inbox = client.new_inbox();
    let Ok(mut replies) = client.subscribe(inbox.clone()).await else {
        return Raw::default();
    };
    if client
        .publish_with_reply(subject, inbox, payload.into())
        .await
        .is_err()
    {
        return Raw::default();
    }
    let mut answers = Vec::new();
    let deadline = tokio::time::sleep(wait);
    tokio::pin!(deadline);
    while peers == 0 || answers.len() < peers {
        tokio::select! {
            _ = &mut deadline => break,
            m = replies.next() => match m {
                Some(m) => answers.push(m.payload),
                None => break,
            }
        }
    }
    Arc::new(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the questions sent and the most out at once; each takes `took`.
    #[derive(Default)]
    struct Sent {
        sent: AtomicUsize,
        now: AtomicUsize,
        most: AtomicUsize,
    }

    fn question(sent: &Arc<Sent>, took: Duration) -> Asking {
        let sent = Arc::clone(sent);
        async move {
            sent.sent.fetch_add(1, Ordering::SeqCst);
            let now = sent.now.fetch_add(1, Ordering::SeqCst) + 1;
            sent.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(took).await;
            sent.now.fetch_sub(1, Ordering::SeqCst);
            Arc::new(vec![Bytes::from_static(b"answer")])
        }
        .boxed()
    }

    #[tokio::test]
    async fn the_same_question_asked_while_it_is_out_is_sent_once() {
        let asks = Asks::default();
        let sent = Arc::new(Sent::default());
        let got = futures_util::future::join_all((0..32).map(|_| {
            asks.once(b"q".to_vec(), "t", || {
                question(&sent, Duration::from_millis(30))
            })
        }))
        .await;
        assert_eq!(sent.sent.load(Ordering::SeqCst), 1);
        assert!(got.iter().all(|g| g.len() == 1));
        // Once answered it is asked afresh, and nothing is left behind.
        asks.once(b"q".to_vec(), "t", || question(&sent, Duration::ZERO))
            .await;
        assert_eq!(sent.sent.load(Ordering::SeqCst), 2);
        assert_eq!((asks.out.len(), asks.askers()), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn one_asker_has_a_few_questions_out_and_others_are_not_held_behind_it() {
        let asks = Asks::default();
        let flood = Arc::new(Sent::default());
        let other = Arc::new(Sent::default());
        let many = futures_util::future::join_all((0..12).map(|i| {
            asks.once(format!("q{i}").into_bytes(), "hostile", || {
                question(&flood, Duration::from_millis(40))
            })
        }));
        let mine = async {
            // Asked while the flood holds all its turns: answered while the flood's
            // questions still wait for theirs.
            tokio::time::sleep(Duration::from_millis(5)).await;
            asks.once(b"mine".to_vec(), "polite", || {
                question(&other, Duration::from_millis(40))
            })
            .await;
            flood.sent.load(Ordering::SeqCst)
        };
        let (_, flood_sent_by_then) = tokio::join!(many, mine);
        assert_eq!(flood.sent.load(Ordering::SeqCst), 12, "each was answered");
        assert_eq!(flood.most.load(Ordering::SeqCst), ASKS_PER_ASKER);
        assert!(
            flood_sent_by_then < 12,
            "the other asker waited until the flood was through"
        );
    }

    #[tokio::test]
    async fn a_question_every_asker_gave_up_frees_its_turn() {
        let asks = Asks::default();
        let sent = Arc::new(Sent::default());
        for i in 0..ASKS_PER_ASKER {
            let hung = asks.once(format!("h{i}").into_bytes(), "t", || {
                question(&sent, Duration::from_secs(3600))
            });
            assert!(tokio::time::timeout(Duration::from_millis(10), hung)
                .await
                .is_err());
        }
        let next = asks.once(b"next".to_vec(), "t", || question(&sent, Duration::ZERO));
        let got = tokio::time::timeout(Duration::from_secs(5), next).await;
        assert!(
            got.is_ok(),
            "the asker's turns were kept by questions no one waits for"
        );
    }
}
