//! Replica names: what a replica accepts from the others before it names them in its
//! audit log, its store, logs or lists. Kept apart from cluster mode itself because
//! the core (audit chain, job copies) checks them in what it stores, with or without
//! `--cluster`.

/// Whether `n` is a replica name (1 to 64 letters, digits, `-`, `_`).
pub fn valid_replica_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
