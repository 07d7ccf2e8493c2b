//! Which permission bits gsv gives a file or directory it creates from bytes and
//! metadata that came over the network (a copy's file, a Write over an existing
//! file): one rule for the node and for `gsv cp` on the copying machine.
//!
//! A mode is data the other side chose. Setuid, setgid and sticky bits, and write
//! permission for everyone, would let an agent with file-write rights plant a
//! program that runs as the node's user (or let a hostile node plant one on the
//! machine that copies from it), so they are dropped unless the owner of the
//! receiving side turned them on.

/// Setuid, setgid and sticky.
pub const SPECIAL_BITS: u32 = 0o7000;
/// Write permission for others.
pub const WORLD_WRITE: u32 = 0o002;

/// The mode to give a created file: `mode`'s permission bits, without setuid,
/// setgid, sticky and world-write unless `keep_special` (the receiving side's
/// owner allowed them).
pub fn safe_mode(mode: u32, keep_special: bool) -> u32 {
    let mode = mode & 0o7777;
    if keep_special {
        mode
    } else {
        mode & !(SPECIAL_BITS | WORLD_WRITE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_bits_and_world_write_are_dropped() {
        assert_eq!(safe_mode(0o6755, false), 0o755);
        assert_eq!(safe_mode(0o1777, false), 0o775);
        assert_eq!(safe_mode(0o100644, false), 0o644);
        assert_eq!(safe_mode(0o6755, true), 0o6755);
    }
}
