//! The one envelope every message on the cluster's NATS bus travels in, so that only
//! the holders of the cluster key (the replicas) can read what crosses NATS or make a
//! replica act on it.
//!
//! NATS is a shared bus: whoever has NATS access (a credential, a network path to an
//! unauthenticated server) could subscribe to `gsv.>` and read job outputs, link
//! secrets and call results, or publish a call under an admin token's id. So nothing
//! in [`super`] publishes or reads NATS itself: [`super::bus::Bus`] (core NATS) and the
//! JetStream paths ([`super::replication::Batches`], [`super::slot`],
//! [`super::directory`]) seal and open every payload here.
//!
//! **The envelope**: `version (1) | sealed_at ms (8, big-endian) | nonce (24) |
//! XChaCha20-Poly1305 ciphertext and tag`, under a key derived from the cluster key
//! (HMAC-SHA256 of a fixed label: the file's bytes are never used as a cipher key
//! themselves). The associated data is the subject the message is published on and
//! the header, so a message moved to another subject, a changed time or a flipped
//! bit fails to open ([`SealError::Forged`]). Random 192-bit nonces never repeat in
//! practice, whatever the number of replicas sharing the key.
//!
//! **Replays**: a message taken live (core NATS: calls, answers, approvals, hellos,
//! cancels, lists, tool events) must have been sealed within [`REPLAY_WINDOW`] of this
//! replica's clock, and a message is taken once per subscription: the nonces seen
//! within the window are kept ([`SealError::Replayed`]). A message read back from
//! JetStream (tokens, labels, jobs, the audit chain, slots, the node directory) is
//! history by design: it is opened without the window; what replaying one could do
//! is what applying it again does, and every kind applies idempotently and never goes
//! back (docs/security.md, Cluster mode).

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::Mac;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The fewest bytes a cluster key file may hold.
pub const KEY_MIN: usize = 32;
/// The most bytes read from a cluster key file.
pub const KEY_MAX: usize = 4096;
/// How far from this replica's clock a live message may have been sealed.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(60);
/// The most nonces kept for the replay check; past it live messages are refused
/// (fail closed) until older ones leave the window.
pub const MAX_SEEN: usize = 1 << 20;
const VERSION: u8 = 1;
const NONCE: usize = 24;
const HEADER: usize = 1 + 8 + NONCE;
const TAG: usize = 16;
/// What sealing adds to a payload.
pub const OVERHEAD: usize = HEADER + TAG;
const LABEL: &[u8] = b"gsv cluster bus v1: XChaCha20-Poly1305 key";
const AAD_LABEL: &[u8] = b"gsv-bus-v1\0";

/// Why a cluster key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the cluster key file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the cluster key file {path} holds {len} bytes: it needs at least {KEY_MIN} bytes (32 random bytes, e.g. `head -c 32 /dev/urandom > FILE`)")]
    Short { path: String, len: usize },
    #[error("the cluster key file {path} is larger than {KEY_MAX} bytes")]
    Long { path: String },
    #[error(
        "the cluster key file {path} may be read by other users (mode {mode:o}): chmod 600 it"
    )]
    Open { path: String, mode: u32 },
}

/// Why a message was not sealed or is not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("too short to be a sealed message ({0} bytes)")]
    Short(usize),
    #[error("unknown envelope version {0}")]
    Version(u8),
    #[error("not sealed with the cluster key for this subject (forged, altered or moved)")]
    Forged,
    #[error("sealed {0} s away from this replica's clock, outside the replay window")]
    Stale(u64),
    #[error("already taken (a replay)")]
    Replayed,
    #[error("too many messages in the replay window")]
    Full,
    #[error("cannot seal the message")]
    Seal,
}

impl SealError {
    /// The reason label of `gsv_cluster_refused_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            SealError::Short(_) | SealError::Version(_) | SealError::Forged => "forged",
            SealError::Stale(_) => "stale",
            SealError::Replayed => "replayed",
            SealError::Full => "full",
            SealError::Seal => "seal",
        }
    }
}

/// How a message is opened.
#[derive(Debug, Clone, Copy)]
pub enum Taken<'a> {
    /// Live on a subscription (`filter` is what it subscribed to): within the window
    /// and once.
    Live { filter: &'a str },
    /// The answer to a request of this replica's (its inbox is its own, one answer):
    /// within the window.
    Reply,
    /// Read back from JetStream: authentic and on its subject, whenever sealed.
    Stored,
}

/// The cluster key, ready to seal and open, and the replay check's memory.
pub struct Seal {
    aead: XChaCha20Poly1305,
    seen: Mutex<Seen>,
    /// Messages refused so far, for the metrics.
    refused: AtomicU64,
}

#[derive(Default)]
struct Seen {
    /// (filter hash, nonce) → when it was sealed (ms).
    nonces: HashMap<(u64, [u8; NONCE]), u64>,
    pruned_at: u64,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(..)")
    }
}

impl Seal {
    /// The seal of the cluster key `key` (at least [`KEY_MIN`] bytes).
    pub fn new(key: &[u8]) -> Option<Seal> {
        if key.len() < KEY_MIN {
            return None;
        }
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).ok()?;
        mac.update(LABEL);
        let derived = mac.finalize().into_bytes();
        let aead = XChaCha20Poly1305::new_from_slice(&derived).ok()?;
        Some(Seal {
            aead,
            seen: Mutex::default(),
            refused: AtomicU64::new(0),
        })
    }

    /// The seal of the key in `path`: its bytes (a trailing newline dropped), at least
    /// [`KEY_MIN`] of them, in a file no other user may read.
    pub fn load(path: &Path) -> Result<Seal, KeyError> {
        let shown = path.display().to_string();
        let read = |source| KeyError::Read {
            path: shown.clone(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(KeyError::Open { path: shown, mode });
            }
        }
        if meta.len() > KEY_MAX as u64 {
            return Err(KeyError::Long { path: shown });
        }
        let mut bytes = std::fs::read(path).map_err(read)?;
        // A key written as text (hex, base64) may end in a line break, which is not
        // part of it; a binary key is taken byte for byte, since 32 random bytes end
        // in `\n` or `\r` one time in 128.
        let text = bytes
            .iter()
            .all(|b| b.is_ascii_graphic() || matches!(b, b'\n' | b'\r'));
        while text && bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        let len = bytes.len();
        Seal::new(&bytes).ok_or(KeyError::Short { path: shown, len })
    }

    /// `plain` sealed for `subject`, now.
    pub fn seal(&self, subject: &str, plain: &[u8]) -> Result<Vec<u8>, SealError> {
        self.seal_at(subject, plain, now_ms())
    }

    fn seal_at(&self, subject: &str, plain: &[u8], at: u64) -> Result<Vec<u8>, SealError> {
        let nonce: [u8; NONCE] = rand::random();
        let mut header = [0u8; HEADER];
        header[0] = VERSION;
        header[1..9].copy_from_slice(&at.to_be_bytes());
        header[9..].copy_from_slice(&nonce);
        let aad = aad(subject, &header);
        let sealed = self
            .aead
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Seal)?;
        let mut out = Vec::with_capacity(HEADER + sealed.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// What `sealed`, published on `subject`, says — if a holder of the cluster key
    /// sealed it for that subject (and, taken live, within the window and once).
    pub fn open(
        &self,
        subject: &str,
        sealed: &[u8],
        taken: Taken<'_>,
    ) -> Result<Vec<u8>, SealError> {
        let opened = self.open_at(subject, sealed, taken, now_ms());
        if opened.is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        opened
    }

    fn open_at(
        &self,
        subject: &str,
        sealed: &[u8],
        taken: Taken<'_>,
        now: u64,
    ) -> Result<Vec<u8>, SealError> {
        if sealed.len() < OVERHEAD {
            return Err(SealError::Short(sealed.len()));
        }
        let (header, body) = sealed.split_at(HEADER);
        if header[0] != VERSION {
            return Err(SealError::Version(header[0]));
        }
        let mut at = [0u8; 8];
        at.copy_from_slice(&header[1..9]);
        let at = u64::from_be_bytes(at);
        let mut nonce = [0u8; NONCE];
        nonce.copy_from_slice(&header[9..]);
        let aad = aad(subject, header);
        // Authentic first: nothing a forger sends reaches the replay memory.
        let plain = self
            .aead
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Forged)?;
        let window = REPLAY_WINDOW.as_millis() as u64;
        match taken {
            Taken::Stored => {}
            Taken::Reply | Taken::Live { .. } if now.abs_diff(at) > window => {
                return Err(SealError::Stale(now.abs_diff(at) / 1000));
            }
            Taken::Reply => {}
            Taken::Live { filter } => self.first_time(filter, nonce, at, now)?,
        }
        Ok(plain)
    }

    /// Remembers `nonce` for `filter`; refused when it was seen already.
    fn first_time(
        &self,
        filter: &str,
        nonce: [u8; NONCE],
        at: u64,
        now: u64,
    ) -> Result<(), SealError> {
        let mut h = DefaultHasher::new();
        filter.hash(&mut h);
        let key = (h.finish(), nonce);
        let window = REPLAY_WINDOW.as_millis() as u64;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if now.saturating_sub(seen.pruned_at) >= 1000 || seen.nonces.len() >= MAX_SEEN {
            // Older than the window: refused as stale anyway, so forgotten.
            let oldest = now.saturating_sub(window);
            seen.nonces.retain(|_, at| *at >= oldest);
            seen.pruned_at = now;
        }
        if seen.nonces.contains_key(&key) {
            return Err(SealError::Replayed);
        }
        if seen.nonces.len() >= MAX_SEEN {
            return Err(SealError::Full);
        }
        seen.nonces.insert(key, at);
        Ok(())
    }

    /// Messages refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

fn aad(subject: &str, header: &[u8]) -> Vec<u8> {
    let mut aad = Vec::with_capacity(AAD_LABEL.len() + subject.len() + 1 + header.len());
    aad.extend_from_slice(AAD_LABEL);
    aad.extend_from_slice(subject.as_bytes());
    aad.push(0);
    aad.extend_from_slice(header);
    aad
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal() -> Seal {
        Seal::new(&[7u8; 32]).unwrap()
    }

    const LIVE: Taken<'static> = Taken::Live { filter: "gsv.x.>" };

    #[test]
    fn a_sealed_message_opens_on_its_subject_and_hides_its_payload() {
        let s = seal();
        let sealed = s.seal("gsv.x.call", b"secret output").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(sealed.len(), b"secret output".len() + OVERHEAD);
        assert_eq!(
            s.open("gsv.x.call", &sealed, LIVE).unwrap(),
            b"secret output"
        );
    }

    #[test]
    fn a_forged_moved_or_altered_message_is_refused() {
        let s = seal();
        let sealed = s.seal("gsv.x.call", b"{}").unwrap();
        assert_eq!(
            s.open("gsv.x.other", &sealed, Taken::Stored),
            Err(SealError::Forged)
        );
        let other = Seal::new(&[8u8; 32]).unwrap();
        assert_eq!(
            other.open("gsv.x.call", &sealed, Taken::Stored),
            Err(SealError::Forged)
        );
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 1;
            assert!(
                s.open("gsv.x.call", &bad, Taken::Stored).is_err(),
                "byte {i}"
            );
        }
        assert_eq!(
            s.open("gsv.x.call", b"{\"tokenId\":\"x\"}", LIVE),
            Err(SealError::Short(15))
        );
        assert!(s.open("gsv.x.call", &[b'{'; 80], LIVE).is_err());
        assert!(s.refused() > 0);
    }

    #[test]
    fn a_live_message_is_taken_once_and_only_within_the_window() {
        let s = seal();
        let sealed = s.seal("gsv.x.call", b"{}").unwrap();
        assert!(s.open("gsv.x.call", &sealed, LIVE).is_ok());
        assert_eq!(
            s.open("gsv.x.call", &sealed, LIVE),
            Err(SealError::Replayed)
        );
        // Another subscription of this replica's takes it once too.
        assert!(s
            .open("gsv.x.call", &sealed, Taken::Live { filter: "gsv.>" })
            .is_ok());
        // Read back from a stream it opens whenever it was sealed.
        let old = s
            .seal_at("gsv.x.call", b"{}", now_ms() - 3_600_000)
            .unwrap();
        assert!(s.open("gsv.x.call", &old, Taken::Stored).is_ok());
        assert_eq!(
            s.open("gsv.x.call", &old, LIVE),
            Err(SealError::Stale(3600))
        );
        assert!(matches!(
            s.open("gsv.x.call", &old, Taken::Reply),
            Err(SealError::Stale(_))
        ));
        let future = s.seal_at("gsv.x.call", b"{}", now_ms() + 120_000).unwrap();
        assert!(matches!(
            s.open("gsv.x.call", &future, LIVE),
            Err(SealError::Stale(_))
        ));
    }

    #[test]
    fn the_replay_memory_forgets_what_left_the_window() {
        let s = seal();
        let now = now_ms();
        let sealed = s.seal_at("gsv.x.a", b"1", now).unwrap();
        assert!(s.open_at("gsv.x.a", &sealed, LIVE, now).is_ok());
        let later = now + REPLAY_WINDOW.as_millis() as u64 + 5_000;
        let fresh = s.seal_at("gsv.x.a", b"2", later).unwrap();
        assert!(s.open_at("gsv.x.a", &fresh, LIVE, later).is_ok());
        assert_eq!(
            s.seen.lock().unwrap().nonces.len(),
            1,
            "the old nonce forgotten"
        );
        assert!(matches!(
            s.open_at("gsv.x.a", &sealed, LIVE, later),
            Err(SealError::Stale(_))
        ));
    }

    #[test]
    fn keys_are_checked_before_use() {
        assert!(Seal::new(&[1u8; 31]).is_none());
        let dir = std::env::temp_dir().join(format!("gsv-seal-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let write = |name: &str, bytes: &[u8], mode: u32| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        assert!(Seal::load(&write("ok", &[3u8; 32], 0o600)).is_ok());
        // Random bytes that happen to end in a line break are still 32 bytes of key.
        let mut binary = [7u8; 32];
        binary[0] = 0x80;
        binary[31] = b'\n';
        assert!(Seal::load(&write("binary", &binary, 0o600)).is_ok());
        let hex = write("hex", format!("{}\n", "ab".repeat(32)).as_bytes(), 0o400);
        assert!(Seal::load(&hex).is_ok());
        assert!(matches!(
            Seal::load(&write("short", b"0123456789\n", 0o600)),
            Err(KeyError::Short { len: 10, .. })
        ));
        assert!(matches!(
            Seal::load(&write("open", &[3u8; 32], 0o644)),
            Err(KeyError::Open { .. })
        ));
        assert!(matches!(
            Seal::load(&dir.join("none")),
            Err(KeyError::Read { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
