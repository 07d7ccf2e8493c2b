//! The memory allocator: mimalloc, tuned for a gateway that holds thousands of idle
//! connections.
//!
//! Why not the system allocator: under load every frame is allocated on one tokio
//! worker and freed on another, and glibc's malloc then serializes the two workers on
//! its arena locks (`__lll_lock_wait_private` in a profile of `gsv bench throughput`);
//! mimalloc frees across threads without a lock. Measured in BENCHMARKS.md.
//!
//! Why the tuning: by default mimalloc commits its arenas eagerly on Linux and asks for
//! transparent huge pages on them, so a gateway with a thousand mostly idle
//! connections holds whole 2 MiB pages it barely touches (about 10 KiB more resident
//! memory per connected node at 1,000 nodes). Committing on demand keeps the
//! per-node figure where the system allocator had it. For the same reason the
//! long-running commands ([`maintain`]) let mimalloc return freed memory while idle.

/// How often long-running commands let mimalloc return freed memory ([`maintain`]).
pub const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// `mi_option_arena_eager_commit` in mimalloc's `mi_option_t` (the same index in its
/// v2 and v3 series; the Rust bindings do not name it).
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Sets mimalloc's options. They apply to arenas reserved after the call, and mimalloc
/// reserves its first arena while the process loads, before `main`: the binary runs
/// this from an ELF constructor ordered before mimalloc's own (see `main.rs`).
pub extern "C" fn tune() {
    // SAFETY: sets a plain integer option; mimalloc reads options with atomics.
    unsafe { libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0) };
}

/// Lets mimalloc return memory freed a while ago to the OS, every [`COLLECT_EVERY`],
/// until the runtime stops. mimalloc gives freed memory back after a delay (1 s), but
/// only when some thread of the process allocates or frees after that: a gateway that
/// goes quiet after a burst (a thousand nodes connecting, each handshake parsing a
/// 20 KB tool list) would otherwise keep the burst's memory resident until its next
/// burst. The call does the due purges of every arena and tidies the calling
/// thread's heap; it costs microseconds.
pub async fn maintain() {
    let mut tick = tokio::time::interval(COLLECT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        // SAFETY: no arguments beyond a flag; safe from any thread at any time.
        unsafe { libmimalloc_sys::mi_collect(false) };
    }
}

/// For tokio's `on_thread_park`: when a worker thread runs out of work, it tidies its
/// own allocator heap, at most every [`COLLECT_EVERY`]. [`maintain`] only reaches the
/// heap of the thread it happens to run on; memory a burst left in another worker's
/// heap (freed pages mimalloc keeps for the thread that allocated them) stayed resident
/// until that thread allocated again. The check costs a clock read per park.
pub fn on_park() {
    use std::cell::Cell;
    use std::time::Instant;
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    let due = LAST.with(|last| match last.get() {
        Some(t) if now.duration_since(t) < COLLECT_EVERY => false,
        _ => {
            last.set(Some(now));
            true
        }
    });
    if due {
        // SAFETY: no arguments beyond a flag; safe from any thread at any time.
        unsafe { libmimalloc_sys::mi_collect(false) };
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eager_commit_is_off_after_tuning() {
        super::tune();
        // SAFETY: reads an integer option.
        let v = unsafe { libmimalloc_sys::mi_option_get(super::ARENA_EAGER_COMMIT) };
        assert_eq!(v, 0);
    }
}
