//! A TCP chaos proxy for the end-to-end tests: it sits between a node and the gateway
//! (the node's gateway URL is [`ChaosProxy::url`]) and forwards bytes both ways while
//! injecting network faults:
//!
//! - **cut**: both directions closed at once, usually mid-frame (only a random prefix of
//!   the chunk being forwarded gets through);
//! - **stall**: nothing forwarded for a while, sockets kept open (a half-open link);
//!   longer than two heartbeats, the peers give up on it;
//! - **delay**: latency added to a chunk (order is kept);
//! - **drop**: the connection becomes a blackhole for good: everything read is thrown
//!   away and nothing is closed, so only heartbeats can tell.
//!
//! Faults come from a [`Plan`] (per-chunk probabilities and timed faults) and from
//! direct calls ([`ChaosProxy::cut_all`], [`ChaosProxy::pause`], ...). Every random
//! choice comes from an RNG seeded with the proxy's seed (per connection and direction,
//! plus one for the timed faults), so a seed replays the same decisions; the timing of
//! real processes still varies from run to run. [`seed_from_env`] takes
//! `GSV_CHAOS_SEED` when set. Everything the proxy did is in [`ChaosProxy::log`]
//! (bounded) and [`ChaosProxy::summary`]. All its tasks stop, and every socket closes,
//! when the proxy is dropped.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Entries kept in the log; later ones are counted, not kept.
const LOG_CAP: usize = 20_000;
/// Bytes read per chunk.
const CHUNK: usize = 16 * 1024;
/// How long dialing the upstream may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// The seed to use: `GSV_CHAOS_SEED` when set (to replay a run), else a fresh one.
/// Printed either way.
pub fn seed_from_env() -> u64 {
    let seed = match std::env::var("GSV_CHAOS_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("GSV_CHAOS_SEED must be a u64, got {s:?}")),
        Err(_) => rand::rng().random(),
    };
    eprintln!("chaos seed: {seed} (replay with GSV_CHAOS_SEED={seed})");
    seed
}

/// What the proxy does on its own. Probabilities are per forwarded chunk (one read,
/// up to 16 KiB) and per direction; ranges are inclusive, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Cut the connection, forwarding only a random prefix of the chunk.
    pub cut: f64,
    /// Stall the connection (both directions) for `stall_ms`.
    pub stall: f64,
    pub stall_ms: (u64, u64),
    /// Hold this chunk back for `delay_ms` (and everything behind it).
    pub delay: f64,
    pub delay_ms: (u64, u64),
    /// Blackhole the connection for good.
    pub drop: f64,
    /// Timed faults: every `every_ms` one live connection (picked at random) gets a
    /// fault drawn by `weights`: a cut at its next chunk (mid-chunk), a stall of
    /// `stall_ms`, or a drop.
    pub every_ms: Option<(u64, u64)>,
    pub weights: Weights,
}

/// Relative weights of the timed faults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub cut: u32,
    pub stall: u32,
    pub drop: u32,
}

impl Plan {
    /// Forward everything untouched.
    pub fn quiet() -> Plan {
        Plan {
            cut: 0.0,
            stall: 0.0,
            stall_ms: (0, 0),
            delay: 0.0,
            delay_ms: (0, 0),
            drop: 0.0,
            every_ms: None,
            weights: Weights {
                cut: 1,
                stall: 1,
                drop: 1,
            },
        }
    }
}

impl Default for Plan {
    fn default() -> Plan {
        Plan::quiet()
    }
}

/// Direction of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Client (node) to upstream (gateway).
    Up,
    /// Upstream (gateway) to client (node).
    Down,
}

/// One thing the proxy did.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// A client connected; the upstream was dialed.
    Open,
    /// The upstream could not be dialed; the client was closed.
    UpstreamFailed(String),
    /// Cut after forwarding `sent` of the `of` bytes of a chunk going `dir`.
    Cut {
        dir: Dir,
        sent: usize,
        of: usize,
    },
    /// Cut at once by [`ChaosProxy::cut_all`].
    CutNow,
    /// A timed cut was armed: the connection is cut at its next chunk.
    CutArmed,
    Stall {
        ms: u64,
    },
    Delay {
        dir: Dir,
        ms: u64,
    },
    /// Blackholed for good.
    Drop,
    Pause,
    Resume,
    /// The connection ended; bytes forwarded each way.
    Closed {
        up: u64,
        down: u64,
    },
}

/// A log entry: when (ms since the proxy started), which connection (0 for the proxy
/// itself), what.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub at_ms: u64,
    pub conn: u64,
    pub what: What,
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>7} ms  conn {:>3}  {:?}",
            self.at_ms, self.conn, self.what
        )
    }
}

/// Counters of what the proxy did (all of it, unlike the bounded log).
#[derive(Debug, Default)]
struct Counts {
    opened: AtomicU64,
    upstream_failed: AtomicU64,
    cuts: AtomicU64,
    mid_chunk_cuts: AtomicU64,
    stalls: AtomicU64,
    delays: AtomicU64,
    drops: AtomicU64,
}

/// A pending cut at the next chunk: in one direction or either, of at least some size.
#[derive(Debug, Clone, Copy)]
struct ArmedCut {
    dir: Option<Dir>,
    min_bytes: usize,
}

/// One proxied connection.
struct Link {
    id: u64,
    kill: CancellationToken,
    stall_until: Mutex<Option<Instant>>,
    blackhole: AtomicBool,
    armed: Mutex<Option<ArmedCut>>,
    up: AtomicU64,
    down: AtomicU64,
}

impl Link {
    fn stall(&self, d: Duration) {
        let until = Instant::now() + d;
        let mut s = self.stall_until.lock().unwrap();
        if s.is_none_or(|t| t < until) {
            *s = Some(until);
        }
    }

    fn take_armed(&self, dir: Dir, len: usize) -> bool {
        let mut a = self.armed.lock().unwrap();
        match *a {
            Some(c) if c.dir.is_none_or(|d| d == dir) && len >= c.min_bytes => {
                *a = None;
                true
            }
            _ => false,
        }
    }
}

struct Inner {
    upstream: SocketAddr,
    seed: u64,
    started: Instant,
    plan: Mutex<Plan>,
    paused: watch::Sender<bool>,
    links: Mutex<BTreeMap<u64, Arc<Link>>>,
    log: Mutex<Vec<Entry>>,
    log_overflow: AtomicUsize,
    counts: Counts,
    shutdown: CancellationToken,
}

impl Inner {
    fn plan(&self) -> Plan {
        self.plan.lock().unwrap().clone()
    }

    fn record(&self, conn: u64, what: What) {
        let c = &self.counts;
        match &what {
            What::Open => c.opened.fetch_add(1, Ordering::Relaxed),
            What::UpstreamFailed(_) => c.upstream_failed.fetch_add(1, Ordering::Relaxed),
            What::Cut { sent, of, .. } => {
                if 0 < *sent && sent < of {
                    c.mid_chunk_cuts.fetch_add(1, Ordering::Relaxed);
                }
                c.cuts.fetch_add(1, Ordering::Relaxed)
            }
            What::CutNow => c.cuts.fetch_add(1, Ordering::Relaxed),
            What::Stall { .. } => c.stalls.fetch_add(1, Ordering::Relaxed),
            What::Delay { .. } => c.delays.fetch_add(1, Ordering::Relaxed),
            What::Drop => c.drops.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        let at_ms = self.started.elapsed().as_millis() as u64;
        let mut log = self.log.lock().unwrap();
        if log.len() < LOG_CAP {
            log.push(Entry { at_ms, conn, what });
        } else {
            self.log_overflow.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn links(&self) -> Vec<Arc<Link>> {
        self.links.lock().unwrap().values().cloned().collect()
    }
}

/// The proxy. Dropping it stops every task and closes every connection.
pub struct ChaosProxy {
    addr: SocketAddr,
    inner: Arc<Inner>,
}

impl ChaosProxy {
    /// Listens on 127.0.0.1 (ephemeral port) and forwards each connection to
    /// `upstream` (`"127.0.0.1:PORT"`). Starts with [`Plan::quiet`].
    pub async fn start(upstream: &str, seed: u64) -> ChaosProxy {
        let upstream: SocketAddr = upstream.parse().expect("upstream is IP:PORT");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the chaos proxy");
        let addr = listener.local_addr().expect("proxy address");
        let inner = Arc::new(Inner {
            upstream,
            seed,
            started: Instant::now(),
            plan: Mutex::new(Plan::quiet()),
            paused: watch::channel(false).0,
            links: Mutex::new(BTreeMap::new()),
            log: Mutex::new(Vec::new()),
            log_overflow: AtomicUsize::new(0),
            counts: Counts::default(),
            shutdown: CancellationToken::new(),
        });
        eprintln!("chaos proxy {addr} -> {upstream}, seed {seed}");
        tokio::spawn(accept_loop(Arc::clone(&inner), listener));
        tokio::spawn(timed_faults(Arc::clone(&inner)));
        ChaosProxy { addr, inner }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to give a node as its gateway.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seed(&self) -> u64 {
        self.inner.seed
    }

    pub fn set_plan(&self, plan: Plan) {
        *self.inner.plan.lock().unwrap() = plan;
    }

    pub fn plan(&self) -> Plan {
        self.inner.plan()
    }

    /// Connections open right now.
    pub fn live(&self) -> usize {
        self.inner.links.lock().unwrap().len()
    }

    /// Cuts every open connection at once (both directions).
    pub fn cut_all(&self) {
        for link in self.inner.links() {
            self.inner.record(link.id, What::CutNow);
            link.kill.cancel();
        }
    }

    /// Arms a cut on every open connection: the next chunk going `dir` (either
    /// direction if `None`) of at least `min_bytes` is forwarded only in part, then
    /// the connection is cut. Lets a test cut a particular frame (a result, say) in the
    /// middle.
    pub fn cut_next(&self, dir: Option<Dir>, min_bytes: usize) {
        for link in self.inner.links() {
            self.inner.record(link.id, What::CutArmed);
            *link.armed.lock().unwrap() = Some(ArmedCut { dir, min_bytes });
        }
    }

    /// Stalls every open connection for `d`, sockets kept open.
    pub fn stall_all(&self, d: Duration) {
        for link in self.inner.links() {
            self.inner.record(
                link.id,
                What::Stall {
                    ms: d.as_millis() as u64,
                },
            );
            link.stall(d);
        }
    }

    /// Blackholes every open connection for good (new connections are not affected).
    pub fn drop_all(&self) {
        for link in self.inner.links() {
            self.inner.record(link.id, What::Drop);
            link.blackhole.store(true, Ordering::SeqCst);
        }
    }

    /// Stops forwarding on every connection, open or new, until [`ChaosProxy::resume`];
    /// sockets stay open and new connections are still accepted.
    pub fn pause(&self) {
        self.inner.record(0, What::Pause);
        self.inner.paused.send_replace(true);
    }

    pub fn resume(&self) {
        self.inner.record(0, What::Resume);
        self.inner.paused.send_replace(false);
    }

    /// Bytes forwarded on each connection so far, open or ended: (connection, up,
    /// down), by connection.
    pub fn forwarded(&self) -> Vec<(u64, u64, u64)> {
        let mut all: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for e in self.log() {
            if let What::Closed { up, down } = e.what {
                all.insert(e.conn, (up, down));
            }
        }
        for link in self.inner.links() {
            all.insert(
                link.id,
                (
                    link.up.load(Ordering::Relaxed),
                    link.down.load(Ordering::Relaxed),
                ),
            );
        }
        all.into_iter().map(|(c, (u, d))| (c, u, d)).collect()
    }

    /// What the proxy did, oldest first (at most 20 000 entries).
    pub fn log(&self) -> Vec<Entry> {
        self.inner.log.lock().unwrap().clone()
    }

    /// One line: how many connections and faults of each kind.
    pub fn summary(&self) -> String {
        let c = &self.inner.counts;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let overflow = self.inner.log_overflow.load(Ordering::Relaxed);
        format!(
            "seed {}: {} connections ({} upstream failures), {} cuts ({} mid-chunk), \
             {} stalls, {} drops, {} delays{}",
            self.inner.seed,
            n(&c.opened),
            n(&c.upstream_failed),
            n(&c.cuts),
            n(&c.mid_chunk_cuts),
            n(&c.stalls),
            n(&c.drops),
            n(&c.delays),
            match overflow {
                0 => String::new(),
                k => format!(" ({k} log entries not kept)"),
            }
        )
    }
}

impl Drop for ChaosProxy {
    fn drop(&mut self) {
        self.inner.shutdown.cancel();
    }
}

async fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
    let mut next_id = 1u64;
    loop {
        let accepted = tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((client, _)) = accepted else {
            // Out of descriptors or similar: do not spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let id = next_id;
        next_id += 1;
        tokio::spawn(serve(Arc::clone(&inner), id, client));
    }
}

/// A per-connection, per-direction RNG derived from the proxy's seed.
fn rng_for(seed: u64, conn: u64, salt: u64) -> StdRng {
    StdRng::seed_from_u64(
        seed ^ conn.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03),
    )
}

async fn serve(inner: Arc<Inner>, id: u64, client: TcpStream) {
    let link = Arc::new(Link {
        id,
        kill: inner.shutdown.child_token(),
        stall_until: Mutex::new(None),
        blackhole: AtomicBool::new(false),
        armed: Mutex::new(None),
        up: AtomicU64::new(0),
        down: AtomicU64::new(0),
    });
    let dial = tokio::select! {
        _ = link.kill.cancelled() => return,
        d = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(inner.upstream)) => d,
    };
    let upstream = match dial {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return inner.record(id, What::UpstreamFailed(e.to_string())),
        Err(_) => return inner.record(id, What::UpstreamFailed("dial timed out".into())),
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    inner.record(id, What::Open);
    inner.links.lock().unwrap().insert(id, Arc::clone(&link));
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let up = pump(
        Arc::clone(&inner),
        Arc::clone(&link),
        Dir::Up,
        cr,
        uw,
        rng_for(inner.seed, id, 1),
    );
    let down = pump(
        Arc::clone(&inner),
        Arc::clone(&link),
        Dir::Down,
        ur,
        cw,
        rng_for(inner.seed, id, 2),
    );
    // The sockets belong to the pumps: they close when the pumps end or are dropped
    // (a cut, or the proxy going away).
    tokio::select! {
        _ = link.kill.cancelled() => {}
        _ = async { tokio::join!(up, down) } => {}
    }
    // Logged before the link leaves the live set, so `forwarded` always sees it.
    inner.record(
        id,
        What::Closed {
            up: link.up.load(Ordering::Relaxed),
            down: link.down.load(Ordering::Relaxed),
        },
    );
    inner.links.lock().unwrap().remove(&id);
}

/// Waits while the proxy is paused or the link stalled.
async fn gate(inner: &Inner, link: &Link) {
    loop {
        let mut paused = inner.paused.subscribe();
        if *paused.borrow_and_update() {
            let _ = paused.wait_for(|p| !*p).await;
            continue;
        }
        let until = *link.stall_until.lock().unwrap();
        match until {
            Some(t) if t > Instant::now() => tokio::time::sleep_until(t).await,
            _ => return,
        }
    }
}

fn roll(rng: &mut StdRng, p: f64) -> bool {
    p > 0.0 && rng.random_bool(p.min(1.0))
}

fn pick(rng: &mut StdRng, (lo, hi): (u64, u64)) -> u64 {
    rng.random_range(lo.min(hi)..=hi.max(lo))
}

/// Forwards one direction until EOF, an error or a cut; after an EOF, returns the
/// write half (still open if the link is a blackhole).
async fn pump(
    inner: Arc<Inner>,
    link: Arc<Link>,
    dir: Dir,
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut rng: StdRng,
) -> Option<OwnedWriteHalf> {
    let mut buf = vec![0u8; CHUNK];
    let forwarded = match dir {
        Dir::Up => &link.up,
        Dir::Down => &link.down,
    };
    loop {
        if !link.blackhole.load(Ordering::SeqCst) {
            gate(&inner, &link).await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => {
                // A reset: pass it on as a cut of both directions.
                link.kill.cancel();
                return None;
            }
        };
        if link.blackhole.load(Ordering::SeqCst) {
            continue;
        }
        let plan = inner.plan();
        if link.take_armed(dir, n) || roll(&mut rng, plan.cut) {
            // Part of the chunk: at least one byte and not all of it, when it can be.
            let sent = if n > 1 { rng.random_range(1..n) } else { 0 };
            let _ = to.write_all(&buf[..sent]).await;
            let _ = to.flush().await;
            forwarded.fetch_add(sent as u64, Ordering::Relaxed);
            inner.record(link.id, What::Cut { dir, sent, of: n });
            link.kill.cancel();
            return None;
        }
        if roll(&mut rng, plan.drop) {
            inner.record(link.id, What::Drop);
            link.blackhole.store(true, Ordering::SeqCst);
            continue;
        }
        if roll(&mut rng, plan.stall) {
            let ms = pick(&mut rng, plan.stall_ms);
            inner.record(link.id, What::Stall { ms });
            link.stall(Duration::from_millis(ms));
        }
        if roll(&mut rng, plan.delay) {
            let ms = pick(&mut rng, plan.delay_ms);
            inner.record(link.id, What::Delay { dir, ms });
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        gate(&inner, &link).await;
        if link.blackhole.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            link.kill.cancel();
            return None;
        }
        forwarded.fetch_add(n as u64, Ordering::Relaxed);
    }
    // EOF: pass the half-close on, unless the link is a blackhole (then nothing gets
    // through, not even that; the other side finds out by its heartbeat): the write
    // half is handed back open and closed only when both directions have ended.
    if !link.blackhole.load(Ordering::SeqCst) {
        let _ = to.shutdown().await;
    }
    Some(to)
}

/// The timed faults of [`Plan::every_ms`].
async fn timed_faults(inner: Arc<Inner>) {
    let mut rng = rng_for(inner.seed, 0, 3);
    loop {
        let wait = match inner.plan().every_ms {
            Some(range) => pick(&mut rng, range),
            None => 100,
        };
        tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
        }
        let plan = inner.plan();
        if plan.every_ms.is_none() {
            continue;
        }
        let links = inner.links();
        if links.is_empty() {
            continue;
        }
        let link = &links[rng.random_range(0..links.len())];
        let w = plan.weights;
        let total = w.cut + w.stall + w.drop;
        if total == 0 {
            continue;
        }
        let r = rng.random_range(0..total);
        if r < w.cut {
            inner.record(link.id, What::CutArmed);
            *link.armed.lock().unwrap() = Some(ArmedCut {
                dir: None,
                min_bytes: 1,
            });
        } else if r < w.cut + w.stall {
            let ms = pick(&mut rng, plan.stall_ms);
            inner.record(link.id, What::Stall { ms });
            link.stall(Duration::from_millis(ms));
        } else {
            inner.record(link.id, What::Drop);
            link.blackhole.store(true, Ordering::SeqCst);
        }
    }
}
